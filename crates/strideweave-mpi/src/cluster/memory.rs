//! The [`ClusterMemory`] carrier class: its storage provider (slots on the owners), its
//! routes to [`ClusterLocal`](crate::ClusterLocal) and to the CPU, and the completion of a
//! transfer, which comes from its MPI requests.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, TryLockError};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    read_f32s, CompletionCell, PreparedTransfer, ProviderCompletion, StorageProvider, Submitted,
    TransferPreparation, TransferProvider, TransferRequest, TransferRoute, Unsupported,
};
use strideweave::carriers::Cpu;
use strideweave::{register_carrier_definition, CarrierDefinition, DType, Error, Result, Value};

use crate::cluster::local::{self, LocalSlots};
use crate::cluster::wire::Op;
use crate::cluster::{Block, ClusterShared, Posted};

/// The two classes of cluster memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Classes {
    pub(crate) memory: CarrierClass,
    pub(crate) local: CarrierClass,
}

static CLASSES: OnceLock<Result<Classes>> = OnceLock::new();

/// The ClusterMemory and ClusterLocal classes, their definitions registered on first use
/// (once per process).
pub(crate) fn classes() -> Result<Classes> {
    CLASSES.get_or_init(register).clone()
}

fn register() -> Result<Classes> {
    let memory = CarrierClass::mint("ClusterMemory", ClassKind::Independent);
    let local = CarrierClass::mint("ClusterLocal", ClassKind::Dependent);
    let cpu = CarrierClass::of::<Cpu>();
    register_carrier_definition(
        memory,
        CarrierDefinition::new(storage()).with_transfers(vec![
            get_route(memory, local, "clustermemory-to-clusterlocal")?,
            get_route(memory, cpu, "clustermemory-to-cpu")?,
        ])?,
    )?;
    register_carrier_definition(local, local::definition(local, memory)?)?;
    Ok(Classes { memory, local })
}

/// The provider-owned state of one ClusterMemory carrier: the cluster it belongs to and its
/// block on the owners (values staged for `allocate` while it is constructed).
#[derive(Default)]
pub struct RemoteSlots {
    cluster: Option<Arc<ClusterShared>>,
    block: Option<Block>,
    staged: Option<Vec<f32>>,
}

impl RemoteSlots {
    fn cluster(&self) -> Result<&Arc<ClusterShared>> {
        self.cluster.as_ref().ok_or_else(|| {
            Error::Runtime(
                "a ClusterMemory carrier needs a cluster: make it with Cluster::memory".into(),
            )
        })
    }

    fn block(&self) -> Result<&Block> {
        self.block
            .as_ref()
            .ok_or_else(|| Error::Runtime("the ClusterMemory carrier holds no slots".into()))
    }
}

impl Drop for RemoteSlots {
    fn drop(&mut self) {
        if let (Some(cluster), Some(block)) = (&self.cluster, self.block.take()) {
            cluster.free(&block);
        }
    }
}

/// Float32 slots held in the memory of other ranks of a [`Cluster`](crate::Cluster): a
/// definition-backed, independent carrier class (no kernels: it stores, it does not
/// compute), made by [`Cluster::memory`](crate::Cluster::memory).
///
/// Its definition declares the routes ClusterMemory → ClusterLocal and ClusterMemory → CPU
/// (seed rule: "every route's source class SHALL be exactly carrier_class"); the way in is
/// ClusterLocal → ClusterMemory, declared by ClusterLocal's definition. Each route posts one
/// request per owner holding part of the span and completes when MPI's requests do, so a
/// `move_async` returns at once and tile staging overlaps the transfer with compute. A
/// write into cluster memory is staged on every owner and committed only once all of them
/// accepted it, so a failed transfer leaves the destination's slots as they were; a read
/// writes its destination only once every part arrived.
///
/// Slot reads and writes (`get`, `set`) are one request each: correct, not fast.
#[derive(Debug)]
pub struct ClusterMemory {
    _private: (),
}

impl ClusterMemory {
    /// The exact ClusterMemory class (registering its definition on first use).
    ///
    /// # Errors
    /// Runtime when the definitions cannot be registered.
    pub fn class() -> Result<CarrierClass> {
        Ok(classes()?.memory)
    }

    /// Where `carrier`'s slots live: one `(rank, first slot, slot count)` per owner holding
    /// some.
    ///
    /// # Errors
    /// Type for a carrier of another class; Runtime once released.
    pub fn placement(carrier: &Carrier) -> Result<Vec<(usize, usize, usize)>> {
        carrier.with_provider_state(|state: &RemoteSlots| {
            state.block().map(|block| {
                block
                    .pieces
                    .iter()
                    .map(|p| (p.rank, p.start, p.len))
                    .collect()
            })
        })?
    }

    /// Every slot of `carrier`, read in one transfer.
    ///
    /// # Errors
    /// Type for a carrier of another class; the transfer's errors.
    pub fn f32s(carrier: &Carrier) -> Result<Vec<f32>> {
        let (cluster, block) = carrier.with_provider_state(|state: &RemoteSlots| {
            Ok::<_, Error>((state.cluster()?.clone(), state.block()?.clone()))
        })??;
        let mut posted =
            cluster.post(Op::Get, &block, (0, block.slots), false, |_| Ok(Vec::new()))?;
        posted.exchange.wait()?;
        with_gathered(&mut posted, block.slots, |values| Ok(values.to_vec()))
    }
}

/// A ClusterMemory carrier of `slots` slots on `cluster`, holding `values` when given.
pub(crate) fn create(
    cluster: &Arc<ClusterShared>,
    slots: usize,
    values: Option<Vec<f32>>,
) -> Result<Carrier> {
    let state = RemoteSlots {
        cluster: Some(Arc::clone(cluster)),
        block: None,
        staged: values,
    };
    Carrier::create(classes()?.memory, state, slots, DType::FLOAT32, true)
}

/// Calls `use_values` with the received slots of a completed get, in transfer order (`len`
/// slots): the one part's buffer itself, or the parts gathered into one.
fn with_gathered<R>(
    posted: &mut Posted,
    len: usize,
    use_values: impl FnOnce(&[f32]) -> Result<R>,
) -> Result<R> {
    posted.statuses().into_iter().collect::<Result<()>>()?;
    if let [index] = posted.data[..] {
        return use_values(posted.exchange.floats(index));
    }
    let mut out = vec![0f32; len];
    for ((part, _, _), &index) in posted.parts.iter().zip(&posted.data) {
        out[part.at..part.at + part.len].copy_from_slice(posted.exchange.floats(index));
    }
    use_values(&out)
}

/// The storage provider: a block on the owners per carrier.
///
/// Seed rule: the storage provider defines "the complete generic storage surface"; here
/// every slot access is a request to the owner holding the slot. A factory's fresh state
/// keeps the prototype's cluster, and a factory allocation is zeroed by the owners, so both
/// requested contents already hold.
fn storage() -> StorageProvider {
    StorageProvider::new_fallible(
        |_: &RemoteSlots, dtype| Ok(dtype == DType::FLOAT32),
        |state: &RemoteSlots| Ok(state.block.as_ref().map_or(0, |b| b.slots as i64)),
        |state: &mut RemoteSlots, slots, _dtype| {
            let staged = state.staged.take();
            let block = state.cluster()?.allocate(slots, staged.as_deref())?;
            state.block = Some(block);
            Ok(())
        },
        |state: &mut RemoteSlots| {
            if let (Some(cluster), Some(block)) = (&state.cluster, state.block.take()) {
                cluster.free(&block);
            }
            Ok(())
        },
        |state: &RemoteSlots, index| {
            let block = state.block()?;
            let mut posted = state
                .cluster()?
                .post(Op::Get, block, (index, 1), false, |_| Ok(Vec::new()))?;
            posted.exchange.wait()?;
            with_gathered(&mut posted, 1, |value| {
                Ok(Value::Float(f64::from(value[0])))
            })
        },
        |state: &mut RemoteSlots, index, value| {
            let Value::Float(x) = value else {
                return Err(Error::Type(format!(
                    "ClusterMemory stores Float32, not {value:?}"
                )));
            };
            let block = state.block()?;
            let mut posted = state
                .cluster()?
                .post(Op::Put, block, (index, 1), false, |_| Ok(vec![x as f32]))?;
            posted.exchange.wait()?;
            posted.statuses().into_iter().collect()
        },
        |prototype: &RemoteSlots| {
            Ok(RemoteSlots {
                cluster: prototype.cluster.clone(),
                block: None,
                staged: None,
            })
        },
    )
    .with_allocation_contents(|_: &mut RemoteSlots, _| Ok(()))
}

/// Refuses a request that is not Float32 (the only dtype cluster memory carries).
fn refuse_dtype(route: &str, request: &TransferRequest) -> Result<Option<TransferPreparation>> {
    if request.dtype() == DType::FLOAT32 {
        return Ok(None);
    }
    Ok(Some(TransferPreparation::Unsupported(Unsupported::new(
        format!("{route} carries Float32, not {}", request.dtype()),
    )?)))
}

/// A route ClusterMemory → `destination` (ClusterLocal or the CPU): one get request per
/// owner holding part of the request's span, completed by their MPI requests; then the
/// destination is written at once (a CPU destination through the request, in bulk; a
/// ClusterLocal destination by giving it the received slots).
///
/// Seed rules: `prepare` validates "without changing either Carrier, submitting transfer
/// work, or publishing state" (it checks the dtype); the destination is written only after
/// every part arrived, so a failed transfer leaves it as it was.
fn get_route(memory: CarrierClass, destination: CarrierClass, id: &str) -> Result<TransferRoute> {
    let route = format!("{memory} → {destination}");
    let provider = TransferProvider::new(move |request: &TransferRequest| {
        if let Some(refusal) = refuse_dtype(&route, request)? {
            return Ok(refusal);
        }
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let source = request.tensor();
                let (cluster, block) =
                    source
                        .carrier()
                        .with_provider_state(|state: &RemoteSlots| {
                            Ok::<_, Error>((state.cluster()?.clone(), state.block()?.clone()))
                        })??;
                let span = request.physical_span();
                let posted =
                    cluster.post(Op::Get, &block, (source.offset(), span), false, |_| {
                        Ok(Vec::new())
                    })?;
                Ok(Submitted::pending(MpiCompletion::new(
                    posted,
                    move |posted: &mut Posted| {
                        with_gathered(posted, span, |values| {
                            if request.destination().downcast_ref::<Cpu>().is_some() {
                                request.write_f32s(0, values)
                            } else {
                                local::receive(request.destination(), values)
                            }
                        })
                    },
                )))
            },
        )))
    });
    TransferRoute::new(memory, destination, id, provider)
}

/// The route ClusterLocal → ClusterMemory: the request's span is read from the source's
/// CPU slots, one staged put per owner holding part of the destination's slots `0..span`;
/// once every owner accepted its part, each is told to commit, otherwise to abort (so the
/// destination keeps its slots).
pub(crate) fn put_route(local: CarrierClass, memory: CarrierClass) -> Result<TransferRoute> {
    let route = format!("{local} → {memory}");
    let provider = TransferProvider::new(move |request: &TransferRequest| {
        if let Some(refusal) = refuse_dtype(&route, request)? {
            return Ok(refusal);
        }
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let source = request.tensor();
                let slots = source
                    .carrier()
                    .with_provider_state(|state: &LocalSlots| state.cpu())??;
                let (cluster, block) =
                    request
                        .destination()
                        .with_provider_state(|state: &RemoteSlots| {
                            Ok::<_, Error>((state.cluster()?.clone(), state.block()?.clone()))
                        })??;
                let span = request.physical_span();
                let offset = source.offset();
                let posted = cluster.post(Op::Put, &block, (0, span), true, |part| {
                    read_f32s(&slots, offset + part.at, part.len)
                })?;
                Ok(Submitted::pending(MpiCompletion::new(
                    posted,
                    move |posted: &mut Posted| {
                        let outcome: Result<()> = posted.statuses().into_iter().collect();
                        let concluded = cluster.conclude(&block, posted, outcome.is_ok());
                        outcome.and(concluded)
                    },
                )))
            },
        )))
    });
    TransferRoute::new(local, memory, "clusterlocal-to-clustermemory", provider)
}

type Finish = Box<dyn FnOnce(&mut Posted) -> Result<()> + Send>;

/// The completion of a transfer: its MPI requests, and the step that turns the arrived
/// answers into the destination's contents.
///
/// Seed rule: `ProviderCompletion[T]` "SHALL be thread-safe and idempotent … done SHALL
/// become true exactly at that terminal outcome". [`done`](ProviderCompletion::done) tests
/// the requests once without blocking (a thread already waiting makes it answer false);
/// [`wait`](ProviderCompletion::wait) polls them until they complete or the deadline passes.
/// Whoever sees them complete runs the final step once; its outcome is stored in a
/// [`CompletionCell`] every caller reads.
struct MpiCompletion {
    work: Mutex<Option<(Posted, Finish)>>,
    outcome: CompletionCell<()>,
}

impl MpiCompletion {
    fn new(
        posted: Posted,
        finish: impl FnOnce(&mut Posted) -> Result<()> + Send + 'static,
    ) -> Self {
        MpiCompletion {
            work: Mutex::new(Some((posted, Box::new(finish)))),
            outcome: CompletionCell::new(),
        }
    }

    /// Settles the work in `slot` when its requests completed (or failed): returns whether
    /// it is settled. `block` waits for the requests.
    fn settle(&self, slot: &mut Option<(Posted, Finish)>, block: bool) -> bool {
        let Some((posted, _)) = slot.as_mut() else {
            return true;
        };
        let tested = if block {
            posted.exchange.wait().map(|()| true)
        } else {
            posted.exchange.test()
        };
        match tested {
            Ok(false) => false,
            Ok(true) => {
                if let Some((mut posted, finish)) = slot.take() {
                    self.outcome.complete(finish(&mut posted));
                }
                true
            }
            Err(error) => {
                *slot = None;
                self.outcome.complete(Err(error));
                true
            }
        }
    }
}

impl ProviderCompletion<()> for MpiCompletion {
    fn done(&self) -> bool {
        if self.outcome.done() {
            return true;
        }
        match self.work.try_lock() {
            Ok(mut slot) => self.settle(&mut slot, false),
            Err(TryLockError::Poisoned(poisoned)) => self.settle(&mut poisoned.into_inner(), false),
            Err(TryLockError::WouldBlock) => false,
        };
        self.outcome.done()
    }

    fn wait(&self) -> Result<()> {
        if !self.outcome.done() {
            let mut slot = self.work.lock().unwrap_or_else(PoisonError::into_inner);
            self.settle(&mut slot, true);
        }
        self.outcome.wait()
    }
}
