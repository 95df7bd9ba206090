//! [`Communicator`]: a group of ranks that run collectives together, each bounded by a
//! timeout.

use std::collections::HashMap;
use std::ffi::c_int;
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};
use std::time::Duration;

use mpi::ffi;
use strideweave::{Error, Result};

use crate::protocol::{Collective, Kind};
use crate::runtime::{self, checked_timeout, error_text, Runtime};

/// A raw MPI communicator handle. Open MPI's handles are pointers, which Rust does not let
/// cross threads by default; every use happens under the process-wide MPI lock.
#[derive(Clone, Copy)]
pub(crate) struct RawComm(pub(crate) ffi::MPI_Comm);

// SAFETY: the handle is only passed to MPI while the process-wide lock is held (MPI is
// initialized at MPI_THREAD_SERIALIZED), so moving or sharing it between threads is sound.
unsafe impl Send for RawComm {}
// SAFETY: as above.
unsafe impl Sync for RawComm {}

/// How a rank leaves a collective on purpose, to test fault handling
/// ([`Communicator::fail_next_collective`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailPoint {
    /// The process exits with `code` when its next collective starts, before it sends
    /// anything: the other ranks wait for a rank that never joins.
    ExitBeforeJoining {
        /// The exit status.
        code: i32,
    },
    /// The process exits with `code` in the middle of its next collective: after every rank
    /// exchanged the collective's header, before its data is reduced.
    ExitAfterHeader {
        /// The exit status.
        code: i32,
    },
}

/// What the handles of one MPI communicator share.
pub(crate) struct Shared {
    pub(crate) raw: RawComm,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) id: i64,
    /// The number of collectives started on this communicator (the next one's number).
    sequence: Mutex<u64>,
    fail_point: Mutex<Option<FailPoint>>,
}

/// A group of ranks that run collectives together: a duplicate of an MPI communicator whose
/// MPI errors are returned rather than fatal.
///
/// Every collective on it (an all-reduce, [`average_gradients`](crate::average_gradients),
/// [`barrier`](Communicator::barrier)) first exchanges a small header, so ranks that pass
/// different shapes, dtypes or reductions each get an error saying what differed, and waits
/// for its peers at most [`timeout`](Communicator::timeout): a rank that exited, crashed or
/// is stuck makes the others fail with an error naming it and the collective within the
/// timeout plus a short grace period ([`grace_period`](Communicator::grace_period)), never a
/// hang. After such a fault MPI is unusable in this process (docs/distributed.md, Faults).
///
/// Clones share the communicator; [`with_timeout`](Communicator::with_timeout) gives a
/// handle with another timeout. Every rank must call the same collectives in the same order.
#[derive(Clone)]
pub struct Communicator {
    pub(crate) shared: Arc<Shared>,
    timeout: Duration,
}

impl fmt::Debug for Communicator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.shared.rank)
            .field("size", &self.shared.size)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Live communicators by id, so that an operation's options can name one.
static REGISTRY: LazyLock<Mutex<HashMap<i64, Weak<Shared>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
static NEXT_ID: AtomicI64 = AtomicI64::new(1);

impl Communicator {
    /// Duplicates `raw` (under the MPI lock, held by the caller as `runtime`).
    pub(crate) fn duplicate(
        runtime: &mut Runtime,
        raw: ffi::MPI_Comm,
        timeout: Duration,
    ) -> Result<Communicator> {
        runtime.check_usable("MPI_Comm_dup")?;
        // SAFETY: a null handle is overwritten by MPI_Comm_dup before it is used.
        let mut duplicate: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        // SAFETY: MPI is initialized, `raw` is a valid communicator, the lock is held.
        let rc = unsafe { ffi::MPI_Comm_dup(raw, &mut duplicate) };
        check(rc, "MPI_Comm_dup")?;
        // SAFETY: as above; RSMPI_ERRORS_RETURN is MPI's predefined handler.
        let rc = unsafe { ffi::MPI_Comm_set_errhandler(duplicate, ffi::RSMPI_ERRORS_RETURN) };
        check(rc, "MPI_Comm_set_errhandler")?;
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: as above.
        check(
            unsafe { ffi::MPI_Comm_rank(duplicate, &mut rank) },
            "MPI_Comm_rank",
        )?;
        // SAFETY: as above.
        check(
            unsafe { ffi::MPI_Comm_size(duplicate, &mut size) },
            "MPI_Comm_size",
        )?;
        let (Ok(rank), Ok(size)) = (usize::try_from(rank), usize::try_from(size)) else {
            return Err(Error::Runtime(format!(
                "MPI reported rank {rank} of size {size}"
            )));
        };
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            raw: RawComm(duplicate),
            rank,
            size,
            id,
            sequence: Mutex::new(0),
            fail_point: Mutex::new(None),
        });
        let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        registry.retain(|_, weak| weak.strong_count() > 0);
        registry.insert(id, Arc::downgrade(&shared));
        Ok(Communicator { shared, timeout })
    }

    /// The live communicator registered under `id`, with `timeout`.
    pub(crate) fn lookup(id: i64, timeout: Duration) -> Result<Communicator> {
        let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        let shared = registry
            .get(&id)
            .and_then(Weak::upgrade)
            .ok_or_else(|| Error::Lookup(format!("no live MPI communicator has id {id}")))?;
        Ok(Communicator { shared, timeout })
    }

    /// This process's rank in the communicator, from 0.
    pub fn rank(&self) -> usize {
        self.shared.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.shared.size
    }

    /// The id that names this communicator in an operation's options.
    pub(crate) fn id(&self) -> i64 {
        self.shared.id
    }

    /// How long a collective waits for its peers before it fails.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How long, after its timeout, a collective waits for the other ranks' fault reports
    /// before it names the ranks that sent none: a quarter of the timeout, at least 0.25 s
    /// and at most 5 s. A failed collective returns within `timeout + grace_period` of its
    /// start (plus scheduling delays).
    pub fn grace_period(&self) -> Duration {
        (self.timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(5))
    }

    /// A handle on the same communicator whose collectives wait at most `timeout`. Every
    /// rank should use the same timeout.
    ///
    /// # Errors
    /// Value for a zero timeout or one over a day.
    pub fn with_timeout(&self, timeout: Duration) -> Result<Communicator> {
        let timeout = checked_timeout(Some(timeout), &format!("{timeout:?}"))?;
        Ok(Communicator {
            shared: Arc::clone(&self.shared),
            timeout,
        })
    }

    /// For tests of fault handling: this rank's next collective on this communicator makes
    /// the process exit at `point` (with the point's status, without finalizing MPI), as a
    /// crash would. Only the next collective is affected.
    pub fn fail_next_collective(&self, point: FailPoint) {
        *self
            .shared
            .fail_point
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(point);
    }

    /// Takes the fail point set for the next collective.
    pub(crate) fn take_fail_point(&self) -> Option<FailPoint> {
        self.shared
            .fail_point
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The number of the next collective, counted from 1, and advances it.
    pub(crate) fn next_sequence(&self) -> u64 {
        let mut sequence = self
            .shared
            .sequence
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *sequence += 1;
        *sequence
    }

    /// Waits until every rank reached the barrier (bounded by the timeout like every
    /// collective).
    ///
    /// # Errors
    /// Runtime naming the ranks that did not arrive within the timeout, or MPI's error;
    /// Runtime when MPI is unusable (not initialized, finalized, or after a fault).
    pub fn barrier(&self) -> Result<()> {
        let mut runtime = runtime::lock();
        let mut collective = Collective::start(&mut runtime, self, Kind::Barrier, "")?;
        // The header exchange completes only once every rank contributed its header.
        collective.agree(None)
    }
}

/// Ok for `MPI_SUCCESS`, otherwise a Runtime error naming `call` and MPI's message.
pub(crate) fn check(rc: c_int, call: &str) -> Result<()> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(Error::Runtime(format!("{call} failed: {}", error_text(rc))))
    }
}
