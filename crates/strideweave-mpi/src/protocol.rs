//! The protocol every collective follows, so that disagreements and faults end with errors
//! instead of hangs (docs/distributed.md, Faults):
//!
//! 1. **Header.** Every rank contributes a fixed header (a magic number, the collective's
//!    number on the communicator, its kind, and the length and hash of a text describing
//!    what this rank passed: shapes, dtypes, the reduction) to one non-blocking
//!    `MPI_Iallgather`.
//! 2. **Details**, only when the headers disagree or a rank reported a local error: the
//!    descriptions and error texts themselves (`MPI_Iallgatherv`), from which every rank
//!    builds the same error saying what differed and on which ranks.
//! 3. **Data**: the reduction itself as non-blocking `MPI_Iallreduce` requests.
//!
//! Every wait polls its requests with `MPI_Testall` until the collective's deadline (its
//! start plus the communicator's timeout). When the deadline passes, the rank sends a short
//! fault report to every other rank and collects theirs for a grace period; the ranks that
//! sent none are named in the error as having exited, crashed or stalled. From then on MPI
//! is unusable in this process: no MPI call is made again, buffers that pending requests
//! may still reference are leaked, and `MPI_Finalize` is skipped.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::time::{Duration, Instant};

use mpi::ffi;
use strideweave::{Error, Result};

use crate::communicator::{Communicator, FailPoint};
use crate::runtime::{error_text, Runtime};

/// The first word of every header: "SWMPI" and a protocol version.
const MAGIC: u64 = 0x5357_4d50_4900_0001;
/// The first word of a fault report.
const REPORT_MAGIC: u64 = 0x5357_4d50_4946_0001;
/// The tag of fault reports (the collectives themselves use no tags).
const REPORT_TAG: c_int = 0x5357;
/// Header words.
const HEADER_WORDS: usize = 8;
/// The longest description compared in detail; a longer one is compared by its hash.
const MAX_DESCRIPTION: usize = 64 * 1024;
/// The longest local error text sent to the other ranks.
const MAX_ERROR_TEXT: usize = 4 * 1024;
/// Elements per `MPI_Iallreduce` request (MPI counts are C ints).
const CHUNK: usize = 1 << 30;
/// How long a wait yields between polls before it sleeps between them.
const SPIN: Duration = Duration::from_millis(1);
/// The sleep between polls after [`SPIN`].
const POLL_SLEEP: Duration = Duration::from_micros(50);

/// The collectives of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduce,
    AverageGradients,
    Barrier,
}

impl Kind {
    fn code(self) -> u64 {
        match self {
            Kind::AllReduce => 1,
            Kind::AverageGradients => 2,
            Kind::Barrier => 3,
        }
    }

    fn from_code(code: u64) -> Option<Kind> {
        match code {
            1 => Some(Kind::AllReduce),
            2 => Some(Kind::AverageGradients),
            3 => Some(Kind::Barrier),
            _ => None,
        }
    }

    /// The name used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "all_reduce",
            Kind::AverageGradients => "average_gradients",
            Kind::Barrier => "barrier",
        }
    }
}

/// The stage a collective is in, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Header,
    Details,
    Data,
}

impl Stage {
    fn code(self) -> u64 {
        match self {
            Stage::Header => 1,
            Stage::Details => 2,
            Stage::Data => 3,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Stage::Header => "while exchanging headers (waiting for every rank to join)",
            Stage::Details => "while exchanging the descriptions of a disagreement",
            Stage::Data => "while reducing the data",
        }
    }
}

/// One collective in progress on one rank, holding the process-wide MPI lock.
pub(crate) struct Collective<'a> {
    runtime: &'a mut Runtime,
    comm: &'a Communicator,
    kind: Kind,
    sequence: u64,
    description: String,
    deadline: Instant,
    exit_after_header: Option<i32>,
}

impl<'a> Collective<'a> {
    /// Starts collective `kind` on `comm`; `description` lists, one `key: value` per line,
    /// what this rank passed (every rank must pass the same).
    ///
    /// # Errors
    /// Runtime when MPI is unusable (not initialized, finalized, or after a fault).
    pub(crate) fn start(
        runtime: &'a mut Runtime,
        comm: &'a Communicator,
        kind: Kind,
        description: &str,
    ) -> Result<Collective<'a>> {
        runtime.check_usable(kind.name())?;
        let sequence = comm.next_sequence();
        let mut exit_after_header = None;
        match comm.take_fail_point() {
            Some(FailPoint::ExitBeforeJoining { code }) => {
                eprintln!(
                    "strideweave-mpi: rank {} exits before joining {} #{sequence} (fail point)",
                    comm.rank(),
                    kind.name()
                );
                std::process::exit(code);
            }
            Some(FailPoint::ExitAfterHeader { code }) => exit_after_header = Some(code),
            None => {}
        }
        Ok(Collective {
            runtime,
            comm,
            kind,
            sequence,
            description: description.to_owned(),
            deadline: Instant::now() + comm.timeout(),
            exit_after_header,
        })
    }

    /// The collective's name and number, for messages: `all_reduce #3`.
    fn title(&self) -> String {
        format!("{} #{}", self.kind.name(), self.sequence)
    }

    /// Exchanges headers and checks that every rank called the same collective with the
    /// same description and without a local error. `local_error` is this rank's own reason
    /// not to go on (it still takes part, so that the others learn of it instead of
    /// waiting).
    ///
    /// # Errors
    /// Value naming what differed and on which ranks, when descriptions differ; Runtime when
    /// ranks called different collectives; `local_error` itself on this rank, and Runtime
    /// naming the failing rank and its error on the others; the timeout and MPI failures of
    /// [`wait`](Self::wait).
    pub(crate) fn agree(&mut self, local_error: Option<Error>) -> Result<()> {
        let size = self.comm.size();
        let description = truncated(&self.description, MAX_DESCRIPTION).to_owned();
        let error_text = local_error
            .as_ref()
            .map(|e| truncated(&e.to_string(), MAX_ERROR_TEXT).to_owned())
            .unwrap_or_default();
        let header: Vec<u64> = vec![
            MAGIC,
            self.sequence,
            self.kind.code(),
            fnv1a(self.description.as_bytes()),
            description.len() as u64,
            error_text.len() as u64,
            0,
            0,
        ];
        let mut all = vec![0u64; HEADER_WORDS * size];
        let mut request = null_request();
        // SAFETY: both buffers hold what the counts say; they stay alive until the request
        // completes or, on a fault, for good (leaked below).
        let rc = unsafe {
            ffi::MPI_Iallgather(
                header.as_ptr().cast(),
                HEADER_WORDS as c_int,
                ffi::RSMPI_UINT64_T,
                all.as_mut_ptr().cast(),
                HEADER_WORDS as c_int,
                ffi::RSMPI_UINT64_T,
                self.comm.shared.raw.0,
                &mut request,
            )
        };
        if rc != ffi::MPI_SUCCESS as c_int {
            return Err(self.mpi_failure("MPI_Iallgather", rc, Stage::Header));
        }
        if let Err(error) = self.wait(std::slice::from_mut(&mut request), Stage::Header) {
            std::mem::forget(header);
            std::mem::forget(all);
            return Err(error);
        }
        let headers: Vec<&[u64]> = all.chunks(HEADER_WORDS).collect();
        if let Some(rank) = headers.iter().position(|h| h[0] != MAGIC) {
            let message = format!(
                "{}: rank {rank} sent a header that is not strideweave-mpi's (another version of the crate?)",
                self.title()
            );
            self.runtime.record_fault(&message);
            return Err(Error::Runtime(message));
        }
        let same = headers
            .iter()
            .all(|h| h[1..4] == headers[0][1..4] && h[5] == 0);
        if same {
            return self.after_header();
        }
        let texts = self.details(&headers, &description, &error_text)?;
        let error = self.disagreement(&headers, &texts, local_error);
        Err(error)
    }

    /// Exits here when the fail point says so; otherwise nothing.
    fn after_header(&mut self) -> Result<()> {
        if let Some(code) = self.exit_after_header {
            eprintln!(
                "strideweave-mpi: rank {} exits in the middle of {} (fail point)",
                self.comm.rank(),
                self.title()
            );
            std::process::exit(code);
        }
        Ok(())
    }

    /// Gathers every rank's description and error text (the lengths come from `headers`).
    fn details(
        &mut self,
        headers: &[&[u64]],
        description: &str,
        error_text: &str,
    ) -> Result<Vec<(String, String)>> {
        let mut counts = Vec::with_capacity(headers.len());
        let mut displacements = Vec::with_capacity(headers.len());
        let mut total: usize = 0;
        for (rank, h) in headers.iter().enumerate() {
            let length = usize::try_from(h[4].saturating_add(h[5])).unwrap_or(usize::MAX);
            let (Ok(count), Ok(displacement)) = (c_int::try_from(length), c_int::try_from(total))
            else {
                let message = format!(
                    "{}: rank {rank} announced a description of {length} bytes, more than MPI can gather",
                    self.title()
                );
                self.runtime.record_fault(&message);
                return Err(Error::Runtime(message));
            };
            counts.push(count);
            displacements.push(displacement);
            total = total.saturating_add(length);
        }
        let mine: Vec<u8> = [description.as_bytes(), error_text.as_bytes()].concat();
        let mut gathered = vec![0u8; total];
        let mut request = null_request();
        // SAFETY: `mine` has this rank's announced length; `gathered`, `counts` and
        // `displacements` describe every rank's announced length; all stay alive until the
        // request completes or, on a fault, for good (leaked below).
        let rc = unsafe {
            ffi::MPI_Iallgatherv(
                mine.as_ptr().cast(),
                mine.len() as c_int,
                ffi::RSMPI_UINT8_T,
                gathered.as_mut_ptr().cast(),
                counts.as_ptr(),
                displacements.as_ptr(),
                ffi::RSMPI_UINT8_T,
                self.comm.shared.raw.0,
                &mut request,
            )
        };
        if rc != ffi::MPI_SUCCESS as c_int {
            return Err(self.mpi_failure("MPI_Iallgatherv", rc, Stage::Details));
        }
        if let Err(error) = self.wait(std::slice::from_mut(&mut request), Stage::Details) {
            std::mem::forget((mine, gathered, counts, displacements));
            return Err(error);
        }
        let mut texts = Vec::with_capacity(headers.len());
        let mut start = 0usize;
        for h in headers {
            let description_length = usize::try_from(h[4]).unwrap_or(usize::MAX);
            let error_length = usize::try_from(h[5]).unwrap_or(usize::MAX);
            let end = start
                .saturating_add(description_length)
                .saturating_add(error_length);
            let bytes = gathered.get(start..end).unwrap_or(&[]);
            let split = description_length.min(bytes.len());
            texts.push((
                String::from_utf8_lossy(&bytes[..split]).into_owned(),
                String::from_utf8_lossy(&bytes[split..]).into_owned(),
            ));
            start = end;
        }
        Ok(texts)
    }

    /// The error every rank builds from the same headers and texts.
    fn disagreement(
        &self,
        headers: &[&[u64]],
        texts: &[(String, String)],
        local_error: Option<Error>,
    ) -> Error {
        // Different collectives (or the same one at different positions).
        let calls: Vec<String> = headers
            .iter()
            .map(|h| {
                let name = Kind::from_code(h[2]).map_or("an unknown collective", Kind::name);
                format!("{name} #{}", h[1])
            })
            .collect();
        if calls.iter().any(|c| *c != calls[0]) {
            return Error::Runtime(format!(
                "ranks called different collectives on one communicator (every rank must call the same collectives in the same order): {}",
                grouped(calls.iter().map(String::as_str))
            ));
        }
        // Different arguments.
        if headers.iter().any(|h| h[3] != headers[0][3]) {
            let tables: Vec<BTreeMap<&str, &str>> = texts.iter().map(|(d, _)| fields(d)).collect();
            let mut keys: Vec<&str> = Vec::new();
            for (d, _) in texts {
                for line in d.lines() {
                    let key = line.split_once(": ").map_or(line, |(k, _)| k);
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
            }
            let differences: Vec<String> = keys
                .iter()
                .filter_map(|key| {
                    let values: Vec<&str> = tables
                        .iter()
                        .map(|t| t.get(key).copied().unwrap_or("(absent)"))
                        .collect();
                    (values.iter().any(|v| *v != values[0]))
                        .then(|| format!("{key} differs: {}", grouped(values.into_iter())))
                })
                .collect();
            let detail = if differences.is_empty() {
                "their descriptions differ beyond what was compared".to_owned()
            } else {
                differences.join("; ")
            };
            return Error::Value(format!(
                "{}: the ranks passed different arguments: {detail}",
                self.title()
            ));
        }
        // Local errors.
        if let Some(error) = local_error {
            return error;
        }
        let failures: Vec<String> = texts
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| !e.is_empty())
            .map(|(rank, (_, e))| format!("rank {rank}: {e}"))
            .collect();
        Error::Runtime(format!(
            "{}: {} could not take part, so no rank reduced anything: {}",
            self.title(),
            if failures.len() == 1 {
                "a rank"
            } else {
                "some ranks"
            },
            failures.join("; ")
        ))
    }

    /// Reduces `send` by summing it element by element across the ranks into `receive` (of
    /// the same length), which is returned. On a fault `receive` is leaked: a late transfer
    /// may still write it.
    ///
    /// # Errors
    /// The timeout and MPI failures of [`wait`](Self::wait); Value when the lengths differ.
    pub(crate) fn sum_f32(&mut self, send: &[f32], mut receive: Vec<f32>) -> Result<Vec<f32>> {
        if send.len() != receive.len() {
            return Err(Error::Value(format!(
                "{}: {} elements to send but {} to receive",
                self.title(),
                send.len(),
                receive.len()
            )));
        }
        let mut requests = Vec::with_capacity(send.len().div_ceil(CHUNK));
        for (chunk, target) in send.chunks(CHUNK).zip(receive.chunks_mut(CHUNK)) {
            let mut request = null_request();
            // SAFETY: both chunks hold `chunk.len()` (at most CHUNK, a C int) floats and stay
            // alive until the request completes or, on a fault, for good (`receive` is leaked;
            // `send` is only read).
            let rc = unsafe {
                ffi::MPI_Iallreduce(
                    chunk.as_ptr().cast(),
                    target.as_mut_ptr().cast(),
                    chunk.len() as c_int,
                    ffi::RSMPI_FLOAT,
                    ffi::RSMPI_SUM,
                    self.comm.shared.raw.0,
                    &mut request,
                )
            };
            if rc != ffi::MPI_SUCCESS as c_int {
                std::mem::forget(receive);
                return Err(self.mpi_failure("MPI_Iallreduce", rc, Stage::Data));
            }
            requests.push(request);
        }
        match self.wait(&mut requests, Stage::Data) {
            Ok(()) => Ok(receive),
            Err(error) => {
                std::mem::forget(receive);
                Err(error)
            }
        }
    }

    /// Polls `requests` until all completed, or fails at the deadline after the fault
    /// reports (naming the ranks that sent none).
    fn wait(&mut self, requests: &mut [ffi::MPI_Request], stage: Stage) -> Result<()> {
        let Ok(count) = c_int::try_from(requests.len()) else {
            return Err(Error::Value(format!(
                "{}: {} requests are more than MPI can test at once",
                self.title(),
                requests.len()
            )));
        };
        let waiting = Instant::now();
        loop {
            let mut flag: c_int = 0;
            // SAFETY: `requests` holds `count` active or null requests; statuses are ignored.
            let rc = unsafe {
                ffi::MPI_Testall(
                    count,
                    requests.as_mut_ptr(),
                    &mut flag,
                    ffi::RSMPI_STATUSES_IGNORE,
                )
            };
            if rc != ffi::MPI_SUCCESS as c_int {
                return Err(self.mpi_failure("MPI_Testall", rc, stage));
            }
            if flag != 0 {
                return Ok(());
            }
            let now = Instant::now();
            if now >= self.deadline {
                return Err(self.timed_out(stage));
            }
            if now - waiting < SPIN {
                std::thread::yield_now();
            } else {
                std::thread::sleep(POLL_SLEEP);
            }
        }
    }

    /// The fault of an MPI call that returned `rc`.
    fn mpi_failure(&mut self, call: &str, rc: c_int, stage: Stage) -> Error {
        let message = format!(
            "{} failed on rank {} {}: {call} returned {}; MPI is unusable in this process from now on",
            self.title(),
            self.comm.rank(),
            stage.describe(),
            error_text(rc)
        );
        self.runtime.record_fault(&message);
        Error::Runtime(message)
    }

    /// The fault of a deadline that passed: sends this rank's report to every other rank,
    /// collects theirs for the grace period, and names the ranks that sent none.
    fn timed_out(&mut self, stage: Stage) -> Error {
        let rank = self.comm.rank();
        let size = self.comm.size();
        let grace = self.comm.grace_period();
        let report: Vec<u64> = vec![REPORT_MAGIC, self.sequence, rank as u64, stage.code()];
        let mut incoming = vec![0u64; 4 * size];
        let mut receives: Vec<(usize, ffi::MPI_Request)> = Vec::with_capacity(size);
        let mut sends: Vec<ffi::MPI_Request> = Vec::with_capacity(size);
        let raw = self.comm.shared.raw.0;
        let mut posted = true;
        for (peer, slot) in incoming.chunks_mut(4).enumerate() {
            if peer == rank {
                continue;
            }
            let (mut receive, mut send) = (null_request(), null_request());
            // SAFETY: each buffer holds 4 words and is leaked below, so it outlives the
            // requests whatever becomes of them.
            let rc_receive = unsafe {
                ffi::MPI_Irecv(
                    slot.as_mut_ptr().cast(),
                    4,
                    ffi::RSMPI_UINT64_T,
                    peer as c_int,
                    REPORT_TAG,
                    raw,
                    &mut receive,
                )
            };
            // SAFETY: as above.
            let rc_send = unsafe {
                ffi::MPI_Isend(
                    report.as_ptr().cast(),
                    4,
                    ffi::RSMPI_UINT64_T,
                    peer as c_int,
                    REPORT_TAG,
                    raw,
                    &mut send,
                )
            };
            posted &=
                rc_receive == ffi::MPI_SUCCESS as c_int && rc_send == ffi::MPI_SUCCESS as c_int;
            if rc_receive == ffi::MPI_SUCCESS as c_int {
                receives.push((peer, receive));
            }
            sends.push(send);
        }
        let grace_deadline = Instant::now() + grace;
        let mut reported = vec![false; size];
        reported[rank] = true;
        let mut pending: Vec<(usize, ffi::MPI_Request)> = receives;
        while !pending.is_empty() && Instant::now() < grace_deadline {
            pending.retain_mut(|(peer, request)| {
                let mut flag: c_int = 0;
                // SAFETY: an active receive request; its status is ignored.
                let rc = unsafe { ffi::MPI_Test(request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
                if rc == ffi::MPI_SUCCESS as c_int && flag != 0 {
                    reported[*peer] = true;
                    return false;
                }
                rc == ffi::MPI_SUCCESS as c_int
            });
            std::thread::sleep(POLL_SLEEP);
        }
        // Reports whose magic is wrong do not count.
        for (peer, words) in incoming.chunks(4).enumerate() {
            if peer != rank && reported[peer] && words[0] != REPORT_MAGIC {
                reported[peer] = false;
            }
        }
        std::mem::forget((report, incoming, sends, pending));
        let silent: Vec<usize> = (0..size).filter(|&r| !reported[r]).collect();
        let others: Vec<usize> = (0..size).filter(|&r| r != rank && reported[r]).collect();
        let timeout = self.comm.timeout();
        let mut message = format!(
            "{} timed out on rank {rank} after {} {}: ",
            self.title(),
            seconds(timeout),
            stage.describe()
        );
        if silent.is_empty() {
            message.push_str(
                "every other rank reported the same timeout, so no rank is missing: the timeout is too short for this collective or MPI's transport stalled",
            );
        } else {
            message.push_str(&format!(
                "{} did not respond (exited, crashed or stuck outside this collective); {} within the {} grace period",
                ranks_phrase(&silent),
                if others.is_empty() {
                    "no other rank reported".to_owned()
                } else {
                    format!("{} reported the same timeout", ranks_phrase(&others))
                },
                seconds(grace)
            ));
        }
        if !posted {
            message.push_str(" (some fault reports could not be posted)");
        }
        message.push_str("; MPI is unusable in this process from now on");
        self.runtime.record_fault(&message);
        Error::Runtime(message)
    }
}

/// A request handle MPI treats as inactive.
fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading MPI's predefined null request handle.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// `text` cut to at most `limit` bytes on a character boundary.
fn truncated(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The 64-bit FNV-1a hash of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The `key: value` lines of a description.
fn fields(description: &str) -> BTreeMap<&str, &str> {
    description
        .lines()
        .map(|line| line.split_once(": ").unwrap_or((line, "")))
        .collect()
}

/// `values` (one per rank) grouped: `(4,2) on ranks 0, 2; (4,3) on rank 1`.
fn grouped<'v>(values: impl Iterator<Item = &'v str>) -> String {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (rank, value) in values.enumerate() {
        match groups.iter_mut().find(|(v, _)| *v == value) {
            Some((_, ranks)) => ranks.push(rank),
            None => groups.push((value, vec![rank])),
        }
    }
    groups
        .iter()
        .map(|(value, ranks)| format!("{value} on {}", ranks_phrase(ranks)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `rank 3` or `ranks 0, 1, 2`.
pub(crate) fn ranks_phrase(ranks: &[usize]) -> String {
    let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
    if ranks.len() == 1 {
        format!("rank {}", list[0])
    } else {
        format!("ranks {}", list.join(", "))
    }
}

/// A duration in seconds for messages: `3 s`, `0.75 s`.
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_names_the_ranks_of_each_value() {
        let values = ["(4,2)", "(4,3)", "(4,2)", "(4,2)"];
        assert_eq!(
            grouped(values.into_iter()),
            "(4,2) on ranks 0, 2, 3; (4,3) on rank 1"
        );
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncated("héllo", 2), "h");
        assert_eq!(truncated("héllo", 3), "hé");
        assert_eq!(truncated("abc", 10), "abc");
    }

    #[test]
    fn descriptions_split_into_fields() {
        let table = fields("shape: (2,2)\ndtype: Float32\nodd line");
        assert_eq!(table.get("shape"), Some(&"(2,2)"));
        assert_eq!(table.get("odd line"), Some(&""));
    }

    #[test]
    fn the_hash_tells_descriptions_apart() {
        assert_ne!(fnv1a(b"shape: (4,2)"), fnv1a(b"shape: (4,3)"));
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
