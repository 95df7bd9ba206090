//! The example "Device" carrier, defined entirely through the public carrier-extension API and
//! shared by `examples/custom_carrier.rs`, `benches/extension.rs` and the tour
//! (`crates/strideweave-tour/examples/tour.rs`); each includes it with a `#[path]` attribute
//! on `mod device_carrier;`.
//!
//! - storage over provider-owned `Vec<f32>` slots ([`Slots`]); a result can be *staged* into
//!   fresh state so that `allocate` adopts it instead of zero-filling;
//! - a kernel provider whose general `neg` completes asynchronously on a worker thread;
//! - a kernel pack whose optimized `neg` negates the operand's slots in bulk, and declines
//!   sizes that are not a multiple of 4 (and strided operands);
//! - a transfer route Device → CPU, a typed facet ([`DeviceInfo`]);
//! - a dependent carrier ("DeviceTiles") composing a Device carrier.

// Each includer uses a different part of the definition.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    CompletionCell, CompositePreparation, InterfaceHandle, Preparation, PreparedComposite,
    PreparedKernel, PreparedTransfer, ProviderResult, Submitted, TransferPreparation,
    TransferProvider, TransferRequest,
};
use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, operation_definition, resolve_operation_plan, Operand, OperationCapability, PlanOperand,
    ResolvedInvocation, ResultSpec,
};
use strideweave::{
    register_carrier_definition, register_kernel_pack, CarrierDefinition, CarrierFacet,
    CompositeProvider, DType, Error, KernelExecutionInterface, KernelPack, KernelPattern,
    KernelProvider, Result, Shape, StorageProvider, Tensor, TransferRoute, Unsupported, Value,
};

/// The Device carrier's provider-owned state: its slots, and values staged for `allocate`.
#[derive(Clone, Default)]
pub struct Slots {
    values: Vec<f32>,
    staged: Option<Vec<f32>>,
}

impl Slots {
    /// State whose `allocate` adopts `values` (their length must be the allocated extent):
    /// how a kernel hands a result it computed in bulk to a fresh carrier.
    pub fn staged(values: Vec<f32>) -> Slots {
        Slots {
            values: Vec::new(),
            staged: Some(values),
        }
    }

    /// The slots `offset..offset + len`, or a Runtime error when they are not all there.
    fn span(&self, offset: usize, len: usize) -> Result<&[f32]> {
        self.values
            .get(offset..offset + len)
            .ok_or_else(|| Error::Runtime(format!("Device slots {offset}..+{len} are not live")))
    }
}

/// A typed facet the Device definition registers.
#[derive(Debug)]
pub struct DeviceInfo {
    pub name: &'static str,
}
impl CarrierFacet for DeviceInfo {}

/// Counters showing which `neg` kernels were asked and which ran.
#[derive(Default)]
pub struct Counters {
    pub fast_prepared: AtomicUsize,
    pub fast_declined: AtomicUsize,
    pub fast_ran: AtomicUsize,
    pub general_ran: AtomicUsize,
}

impl Counters {
    fn bump(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}

fn device_storage() -> StorageProvider {
    StorageProvider::new(
        |_: &Slots, dtype| dtype == DType::FLOAT32,
        |state: &Slots| state.values.len() as i64,
        |state: &mut Slots, slots, _dtype| {
            state.values = match state.staged.take() {
                None => vec![0.0; slots],
                Some(values) if values.len() == slots => values,
                Some(values) => {
                    return Err(Error::Value(format!(
                        "{} staged Device values for {slots} slots",
                        values.len()
                    )))
                }
            };
            Ok(())
        },
        |state: &mut Slots| {
            state.values = Vec::new();
            Ok(())
        },
        |state: &Slots, index| Ok(Value::Float(f64::from(state.values[index]))),
        |state: &mut Slots, index, value| match value {
            Value::Float(x) => {
                state.values[index] = x as f32;
                Ok(())
            }
            other => Err(Error::Type(format!("Device stores floats, not {other:?}"))),
        },
    )
}

fn neg_plan() -> Result<OperationCapability> {
    Ok(OperationCapability::from_plan(resolve_operation_plan(
        "neg",
        &[PlanOperand::Tensor(DType::FLOAT32)],
        None,
    )?))
}

fn interface() -> Result<InterfaceHandle> {
    InterfaceHandle::new(KernelExecutionInterface::new("1.0")?)
}

/// The values of `t` as `f64`s.
pub fn floats(t: &Tensor) -> Result<Vec<f64>> {
    t.to_values()?
        .into_iter()
        .map(|v| match v {
            Value::Float(x) => Ok(x),
            other => Err(Error::Type(format!("not a float: {other:?}"))),
        })
        .collect()
}

/// A carrier of the Device (or DeviceTiles) `class` holding `xs`, written slot by slot.
pub fn device_carrier(class: CarrierClass, xs: &[f64]) -> Result<Carrier> {
    let carrier = Carrier::create(class, Slots::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(*x))?;
    }
    Ok(carrier)
}

/// A compact rank-1 tensor on a fresh Device carrier holding `xs`.
pub fn device_tensor(class: CarrierClass, xs: &[f64]) -> Result<Tensor> {
    Tensor::compact(device_carrier(class, xs)?, Shape::new(xs.len())?)
}

/// A Device copy of the CPU tensor `t` (compact, same shape), its values staged into the new
/// carrier's state in one piece: the upload path, since a move CPU -> Device has no route.
pub fn upload(device: CarrierClass, t: &Tensor) -> Result<Tensor> {
    let values: Vec<f32> = floats(t)?.into_iter().map(|x| x as f32).collect();
    let slots = values.len();
    let carrier = Carrier::create(device, Slots::staged(values), slots, DType::FLOAT32, true)?;
    Tensor::compact(carrier, t.shape().clone())
}

/// The invocation's single tensor operand.
fn operand(invocation: &ResolvedInvocation) -> Result<Tensor> {
    invocation
        .call()
        .operands()
        .iter()
        .find_map(|o| o.as_tensor().cloned())
        .ok_or_else(|| Error::Runtime("neg needs a tensor operand".into()))
}

/// The negation of `x` as a fresh Device tensor laid out as `spec`, element by element (the
/// general kernel handles any layout).
fn negate(class: CarrierClass, x: &Tensor, spec: &ResultSpec) -> Result<ProviderResult> {
    let layout = spec.layout();
    let carrier = Carrier::create(class, Slots::default(), layout.cosize(), spec.dtype(), true)?;
    for (ordinal, value) in floats(x)?.into_iter().enumerate() {
        carrier.set(layout.index_of(ordinal)?, Value::Float(-value))?;
    }
    ProviderResult::new([spec.tensor(carrier)?])
}

/// The general `neg`: submission hands the work to a worker thread and returns `Pending`.
fn general_neg(class: CarrierClass, counters: &'static Counters) -> Result<KernelPattern> {
    KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()?],
        "device.neg.general",
        move |invocation, interface| {
            let x = operand(invocation)?;
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let cell = CompletionCell::new();
                    let worker = cell.clone();
                    thread::spawn(move || {
                        thread::sleep(Duration::from_millis(10));
                        Counters::bump(&counters.general_ran);
                        worker.complete(negate(class, &x, &spec));
                    });
                    Ok(Submitted::pending(cell))
                },
            )))
        },
        0,
    )
}

/// The pack's optimized `neg`: preferred, but only for sizes that are a multiple of 4 and
/// operands laid out exactly like the result over a dense span. It reads the operand's slots
/// in bulk through the provider-owned state and stages the negated slots into the result's
/// fresh state, so no slot goes through a `Value`.
fn fast_neg(class: CarrierClass, counters: &'static Counters) -> Result<KernelPattern> {
    KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()?],
        "example.fast.neg",
        move |invocation, interface| {
            Counters::bump(&counters.fast_prepared);
            let x = operand(invocation)?;
            let size = x.layout().size();
            let spec = &invocation.results()[0];
            let reason = if size % 4 != 0 {
                format!("misaligned: size {size} is not a multiple of 4")
            } else if x.layout() != spec.layout() || spec.layout().cosize() != size {
                format!("strided: {} is not a dense result layout", x.layout())
            } else {
                let spec = spec.clone();
                return Ok(Preparation::Kernel(PreparedKernel::new(
                    interface.clone(),
                    move || {
                        Counters::bump(&counters.fast_ran);
                        // Equal layouts that are dense over `size` slots: slot j of the
                        // result is the negation of slot offset + j of the operand.
                        let negated = x.carrier().with_provider_state(|state: &Slots| {
                            state
                                .span(x.offset(), size)
                                .map(|xs| xs.iter().map(|v| -v).collect::<Vec<f32>>())
                        })??;
                        let carrier = Carrier::create(
                            class,
                            Slots::staged(negated),
                            size,
                            spec.dtype(),
                            true,
                        )?;
                        ProviderResult::new([spec.tensor(carrier)?]).map(Submitted::Ready)
                    },
                )));
            };
            Counters::bump(&counters.fast_declined);
            Ok(Preparation::Unsupported(Unsupported::new(reason)?))
        },
        10,
    )
}

/// Copies the request's source slots through the request's writer.
fn copy_request(request: &TransferRequest) -> Result<()> {
    let source = request.tensor();
    for slot in 0..request.physical_span() {
        request.write(slot, source.carrier().get(source.offset() + slot)?)?;
    }
    Ok(())
}

fn route(source: CarrierClass, destination: CarrierClass, id: &str) -> Result<TransferRoute> {
    let provider = TransferProvider::new(|request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                copy_request(&request)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    TransferRoute::new(source, destination, id, provider)
}

/// Registers a fresh "Device" class: storage, the general kernel, the Device → CPU route and
/// the [`DeviceInfo`] facet. Packs may attach until the class is first observed.
pub fn define_device(counters: &'static Counters) -> Result<CarrierClass> {
    let device = CarrierClass::mint("Device", ClassKind::Independent);
    let kernels = KernelProvider::new(interface()?, [general_neg(device, counters)?])?;
    let definition = CarrierDefinition::new(device_storage())
        .with_kernels(kernels)?
        .with_transfers(vec![route(
            device,
            CarrierClass::of::<Cpu>(),
            "device-to-cpu",
        )?])?
        .with_facets([Arc::new(DeviceInfo {
            name: "demo-device-0",
        }) as Arc<dyn CarrierFacet>])?;
    register_carrier_definition(device, definition)?;
    Ok(device)
}

/// Attaches the "example.fast" pack (the optimized `neg`) to `device`.
pub fn attach_fast_pack(device: CarrierClass, counters: &'static Counters) -> Result<()> {
    register_kernel_pack(KernelPack::new(
        "example.fast",
        "1",
        device,
        interface()?,
        [fast_neg(device, counters)?],
    )?)
}

/// The dependent carrier's state: the Device carrier it composes and the slots it holds there.
#[derive(Clone)]
pub struct Tiers {
    dependency: Carrier,
    slots: Option<Carrier>,
}

impl Tiers {
    fn slots(&self) -> Result<&Carrier> {
        self.slots
            .as_ref()
            .ok_or_else(|| Error::Runtime("the composite has no slots".to_string()))
    }
}

fn tiers_storage() -> StorageProvider {
    StorageProvider::new_fallible(
        |state: &Tiers, dtype| state.dependency.supports_storage_dtype(dtype),
        |state: &Tiers| Ok(state.slots.as_ref().map_or(0, |c| c.size() as i64)),
        |state: &mut Tiers, slots, dtype| {
            state.slots = Some(
                state
                    .dependency
                    .allocate_like(slots, true, Some(dtype), false)?,
            );
            Ok(())
        },
        |state: &mut Tiers| match state.slots.take() {
            Some(slots) => slots.release(),
            None => Ok(()),
        },
        |state: &Tiers, index| state.slots()?.get(index),
        |state: &mut Tiers, index, value| state.slots()?.set(index, value),
        // A factory's fresh state keeps the configuration (the dependency), not the slots.
        |prototype: &Tiers| {
            Ok(Tiers {
                dependency: prototype.dependency.clone(),
                slots: None,
            })
        },
    )
}

fn dependency(carrier: &Carrier) -> Result<Carrier> {
    carrier.with_provider_state(|state: &Tiers| state.dependency.clone())
}

/// A composite forwarding `neg` to the Device carrier it is configured over.
fn forwarding() -> CompositeProvider {
    CompositeProvider::new(
        |carrier: &Carrier| {
            let dependency = dependency(carrier)?;
            let plan = neg_plan()?;
            Ok(if dependency.supports_operation_plan(plan.plan()) {
                vec![plan]
            } else {
                vec![]
            })
        },
        |carrier: &Carrier, invocation: &ResolvedInvocation| {
            Ok(vec![
                dependency(carrier)?.class();
                invocation.results().len()
            ])
        },
        |_: &Carrier, invocation: &ResolvedInvocation| {
            let name = invocation.call().definition().name().to_string();
            let operands = invocation
                .call()
                .operands()
                .iter()
                .filter_map(Operand::as_tensor)
                .map(|t| {
                    let slots = t
                        .carrier()
                        .with_provider_state(|state: &Tiers| state.slots.clone())?
                        .ok_or_else(|| Error::Runtime("released composite operand".into()))?;
                    Ok(Tensor::new(slots, t.offset(), t.layout().clone())?.into())
                })
                .collect::<Result<Vec<Operand>>>()?;
            Ok(CompositePreparation::Composite(PreparedComposite::new(
                move || ProviderResult::new(call(&name, operands, &[])?).map(Submitted::Ready),
            )))
        },
    )
}

/// Registers a fresh dependent "DeviceTiles" class forwarding `neg` to its Device carrier.
pub fn define_tiles() -> Result<CarrierClass> {
    let tiles = CarrierClass::mint("DeviceTiles", ClassKind::Dependent);
    register_carrier_definition(
        tiles,
        CarrierDefinition::new(tiers_storage()).with_composite(forwarding())?,
    )?;
    Ok(tiles)
}

/// A compact rank-1 tensor holding `xs` on a fresh `tiles` carrier composed over an empty
/// carrier of `device`.
pub fn tiles_tensor(tiles: CarrierClass, device: CarrierClass, xs: &[f64]) -> Result<Tensor> {
    let composite = Carrier::create(
        tiles,
        Tiers {
            dependency: device_carrier(device, &[])?,
            slots: None,
        },
        xs.len(),
        DType::FLOAT32,
        true,
    )?;
    for (i, x) in xs.iter().enumerate() {
        composite.set(i, Value::Float(*x))?;
    }
    Tensor::compact(composite, Shape::new(xs.len())?)
}

/// The whole example extension, registered once: a Device class with the fast pack attached,
/// a DeviceTiles class over it, and the kernel counters.
pub struct DeviceExtension {
    pub device: CarrierClass,
    pub tiles: CarrierClass,
    pub counters: &'static Counters,
}

impl DeviceExtension {
    /// Registers fresh Device and DeviceTiles classes (the Device class is not yet observed).
    pub fn register() -> Result<DeviceExtension> {
        // A class is registered for the life of the process, and so are its kernels' counters.
        let counters: &'static Counters = Box::leak(Box::default());
        let device = define_device(counters)?;
        attach_fast_pack(device, counters)?;
        Ok(DeviceExtension {
            device,
            tiles: define_tiles()?,
            counters,
        })
    }
}

/// `neg` through the public call API.
pub fn neg(x: &Tensor) -> Result<Tensor> {
    call("neg", [x.clone().into()], &[])?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Runtime("neg returned no result".into()))
}
