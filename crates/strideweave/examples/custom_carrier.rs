//! A custom, definition-backed "Device" carrier built entirely through the public
//! carrier-extension API: storage over provider-owned `Vec<f32>` slots, a kernel provider
//! whose general `neg` completes asynchronously on a worker thread, a kernel pack with an
//! optimized `neg` that declines misaligned sizes, transfer routes to and from the CPU, a
//! typed facet, and a dependent carrier composing a Device carrier.
//!
//! Run with `cargo run --example custom_carrier -p strideweave`.

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
use strideweave::movement::move_to;
use strideweave::operation::{
    call, operation_definition, resolve_operation_plan, Operand, OperationCapability, PlanOperand,
    ResolvedInvocation, ResultSpec,
};
use strideweave::{
    register_carrier_definition, register_kernel_pack, CarrierDefinition, CarrierFacet,
    CompositeProvider, DType, Error, KernelExecutionInterface, KernelPack, KernelPattern,
    KernelProvider, Result, Shape, StorageProvider, Tensor, TransferRoute, Unsupported, Value,
};

/// The Device carrier's provider-owned state: its slots.
#[derive(Clone, Default)]
struct Slots(Vec<f32>);

/// A typed facet the Device definition registers.
#[derive(Debug)]
struct DeviceInfo {
    name: &'static str,
}
impl CarrierFacet for DeviceInfo {}

/// Counters showing which `neg` kernels were asked and which ran.
#[derive(Default)]
struct Counters {
    fast_prepared: AtomicUsize,
    fast_declined: AtomicUsize,
    fast_ran: AtomicUsize,
    general_ran: AtomicUsize,
}

fn device_storage() -> StorageProvider {
    StorageProvider::new(
        |_: &Slots, dtype| dtype == DType::FLOAT32,
        |state: &Slots| state.0.len() as i64,
        |state: &mut Slots, slots| {
            state.0 = vec![0.0; slots];
            Ok(())
        },
        |state: &mut Slots| {
            state.0.clear();
            Ok(())
        },
        |state: &Slots, index| Ok(Value::Float(f64::from(state.0[index]))),
        |state: &mut Slots, index, value| match value {
            Value::Float(x) => {
                state.0[index] = x as f32;
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

fn floats(t: &Tensor) -> Result<Vec<f64>> {
    t.to_values()?
        .into_iter()
        .map(|v| match v {
            Value::Float(x) => Ok(x),
            other => Err(Error::Type(format!("not a float: {other:?}"))),
        })
        .collect()
}

/// A Device carrier of `class` holding `xs`.
fn device_carrier(class: CarrierClass, xs: &[f64]) -> Result<Carrier> {
    let carrier = Carrier::create(class, Slots::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(*x))?;
    }
    Ok(carrier)
}

fn device_tensor(class: CarrierClass, xs: &[f64]) -> Result<Tensor> {
    Tensor::compact(device_carrier(class, xs)?, Shape::new(xs.len())?)
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

/// The negation of `x` as a fresh Device tensor laid out as `spec`.
fn negate(class: CarrierClass, x: &Tensor, spec: &ResultSpec) -> Result<ProviderResult> {
    let layout = spec.layout().clone();
    let carrier = Carrier::create(class, Slots::default(), layout.cosize(), spec.dtype(), true)?;
    for (ordinal, value) in floats(x)?.into_iter().enumerate() {
        carrier.set(layout.index_of(ordinal)?, Value::Float(-value))?;
    }
    ProviderResult::new([Tensor::new(carrier, 0, layout)?])
}

/// The general `neg`: submission hands the work to a worker thread and returns `Pending`.
fn general_neg(class: CarrierClass, counters: Arc<Counters>) -> Result<KernelPattern> {
    KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()?],
        "device.neg.general",
        move |invocation, interface| {
            let x = operand(invocation)?;
            let spec = invocation.results()[0].clone();
            let counters = Arc::clone(&counters);
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let cell = CompletionCell::new();
                    let worker = cell.clone();
                    thread::spawn(move || {
                        thread::sleep(Duration::from_millis(10));
                        counters.general_ran.fetch_add(1, Ordering::SeqCst);
                        worker.complete(negate(class, &x, &spec));
                    });
                    Ok(Submitted::pending(cell))
                },
            )))
        },
        0,
    )
}

/// The pack's optimized `neg`: preferred, but only for sizes that are a multiple of 4.
fn fast_neg(class: CarrierClass, counters: Arc<Counters>) -> Result<KernelPattern> {
    KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()?],
        "example.fast.neg",
        move |invocation, interface| {
            counters.fast_prepared.fetch_add(1, Ordering::SeqCst);
            let x = operand(invocation)?;
            let size = x.layout().size();
            if size % 4 != 0 {
                counters.fast_declined.fetch_add(1, Ordering::SeqCst);
                return Ok(Preparation::Unsupported(Unsupported::new(format!(
                    "misaligned: size {size} is not a multiple of 4"
                ))?));
            }
            let spec = invocation.results()[0].clone();
            let counters = Arc::clone(&counters);
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    counters.fast_ran.fetch_add(1, Ordering::SeqCst);
                    negate(class, &x, &spec).map(Submitted::Ready)
                },
            )))
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

/// The dependent carrier's state: the Device carrier it composes and the slots it holds there.
#[derive(Clone)]
struct Tiers {
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
    StorageProvider::new(
        |state: &Tiers, dtype| state.dependency.supports_storage_dtype(dtype),
        |state: &Tiers| state.slots.as_ref().map_or(0, |c| c.size() as i64),
        |state: &mut Tiers, slots| {
            state.slots = Some(state.dependency.allocate_like(slots, true, None, false)?);
            Ok(())
        },
        |state: &mut Tiers| match state.slots.take() {
            Some(slots) => slots.release(),
            None => Ok(()),
        },
        |state: &Tiers, index| state.slots()?.get(index),
        |state: &mut Tiers, index, value| state.slots()?.set(index, value),
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

fn neg(x: &Tensor) -> Result<Tensor> {
    call("neg", [x.clone().into()], &[])?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Runtime("neg returned no result".into()))
}

fn main() -> Result<()> {
    let device = CarrierClass::mint("Device", ClassKind::Independent);
    let cpu = CarrierClass::of::<Cpu>();
    let counters = Arc::new(Counters::default());

    // 1. Define the Device carrier: storage, the general kernel, routes and a facet.
    let kernels = KernelProvider::new(interface()?, [general_neg(device, Arc::clone(&counters))?])?;
    let definition = CarrierDefinition::new(device_storage())
        .with_kernels(kernels)?
        .with_transfers(vec![route(device, cpu, "device-to-cpu")?])?
        .with_facets([Arc::new(DeviceInfo {
            name: "demo-device-0",
        }) as Arc<dyn CarrierFacet>])?;
    register_carrier_definition(device, definition)?;

    // 2. Attach a kernel pack before the class is first observed.
    register_kernel_pack(KernelPack::new(
        "example.fast",
        "1",
        device,
        interface()?,
        [fast_neg(device, Arc::clone(&counters))?],
    )?)?;

    // 3. Capabilities (the first observation seals provider + pack patterns).
    let x = device_tensor(device, &[1.0, -2.0, 3.5, -4.0])?;
    let capabilities: Vec<String> = x
        .carrier()
        .capabilities()
        .iter()
        .map(ToString::to_string)
        .collect();
    println!("Device capabilities: {capabilities:?}");

    // 4. A 4-element neg takes the preferred, optimized kernel.
    let negated = neg(&x)?;
    println!(
        "neg of 4 elements: {:?} (fast ran {}, general ran {})",
        floats(&negated)?,
        counters.fast_ran.load(Ordering::SeqCst),
        counters.general_ran.load(Ordering::SeqCst),
    );

    // 5. A 3-element neg: the fast kernel declines and the asynchronous general one runs.
    let y = device_tensor(device, &[5.0, -6.0, 7.0])?;
    let negated = neg(&y)?;
    println!(
        "neg of 3 elements: {:?} (fast prepared {}, declined {} as misaligned; general ran {})",
        floats(&negated)?,
        counters.fast_prepared.load(Ordering::SeqCst),
        counters.fast_declined.load(Ordering::SeqCst),
        counters.general_ran.load(Ordering::SeqCst),
    );

    // 6. Move Device -> CPU through the Device's transfer route. A definition may only
    // register routes that start at its own class, and the CPU (definition-free) cannot
    // register a move operation to a definition-backed class, so CPU -> Device has no route:
    // the move is refused and the values are copied back slot by slot instead.
    let on_cpu = move_to(&negated, &Cpu::carrier(3, DType::FLOAT32, true, false)?)?;
    println!(
        "moved to {}: {:?}",
        on_cpu.carrier().class().name(),
        floats(&on_cpu)?
    );
    let target = Carrier::create(device, Slots::default(), 3, DType::FLOAT32, true)?;
    match move_to(&on_cpu, &target) {
        Ok(_) => return Err(Error::Runtime("CPU -> Device unexpectedly moved".into())),
        Err(error) => println!("move CPU -> Device refused ({:?}): {error}", error.kind()),
    }
    for (i, value) in on_cpu.to_values()?.into_iter().enumerate() {
        target.set(i, value)?;
    }
    let back = Tensor::compact(target, Shape::new(3)?)?;
    println!(
        "copied back to {}: {:?}",
        back.carrier().class().name(),
        floats(&back)?
    );

    // 7. The typed facet.
    let info = back
        .carrier()
        .facet::<DeviceInfo>()
        .ok_or_else(|| Error::Runtime("DeviceInfo facet missing".into()))?;
    println!("facet DeviceInfo: name = {}", info.name);

    // 8. A dependent carrier composing a Device carrier forwards neg to it.
    let tiles = CarrierClass::mint("DeviceTiles", ClassKind::Dependent);
    register_carrier_definition(
        tiles,
        CarrierDefinition::new(tiers_storage()).with_composite(forwarding())?,
    )?;
    let over = device_carrier(device, &[])?;
    let composite = Carrier::create(
        tiles,
        Tiers {
            dependency: over,
            slots: None,
        },
        4,
        DType::FLOAT32,
        true,
    )?;
    for (i, x) in [0.5, 1.5, -2.5, 3.0].into_iter().enumerate() {
        composite.set(i, Value::Float(x))?;
    }
    let z = Tensor::compact(composite, Shape::new(4)?)?;
    let result = neg(&z)?;
    println!(
        "DeviceTiles neg via {}: {:?} (fast ran {})",
        result.carrier().class().name(),
        floats(&result)?,
        counters.fast_ran.load(Ordering::SeqCst),
    );
    Ok(())
}
