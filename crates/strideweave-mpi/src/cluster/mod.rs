//! Cluster memory as a tier: [`Cluster`] (the ranks that lend memory and the one that uses
//! it), [`ClusterMemory`] (a carrier class whose slots live in other ranks' memory) and
//! [`ClusterLocal`] (the host-memory class it exchanges tiles with, which computes through
//! the CPU's kernels), so that a `TiledEvictable` over (ClusterLocal, ClusterMemory) streams
//! a tensor held by other ranks through this rank's memory (docs/distributed.md, Cluster
//! memory as a tier).

mod local;
mod memory;
mod server;
mod wire;

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mpi::ffi;
use strideweave::{Carrier, Error, Result, Shape, Tensor};

pub use local::{ClusterLocal, LocalSlots};
pub use memory::{ClusterMemory, RemoteSlots};
pub use server::{RequestKind, ServeSummary, ServerFault};

use crate::communicator::Communicator;
use crate::runtime;
use wire::{answer_status, header, Exchange, Op, FIRST_TAG, REQUEST_TAG, STATUS_SLOTS, TAGS};

/// The longest error text a server sends back, in bytes.
pub(crate) const MAX_ERROR_TEXT: usize = 1024;

/// `text` cut to at most `limit` bytes on a character boundary.
pub(crate) fn clipped(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// One contiguous run of a block's slots, held by one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    /// The rank holding the run.
    pub(crate) rank: usize,
    /// The run's first slot in the block.
    pub(crate) start: usize,
    /// The run's length.
    pub(crate) len: usize,
}

/// The part of a transfer that one rank serves: slots `server_start..+len` of its piece,
/// slots `at..at + len` of the transfer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    pub(crate) rank: usize,
    pub(crate) server_start: usize,
    pub(crate) at: usize,
    pub(crate) len: usize,
}

/// The slots of one ClusterMemory carrier: its id on the serving ranks and the pieces each
/// holds.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub(crate) id: u64,
    pub(crate) slots: usize,
    pub(crate) pieces: Vec<Piece>,
}

impl Block {
    /// The parts of slots `start..start + len` of this block, one per rank holding some.
    pub(crate) fn parts(&self, start: usize, len: usize) -> Result<Vec<Part>> {
        let end = start.checked_add(len).filter(|&end| end <= self.slots);
        let Some(end) = end else {
            return Err(Error::Index(format!(
                "slots {start}..{start}+{len} lie outside a ClusterMemory carrier of {} slots",
                self.slots
            )));
        };
        Ok(self
            .pieces
            .iter()
            .filter_map(|piece| {
                let from = start.max(piece.start);
                let to = end.min(piece.start + piece.len);
                (from < to).then(|| Part {
                    rank: piece.rank,
                    server_start: from - piece.start,
                    at: from - start,
                    len: to - from,
                })
            })
            .collect())
    }
}

/// Posted requests of one transfer and the parts they serve.
pub(crate) struct Posted {
    pub(crate) exchange: Exchange,
    /// Per part: the part, the buffer index of its status answer, and its tag.
    pub(crate) parts: Vec<(Part, usize, c_int)>,
    /// Per part of a get: the buffer index of its data.
    pub(crate) data: Vec<usize>,
}

impl Posted {
    /// The answers' statuses, in part order: Ok, or the serving rank's error.
    pub(crate) fn statuses(&self) -> Vec<Result<()>> {
        self.parts
            .iter()
            .map(|(part, index, _)| {
                answer_status(
                    self.exchange.floats(*index),
                    part.rank,
                    self.exchange.what(),
                )
            })
            .collect()
    }
}

/// What every handle of one cluster shares.
pub(crate) struct ClusterShared {
    comm: Communicator,
    pub(crate) client: usize,
    owners: Vec<usize>,
    next_id: AtomicU64,
    next_tag: AtomicU64,
    /// Unanswered notices (free, commit, abort, stop) whose sends have not completed yet.
    loose: Mutex<Vec<Exchange>>,
    stopped: AtomicBool,
}

impl ClusterShared {
    /// The cluster's own MPI communicator.
    pub(crate) fn raw(&self) -> ffi::MPI_Comm {
        self.comm.shared.raw.0
    }

    /// This process's rank.
    pub(crate) fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// An exchange bounded by the cluster's timeout.
    pub(crate) fn exchange(&self, what: String) -> Exchange {
        Exchange::new(what, self.raw(), self.rank(), self.comm.timeout())
    }

    /// A fresh request tag.
    fn tag(&self) -> c_int {
        let n = self.next_tag.fetch_add(1, Ordering::Relaxed);
        (FIRST_TAG + n % TAGS) as c_int
    }

    /// Refuses a request made on a rank that is not the client.
    fn require_client(&self, what: &str) -> Result<()> {
        if self.rank() != self.client {
            return Err(Error::Runtime(format!(
                "cluster memory: {what} runs on the client, rank {}, not on rank {}",
                self.client,
                self.rank()
            )));
        }
        if self.stopped.load(Ordering::Acquire) {
            return Err(Error::Runtime(format!(
                "cluster memory: cannot {what}: the cluster was stopped"
            )));
        }
        Ok(())
    }

    /// Sends `op` to `rank` without waiting for an answer; the send completes in the
    /// background (checked at the next notice and at [`Cluster::stop`]).
    fn notify(&self, rank: usize, op: Op, id: u64, arg: u64) -> Result<()> {
        let mut exchange = self.exchange(format!("{} of block {id} on rank {rank}", op.name()));
        {
            let mut runtime = runtime::lock();
            exchange.send_words(
                &mut runtime,
                rank,
                REQUEST_TAG,
                header(op, id, 0, 0, 0, arg),
            )?;
        }
        let mut loose = self.loose.lock().unwrap_or_else(PoisonError::into_inner);
        let mut first_error = None;
        loose.retain_mut(|e| match e.test() {
            Ok(done) => !done,
            Err(error) => {
                first_error.get_or_insert(error);
                true
            }
        });
        if !exchange.test()? {
            loose.push(exchange);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits for every notice sent so far.
    fn settle_notices(&self) -> Result<()> {
        let mut loose = self.loose.lock().unwrap_or_else(PoisonError::into_inner);
        for exchange in loose.iter_mut() {
            exchange.wait()?;
        }
        loose.clear();
        Ok(())
    }

    /// Posts `op` on slots `start..start + len` of `block`, one request per rank holding
    /// some; `data(part)` gives a put's slots. Answers are received into buffers of
    /// `answer_slots(part)` slots.
    pub(crate) fn post(
        &self,
        op: Op,
        block: &Block,
        (start, len): (usize, usize),
        staged: bool,
        mut data: impl FnMut(&Part) -> Result<Vec<f32>>,
    ) -> Result<Posted> {
        let parts = block.parts(start, len)?;
        let mut exchange = self.exchange(format!(
            "{} of slots {start}..{} of block {} ({})",
            op.name(),
            start + len,
            block.id,
            parts
                .iter()
                .map(|p| format!("{} on rank {}", p.len, p.rank))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let mut payloads = Vec::with_capacity(parts.len());
        if op == Op::Put {
            for part in &parts {
                payloads.push(data(part)?);
            }
        }
        let mut payloads = payloads.into_iter();
        let mut posted = Vec::with_capacity(parts.len());
        let mut data_buffers = Vec::new();
        let mut runtime = runtime::lock();
        for part in parts {
            let tag = self.tag();
            let index = exchange.receive_floats(&mut runtime, part.rank, tag, STATUS_SLOTS)?;
            if op == Op::Get {
                data_buffers.push(exchange.receive_floats(
                    &mut runtime,
                    part.rank,
                    tag,
                    part.len,
                )?);
            }
            let arg = u64::from(!staged);
            exchange.send_words(
                &mut runtime,
                part.rank,
                REQUEST_TAG,
                header(op, block.id, part.server_start, part.len, tag, arg),
            )?;
            if let Some(payload) = payloads.next() {
                exchange.send_floats(&mut runtime, part.rank, tag, payload)?;
            }
            posted.push((part, index, tag));
        }
        Ok(Posted {
            exchange,
            parts: posted,
            data: data_buffers,
        })
    }

    /// Allocates a block of `slots` zeroed slots spread over the owners, filled with
    /// `values` when given.
    pub(crate) fn allocate(&self, slots: usize, values: Option<&[f32]>) -> Result<Block> {
        self.require_client("allocate cluster memory")?;
        if values.is_some_and(|v| v.len() != slots) {
            return Err(Error::Value(format!(
                "{} values for a ClusterMemory carrier of {slots} slots",
                values.map_or(0, <[f32]>::len)
            )));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let share = slots.div_ceil(self.owners.len()).max(1);
        let pieces: Vec<Piece> = self
            .owners
            .iter()
            .enumerate()
            .filter_map(|(k, &rank)| {
                let start = k * share;
                (start < slots).then(|| Piece {
                    rank,
                    start,
                    len: share.min(slots - start),
                })
            })
            .collect();
        let block = Block { id, slots, pieces };
        let allocated = self.alloc_pieces(&block).and_then(|()| match values {
            Some(values) => {
                let mut posted = self.post(Op::Put, &block, (0, slots), false, |part| {
                    Ok(values[part.at..part.at + part.len].to_vec())
                })?;
                posted.exchange.wait()?;
                posted.statuses().into_iter().collect::<Result<()>>()
            }
            None => Ok(()),
        });
        match allocated {
            Ok(()) => Ok(block),
            Err(error) => {
                self.free(&block);
                Err(error)
            }
        }
    }

    /// Asks every rank of `block` to allocate its piece.
    fn alloc_pieces(&self, block: &Block) -> Result<()> {
        let mut exchange = self.exchange(format!(
            "alloc of block {} ({} slots)",
            block.id, block.slots
        ));
        let mut answers = Vec::new();
        {
            let mut runtime = runtime::lock();
            for piece in &block.pieces {
                let tag = self.tag();
                let index = exchange.receive_floats(&mut runtime, piece.rank, tag, STATUS_SLOTS)?;
                exchange.send_words(
                    &mut runtime,
                    piece.rank,
                    REQUEST_TAG,
                    header(Op::Alloc, block.id, 0, piece.len, tag, 0),
                )?;
                answers.push((piece.rank, index));
            }
        }
        exchange.wait()?;
        for (rank, index) in answers {
            answer_status(exchange.floats(index), rank, exchange.what())?;
        }
        Ok(())
    }

    /// Frees `block` on every rank holding a piece (errors only reach later requests: a
    /// release must not fail on a dead peer).
    pub(crate) fn free(&self, block: &Block) {
        if self.stopped.load(Ordering::Acquire) {
            // The owners left their serve loops, and their memory with them.
            return;
        }
        for piece in &block.pieces {
            let _ = self.notify(piece.rank, Op::Free, block.id, 0);
        }
    }

    /// Commits (or aborts) the staged puts of `posted`.
    pub(crate) fn conclude(&self, block: &Block, posted: &Posted, commit: bool) -> Result<()> {
        let op = if commit { Op::Commit } else { Op::Abort };
        let mut outcome = Ok(());
        for (part, _, tag) in &posted.parts {
            if let Err(error) = self.notify(part.rank, op, block.id, *tag as u64) {
                outcome = outcome.and(Err(error));
            }
        }
        outcome
    }
}

impl Drop for ClusterShared {
    fn drop(&mut self) {
        if self.rank() == self.client && !self.stopped.load(Ordering::Acquire) {
            let _ = stop(self);
        }
    }
}

/// Tells every owner to leave its serve loop and waits until the notices left.
fn stop(shared: &ClusterShared) -> Result<()> {
    shared.require_client("stop the cluster")?;
    shared.stopped.store(true, Ordering::Release);
    let mut outcome = Ok(());
    for &rank in &shared.owners {
        let mut exchange = shared.exchange(format!("stop of rank {rank}"));
        let sent = {
            let mut runtime = runtime::lock();
            exchange.send_words(
                &mut runtime,
                rank,
                REQUEST_TAG,
                header(Op::Stop, 0, 0, 0, 0, 0),
            )
        };
        outcome = outcome.and(sent).and_then(|()| exchange.wait());
    }
    outcome.and(shared.settle_notices())
}

/// Ranks that hold memory for one client rank: the client allocates ClusterMemory carriers
/// whose slots are spread over the other ranks (the **owners**), each owner serves the slots
/// it holds ([`serve`](Cluster::serve)) until the client [`stop`](Cluster::stop)s it.
///
/// Transfers are MPI messages on the cluster's own communicator (a duplicate of the one it
/// was joined on): a request header, then the data, and an answer with a status. Every
/// wait is bounded by the communicator's timeout: an owner that exits or stalls makes the
/// client's request fail with a Runtime error naming the rank and the request, after which
/// MPI is unusable in the process, as after a failed collective (docs/distributed.md,
/// Faults).
///
/// ```no_run
/// use strideweave_mpi::{Cluster, Mpi};
/// let mpi = Mpi::init()?;
/// let cluster = Cluster::join(mpi.world(), 0)?;
/// if !cluster.is_client() {
///     cluster.serve()?;                    // until rank 0 stops the cluster
///     return Ok(());
/// }
/// let far = cluster.memory_from_f32(&[1.0; 1024])?; // slots held by ranks 1, 2, …
/// assert_eq!(far.get(3)?.as_f64(), Some(1.0));
/// cluster.stop()?;
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Clone)]
pub struct Cluster {
    shared: Arc<ClusterShared>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("rank", &self.shared.rank())
            .field("client", &self.shared.client)
            .field("owners", &self.shared.owners)
            .finish()
    }
}

impl Cluster {
    /// Joins the cluster of every rank of `comm` whose client is rank `client`: a collective
    /// (every rank calls it) that duplicates `comm`, so the cluster's messages never meet
    /// the communicator's collectives. The owners are the other ranks, in rank order.
    ///
    /// # Errors
    /// Value for a client outside the communicator or a communicator of one rank; the
    /// barrier's errors (a rank that does not join within the timeout); Runtime naming
    /// MPI's error when duplicating fails.
    pub fn join(comm: &Communicator, client: usize) -> Result<Cluster> {
        if client >= comm.size() {
            return Err(Error::Value(format!(
                "the client rank {client} is outside a communicator of {} ranks",
                comm.size()
            )));
        }
        if comm.size() < 2 {
            return Err(Error::Value(
                "cluster memory needs at least one rank besides the client".into(),
            ));
        }
        crate::cluster::memory::classes()?;
        comm.barrier()?;
        let duplicate = {
            let mut runtime = runtime::lock();
            Communicator::duplicate(&mut runtime, comm.shared.raw.0, comm.timeout())?
        };
        let owners = (0..comm.size()).filter(|&r| r != client).collect();
        Ok(Cluster {
            shared: Arc::new(ClusterShared {
                comm: duplicate,
                client,
                owners,
                next_id: AtomicU64::new(1),
                next_tag: AtomicU64::new(0),
                loose: Mutex::new(Vec::new()),
                stopped: AtomicBool::new(false),
            }),
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.shared.rank()
    }

    /// The client's rank.
    pub fn client(&self) -> usize {
        self.shared.client
    }

    /// Whether this process is the client.
    pub fn is_client(&self) -> bool {
        self.rank() == self.shared.client
    }

    /// The ranks that hold the client's slots.
    pub fn owners(&self) -> &[usize] {
        &self.shared.owners
    }

    /// How long a request waits for its answer before it fails.
    pub fn timeout(&self) -> Duration {
        self.shared.comm.timeout()
    }

    /// Serves the client's requests (allocations, reads, writes, releases) from this rank's
    /// memory until the client stops the cluster, and says what it did.
    ///
    /// Waiting for the next request has no deadline (the client may compute for long);
    /// receiving a request's data and sending an answer are bounded by the timeout.
    ///
    /// # Errors
    /// Runtime on the client; Runtime naming MPI's error or a timeout while exchanging a
    /// request's data (MPI is unusable afterwards).
    pub fn serve(&self) -> Result<ServeSummary> {
        if self.is_client() {
            return Err(Error::Runtime(format!(
                "cluster memory: rank {} is the client; only the owners serve",
                self.rank()
            )));
        }
        server::serve(&self.shared, None)
    }

    /// [`serve`](Cluster::serve), failing when no request arrives for `idle`: for owners
    /// that must not outlive a client that failed (after a fault the client makes no MPI
    /// call, so it cannot stop them).
    ///
    /// # Errors
    /// As [`serve`](Cluster::serve); Runtime naming the client when it was silent for
    /// `idle` (MPI is unusable afterwards).
    pub fn serve_with_idle_timeout(&self, idle: Duration) -> Result<ServeSummary> {
        if self.is_client() {
            return Err(Error::Runtime(format!(
                "cluster memory: rank {} is the client; only the owners serve",
                self.rank()
            )));
        }
        server::serve(&self.shared, Some(idle))
    }

    /// Stops every owner's serve loop (the client's last call; dropping the last handle of
    /// the cluster on the client stops it too). Later allocations fail.
    ///
    /// # Errors
    /// Runtime on an owner, or when a stop notice cannot be sent within the timeout.
    pub fn stop(&self) -> Result<()> {
        stop(&self.shared)
    }

    /// For tests of failure handling: arms `fault` on owner `rank`, which applies it to its
    /// next request of the fault's kind.
    ///
    /// # Errors
    /// Value for a rank that is not an owner; the request's errors.
    pub fn inject_fault(&self, rank: usize, fault: ServerFault) -> Result<()> {
        self.shared.require_client("inject a fault")?;
        if !self.shared.owners.contains(&rank) {
            return Err(Error::Value(format!(
                "rank {rank} is not an owner of this cluster (owners: {:?})",
                self.shared.owners
            )));
        }
        let (kind, action, code) = fault.encode();
        let mut exchange = self
            .shared
            .exchange(format!("arm of {fault:?} on rank {rank}"));
        let tag = self.shared.tag();
        let index = {
            let mut runtime = runtime::lock();
            let index = exchange.receive_floats(&mut runtime, rank, tag, STATUS_SLOTS)?;
            exchange.send_words(
                &mut runtime,
                rank,
                REQUEST_TAG,
                header(Op::Arm, 0, kind, action, tag, code),
            )?;
            index
        };
        exchange.wait()?;
        answer_status(exchange.floats(index), rank, exchange.what())
    }

    /// A mutable ClusterMemory carrier of `slots` zeroed Float32 slots, spread over the
    /// owners in contiguous runs of `⌈slots / owners⌉`.
    ///
    /// # Errors
    /// Runtime on an owner or after [`stop`](Cluster::stop); the requests' errors.
    pub fn memory(&self, slots: usize) -> Result<Carrier> {
        memory::create(&self.shared, slots, None)
    }

    /// A mutable ClusterMemory carrier holding `values`, spread like
    /// [`memory`](Cluster::memory).
    ///
    /// # Errors
    /// As [`memory`](Cluster::memory).
    pub fn memory_from_f32(&self, values: &[f32]) -> Result<Carrier> {
        memory::create(&self.shared, values.len(), Some(values.to_vec()))
    }

    /// A compact ClusterMemory tensor of `shape` holding `values` (column-major).
    ///
    /// # Errors
    /// Value when the count differs from the shape's size; as
    /// [`memory`](Cluster::memory).
    pub fn tensor(&self, values: &[f32], shape: Shape) -> Result<Tensor> {
        if values.len() != shape.size() {
            return Err(Error::Value(format!(
                "{} values for a ClusterMemory tensor of shape {shape} ({} elements)",
                values.len(),
                shape.size()
            )));
        }
        Tensor::compact(self.memory_from_f32(values)?, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_splits_into_one_part_per_rank_holding_some() {
        let block = Block {
            id: 1,
            slots: 10,
            pieces: vec![
                Piece {
                    rank: 1,
                    start: 0,
                    len: 4,
                },
                Piece {
                    rank: 2,
                    start: 4,
                    len: 4,
                },
                Piece {
                    rank: 3,
                    start: 8,
                    len: 2,
                },
            ],
        };
        let parts = block.parts(3, 6).unwrap();
        let seen: Vec<(usize, usize, usize, usize)> = parts
            .iter()
            .map(|p| (p.rank, p.server_start, p.at, p.len))
            .collect();
        assert_eq!(seen, [(1, 3, 0, 1), (2, 0, 1, 4), (3, 0, 5, 1)]);
        let error = block.parts(8, 3).unwrap_err();
        assert_eq!(error.kind(), strideweave::ErrorKind::Index);
        assert!(error.to_string().contains("slots 8..8+3 lie outside"));
    }

    #[test]
    fn clipping_keeps_whole_characters() {
        assert_eq!(clipped("héllo", 2), "h");
        assert_eq!(clipped("abc", 10), "abc");
    }
}
