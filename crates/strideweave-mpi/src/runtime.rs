//! The MPI runtime of this process: initialization, finalization, the process-wide lock that
//! serializes every MPI call, and the fault state that stops all MPI use after a collective
//! failed.

use std::ffi::c_int;
use std::mem::ManuallyDrop;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mpi::environment::{Threading, Universe};
use mpi::ffi;
use strideweave::{Error, Result};

use crate::communicator::Communicator;

/// The environment variable that sets the default collective timeout, in seconds.
pub const TIMEOUT_VARIABLE: &str = "STRIDEWEAVE_MPI_TIMEOUT";

/// The collective timeout when [`TIMEOUT_VARIABLE`] is not set: 60 seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest timeout a communicator accepts: one day.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Where this process's MPI runtime stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Uninitialized,
    Running,
    Finalized,
}

/// The process-wide MPI state, behind [`RUNTIME`].
#[derive(Debug)]
pub(crate) struct Runtime {
    phase: Phase,
    /// The first fault: once set, no MPI call is made again in this process.
    fault: Option<String>,
    /// Whether MPI was adopted ([`Mpi::adopt`]): then other code may finalize it at any time.
    adopted: bool,
}

static RUNTIME: Mutex<Runtime> = Mutex::new(Runtime {
    phase: Phase::Uninitialized,
    fault: None,
    adopted: false,
});

/// The process-wide MPI lock. Every MPI call of this crate runs while it is held, so the
/// library is used as `MPI_THREAD_SERIALIZED` requires, from any thread.
pub(crate) fn lock() -> MutexGuard<'static, Runtime> {
    RUNTIME.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Runtime {
    /// Ok while MPI is initialized, not finalized and no collective has faulted.
    pub(crate) fn check_usable(&self, what: &str) -> Result<()> {
        match self.phase {
            Phase::Uninitialized => Err(Error::Runtime(format!(
                "cannot run {what}: MPI is not initialized (call strideweave_mpi::Mpi::init first)"
            ))),
            Phase::Finalized => Err(Error::Runtime(format!(
                "cannot run {what}: MPI was finalized (the strideweave_mpi::Mpi value was dropped)"
            ))),
            Phase::Running => match &self.fault {
                Some(fault) => Err(Error::Runtime(format!(
                    "cannot run {what}: MPI is unusable in this process after an earlier fault: {fault}"
                ))),
                None if self.adopted && finalized_elsewhere() => Err(Error::Runtime(format!(
                    "cannot run {what}: MPI was finalized by the code that initialized it"
                ))),
                None => Ok(()),
            },
        }
    }

    /// Records the first fault; later MPI use in this process is refused.
    pub(crate) fn record_fault(&mut self, fault: &str) {
        if self.fault.is_none() {
            self.fault = Some(fault.to_owned());
        }
    }

    /// The first fault, if one happened.
    pub(crate) fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }
}

/// Whether MPI was finalized (by whoever initialized it: asked only of adopted MPI).
fn finalized_elsewhere() -> bool {
    let mut finalized: c_int = 0;
    // SAFETY: MPI_Finalized may be called at any time, even after finalization.
    let rc = unsafe { ffi::MPI_Finalized(&mut finalized) };
    rc != ffi::MPI_SUCCESS as c_int || finalized != 0
}

/// The text of an MPI error code.
pub(crate) fn error_text(code: c_int) -> String {
    let mut buffer = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut length: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters, as MPI_Error_string needs.
    let rc = unsafe { ffi::MPI_Error_string(code, buffer.as_mut_ptr().cast(), &mut length) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return format!("MPI error code {code}");
    }
    buffer.truncate(usize::try_from(length).unwrap_or(0).min(buffer.len()));
    format!(
        "{} (MPI error code {code})",
        String::from_utf8_lossy(&buffer)
    )
}

/// MPI in this process: created once by [`Mpi::init`], finalized when dropped — or adopted
/// from other code that initialized it ([`Mpi::adopt`], e.g. `mpi4py`), which finalizes it.
///
/// Dropping an initialized one calls `MPI_Finalize`, except after a collective faulted (a
/// peer timed out or MPI returned an error): then finalization is skipped, because
/// `MPI_Finalize` waits for every rank and would hang on a dead one; the process should exit
/// (docs/distributed.md, Faults). Dropping an adopted one finalizes nothing.
pub struct Mpi {
    /// The universe this crate initialized; `None` when MPI was adopted.
    universe: Option<ManuallyDrop<Universe>>,
    world: Communicator,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi").field("world", &self.world).finish()
    }
}

impl Mpi {
    /// Initializes MPI (at the `MPI_THREAD_SERIALIZED` level: any thread may call, one at a
    /// time, which this crate's lock ensures) and duplicates `MPI_COMM_WORLD` into the
    /// communicator [`world`](Mpi::world) returns, with MPI errors returned instead of
    /// aborting the job.
    ///
    /// The world communicator's collective timeout is [`TIMEOUT_VARIABLE`] (seconds, a
    /// positive number up to a day) when it is set, otherwise [`DEFAULT_TIMEOUT`].
    ///
    /// # Errors
    /// Runtime when MPI was already initialized or finalized in this process, or when the
    /// library cannot serve `MPI_THREAD_SERIALIZED`; Value for a malformed
    /// [`TIMEOUT_VARIABLE`]; Runtime naming MPI's error when duplicating the communicator
    /// fails.
    pub fn init() -> Result<Mpi> {
        let timeout = timeout_from_environment()?;
        crate::registration::setup()?;
        let mut runtime = lock();
        match runtime.phase {
            Phase::Running => {
                return Err(Error::Runtime(
                    "MPI is already initialized: strideweave_mpi::Mpi::init runs once per process"
                        .into(),
                ))
            }
            Phase::Finalized => {
                return Err(Error::Runtime(
                    "MPI was finalized in this process and cannot be initialized again".into(),
                ))
            }
            Phase::Uninitialized => {}
        }
        let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Serialized)
        else {
            return Err(Error::Runtime(
                "MPI was already initialized by other code in this process; strideweave_mpi::Mpi::init must initialize it"
                    .into(),
            ));
        };
        if !matches!(threading, Threading::Serialized | Threading::Multiple) {
            drop(universe);
            runtime.phase = Phase::Finalized;
            return Err(Error::Runtime(format!(
                "the MPI library provides thread support {threading:?}; strideweave-mpi needs Serialized or Multiple"
            )));
        }
        runtime.phase = Phase::Running;
        // SAFETY: MPI is initialized and RSMPI_COMM_WORLD is its world communicator.
        let world_raw = unsafe { ffi::RSMPI_COMM_WORLD };
        let world = match Communicator::duplicate(&mut runtime, world_raw, timeout) {
            Ok(world) => world,
            Err(error) => {
                drop(universe);
                runtime.phase = Phase::Finalized;
                return Err(error);
            }
        };
        Ok(Mpi {
            universe: Some(ManuallyDrop::new(universe)),
            world,
        })
    }

    /// Adopts MPI that other code in this process initialized (`mpi4py`, a C library) at
    /// `MPI_THREAD_SERIALIZED` or `MPI_THREAD_MULTIPLE`: [`world`](Mpi::world) is a duplicate
    /// of `MPI_COMM_WORLD` like [`init`](Mpi::init)'s, the timeout is read the same way, and
    /// whoever initialized MPI finalizes it (dropping the adopted `Mpi` does not).
    ///
    /// # Errors
    /// Runtime when MPI is not initialized, already finalized, initialized by this crate (use
    /// [`init`](Mpi::init)'s value) or adopted already, or provides less thread support than
    /// `MPI_THREAD_SERIALIZED`; Value for a malformed [`TIMEOUT_VARIABLE`]; Runtime naming
    /// MPI's error when duplicating fails.
    pub fn adopt() -> Result<Mpi> {
        let timeout = timeout_from_environment()?;
        crate::registration::setup()?;
        let mut runtime = lock();
        if runtime.phase != Phase::Uninitialized {
            return Err(Error::Runtime(
                "MPI is already in use by strideweave_mpi in this process: Mpi::init or Mpi::adopt runs once"
                    .into(),
            ));
        }
        let (mut initialized, mut finalized): (c_int, c_int) = (0, 0);
        // SAFETY: both calls may be made at any time, before or after initialization.
        let rc = unsafe { ffi::MPI_Initialized(&mut initialized) };
        crate::communicator::check(rc, "MPI_Initialized")?;
        // SAFETY: as above.
        let rc = unsafe { ffi::MPI_Finalized(&mut finalized) };
        crate::communicator::check(rc, "MPI_Finalized")?;
        if initialized == 0 || finalized != 0 {
            return Err(Error::Runtime(format!(
                "cannot adopt MPI: it is {} (initialize it first, e.g. by importing mpi4py.MPI)",
                if finalized != 0 {
                    "already finalized"
                } else {
                    "not initialized"
                }
            )));
        }
        let mut provided: c_int = 0;
        // SAFETY: MPI is initialized and not finalized.
        let rc = unsafe { ffi::MPI_Query_thread(&mut provided) };
        crate::communicator::check(rc, "MPI_Query_thread")?;
        if provided < ffi::MPI_THREAD_SERIALIZED as c_int {
            return Err(Error::Runtime(format!(
                "cannot adopt MPI: it provides thread support level {provided}; strideweave-mpi needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (mpi4py's default)"
            )));
        }
        runtime.phase = Phase::Running;
        runtime.adopted = true;
        // SAFETY: MPI is initialized and RSMPI_COMM_WORLD is its world communicator.
        let world_raw = unsafe { ffi::RSMPI_COMM_WORLD };
        match Communicator::duplicate(&mut runtime, world_raw, timeout) {
            Ok(world) => Ok(Mpi {
                universe: None,
                world,
            }),
            Err(error) => {
                runtime.phase = Phase::Uninitialized;
                runtime.adopted = false;
                Err(error)
            }
        }
    }

    /// Whether this crate initialized MPI (and finalizes it when this value is dropped), as
    /// opposed to adopting it.
    pub fn owns_mpi(&self) -> bool {
        self.universe.is_some()
    }

    /// A communicator over the ranks of the MPI communicator whose Fortran handle is
    /// `handle` (what `mpi4py`'s `comm.py2f()` returns), converted with `MPI_Comm_f2c` and
    /// duplicated like [`world`](Mpi::world) (with its timeout), so this crate's messages
    /// never meet the caller's. Collective: every rank of that communicator calls it.
    ///
    /// # Errors
    /// Value for a handle outside a C int; Runtime when MPI is unusable or naming MPI's
    /// error (an invalid handle).
    pub fn communicator_from_fortran(&self, handle: i64) -> Result<Communicator> {
        let Ok(fortran) = c_int::try_from(handle) else {
            return Err(Error::Value(format!(
                "an MPI Fortran communicator handle is a C int, got {handle}"
            )));
        };
        let mut runtime = lock();
        runtime.check_usable("a communicator from a Fortran handle")?;
        // SAFETY: MPI is initialized (checked above, under the lock); MPI_Comm_f2c returns
        // MPI_COMM_NULL or an invalid handle for a bad one, which MPI_Comm_dup then refuses.
        let raw = unsafe { ffi::MPI_Comm_f2c(fortran) };
        Communicator::duplicate(&mut runtime, raw, self.world.timeout())
    }

    /// A handle on the duplicate of `MPI_COMM_WORLD`: every rank of the job.
    pub fn world(&self) -> &Communicator {
        &self.world
    }

    /// The fault that made MPI unusable in this process, if one happened (a collective that
    /// timed out or an MPI error): every later collective fails with it.
    pub fn fault(&self) -> Option<String> {
        lock().fault().map(str::to_owned)
    }

    /// The MPI library's version string (for example "Open MPI v4.1.4, …").
    pub fn library_version(&self) -> String {
        let _runtime = lock();
        mpi::environment::library_version().unwrap_or_else(|_| "unknown".into())
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        let mut runtime = lock();
        let faulted = runtime.fault.is_some();
        runtime.phase = Phase::Finalized;
        if faulted {
            // A peer may be dead: MPI_Finalize would wait for it forever. Leave MPI as it is
            // and let the process exit.
            return;
        }
        let Some(universe) = self.universe.as_mut() else {
            // Adopted: whoever initialized MPI finalizes it.
            return;
        };
        // SAFETY: taken once, here, in the only drop of `self`.
        let universe = unsafe { ManuallyDrop::take(universe) };
        drop(universe);
    }
}

/// The default collective timeout: [`TIMEOUT_VARIABLE`] when set, else [`DEFAULT_TIMEOUT`].
fn timeout_from_environment() -> Result<Duration> {
    match std::env::var(TIMEOUT_VARIABLE) {
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_TIMEOUT),
        Err(std::env::VarError::NotUnicode(value)) => Err(Error::Value(format!(
            "{TIMEOUT_VARIABLE} must be a number of seconds, got {value:?}"
        ))),
        Ok(text) => {
            let seconds: f64 = text.trim().parse().map_err(|_| {
                Error::Value(format!(
                    "{TIMEOUT_VARIABLE} must be a number of seconds, got {text:?}"
                ))
            })?;
            checked_timeout(Duration::try_from_secs_f64(seconds).ok(), &text)
        }
    }
}

/// `timeout` when it is positive and at most [`MAX_TIMEOUT`]; a Value error naming `shown`
/// otherwise.
pub(crate) fn checked_timeout(timeout: Option<Duration>, shown: &str) -> Result<Duration> {
    match timeout {
        Some(t) if !t.is_zero() && t <= MAX_TIMEOUT => Ok(t),
        _ => Err(Error::Value(format!(
            "a collective timeout must be more than 0 and at most {} seconds, got {shown}",
            MAX_TIMEOUT.as_secs()
        ))),
    }
}
