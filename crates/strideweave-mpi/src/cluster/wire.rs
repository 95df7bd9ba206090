//! The messages of cluster memory and [`Exchange`], a set of non-blocking point-to-point MPI
//! requests that completes, fails with MPI's error, or fails at its deadline naming the
//! ranks that did not answer.
//!
//! Every request a client sends a server starts with a header of [`HEADER_WORDS`] words on
//! [`REQUEST_TAG`]: a magic number, the [`Op`], the block id, the first slot, the slot count,
//! the request's own tag (its data and its answer travel on it, so concurrent requests never
//! match each other's messages), and an argument. An answer is a status message — two 32-bit
//! words, a status and the length of an error text that follows when the status is not
//! [`STATUS_OK`] — and, for a get, a data message on the same tag: the slots, or nothing
//! after a refusal.

use std::ffi::c_int;
use std::time::{Duration, Instant};

use mpi::ffi;
use strideweave::{Error, Result};

use crate::communicator::check;
use crate::protocol::ranks_phrase;
use crate::runtime::{self, error_text, Runtime};

/// The first word of every request header: "SWCLM" and a protocol version.
pub(crate) const MAGIC: u64 = 0x5357_434c_4d00_0001;
/// The tag of request headers.
pub(crate) const REQUEST_TAG: c_int = 1;
/// The first tag a request may own; tags cycle through `FIRST_TAG..FIRST_TAG + TAGS`
/// (MPI guarantees tags up to 32767).
pub(crate) const FIRST_TAG: u64 = 16;
/// How many request tags cycle.
pub(crate) const TAGS: u64 = 32_000;
/// Header words.
pub(crate) const HEADER_WORDS: usize = 8;
/// The status of an answer that carries its data.
pub(crate) const STATUS_OK: u32 = 0;
/// The status of a refused request: an error text follows.
pub(crate) const STATUS_ERROR: u32 = 1;
/// Answer words before the error text (two 32-bit words, stored in two `f32` slots).
pub(crate) const ANSWER_PREFIX: usize = 2;
/// The slots of a status message's buffer: the prefix and the longest error text.
pub(crate) const STATUS_SLOTS: usize = ANSWER_PREFIX + crate::cluster::MAX_ERROR_TEXT / 4 + 1;
/// How long an idle wait yields between polls before it sleeps between them.
const SPIN: Duration = Duration::from_micros(200);
/// The sleep between an idle wait's polls after [`SPIN`].
const POLL_SLEEP: Duration = Duration::from_micros(50);

/// How a wait polls its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polling {
    /// Test, yield, test again: a transfer in flight. Open MPI moves a large message's
    /// fragments only inside MPI calls, so sleeping between tests would stall it.
    Busy,
    /// Yield for [`SPIN`], then sleep [`POLL_SLEEP`] between tests: waiting for a request
    /// that may be long in coming.
    Idle,
}

/// What a request asks of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Allocate a zeroed block of `len` slots under `id`; answered.
    Alloc,
    /// Drop block `id`; not answered.
    Free,
    /// Send slots `start..start + len` of block `id`; answered with the data.
    Get,
    /// Receive slots `start..start + len` of block `id` (the data follows on the request's
    /// tag); `arg` 0 stages them until [`Op::Commit`], 1 stores them at once; answered.
    Put,
    /// Store the staged data of the put whose tag is `arg`; not answered.
    Commit,
    /// Drop the staged data of the put whose tag is `arg`; not answered.
    Abort,
    /// Arm a fault for the server's next request of a kind (`start`: the kind, `len`: the
    /// action, `arg`: an exit status); answered.
    Arm,
    /// Leave the serve loop; not answered.
    Stop,
}

impl Op {
    pub(crate) fn code(self) -> u64 {
        match self {
            Op::Alloc => 1,
            Op::Free => 2,
            Op::Get => 3,
            Op::Put => 4,
            Op::Commit => 5,
            Op::Abort => 6,
            Op::Arm => 7,
            Op::Stop => 8,
        }
    }

    pub(crate) fn from_code(code: u64) -> Option<Op> {
        Some(match code {
            1 => Op::Alloc,
            2 => Op::Free,
            3 => Op::Get,
            4 => Op::Put,
            5 => Op::Commit,
            6 => Op::Abort,
            7 => Op::Arm,
            8 => Op::Stop,
            _ => return None,
        })
    }

    /// The name used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Alloc => "alloc",
            Op::Free => "free",
            Op::Get => "get",
            Op::Put => "put",
            Op::Commit => "commit",
            Op::Abort => "abort",
            Op::Arm => "arm",
            Op::Stop => "stop",
        }
    }
}

/// A request header.
pub(crate) fn header(op: Op, id: u64, start: usize, len: usize, tag: c_int, arg: u64) -> Vec<u64> {
    vec![
        MAGIC,
        op.code(),
        id,
        start as u64,
        len as u64,
        tag as u64,
        arg,
        0,
    ]
}

/// A status message: the status words, then `payload` (the bytes of an error text packed
/// four to a slot).
fn answer(status: u32, text_len: u32, payload: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(ANSWER_PREFIX + payload.len());
    out.push(f32::from_bits(status));
    out.push(f32::from_bits(text_len));
    out.extend_from_slice(payload);
    out
}

/// The status message of an accepted request.
pub(crate) fn ok_answer() -> Vec<f32> {
    answer(STATUS_OK, 0, &[])
}

/// The status message of a refused request, carrying `text`.
pub(crate) fn error_answer(text: &str) -> Vec<f32> {
    let bytes = text.as_bytes();
    let packed: Vec<f32> = bytes
        .chunks(4)
        .map(|c| {
            let mut word = [0u8; 4];
            word[..c.len()].copy_from_slice(c);
            f32::from_bits(u32::from_ne_bytes(word))
        })
        .collect();
    answer(STATUS_ERROR, bytes.len() as u32, &packed)
}

/// The outcome an answer reports: Ok, or the server's error text (as a Runtime error naming
/// `peer` and `what`).
pub(crate) fn answer_status(buffer: &[f32], peer: usize, what: &str) -> Result<()> {
    let (Some(status), Some(len)) = (buffer.first(), buffer.get(1)) else {
        return Err(Error::Runtime(format!(
            "{what}: rank {peer} sent an empty answer"
        )));
    };
    if status.to_bits() == STATUS_OK {
        return Ok(());
    }
    let len = len.to_bits() as usize;
    let bytes: Vec<u8> = buffer[ANSWER_PREFIX..]
        .iter()
        .flat_map(|w| w.to_bits().to_ne_bytes())
        .take(len)
        .collect();
    Err(Error::Runtime(format!(
        "{what}: rank {peer} refused: {}",
        String::from_utf8_lossy(&bytes)
    )))
}

/// A raw MPI request. Open MPI's handles are pointers; every use happens under the
/// process-wide MPI lock.
struct RawRequest(ffi::MPI_Request);

// SAFETY: the handle is only passed to MPI while the process-wide lock is held (MPI is
// initialized at MPI_THREAD_SERIALIZED), so moving it between threads is sound.
unsafe impl Send for RawRequest {}

/// A buffer an [`Exchange`] keeps alive while MPI may read or write it.
enum Buffer {
    Words(Vec<u64>),
    Floats(Vec<f32>),
}

/// Non-blocking MPI requests to or from peers, the buffers they use, and a deadline.
///
/// Dropped before every request completed (an error, a timeout), its buffers are leaked: a
/// late transfer could still write them.
pub(crate) struct Exchange {
    what: String,
    raw: ffi::MPI_Comm,
    rank: usize,
    timeout: Duration,
    deadline: Option<Instant>,
    pending: Vec<(usize, RawRequest)>,
    buffers: Vec<Buffer>,
}

// SAFETY: `raw` is only passed to MPI while the process-wide lock is held; the requests are
// `RawRequest`s (see there) and the buffers are plain vectors.
unsafe impl Send for Exchange {}

impl Exchange {
    /// An exchange described by `what` ("get of slots 0..64 of block 3") on communicator
    /// `raw` (this process is `rank` there), failing `timeout` from now.
    pub(crate) fn new(what: String, raw: ffi::MPI_Comm, rank: usize, timeout: Duration) -> Self {
        Exchange {
            what,
            raw,
            rank,
            timeout,
            deadline: Some(Instant::now() + timeout),
            pending: Vec::new(),
            buffers: Vec::new(),
        }
    }

    /// An exchange with no deadline: it waits as long as its peers take (a server waiting
    /// for its next request).
    pub(crate) fn unbounded(what: String, raw: ffi::MPI_Comm, rank: usize) -> Self {
        let mut exchange = Exchange::new(what, raw, rank, Duration::ZERO);
        exchange.deadline = None;
        exchange
    }

    /// What the exchange does, for messages.
    pub(crate) fn what(&self) -> &str {
        &self.what
    }

    /// Sends `words` to `peer` with `tag` (the runtime lock is held by the caller).
    pub(crate) fn send_words(
        &mut self,
        runtime: &mut Runtime,
        peer: usize,
        tag: c_int,
        words: Vec<u64>,
    ) -> Result<()> {
        let bytes = words.len() * 8;
        let pointer = words.as_ptr().cast::<std::ffi::c_void>();
        self.buffers.push(Buffer::Words(words));
        self.post(runtime, peer, tag, pointer.cast_mut(), bytes, true)
    }

    /// Sends `floats` to `peer` with `tag`.
    pub(crate) fn send_floats(
        &mut self,
        runtime: &mut Runtime,
        peer: usize,
        tag: c_int,
        floats: Vec<f32>,
    ) -> Result<()> {
        let bytes = floats.len() * 4;
        let pointer = floats.as_ptr().cast::<std::ffi::c_void>();
        self.buffers.push(Buffer::Floats(floats));
        self.post(runtime, peer, tag, pointer.cast_mut(), bytes, true)
    }

    /// Sends `data` to `peer` with `tag` without copying it.
    ///
    /// # Safety
    /// `data` must stay alive and unchanged until this exchange completed, or for good when
    /// it is dropped before (its requests may still read it then).
    pub(crate) unsafe fn send_borrowed(
        &mut self,
        runtime: &mut Runtime,
        peer: usize,
        tag: c_int,
        data: &[f32],
    ) -> Result<()> {
        let pointer = data.as_ptr().cast::<std::ffi::c_void>();
        self.post(runtime, peer, tag, pointer.cast_mut(), data.len() * 4, true)
    }

    /// Receives at most `slots` floats from `peer` with `tag` into a buffer of its own, and
    /// returns the buffer's index for [`floats`](Self::floats).
    pub(crate) fn receive_floats(
        &mut self,
        runtime: &mut Runtime,
        peer: usize,
        tag: c_int,
        slots: usize,
    ) -> Result<usize> {
        let mut floats = vec![0f32; slots];
        let pointer = floats.as_mut_ptr().cast::<std::ffi::c_void>();
        let index = self.buffers.len();
        self.buffers.push(Buffer::Floats(floats));
        self.post(runtime, peer, tag, pointer, slots * 4, false)?;
        Ok(index)
    }

    /// Receives `count` words from `peer` with `tag` into a buffer of its own, and returns
    /// the buffer's index for [`words`](Self::words).
    pub(crate) fn receive_words(
        &mut self,
        runtime: &mut Runtime,
        peer: usize,
        tag: c_int,
        count: usize,
    ) -> Result<usize> {
        let mut words = vec![0u64; count];
        let pointer = words.as_mut_ptr().cast::<std::ffi::c_void>();
        let index = self.buffers.len();
        self.buffers.push(Buffer::Words(words));
        self.post(runtime, peer, tag, pointer, count * 8, false)?;
        Ok(index)
    }

    /// Posts one `MPI_Isend` or `MPI_Irecv` of `bytes` bytes at `pointer`.
    fn post(
        &mut self,
        runtime: &mut Runtime,
        peer: usize,
        tag: c_int,
        pointer: *mut std::ffi::c_void,
        bytes: usize,
        send: bool,
    ) -> Result<()> {
        runtime.check_usable(&self.what)?;
        let Ok(count) = c_int::try_from(bytes) else {
            return Err(Error::Value(format!(
                "{}: a message of {bytes} bytes is more than MPI can send at once",
                self.what
            )));
        };
        let mut request = null_request();
        // SAFETY: `pointer` addresses `bytes` bytes of a buffer this exchange owns (it is
        // leaked if the exchange is dropped before the request completes); MPI is
        // initialized, `raw` is a live communicator and the lock is held.
        let rc = unsafe {
            if send {
                ffi::MPI_Isend(
                    pointer,
                    count,
                    ffi::RSMPI_UINT8_T,
                    peer as c_int,
                    tag,
                    self.raw,
                    &mut request,
                )
            } else {
                ffi::MPI_Irecv(
                    pointer,
                    count,
                    ffi::RSMPI_UINT8_T,
                    peer as c_int,
                    tag,
                    self.raw,
                    &mut request,
                )
            }
        };
        if let Err(error) = check(rc, if send { "MPI_Isend" } else { "MPI_Irecv" }) {
            return Err(self.fault(runtime, &format!("{error}")));
        }
        self.pending.push((peer, RawRequest(request)));
        Ok(())
    }

    /// Tests every pending request once: Ok(true) when all completed.
    ///
    /// # Errors
    /// Runtime naming MPI's error, or naming the ranks that did not answer once the deadline
    /// passed; MPI is unusable in this process afterwards.
    pub(crate) fn test(&mut self) -> Result<bool> {
        if self.pending.is_empty() {
            return Ok(true);
        }
        let mut runtime = runtime::lock();
        runtime.check_usable(&self.what)?;
        let mut failure = None;
        self.pending.retain_mut(|(_, request)| {
            if failure.is_some() {
                return true;
            }
            let mut flag: c_int = 0;
            // SAFETY: an active request of this exchange; its status is ignored.
            let rc = unsafe { ffi::MPI_Test(&mut request.0, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            if rc != ffi::MPI_SUCCESS as c_int {
                failure = Some(rc);
                return true;
            }
            flag == 0
        });
        if let Some(rc) = failure {
            return Err(self.fault(
                &mut runtime,
                &format!("MPI_Test returned {}", error_text(rc)),
            ));
        }
        if self.pending.is_empty() {
            return Ok(true);
        }
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            let mut silent: Vec<usize> = self.pending.iter().map(|(peer, _)| *peer).collect();
            silent.sort_unstable();
            silent.dedup();
            let message = format!(
                "timed out on rank {} after {} s: {} did not answer (exited, crashed or stuck)",
                self.rank,
                self.timeout.as_secs_f64(),
                ranks_phrase(&silent)
            );
            return Err(self.fault(&mut runtime, &message));
        }
        Ok(false)
    }

    /// Waits until every request completed, busy (releasing the MPI lock between polls).
    ///
    /// # Errors
    /// As [`test`](Self::test).
    pub(crate) fn wait(&mut self) -> Result<()> {
        self.wait_polling(Polling::Busy)
    }

    /// Waits until every request completed, polling as `polling` says.
    ///
    /// # Errors
    /// As [`test`](Self::test).
    pub(crate) fn wait_polling(&mut self, polling: Polling) -> Result<()> {
        let waiting = Instant::now();
        while !self.test()? {
            if polling == Polling::Busy || waiting.elapsed() < SPIN {
                std::thread::yield_now();
            } else {
                std::thread::sleep(POLL_SLEEP);
            }
        }
        Ok(())
    }

    /// The received floats of buffer `index` (after the exchange completed).
    pub(crate) fn floats(&self, index: usize) -> &[f32] {
        match self.buffers.get(index) {
            Some(Buffer::Floats(floats)) => floats,
            _ => &[],
        }
    }

    /// The received words of buffer `index` (after the exchange completed).
    pub(crate) fn words(&self, index: usize) -> &[u64] {
        match self.buffers.get(index) {
            Some(Buffer::Words(words)) => words,
            _ => &[],
        }
    }

    /// Takes the received floats of buffer `index` out of the exchange (after it completed;
    /// empty otherwise).
    pub(crate) fn take_floats(&mut self, index: usize) -> Vec<f32> {
        if !self.pending.is_empty() {
            return Vec::new();
        }
        match self.buffers.get_mut(index) {
            Some(Buffer::Floats(floats)) => std::mem::take(floats),
            _ => Vec::new(),
        }
    }

    /// Records `detail` as this process's MPI fault and returns it as a Runtime error.
    fn fault(&self, runtime: &mut Runtime, detail: &str) -> Error {
        let message = format!(
            "cluster memory: {} {detail}; MPI is unusable in this process from now on",
            self.what
        );
        runtime.record_fault(&message);
        Error::Runtime(message)
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            std::mem::forget(std::mem::take(&mut self.buffers));
        }
    }
}

/// A request handle MPI treats as inactive.
fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading MPI's predefined null request handle.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_answer_carries_its_text() {
        let answer = error_answer("no block 7 on this rank");
        let error = answer_status(&answer, 2, "get of slots 0..4").unwrap_err();
        assert_eq!(
            error.to_string(),
            Error::Runtime("get of slots 0..4: rank 2 refused: no block 7 on this rank".into())
                .to_string()
        );
        assert!(answer_status(&ok_answer(), 1, "x").is_ok());
    }

    #[test]
    fn operations_round_trip_through_their_codes() {
        for op in [
            Op::Alloc,
            Op::Free,
            Op::Get,
            Op::Put,
            Op::Commit,
            Op::Abort,
            Op::Arm,
            Op::Stop,
        ] {
            assert_eq!(Op::from_code(op.code()), Some(op));
        }
        assert_eq!(Op::from_code(0), None);
    }
}
