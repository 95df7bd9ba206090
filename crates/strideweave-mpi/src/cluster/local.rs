//! The [`ClusterLocal`] carrier class: host memory of this rank that computes with the CPU's
//! kernels, the primary tier paired with [`ClusterMemory`](crate::ClusterMemory).

use std::sync::{OnceLock, PoisonError, RwLock};

use strideweave::autograd::no_grad;
use strideweave::carrier::{Carrier, CarrierClass};
use strideweave::carriers::extension::{
    read_f32s, CompositePreparation, PreparedComposite, PreparedTransfer, ProviderResult,
    StorageProvider, Submitted, TransferPreparation, TransferProvider, TransferRequest,
    TransferRoute, Unsupported,
};
use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, capabilities_for_carrier_class, Operand, OperationCapability, OptionValue,
    ResolvedInvocation,
};
use strideweave::{CarrierDefinition, CompositeProvider, DType, Error, Result, Shape, Tensor};

use crate::cluster::memory::{classes, put_route};

/// The provider-owned state of one ClusterLocal carrier: the CPU carrier holding its slots
/// (a CPU carrier staged for `allocate` to adopt while it is constructed).
#[derive(Default)]
pub struct LocalSlots {
    cpu: RwLock<Option<Carrier>>,
    staged: Option<Carrier>,
}

impl LocalSlots {
    /// State whose `allocate` adopts `cpu`.
    fn adopting(cpu: Carrier) -> LocalSlots {
        LocalSlots {
            cpu: RwLock::new(None),
            staged: Some(cpu),
        }
    }

    /// The CPU carrier holding the slots.
    pub(crate) fn cpu(&self) -> Result<Carrier> {
        self.cpu
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| Error::Runtime("the ClusterLocal carrier holds no slots".into()))
    }

    fn with_cpu<R>(&self, use_it: impl FnOnce(&Carrier) -> Result<R>) -> Result<R> {
        use_it(&self.cpu()?)
    }
}

/// Gives the ClusterLocal carrier `destination` (claimed by a transfer into it) the slots
/// `values`: its CPU carrier is replaced by one holding them, so the destination changes in
/// one step, after everything arrived. Slots past `values` keep their contents.
pub(crate) fn receive(destination: &Carrier, values: &[f32]) -> Result<()> {
    destination.with_provider_state(|state: &LocalSlots| {
        let mut slot = state.cpu.write().unwrap_or_else(PoisonError::into_inner);
        let old = slot
            .as_ref()
            .ok_or_else(|| Error::Runtime("the ClusterLocal destination holds no slots".into()))?;
        if old.dtype() != DType::FLOAT32 {
            return Err(Error::Type(format!(
                "a ClusterLocal destination of dtype {} cannot receive Float32 slots",
                old.dtype()
            )));
        }
        let size = old.size();
        let replacement = if values.len() == size {
            Cpu::from_f32(values, true)?
        } else if values.len() < size {
            let mut all = read_f32s(old, 0, size)?;
            all[..values.len()].copy_from_slice(values);
            Cpu::from_f32(&all, true)?
        } else {
            return Err(Error::Index(format!(
                "{} slots do not fit a ClusterLocal destination of {size} slots",
                values.len()
            )));
        };
        let old = slot.replace(replacement);
        if let Some(old) = old {
            let _ = old.release();
        }
        Ok(())
    })?
}

/// The storage provider: every slot access goes to the CPU carrier.
///
/// Seed rule: the storage provider defines "the complete generic storage surface"; a
/// factory allocation is a zeroed CPU carrier, so both requested contents already hold.
fn storage() -> StorageProvider {
    StorageProvider::new(
        |_: &LocalSlots, dtype| dtype == DType::FLOAT32,
        |state: &LocalSlots| state.cpu().map_or(0, |c| c.size() as i64),
        |state: &mut LocalSlots, slots, dtype| {
            let cpu = match state.staged.take() {
                Some(cpu) if cpu.size() == slots && cpu.dtype() == dtype => cpu,
                Some(cpu) => {
                    return Err(Error::Value(format!(
                        "a staged CPU carrier of {} {} slots for a ClusterLocal carrier of {slots} {dtype} slots",
                        cpu.size(),
                        cpu.dtype()
                    )))
                }
                None => Cpu::carrier(slots, dtype, true, false)?,
            };
            *state.cpu.write().unwrap_or_else(PoisonError::into_inner) = Some(cpu);
            Ok(())
        },
        |state: &mut LocalSlots| match state
            .cpu
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            Some(cpu) => cpu.release(),
            None => Ok(()),
        },
        |state: &LocalSlots, index| state.with_cpu(|cpu| cpu.get(index)),
        |state: &mut LocalSlots, index, value| state.with_cpu(|cpu| cpu.set(index, value)),
    )
    .with_allocation_contents(|_: &mut LocalSlots, _| Ok(()))
}

/// The composite provider: every Float32 plan the CPU executes, run by the CPU's kernels on
/// the operands' CPU carriers, each result wrapped (without a copy) into a new ClusterLocal
/// carrier.
///
/// Seed rules: `capabilities` is "the complete executable set" (the CPU class's Float32
/// plans, frozen at construction); `result_carriers` names this class for every result; `prepare` preserves
/// the invocation's semantics by calling the same operation with the same options.
fn composite(local: CarrierClass) -> CompositeProvider {
    CompositeProvider::new(
        |_: &Carrier| Ok(float32_capabilities().to_vec()),
        move |_: &Carrier, invocation: &ResolvedInvocation| {
            Ok(vec![local; invocation.results().len()])
        },
        move |_: &Carrier, invocation: &ResolvedInvocation| {
            let call_ = invocation.call();
            let definition = call_.definition();
            let name = definition.name().to_owned();
            let mut lowered = Vec::with_capacity(call_.operands().len());
            for operand in call_.operands() {
                let Some(tensor) = operand.as_tensor() else {
                    lowered.push(operand.clone());
                    continue;
                };
                if tensor.carrier().class() != local {
                    return Ok(CompositePreparation::Unsupported(Unsupported::new(
                        format!(
                        "'{name}' on {local} needs every tensor operand on {local}, got one on {}",
                        tensor.carrier().class()
                    ),
                    )?));
                }
                let cpu = tensor
                    .carrier()
                    .with_provider_state(|state: &LocalSlots| state.cpu())??;
                lowered.push(Operand::Tensor(Tensor::new(
                    cpu,
                    tensor.offset(),
                    tensor.layout().clone(),
                )?));
            }
            let options: Vec<(String, OptionValue)> = definition
                .schema()
                .options()
                .iter()
                .filter_map(|spec| {
                    call_
                        .option(spec.name())
                        .map(|v| (spec.name().to_owned(), v))
                })
                .collect();
            let aliases: Vec<Option<Tensor>> = invocation
                .results()
                .iter()
                .map(|spec| spec.alias_of().and_then(|i| call_.tensor(i).ok().cloned()))
                .collect();
            Ok(CompositePreparation::Composite(PreparedComposite::new(
                move || {
                    let options: Vec<(&str, OptionValue)> =
                        options.iter().map(|(n, v)| (n.as_str(), *v)).collect();
                    let results = {
                        let _recording = no_grad();
                        call(&name, lowered, &options)?
                    };
                    let wrapped = results
                        .into_iter()
                        .zip(aliases)
                        .map(|(result, alias)| match alias {
                            Some(operand) => Ok(operand),
                            None => wrap(local, &result),
                        })
                        .collect::<Result<Vec<Tensor>>>()?;
                    ProviderResult::new(wrapped).map(Submitted::Ready)
                },
            )))
        },
    )
}

/// The capabilities of every ClusterLocal carrier: the CPU class's plans whose tensor
/// operands and output are all Float32 (the dtype cluster memory carries), read once and
/// kept sorted.
///
/// Why not all of the CPU's: the framework sorts and checks a dependent carrier's set at
/// every construction, about half a microsecond per capability, and the tiled engine makes
/// a carrier per staged piece and per partial result; the CPU's 108 plans cost about 55 µs
/// per carrier, its 23 Float32 plans about 11 µs.
fn float32_capabilities() -> &'static [OperationCapability] {
    static CAPABILITIES: OnceLock<Vec<OperationCapability>> = OnceLock::new();
    CAPABILITIES.get_or_init(|| {
        let mut all: Vec<OperationCapability> =
            capabilities_for_carrier_class(CarrierClass::of::<Cpu>())
                .iter()
                .filter(|capability| {
                    let plan = capability.plan();
                    plan.output() == DType::FLOAT32
                        && plan
                            .operands()
                            .iter()
                            .all(|o| o.dtype().is_none_or(|d| d == DType::FLOAT32))
                })
                .cloned()
                .collect();
        all.sort_by(OperationCapability::cmp_order);
        all
    })
}

/// `result`, a tensor on a fresh CPU carrier, as a tensor on a new ClusterLocal carrier
/// adopting that CPU carrier.
fn wrap(local: CarrierClass, result: &Tensor) -> Result<Tensor> {
    let cpu = result.carrier().clone();
    let (slots, dtype) = (cpu.size(), cpu.dtype());
    let carrier = Carrier::create(local, LocalSlots::adopting(cpu), slots, dtype, true)?;
    Tensor::new(carrier, result.offset(), result.layout().clone())
}

/// The route ClusterLocal → CPU: one bulk read of the source's CPU slots, written into the
/// destination in one bulk copy (through the request, so a failed move undoes it).
fn cpu_route(local: CarrierClass) -> Result<TransferRoute> {
    let route = format!("{local} → CPU");
    let provider = TransferProvider::new(move |request: &TransferRequest| {
        if request.dtype() != DType::FLOAT32 {
            return Ok(TransferPreparation::Unsupported(Unsupported::new(
                format!("{route} carries Float32, not {}", request.dtype()),
            )?));
        }
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let source = request.tensor();
                let cpu = source
                    .carrier()
                    .with_provider_state(|state: &LocalSlots| state.cpu())??;
                let values = read_f32s(&cpu, source.offset(), request.physical_span())?;
                request.write_f32s(0, &values)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    TransferRoute::new(
        local,
        CarrierClass::of::<Cpu>(),
        "clusterlocal-to-cpu",
        provider,
    )
}

/// The definition of the ClusterLocal class `local`, paired with the ClusterMemory class
/// `memory`.
pub(crate) fn definition(local: CarrierClass, memory: CarrierClass) -> Result<CarrierDefinition> {
    CarrierDefinition::new(storage())
        .with_composite(composite(local))?
        .with_transfers(vec![put_route(local, memory)?, cpu_route(local)?])
}

/// Host memory of this rank that computes: the primary tier paired with
/// [`ClusterMemory`](crate::ClusterMemory) (a `TiledEvictable` over a ClusterLocal primary
/// and a ClusterMemory secondary streams a tensor held by other ranks through this rank).
///
/// Why a class of its own: a `TiledEvictable` moves tiles both ways between its tiers, and
/// the seed makes every route start at the class whose definition declares it ("every
/// route's source class SHALL be exactly carrier_class"). The CPU is definition-free, so
/// nothing can declare CPU → ClusterMemory, and `register_move_operation` refuses a
/// definition-backed end. ClusterLocal is definition-backed and defined by this crate with
/// ClusterMemory, so its definition declares ClusterLocal → ClusterMemory while
/// ClusterMemory's declares ClusterMemory → ClusterLocal: each route starts at its own
/// defining class.
///
/// It is a **dependent** class: each carrier composes a CPU carrier holding its slots, and
/// its composite provider runs every Float32 plan the CPU executes with the CPU's kernels on
/// those carriers, wrapping each result's CPU carrier without a copy; results, gradients
/// and the tiled engine's per-tile work therefore stay on ClusterLocal. Its definition also
/// declares ClusterLocal → CPU. Like the CPU it has no route in from the CPU: carriers are
/// built from values ([`from_f32`](ClusterLocal::from_f32), [`tensor`](ClusterLocal::tensor),
/// [`upload`](ClusterLocal::upload)) or zeroed ([`carrier`](ClusterLocal::carrier)).
#[derive(Debug)]
pub struct ClusterLocal {
    _private: (),
}

impl ClusterLocal {
    /// The exact ClusterLocal class (registering the definitions on first use).
    ///
    /// # Errors
    /// Runtime when the definitions cannot be registered.
    pub fn class() -> Result<CarrierClass> {
        Ok(classes()?.local)
    }

    /// A mutable ClusterLocal carrier of `slots` zeroed slots of `dtype`.
    ///
    /// # Errors
    /// Value for a dtype other than Float32 (the only one it stores).
    pub fn carrier(slots: usize, dtype: DType) -> Result<Carrier> {
        Carrier::create(
            ClusterLocal::class()?,
            LocalSlots::default(),
            slots,
            dtype,
            true,
        )
    }

    /// A mutable Float32 ClusterLocal carrier holding `values`.
    ///
    /// # Errors
    /// The construction errors of the carrier extension (none for valid values).
    pub fn from_f32(values: &[f32]) -> Result<Carrier> {
        let cpu = Cpu::from_f32(values, true)?;
        Carrier::create(
            ClusterLocal::class()?,
            LocalSlots::adopting(cpu),
            values.len(),
            DType::FLOAT32,
            true,
        )
    }

    /// A compact ClusterLocal tensor of `shape` holding `values` (column-major).
    ///
    /// # Errors
    /// Value when the count differs from the shape's size.
    pub fn tensor(values: &[f32], shape: Shape) -> Result<Tensor> {
        if values.len() != shape.size() {
            return Err(Error::Value(format!(
                "{} values for a ClusterLocal tensor of shape {shape} ({} elements)",
                values.len(),
                shape.size()
            )));
        }
        Tensor::compact(ClusterLocal::from_f32(values)?, shape)
    }

    /// A compact ClusterLocal copy of `tensor` (any carrier, any layout): its values in its
    /// own order, in its shape.
    ///
    /// # Errors
    /// The source's read errors; Type for a dtype that is not Float32.
    pub fn upload(tensor: &Tensor) -> Result<Tensor> {
        ClusterLocal::tensor(&tensor.to_f32_vec()?, tensor.shape().clone())
    }

    /// Every slot of the Float32 ClusterLocal `carrier`, read in one copy.
    ///
    /// # Errors
    /// Type for a carrier of another class or dtype; Runtime once released.
    pub fn f32s(carrier: &Carrier) -> Result<Vec<f32>> {
        let cpu = carrier.with_provider_state(|state: &LocalSlots| state.cpu())??;
        read_f32s(&cpu, 0, cpu.size())
    }
}
