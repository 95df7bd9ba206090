//! The serve loop of a rank that lends its memory to cluster memory: it answers the client's
//! requests one at a time until the client stops it.

use std::collections::HashMap;
use std::ffi::c_int;
use std::time::Duration;

use strideweave::{Error, Result};

use crate::cluster::wire::{
    error_answer, ok_answer, Exchange, Op, Polling, HEADER_WORDS, MAGIC, REQUEST_TAG,
};
use crate::cluster::{clipped, ClusterShared, MAX_ERROR_TEXT};
use crate::runtime;

/// The kind of request a [`ServerFault`] applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A read of slots (a transfer out of cluster memory, or a slot read).
    Get,
    /// A write of slots (a transfer into cluster memory, or a slot write).
    Put,
}

impl RequestKind {
    fn op(self) -> Op {
        match self {
            RequestKind::Get => Op::Get,
            RequestKind::Put => Op::Put,
        }
    }
}

/// A fault a serving rank injects into its next request of one kind, armed by the client
/// with [`Cluster::inject_fault`](crate::Cluster::inject_fault), to test that failures end
/// cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFault {
    /// The server refuses the request with an error (after receiving a put's data, without
    /// storing it): the transfer fails on the client.
    Refuse(RequestKind),
    /// The server's process exits with `code` as the request arrives, before answering or
    /// receiving its data, as a crash would.
    Exit(RequestKind, i32),
}

impl ServerFault {
    /// The fault as the arguments of an `Arm` request: (kind, action, code).
    pub(crate) fn encode(self) -> (usize, usize, u64) {
        match self {
            ServerFault::Refuse(kind) => (kind.op().code() as usize, 1, 0),
            ServerFault::Exit(kind, code) => (kind.op().code() as usize, 2, code as u32 as u64),
        }
    }

    fn decode(kind: u64, action: u64, code: u64) -> Option<ServerFault> {
        let kind = match Op::from_code(kind)? {
            Op::Get => RequestKind::Get,
            Op::Put => RequestKind::Put,
            _ => return None,
        };
        match action {
            1 => Some(ServerFault::Refuse(kind)),
            2 => Some(ServerFault::Exit(kind, code as u32 as i32)),
            _ => None,
        }
    }

    fn kind(self) -> RequestKind {
        match self {
            ServerFault::Refuse(kind) | ServerFault::Exit(kind, _) => kind,
        }
    }
}

/// What a serving rank did, returned by [`Cluster::serve`](crate::Cluster::serve) when the
/// client stopped it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeSummary {
    /// Requests answered or applied (the stop request included).
    pub requests: u64,
    /// Slots sent to the client.
    pub slots_sent: u64,
    /// Slots received from the client.
    pub slots_received: u64,
    /// The most slots this rank held at once for the client (blocks and staged puts).
    pub peak_slots: u64,
}

/// The memory this rank lends: blocks by id, and puts staged until their commit.
#[derive(Default)]
struct Store {
    blocks: HashMap<u64, Vec<f32>>,
    staged: HashMap<(u64, u64), (usize, Vec<f32>)>,
    armed: Vec<ServerFault>,
    held: u64,
    summary: ServeSummary,
}

impl Store {
    fn hold(&mut self, slots: usize, add: bool) {
        if add {
            self.held += slots as u64;
        } else {
            self.held = self.held.saturating_sub(slots as u64);
        }
        self.summary.peak_slots = self.summary.peak_slots.max(self.held);
    }

    /// Takes the armed fault for `op`, if there is one.
    fn fault_for(&mut self, op: Op) -> Option<ServerFault> {
        let index = self.armed.iter().position(|f| f.kind().op() == op)?;
        Some(self.armed.remove(index))
    }

    /// The slots `start..start + len` of block `id`, or why not.
    fn range(
        &mut self,
        id: u64,
        start: usize,
        len: usize,
    ) -> std::result::Result<&mut [f32], String> {
        let block = self
            .blocks
            .get_mut(&id)
            .ok_or_else(|| format!("this rank holds no block {id}"))?;
        let size = block.len();
        start
            .checked_add(len)
            .and_then(|end| block.get_mut(start..end))
            .ok_or_else(|| {
                format!("slots {start}..{start}+{len} lie outside block {id} of {size} slots")
            })
    }
}

/// Serves the client of `cluster` until it sends a stop request, or fails when no request
/// arrives for `idle` (when given).
pub(crate) fn serve(cluster: &ClusterShared, idle: Option<Duration>) -> Result<ServeSummary> {
    let mut store = Store::default();
    let client = cluster.client;
    loop {
        let what = format!(
            "server rank {} waiting for a request from rank {client}",
            cluster.rank()
        );
        let mut exchange = match idle {
            None => Exchange::unbounded(what, cluster.raw(), cluster.rank()),
            Some(idle) => Exchange::new(what, cluster.raw(), cluster.rank(), idle),
        };
        let index = {
            let mut runtime = runtime::lock();
            exchange.receive_words(&mut runtime, client, REQUEST_TAG, HEADER_WORDS)?
        };
        exchange.wait_polling(Polling::Idle)?;
        let header = exchange.words(index).to_vec();
        if header.first() != Some(&MAGIC) {
            return Err(Error::Runtime(format!(
                "cluster memory server on rank {}: rank {client} sent a request that is not cluster memory's",
                cluster.rank()
            )));
        }
        let Some(op) = Op::from_code(header[1]) else {
            return Err(Error::Runtime(format!(
                "cluster memory server on rank {}: unknown request {}",
                cluster.rank(),
                header[1]
            )));
        };
        store.summary.requests += 1;
        let (id, start, len) = (header[2], header[3] as usize, header[4] as usize);
        let (tag, arg) = (header[5] as c_int, header[6]);
        let fault = match op {
            Op::Get | Op::Put => store.fault_for(op),
            _ => None,
        };
        if let Some(ServerFault::Exit(_, code)) = fault {
            eprintln!(
                "strideweave-mpi: cluster memory server rank {} exits on a {} request (injected fault)",
                cluster.rank(),
                op.name()
            );
            std::process::exit(code);
        }
        let refused = fault.map(|_| "injected failure".to_owned());
        match op {
            Op::Stop => return Ok(store.summary),
            Op::Alloc => {
                let outcome = match store.blocks.entry(id) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        Err(format!("block {id} exists already"))
                    }
                    std::collections::hash_map::Entry::Vacant(entry) => {
                        entry.insert(vec![0.0; len]);
                        Ok(())
                    }
                };
                if outcome.is_ok() {
                    store.hold(len, true);
                }
                reply(cluster, tag, outcome)?;
            }
            Op::Free => {
                if let Some(block) = store.blocks.remove(&id) {
                    store.hold(block.len(), false);
                }
                let stale: Vec<(u64, u64)> = store
                    .staged
                    .keys()
                    .filter(|(b, _)| *b == id)
                    .copied()
                    .collect();
                for key in stale {
                    if let Some((_, data)) = store.staged.remove(&key) {
                        store.hold(data.len(), false);
                    }
                }
            }
            Op::Get => {
                let refusal = match refused {
                    Some(reason) => Some(reason),
                    None => store.range(id, start, len).err(),
                };
                match refusal {
                    Some(reason) => {
                        send(cluster, tag, error_message(reason))?;
                        send(cluster, tag, Vec::new())?;
                    }
                    None => {
                        send(cluster, tag, ok_answer())?;
                        if let Err(error) = send_slots(cluster, tag, &mut store, (id, start, len)) {
                            // A late transfer may still read the store's memory.
                            std::mem::forget(store);
                            return Err(error);
                        }
                        store.summary.slots_sent += len as u64;
                    }
                }
            }
            Op::Put => {
                let data = receive_data(cluster, tag, len, op)?;
                store.summary.slots_received += len as u64;
                let outcome = match refused {
                    Some(reason) => Err(reason),
                    None => match store.range(id, start, len) {
                        Err(reason) => Err(reason),
                        Ok(slots) if arg == 1 => {
                            slots.copy_from_slice(&data);
                            Ok(())
                        }
                        Ok(_) => {
                            store.hold(len, true);
                            store.staged.insert((id, tag as u64), (start, data));
                            Ok(())
                        }
                    },
                };
                reply(cluster, tag, outcome)?;
            }
            Op::Commit => {
                if let Some((at, data)) = store.staged.remove(&(id, arg)) {
                    store.hold(data.len(), false);
                    if let Ok(slots) = store.range(id, at, data.len()) {
                        slots.copy_from_slice(&data);
                    }
                }
            }
            Op::Abort => {
                if let Some((_, data)) = store.staged.remove(&(id, arg)) {
                    store.hold(data.len(), false);
                }
            }
            Op::Arm => {
                let outcome = ServerFault::decode(start as u64, len as u64, arg)
                    .map(|fault| store.armed.push(fault))
                    .ok_or_else(|| "an unknown fault".to_owned());
                reply(cluster, tag, outcome)?;
            }
        }
    }
}

/// Receives the `len` slots of a put on `tag` from the client, within the timeout.
fn receive_data(cluster: &ClusterShared, tag: c_int, len: usize, op: Op) -> Result<Vec<f32>> {
    let client = cluster.client;
    let mut exchange = cluster.exchange(format!(
        "server rank {} receiving the {len} slots of a {} from rank {client}",
        cluster.rank(),
        op.name()
    ));
    let index = {
        let mut runtime = runtime::lock();
        exchange.receive_floats(&mut runtime, client, tag, len)?
    };
    exchange.wait()?;
    Ok(exchange.take_floats(index))
}

/// Answers the client on `tag`: the status of `outcome` (or the error text).
fn reply(
    cluster: &ClusterShared,
    tag: c_int,
    outcome: std::result::Result<(), String>,
) -> Result<()> {
    send(
        cluster,
        tag,
        match outcome {
            Ok(()) => ok_answer(),
            Err(reason) => error_message(reason),
        },
    )
}

/// Sends slots `start..start + len` of block `id` to the client on `tag` straight from the
/// store, and waits until they left.
fn send_slots(
    cluster: &ClusterShared,
    tag: c_int,
    store: &mut Store,
    (id, start, len): (u64, usize, usize),
) -> Result<()> {
    let client = cluster.client;
    let mut exchange = cluster.exchange(format!(
        "server rank {} sending {len} slots of block {id} to rank {client}",
        cluster.rank()
    ));
    let slots = store.range(id, start, len).map_err(Error::Runtime)?;
    {
        let mut runtime = runtime::lock();
        // SAFETY: the slots stay in the store, unchanged, until the wait below returns;
        // when it fails the caller leaks the store.
        unsafe { exchange.send_borrowed(&mut runtime, client, tag, slots)? };
    }
    exchange.wait()
}

/// The error answer carrying `reason`, cut to the longest text sent.
fn error_message(reason: String) -> Vec<f32> {
    error_answer(clipped(&reason, MAX_ERROR_TEXT))
}

/// Sends `message` to the client on `tag` and waits until it left, within the timeout.
fn send(cluster: &ClusterShared, tag: c_int, message: Vec<f32>) -> Result<()> {
    let client = cluster.client;
    let mut exchange = cluster.exchange(format!(
        "server rank {} answering rank {client}",
        cluster.rank()
    ));
    {
        let mut runtime = runtime::lock();
        exchange.send_floats(&mut runtime, client, tag, message)?;
    }
    exchange.wait()
}
