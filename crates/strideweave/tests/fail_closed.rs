//! The "fail closed" issue: the definition-backed dispatch hook, observation by construction
//! and registration, and fallible storage-provider callbacks. Every test asserts the error
//! kind and message, and the versions and state left behind.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{f32_storage, F32s, Flaky};

use strideweave::carrier::{
    capabilities_for_carrier_class, register_operation_capabilities, Carrier, CarrierClass,
    ClassKind,
};
use strideweave::carriers::extension::{
    carrier_definition, CompositePreparation, CompositeProvider, InterfaceHandle, Preparation,
    PreparedComposite, PreparedKernel, ProviderResult, Submitted,
};
use strideweave::operation::{
    operation_definition, resolve_operation_plan, OperationCapability, PlanOperand,
    ResolvedInvocation, ResultSpec,
};
use strideweave::{
    register_carrier_definition, register_kernel_pack, CarrierDefinition, DType, Error, ErrorKind,
    KernelExecutionInterface, KernelPack, KernelPattern, KernelProvider, Result, Shape, Tensor,
    Value,
};

// ---------------------------------------------------------------------------------------
// Helpers.

fn independent(name: &str) -> CarrierClass {
    CarrierClass::mint(name, ClassKind::Independent)
}

fn interface() -> InterfaceHandle {
    InterfaceHandle::new(KernelExecutionInterface::new("1").unwrap()).unwrap()
}

fn neg_plan() -> OperationCapability {
    OperationCapability::from_plan(
        resolve_operation_plan("neg", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap(),
    )
}

fn floats(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .into_iter()
        .map(|v| v.as_f64().expect("a float"))
        .collect()
}

/// A Float32 tensor of the definition-backed `class` (state `F32s`).
fn tensor(class: CarrierClass, xs: &[f64]) -> Result<Tensor> {
    let carrier = Carrier::create(class, F32s::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(*x))?;
    }
    Tensor::compact(carrier, Shape::new(xs.len())?)
}

/// A fresh result of `class` laid out as `spec` holding `values` in logical order.
fn output(class: CarrierClass, spec: &ResultSpec, values: &[f64]) -> Result<Tensor> {
    let layout = spec.layout().clone();
    let carrier = Carrier::create(class, F32s::default(), layout.cosize(), spec.dtype(), true)?;
    for (ordinal, value) in values.iter().enumerate() {
        carrier.set(layout.index_of(ordinal)?, Value::Float(*value))?;
    }
    Tensor::new(carrier, 0, layout)
}

/// A `neg` pattern computing on `class`, counting its preparations in `prepared`.
fn neg_pattern(class: CarrierClass, id: &str, prepared: Arc<AtomicUsize>) -> KernelPattern {
    KernelPattern::new(
        &operation_definition("neg").unwrap(),
        [neg_plan()],
        id,
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            prepared.fetch_add(1, Ordering::SeqCst);
            let input = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let values: Vec<f64> = floats(&input).into_iter().map(|x| -x).collect();
                    ProviderResult::new([output(class, &spec, &values)?]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )
    .unwrap()
}

/// Registers a kernel-backed definition over `F32s` for `class` with `patterns`.
/// A fresh independent class `name` whose one kernel is [`neg_pattern`] with id `id`.
fn neg_class(name: &str, id: &str) -> CarrierClass {
    let class = independent(name);
    define_kernels(class, vec![neg_pattern(class, id, Arc::default())]);
    class
}

/// A one-slot Float32 carrier of `class`.
fn one_slot(class: CarrierClass) -> Result<Carrier> {
    Carrier::create(class, F32s::default(), 1, DType::FLOAT32, true)
}

fn define_kernels(class: CarrierClass, patterns: Vec<KernelPattern>) {
    let provider = KernelProvider::new(interface(), patterns).unwrap();
    let definition = CarrierDefinition::new(f32_storage())
        .with_kernels(provider)
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
}

// ---------------------------------------------------------------------------------------
// Item B: construction observes the class; a refused construction seals nothing.

struct ObservedMarker;
struct RefusedMarker;
struct RefusedThenDefinedMarker;

#[test]
fn constructing_a_definition_free_carrier_observes_its_class() {
    let class = CarrierClass::of::<Flaky<ObservedMarker>>();
    let carrier = Flaky::<ObservedMarker>::carrier(&[1.0], true);
    assert_eq!(carrier.version(), 0);

    let error = register_operation_capabilities(class, [neg_plan()]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: Flaky was already observed (constructed); its capabilities must be declared before \
         the first carrier of the class is constructed"
    );
    let error =
        register_carrier_definition(class, CarrierDefinition::new(f32_storage())).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: Flaky was already observed (constructed, queried or given definition-free \
         authority); a definition must be registered before the first observation"
    );
    // Nothing changed: no definition, no capability, the carrier is untouched.
    assert!(!class.is_definition_backed());
    assert!(carrier_definition(class).is_none());
    assert!(capabilities_for_carrier_class(class).is_empty());
    assert_eq!(carrier.version(), 0);
    assert_eq!(carrier.get(0).unwrap(), Value::Float(1.0));
    // Further constructions of the class still work.
    assert_eq!(Flaky::<ObservedMarker>::carrier(&[2.0], true).size(), 1);
}

#[test]
fn a_refused_definition_free_construction_seals_nothing() {
    let class = CarrierClass::of::<Flaky<RefusedMarker>>();
    let error = Carrier::new(Flaky::<RefusedMarker>::default(), DType::INT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(matches!(
        error,
        Error::UnstorableDtype { class: c, dtype } if c == class && dtype == DType::INT32
    ));
    // The class is still open: its capabilities can be declared, then carriers built.
    register_operation_capabilities(class, [neg_plan()]).unwrap();
    assert_eq!(&*capabilities_for_carrier_class(class), &[neg_plan()]);
    let carrier = Flaky::<RefusedMarker>::carrier(&[1.0], true);
    assert_eq!(carrier.version(), 0);
}

#[test]
fn a_refused_definition_free_construction_leaves_the_class_open_to_a_definition() {
    let class = CarrierClass::of::<Flaky<RefusedThenDefinedMarker>>();
    let error = Carrier::new(
        Flaky::<RefusedThenDefinedMarker>::default(),
        DType::BOOL,
        true,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    register_carrier_definition(class, CarrierDefinition::new(f32_storage())).unwrap();
    assert!(class.is_definition_backed());
    // Now the definition-free path is closed (Type), and nothing was constructed.
    let error = Carrier::new(
        Flaky::<RefusedThenDefinedMarker>::default(),
        DType::FLOAT32,
        true,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: cannot construct a definition-free carrier body: Flaky is a definition-backed carrier \
         class and uses only its CarrierDefinition"
    );
}

#[test]
fn a_refused_definition_backed_construction_leaves_the_kernel_set_open() -> Result<()> {
    let class = independent("RefusedAccel");
    let prepared = Arc::new(AtomicUsize::new(0));
    define_kernels(class, vec![]);
    // Unsupported dtype: refused before anything is allocated or frozen.
    let error = Carrier::create(class, F32s::default(), 2, DType::INT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(matches!(
        error,
        Error::UnstorableDtype { class: c, dtype } if c == class && dtype == DType::INT32
    ));
    // Wrong state type: refused too.
    let error = Carrier::create(class, 5_u8, 2, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    // A pack may still attach: the refused constructions observed nothing.
    let pack = KernelPack::new(
        "vendor",
        "1.0",
        class,
        interface(),
        [neg_pattern(class, "vendor.neg", Arc::clone(&prepared))],
    )?;
    register_kernel_pack(pack)?;
    // The first successful construction freezes the set, pack included.
    let x = tensor(class, &[1.0, -2.0])?;
    assert_eq!(&*x.carrier().capabilities(), &[neg_plan()]);
    let y = strideweave::ops::neg(&x)?;
    assert_eq!(floats(&y), [-1.0, 2.0]);
    assert_eq!(prepared.load(Ordering::SeqCst), 1);
    assert_eq!(x.version(), 2);
    // A pack after the first construction is refused.
    let late = KernelPack::new(
        "vendor",
        "2.0",
        class,
        interface(),
        [neg_pattern(class, "vendor.neg2", Arc::clone(&prepared))],
    )?;
    let error = register_kernel_pack(late).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: KernelPack 'vendor' 2.0: RefusedAccel was already observed (constructed or queried); \
         its kernel set is sealed"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Item A: `dispatch_op` on a definition-backed class.

fn bind_neg(x: &Tensor) -> Result<ResolvedInvocation> {
    let neg = operation_definition("neg")?;
    neg.resolve(&neg.bind(vec![x.clone().into()], &[])?)
}

#[test]
fn dispatch_op_on_a_kernel_backed_class_runs_its_execution_set() -> Result<()> {
    let class = independent("DispatchAccel");
    let prepared = Arc::new(AtomicUsize::new(0));
    define_kernels(
        class,
        vec![neg_pattern(class, "accel.neg", Arc::clone(&prepared))],
    );
    let x = tensor(class, &[1.0, -2.0])?;
    let first = x.carrier().dispatch_op("neg")?;
    let second = x.carrier().dispatch_op("neg")?;
    assert!(!first.same_as(&second));
    assert_eq!(
        (first.name(), first.carrier_class()),
        (Some("neg"), Some(class))
    );
    assert_eq!(
        prepared.load(Ordering::SeqCst),
        0,
        "dispatch prepares nothing"
    );

    let invocation = bind_neg(&x)?;
    let y = first.forward(&invocation)?.remove(0);
    assert_eq!(floats(&y), [-1.0, 2.0]);
    assert_eq!(y.carrier().class(), class);
    assert_eq!(prepared.load(Ordering::SeqCst), 1);
    // The operand is unchanged and nothing was recorded.
    assert_eq!(x.version(), 2);
    assert_eq!(floats(&x), [1.0, -2.0]);
    assert!(y.grad_fn().is_none());

    // An invocation of another operation is refused before any pattern prepares.
    let abs = operation_definition("abs")?;
    let other = abs.resolve(&abs.bind(vec![x.clone().into()], &[])?)?;
    let error = second.forward(&other).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: an operation dispatched as 'neg' by DispatchAccel cannot run a 'abs' \
         invocation"
    );
    assert_eq!(prepared.load(Ordering::SeqCst), 1);
    Ok(())
}

#[test]
fn the_forward_of_a_definition_backed_operation_validates_like_the_pipeline() -> Result<()> {
    let class = independent("EchoAccel");
    // A kernel that hands the operand back as its result: a contract violation.
    let echo = KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()],
        "echo.neg",
        |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let input = invocation.call().tensor(0)?.clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || ProviderResult::new([input]).map(Submitted::Ready),
            )))
        },
        0,
    )?;
    define_kernels(class, vec![echo]);
    let x = tensor(class, &[3.0])?;
    let operation = x.carrier().dispatch_op("neg")?;
    let error = operation.forward(&bind_neg(&x)?).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(matches!(error, Error::ProviderContract(_)));
    assert_eq!(
        error.to_string(),
        "provider contract violated: 'neg' on EchoAccel: result 0 shares storage with operand 0, \
         which its spec does not declare with alias_of"
    );
    // The pipeline says the same.
    let piped = strideweave::ops::neg(&x).unwrap_err();
    assert_eq!(piped.to_string(), error.to_string());
    assert_eq!(x.version(), 1);
    assert_eq!(floats(&x), [3.0]);

    // Operands of another class are refused (Type) before anything runs.
    let cpu = Tensor::compact(
        strideweave::carriers::Cpu::from_f32(&[1.0], true)?,
        Shape::new(1)?,
    )?;
    let error = operation.forward(&bind_neg(&cpu)?).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: Tensor backing carriers must match: 'neg' was dispatched by EchoAccel and \
         got a CPU operand"
    );
    Ok(())
}

#[test]
fn dispatch_op_on_a_released_definition_backed_carrier_reports_the_release_first() -> Result<()> {
    let class = neg_class("ReleasedAccel", "released.neg");
    let carrier = one_slot(class)?;
    carrier.release()?;
    for name in ["neg", "relu", "nope"] {
        let error = carrier.dispatch_op(name).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime);
        assert!(matches!(error, Error::Released { class: c, .. } if c == class));
        assert_eq!(
            error.to_string(),
            "runtime error: cannot dispatch an operation: ReleasedAccel is released"
        );
    }
    assert!(carrier.is_released());
    assert_eq!(carrier.version(), 0);
    Ok(())
}

#[test]
fn dispatch_op_on_a_storage_only_class_says_it_is_storage_only() -> Result<()> {
    let class = independent("StorageOnlyDispatch");
    register_carrier_definition(class, CarrierDefinition::new(f32_storage()))?;
    let carrier = one_slot(class)?;
    for name in ["neg", "nope"] {
        let error = carrier.dispatch_op(name).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotImplemented);
        assert!(matches!(error, Error::UnsupportedOperationPlan(_)));
        assert_eq!(
            error.to_string(),
            format!(
                "unsupported operation plan for '{name}': StorageOnlyDispatch is a storage-only \
                 definition-backed carrier class: it executes no operation"
            )
        );
    }
    assert!(!carrier.is_released());
    assert_eq!(carrier.version(), 0);
    Ok(())
}

#[test]
fn dispatch_op_of_an_operation_without_a_pattern_or_an_unknown_name_is_refused() -> Result<()> {
    let class = neg_class("NegOnlyAccel", "negonly.neg");
    let carrier = one_slot(class)?;
    let error = carrier.dispatch_op("relu").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    match &error {
        Error::UnsupportedOperationPlan(plan) => {
            assert_eq!(plan.operation(), "relu");
            assert_eq!(
                plan.reasons(),
                ["NegOnlyAccel has no kernel pattern for 'relu'"]
            );
        }
        other => panic!("expected UnsupportedOperationPlan, got {other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "unsupported operation plan for 'relu': NegOnlyAccel has no kernel pattern for 'relu'"
    );
    let error = carrier.dispatch_op("nope").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert!(matches!(error, Error::NotImplemented(_)));
    assert_eq!(
        error.to_string(),
        "not implemented: NegOnlyAccel dispatches no operation 'nope': no operation of that \
         name is defined"
    );
    assert_eq!(carrier.version(), 0);
    Ok(())
}

/// The state of a dependent test class: F32 slots of its own.
fn negating_composite() -> CompositeProvider {
    let cpu = CarrierClass::of::<strideweave::carriers::Cpu>();
    CompositeProvider::new(
        |_: &Carrier| Ok(vec![neg_plan()]),
        move |_: &Carrier, _: &ResolvedInvocation| Ok(vec![cpu]),
        |_: &Carrier, invocation: &ResolvedInvocation| {
            let input = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            Ok(CompositePreparation::Composite(PreparedComposite::new(
                move || {
                    let values: Vec<f32> = floats(&input).into_iter().map(|x| -x as f32).collect();
                    let carrier = strideweave::carriers::Cpu::from_f32(&values, true)?;
                    ProviderResult::new([spec.tensor(carrier)?]).map(Submitted::Ready)
                },
            )))
        },
    )
}

#[test]
fn dispatch_op_on_a_dependent_class_runs_its_composite_provider() -> Result<()> {
    let class = CarrierClass::mint("NegatingComposite", ClassKind::Dependent);
    let definition = CarrierDefinition::new(f32_storage()).with_composite(negating_composite())?;
    register_carrier_definition(class, definition)?;
    let x = tensor(class, &[2.0, -5.0])?;
    let operation = x.carrier().dispatch_op("neg")?;
    assert_eq!(
        (operation.name(), operation.carrier_class()),
        (Some("neg"), Some(class))
    );
    let y = operation.forward(&bind_neg(&x)?)?.remove(0);
    assert_eq!(floats(&y), [-2.0, 5.0]);
    assert_eq!(
        y.carrier().class(),
        CarrierClass::of::<strideweave::carriers::Cpu>()
    );
    assert_eq!(x.version(), 2);
    assert!(y.grad_fn().is_none());
    // An operation outside the instance's reach is refused at dispatch, as the gate refuses
    // its plans.
    let error = x.carrier().dispatch_op("abs").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert_eq!(
        error.to_string(),
        "unsupported operation plan for 'abs': NegatingComposite declares no operation-plan \
         capability for 'abs'"
    );
    assert_eq!(x.version(), 2);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Item C: every storage callback can fail; factories build fresh state.

const OK: u8 = 0;
const FAIL: u8 = 1;
const PANIC: u8 = 2;

/// Provider state with a configuration (`device`) and per-instance slots.
#[derive(Default)]
struct Probe {
    device: Option<Arc<str>>,
    values: Vec<f64>,
}

/// What the probe provider's callbacks saw.
#[derive(Default)]
struct Probes {
    supports: Arc<std::sync::atomic::AtomicU8>,
    size: Arc<std::sync::atomic::AtomicU8>,
    fresh: Arc<std::sync::atomic::AtomicU8>,
    allocations: Arc<AtomicUsize>,
    releases: Arc<AtomicUsize>,
    /// The `device` of each prototype `fresh` was given.
    fresh_from: Arc<std::sync::Mutex<Vec<Option<Arc<str>>>>>,
}

fn injected(mode: &std::sync::atomic::AtomicU8, what: &str) -> Result<()> {
    match mode.load(Ordering::SeqCst) {
        FAIL => Err(Error::Memory(format!("injected {what} failure"))),
        PANIC => panic!("injected {what} panic"),
        _ => Ok(()),
    }
}

fn probe_storage(probes: &Probes) -> strideweave::carriers::extension::StorageProvider {
    let (supports, size, fresh) = (
        Arc::clone(&probes.supports),
        Arc::clone(&probes.size),
        Arc::clone(&probes.fresh),
    );
    let (allocations, releases) = (
        Arc::clone(&probes.allocations),
        Arc::clone(&probes.releases),
    );
    let fresh_from = Arc::clone(&probes.fresh_from);
    strideweave::carriers::extension::StorageProvider::new_fallible(
        move |_: &Probe, dtype| {
            injected(&supports, "supports_dtype")?;
            Ok(dtype == DType::FLOAT32)
        },
        move |state: &Probe| {
            injected(&size, "physical_size")?;
            Ok(state.values.len() as i64)
        },
        move |state: &mut Probe, slots, _dtype| {
            allocations.fetch_add(1, Ordering::SeqCst);
            state.values = vec![0.0; slots];
            Ok(())
        },
        move |state: &mut Probe| {
            releases.fetch_add(1, Ordering::SeqCst);
            state.values.clear();
            Ok(())
        },
        |state: &Probe, index| Ok(Value::Float(state.values[index])),
        |state: &mut Probe, index, value| {
            state.values[index] = value.as_f64().unwrap_or(0.0);
            Ok(())
        },
        move |prototype: &Probe| {
            injected(&fresh, "fresh")?;
            fresh_from.lock().unwrap().push(prototype.device.clone());
            Ok(Probe {
                device: prototype.device.clone(),
                values: Vec::new(),
            })
        },
    )
}

fn probe_class(name: &str, probes: &Probes) -> CarrierClass {
    let class = independent(name);
    register_carrier_definition(class, CarrierDefinition::new(probe_storage(probes))).unwrap();
    class
}

fn probe_on(device: &str) -> Probe {
    Probe {
        device: Some(Arc::from(device)),
        values: Vec::new(),
    }
}

fn panic_message(class: &str, callback: &str, detail: &str) -> String {
    format!(
        "provider contract violated: the storage provider of {class} panicked in \
         {callback}: {detail}"
    )
}

#[test]
fn a_failing_supports_dtype_propagates_from_every_path_and_never_reads_as_false() -> Result<()> {
    let probes = Probes::default();
    let class = probe_class("FailingDtypes", &probes);
    // Construction: the error itself, before anything is allocated.
    probes.supports.store(FAIL, Ordering::SeqCst);
    let error = Carrier::create(class, probe_on("gpu0"), 2, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory);
    assert_eq!(
        error.to_string(),
        "memory error: injected supports_dtype failure"
    );
    assert_eq!(probes.allocations.load(Ordering::SeqCst), 0);

    probes.supports.store(OK, Ordering::SeqCst);
    let carrier = Carrier::create(class, probe_on("gpu0"), 2, DType::FLOAT32, true)?;
    carrier.set(0, Value::Float(4.0))?;
    assert!(carrier.supports_storage_dtype(DType::FLOAT32)?);
    assert!(!carrier.supports_storage_dtype(DType::INT32)?);
    assert_eq!(probes.allocations.load(Ordering::SeqCst), 1);

    for mode in [FAIL, PANIC] {
        probes.supports.store(mode, Ordering::SeqCst);
        let expected = if mode == FAIL {
            "memory error: injected supports_dtype failure".to_string()
        } else {
            panic_message(
                "FailingDtypes",
                "supports_dtype",
                "injected supports_dtype panic",
            )
        };
        let query = carrier.supports_storage_dtype(DType::FLOAT32).unwrap_err();
        let like = carrier
            .new_like(&[Value::Float(1.0)], true, None)
            .unwrap_err();
        let allocated = carrier.allocate_like(3, true, None, false).unwrap_err();
        let other_dtype = carrier
            .allocate_like(3, true, Some(DType::INT32), false)
            .unwrap_err();
        for error in [&query, &like, &allocated, &other_dtype] {
            assert_eq!(error.to_string(), expected);
            assert_eq!(
                error.kind(),
                if mode == FAIL {
                    ErrorKind::Memory
                } else {
                    ErrorKind::Runtime
                }
            );
        }
    }
    // Nothing was allocated, written or released by the refused factories.
    assert_eq!(probes.allocations.load(Ordering::SeqCst), 1);
    assert_eq!(probes.releases.load(Ordering::SeqCst), 0);
    assert_eq!(carrier.version(), 1);
    assert_eq!(carrier.get(0)?, Value::Float(4.0));
    assert!(probes.fresh_from.lock().unwrap().is_empty());

    // The query still answers after release.
    probes.supports.store(OK, Ordering::SeqCst);
    carrier.release()?;
    assert!(carrier.supports_storage_dtype(DType::FLOAT32)?);
    Ok(())
}

#[test]
fn a_failing_physical_size_propagates_and_the_state_is_released() -> Result<()> {
    let probes = Probes::default();
    let class = probe_class("FailingSize", &probes);
    for (mode, expected) in [
        (
            FAIL,
            "memory error: injected physical_size failure".to_string(),
        ),
        (
            PANIC,
            panic_message(
                "FailingSize",
                "physical_size",
                "injected physical_size panic",
            ),
        ),
    ] {
        probes.size.store(mode, Ordering::SeqCst);
        let error = Carrier::create(class, probe_on("gpu0"), 2, DType::FLOAT32, true).unwrap_err();
        assert_eq!(error.to_string(), expected);
    }
    // Each refused construction allocated, then handed the storage back once.
    assert_eq!(probes.allocations.load(Ordering::SeqCst), 2);
    assert_eq!(probes.releases.load(Ordering::SeqCst), 2);
    probes.size.store(OK, Ordering::SeqCst);
    let carrier = Carrier::create(class, probe_on("gpu0"), 2, DType::FLOAT32, true)?;
    assert_eq!((carrier.size(), carrier.version()), (2, 0));
    Ok(())
}

#[test]
fn a_refused_construction_through_a_failing_callback_leaves_packs_open() -> Result<()> {
    let probes = Probes::default();
    let class = independent("FailingAccel");
    let provider = KernelProvider::new(interface(), [])?;
    let definition = CarrierDefinition::new(probe_storage(&probes)).with_kernels(provider)?;
    register_carrier_definition(class, definition)?;
    probes.size.store(FAIL, Ordering::SeqCst);
    let error = Carrier::create(class, probe_on("gpu0"), 1, DType::FLOAT32, true).unwrap_err();
    assert_eq!(
        error.to_string(),
        "memory error: injected physical_size failure"
    );
    let pack = KernelPack::new(
        "late",
        "1",
        class,
        interface(),
        [neg_pattern(class, "late.neg", Arc::default())],
    )?;
    register_kernel_pack(pack)?;
    probes.size.store(OK, Ordering::SeqCst);
    let carrier = Carrier::create(class, probe_on("gpu0"), 1, DType::FLOAT32, true)?;
    assert_eq!(&*carrier.capabilities(), &[neg_plan()]);
    Ok(())
}

#[test]
fn factories_build_fresh_state_and_never_copy_the_prototype() -> Result<()> {
    let probes = Probes::default();
    let class = probe_class("FreshFactories", &probes);
    let prototype = Carrier::create(class, probe_on("gpu1"), 2, DType::FLOAT32, true)?;
    prototype.set(0, Value::Float(9.0))?;
    prototype.set(1, Value::Float(8.0))?;

    let zeroed = prototype.allocate_like(3, true, None, false)?;
    let like = prototype.new_like(&[Value::Float(1.5)], true, None)?;
    // `fresh` saw the prototype's configuration; the new states hold it and their own slots.
    assert_eq!(
        *probes.fresh_from.lock().unwrap(),
        [Some(Arc::from("gpu1")), Some(Arc::from("gpu1"))]
    );
    let state = |carrier: &Carrier| {
        carrier
            .with_provider_state(|s: &Probe| (s.device.clone(), s.values.clone()))
            .unwrap()
    };
    assert_eq!(state(&zeroed), (Some(Arc::from("gpu1")), vec![0.0; 3]));
    assert_eq!(state(&like), (Some(Arc::from("gpu1")), vec![1.5]));
    assert_eq!(state(&prototype), (Some(Arc::from("gpu1")), vec![9.0, 8.0]));
    assert_eq!(
        (zeroed.version(), like.version(), prototype.version()),
        (0, 0, 2)
    );
    // Writing the new instance leaves the prototype alone.
    zeroed.set(0, Value::Float(-1.0))?;
    assert_eq!(prototype.get(0)?, Value::Float(9.0));

    // A failing or panicking `fresh` fails the factory with nothing constructed.
    let allocations = probes.allocations.load(Ordering::SeqCst);
    probes.fresh.store(FAIL, Ordering::SeqCst);
    let error = prototype.allocate_like(2, true, None, false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory);
    assert_eq!(error.to_string(), "memory error: injected fresh failure");
    probes.fresh.store(PANIC, Ordering::SeqCst);
    let error = prototype
        .new_like(&[Value::Float(1.0)], true, None)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        panic_message("FreshFactories", "fresh state", "injected fresh panic")
    );
    assert_eq!(probes.allocations.load(Ordering::SeqCst), allocations);
    assert_eq!(prototype.version(), 2);
    Ok(())
}

/// State whose `Default` is the fresh state of [`StorageProvider::new`].
#[derive(Default)]
struct Tagged {
    tag: Option<u32>,
    values: Vec<f64>,
}

#[test]
fn the_infallible_constructor_builds_default_fresh_state() -> Result<()> {
    let storage = strideweave::carriers::extension::StorageProvider::new(
        |_: &Tagged, dtype| dtype == DType::FLOAT32,
        |state: &Tagged| state.values.len() as i64,
        |state: &mut Tagged, slots, _| {
            state.values = vec![0.0; slots];
            Ok(())
        },
        |_: &mut Tagged| Ok(()),
        |state: &Tagged, index| Ok(Value::Float(state.values[index])),
        |state: &mut Tagged, index, value| {
            state.values[index] = value.as_f64().unwrap_or(0.0);
            Ok(())
        },
    );
    let class = independent("DefaultFresh");
    register_carrier_definition(class, CarrierDefinition::new(storage))?;
    let tagged = Tagged {
        tag: Some(7),
        values: Vec::new(),
    };
    let prototype = Carrier::create(class, tagged, 2, DType::FLOAT32, true)?;
    prototype.set(1, Value::Float(3.0))?;
    let fresh = prototype.allocate_like(2, true, None, false)?;
    let read = |carrier: &Carrier| {
        carrier
            .with_provider_state(|s: &Tagged| (s.tag, s.values.clone()))
            .unwrap()
    };
    assert_eq!(read(&fresh), (None, vec![0.0, 0.0]));
    assert_eq!(read(&prototype), (Some(7), vec![0.0, 3.0]));
    assert_eq!((fresh.version(), prototype.version()), (0, 1));
    Ok(())
}

/// A definition-free class whose dtype answer fails (as a composite over failing tiers
/// would): its construction is refused with that error and seals nothing.
#[derive(Default)]
struct Undecided {
    fail: bool,
}

impl strideweave::carrier::DefinitionFreeCarrier for Undecided {
    const NAME: &'static str = "Undecided";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }

    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        if self.fail {
            return Err(Error::Runtime("the dtype table is unreachable".into()));
        }
        Ok(self.supports_storage_dtype(dtype))
    }

    fn size(&self) -> usize {
        0
    }

    fn read(&self, _index: usize, _dtype: DType) -> Result<Value> {
        Err(Error::Runtime("no slots".into()))
    }

    fn write(&self, _index: usize, _value: Value, _dtype: DType) -> Result<()> {
        Err(Error::Runtime("no slots".into()))
    }

    fn release(&self) -> Result<()> {
        Ok(())
    }

    fn new_like(&self, _values: &[Value], _dtype: DType) -> Result<Self> {
        Ok(Undecided::default())
    }

    fn allocate_like(&self, _size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Ok(Undecided::default())
    }
}

#[test]
fn a_definition_free_construction_refused_by_a_failing_dtype_answer_seals_nothing() -> Result<()> {
    let class = CarrierClass::of::<Undecided>();
    let error = Carrier::new(Undecided { fail: true }, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        "runtime error: the dtype table is unreachable"
    );
    // Still open: a declaration succeeds, then the class constructs.
    register_operation_capabilities(class, [])?;
    let carrier = Carrier::new(Undecided::default(), DType::FLOAT32, true)?;
    assert_eq!((carrier.size(), carrier.version()), (0, 0));
    let error =
        register_carrier_definition(class, CarrierDefinition::new(f32_storage())).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(
        error.to_string().contains("Undecided was already observed"),
        "{error}"
    );
    Ok(())
}

#[test]
fn the_forward_of_a_definition_backed_operation_refuses_a_kernel_that_writes_its_operand(
) -> Result<()> {
    let class = independent("ScribbleAccel");
    let scribble = KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()],
        "scribble.neg",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let input = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    input.carrier().set(0, Value::Float(100.0))?;
                    ProviderResult::new([output(class, &spec, &[0.0])?]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )?;
    define_kernels(class, vec![scribble]);
    let x = tensor(class, &[1.0])?;
    let operation = x.carrier().dispatch_op("neg")?;
    let error = operation.forward(&bind_neg(&x)?).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(matches!(error, Error::ProviderContract(_)));
    assert_eq!(
        error.to_string(),
        "provider contract violated: 'neg' on ScribbleAccel: tensor operand 0 was mutated by \
         the provider"
    );
    // The pipeline reports the same violation.
    let piped = strideweave::ops::neg(&x).unwrap_err();
    assert_eq!(piped.to_string(), error.to_string());
    // Both writes were undone: the value and the version are the ones before either call.
    assert_eq!((floats(&x), x.version()), (vec![1.0], 1));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Item 1: provider work is transactional.

/// Where a scribbling kernel writes its operand and a bystander tensor through the public
/// API, and how it then ends.
#[derive(Clone, Copy, Debug)]
enum Scribble {
    /// Writes in `prepare`, then `prepare` fails.
    PrepareThenError,
    /// Writes in `submit`, then `submit` fails.
    SubmitThenError,
    /// Writes in `submit`, then `submit` panics.
    SubmitThenPanic,
    /// Writes in `submit` and returns a result of the wrong dtype.
    SubmitThenInvalidResult,
    /// Writes in a pending completion's `wait`, which then fails.
    WaitThenError,
    /// Writes the bystander only and succeeds: the write is the provider's to keep.
    BystanderOnly,
}

/// Work a deferred completion runs when waited on.
type DeferredWork = Box<dyn FnOnce() -> Result<ProviderResult> + Send>;

/// A completion whose `wait` runs its work once.
struct Deferred(std::sync::Mutex<Option<DeferredWork>>);

impl strideweave::carriers::extension::ProviderCompletion<ProviderResult> for Deferred {
    fn done(&self) -> bool {
        false
    }
    fn wait(&self) -> Result<ProviderResult> {
        let work = self.0.lock().unwrap().take();
        match work {
            Some(work) => work(),
            None => Err(Error::Runtime("waited twice".into())),
        }
    }
}

fn scribbling_neg(class: CarrierClass, bystander: Tensor, mode: Scribble) -> KernelPattern {
    KernelPattern::new(
        &operation_definition("neg").unwrap(),
        [neg_plan()],
        "scribble",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let input = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            let (bystander, written) = (bystander.clone(), bystander.clone());
            let scribble = move |input: &Tensor| -> Result<()> {
                written.carrier().set(0, Value::Float(99.0))?;
                written.carrier().set(1, Value::Float(98.0))?;
                input.carrier().set(1, Value::Float(77.0))
            };
            if let Scribble::PrepareThenError = mode {
                scribble(&input)?;
                return Err(Error::Runtime("prepare failed after writing".into()));
            }
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let values: Vec<f64> = floats(&input).into_iter().map(|x| -x).collect();
                    match mode {
                        Scribble::PrepareThenError => unreachable!("prepare failed"),
                        Scribble::SubmitThenError => {
                            scribble(&input)?;
                            Err(Error::Runtime("submit failed after writing".into()))
                        }
                        Scribble::SubmitThenPanic => {
                            scribble(&input)?;
                            panic!("submit panicked after writing")
                        }
                        Scribble::SubmitThenInvalidResult => {
                            scribble(&input)?;
                            // One element where the spec wants the operand's shape.
                            let wrong = ResultSpec::canonical(DType::FLOAT32, Shape::new(1)?);
                            ProviderResult::new([output(class, &wrong, &[0.0])?])
                                .map(Submitted::Ready)
                        }
                        Scribble::WaitThenError => {
                            let work: DeferredWork = Box::new(move || {
                                scribble(&input)?;
                                Err(Error::Runtime("the completion failed after writing".into()))
                            });
                            Ok(Submitted::pending(Deferred(std::sync::Mutex::new(Some(
                                work,
                            )))))
                        }
                        Scribble::BystanderOnly => {
                            bystander.carrier().set(0, Value::Float(99.0))?;
                            ProviderResult::new([output(class, &spec, &values)?])
                                .map(Submitted::Ready)
                        }
                    }
                },
            )))
        },
        0,
    )
    .unwrap()
}

#[test]
fn a_failing_kernel_leaves_its_operand_and_every_tensor_it_wrote_as_they_were() -> Result<()> {
    let modes = [
        (
            Scribble::PrepareThenError,
            ErrorKind::Runtime,
            "prepare failed after writing",
        ),
        (
            Scribble::SubmitThenError,
            ErrorKind::Runtime,
            "submit failed after writing",
        ),
        (
            Scribble::SubmitThenPanic,
            ErrorKind::Runtime,
            "submit panicked after writing",
        ),
        (
            Scribble::SubmitThenInvalidResult,
            ErrorKind::Runtime,
            "result 0 has layout",
        ),
        (
            Scribble::WaitThenError,
            ErrorKind::Runtime,
            "the completion failed after writing",
        ),
    ];
    for (i, (mode, kind, message)) in modes.into_iter().enumerate() {
        let class = independent(&format!("Scribbler{i}"));
        let bystander = Tensor::compact(
            strideweave::carriers::Cpu::from_f32(&[1.0, 2.0], true)?,
            Shape::new(2)?,
        )?;
        define_kernels(class, vec![scribbling_neg(class, bystander.clone(), mode)]);
        let x = tensor(class, &[1.0, 2.0, 3.0])?;
        let (x_version, b_version) = (x.version(), bystander.version());
        let error = strideweave::ops::neg(&x).expect_err("the kernel fails");
        assert_eq!(error.kind(), kind, "{mode:?}: {error}");
        assert!(error.to_string().contains(message), "{mode:?}: {error}");
        assert_eq!(
            floats(&x),
            [1.0, 2.0, 3.0],
            "{mode:?}: the operand is restored"
        );
        assert_eq!(
            x.version(),
            x_version,
            "{mode:?}: the operand's version is restored"
        );
        assert_eq!(
            floats(&bystander),
            [1.0, 2.0],
            "{mode:?}: the bystander is restored"
        );
        assert_eq!(
            bystander.version(),
            b_version,
            "{mode:?}: its version is restored"
        );
        // The carrier still works, and a retry fails the same way without drifting.
        let again = strideweave::ops::neg(&x).expect_err("the kernel fails again");
        assert_eq!(again.kind(), kind);
        assert_eq!((floats(&x), x.version()), (vec![1.0, 2.0, 3.0], x_version));
    }
    Ok(())
}

#[test]
fn a_kernel_that_mutates_its_operand_and_succeeds_is_refused_and_undone() -> Result<()> {
    let class = independent("MutatingScribbler");
    let bystander = Tensor::compact(
        strideweave::carriers::Cpu::from_f32(&[1.0, 2.0], true)?,
        Shape::new(2)?,
    )?;
    // Writes the operand in `submit`, then returns a valid result.
    let mutate = KernelPattern::new(
        &operation_definition("neg").unwrap(),
        [neg_plan()],
        "mutate",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let input = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let values: Vec<f64> = floats(&input).into_iter().map(|x| -x).collect();
                    input.carrier().set(0, Value::Float(-5.0))?;
                    ProviderResult::new([output(class, &spec, &values)?]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )?;
    define_kernels(class, vec![mutate]);
    let x = tensor(class, &[1.0, 2.0])?;
    let version = x.version();
    let error = strideweave::ops::neg(&x).expect_err("an undeclared mutation");
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(
        error
            .to_string()
            .contains("tensor operand 0 was mutated by the provider"),
        "{error}"
    );
    assert_eq!((floats(&x), x.version()), (vec![1.0, 2.0], version));
    let _ = bystander;
    Ok(())
}

#[test]
fn a_succeeding_kernel_keeps_its_writes_to_tensors_that_are_not_operands() -> Result<()> {
    let class = independent("BystanderScribbler");
    let bystander = Tensor::compact(
        strideweave::carriers::Cpu::from_f32(&[1.0, 2.0], true)?,
        Shape::new(2)?,
    )?;
    define_kernels(
        class,
        vec![scribbling_neg(
            class,
            bystander.clone(),
            Scribble::BystanderOnly,
        )],
    );
    let x = tensor(class, &[1.0, 2.0])?;
    let y = strideweave::ops::neg(&x)?;
    assert_eq!(floats(&y), [-1.0, -2.0]);
    assert_eq!(floats(&bystander), [99.0, 2.0]);
    assert_eq!(bystander.version(), 1);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Item 2: declared in-place mutation.

/// How the in-place kernel behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum InPlace {
    /// Writes operand 0 twice and returns it.
    Declared,
    /// Writes operand 0, then fails.
    DeclaredThenError,
    /// Writes operand 1 (not declared) as well.
    Undeclared,
}

/// `tx.fill_<mode>(x, y)`: writes `x` in place (declared mutated) and returns it.
fn in_place_operation(tag: &str) -> Result<strideweave::operation::OperationDefinition> {
    in_place_operation_with(tag, strideweave::operation::Vjp::NonDifferentiable)
}

/// `in_place_operation` with the backward `vjp`.
fn in_place_operation_with(
    tag: &str,
    vjp: strideweave::operation::Vjp,
) -> Result<strideweave::operation::OperationDefinition> {
    use strideweave::operation::{
        define_operation, Arithmetic, BoundOperationCall, OperandKind, OperandPlan, OperandSpec,
        OperationPlan, OperationSchema,
    };
    let schema = OperationSchema::new(
        [
            OperandSpec::new("x", OperandKind::Tensor, true)?,
            OperandSpec::new("y", OperandKind::Tensor, true)?,
        ],
        [],
    )?;
    let resolve = |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let x = call.tensor(0)?;
        let plan = OperationPlan::new(
            call.definition().name(),
            [
                OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?,
                OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?,
            ],
            Arithmetic::Binary32,
            None,
            None,
            DType::FLOAT32,
        )?;
        let result = ResultSpec::new(DType::FLOAT32, x.layout().clone()).aliasing(0);
        ResolvedInvocation::new(call.clone(), plan, [result], [], None)?.with_mutated_operands([0])
    };
    define_operation(&format!("inplace{tag}.fill"), schema, resolve, None, vjp)
}

/// A kernel-backed class whose one pattern runs the in-place operation `operation` as `mode`.
fn in_place_class(
    tag: &str,
    operation: &strideweave::operation::OperationDefinition,
    mode: InPlace,
) -> Result<CarrierClass> {
    use strideweave::operation::{Arithmetic, OperandPlan, OperationPlan};
    let class = independent(&format!("InPlace{tag}"));
    let plan = OperationPlan::new(
        operation.name(),
        [
            OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?,
            OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?,
        ],
        Arithmetic::Binary32,
        None,
        None,
        DType::FLOAT32,
    )?;
    let pattern = KernelPattern::new(
        operation,
        [OperationCapability::from_plan(plan)],
        "inplace.fill",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let (x, y) = (
                invocation.call().tensor(0)?.clone(),
                invocation.call().tensor(1)?.clone(),
            );
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let ys = floats(&y);
                    for (i, v) in ys.iter().enumerate() {
                        x.carrier().set(i, Value::Float(-1.0))?;
                        x.carrier().set(i, Value::Float(*v))?;
                    }
                    match mode {
                        InPlace::Declared => {}
                        InPlace::DeclaredThenError => {
                            return Err(Error::Runtime("the in-place kernel failed".into()))
                        }
                        InPlace::Undeclared => y.carrier().set(0, Value::Float(0.5))?,
                    }
                    ProviderResult::new([x.clone()]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )?;
    define_kernels(class, vec![pattern]);
    Ok(class)
}

#[test]
fn a_declared_in_place_write_is_kept_and_moves_the_version_once() -> Result<()> {
    let operation = in_place_operation("Kept")?;
    let class = in_place_class("Kept", &operation, InPlace::Declared)?;
    let x = tensor(class, &[1.0, 2.0, 3.0])?;
    let y = tensor(class, &[7.0, 8.0, 9.0])?;
    let (xv, yv) = (x.version(), y.version());
    let out = operation.call(vec![x.clone().into(), y.clone().into()], &[])?;
    assert!(out[0].same_as(&x), "the result is operand 0 itself");
    assert_eq!(floats(&x), [7.0, 8.0, 9.0]);
    // Six writes, one publication.
    assert_eq!(x.version(), xv + 1);
    assert_eq!((floats(&y), y.version()), (vec![7.0, 8.0, 9.0], yv));
    Ok(())
}

#[test]
fn a_failing_in_place_kernel_and_an_undeclared_write_are_undone() -> Result<()> {
    for (tag, mode, message) in [
        (
            "Failing",
            InPlace::DeclaredThenError,
            "the in-place kernel failed",
        ),
        (
            "Undeclared",
            InPlace::Undeclared,
            "tensor operand 1 was mutated by the provider",
        ),
    ] {
        let operation = in_place_operation(tag)?;
        let class = in_place_class(tag, &operation, mode)?;
        let x = tensor(class, &[1.0, 2.0])?;
        let y = tensor(class, &[7.0, 8.0])?;
        let (xv, yv) = (x.version(), y.version());
        let error = operation
            .call(vec![x.clone().into(), y.clone().into()], &[])
            .expect_err("the call fails");
        assert_eq!(error.kind(), ErrorKind::Runtime, "{mode:?}");
        assert!(error.to_string().contains(message), "{mode:?}: {error}");
        assert_eq!((floats(&x), x.version()), (vec![1.0, 2.0], xv), "{mode:?}");
        assert_eq!((floats(&y), y.version()), (vec![7.0, 8.0], yv), "{mode:?}");
    }
    Ok(())
}

#[test]
fn mutated_operands_name_distinct_tensor_operands_and_refuse_recording() -> Result<()> {
    let operation = in_place_operation("Checked")?;
    let class = in_place_class("Checked", &operation, InPlace::Declared)?;
    let x = tensor(class, &[1.0])?;
    let y = tensor(class, &[2.0])?;
    let bound = operation.bind(vec![x.clone().into(), y.clone().into()], &[])?;
    let resolved = operation.resolve(&bound)?;
    assert_eq!(resolved.mutated_operands(), [0]);
    let twice = resolved.clone().with_mutated_operands([1, 1]).unwrap_err();
    assert_eq!(twice.kind(), ErrorKind::Value);
    assert_eq!(
        twice.to_string(),
        "value error: 'inplaceChecked.fill' declares operand 1 mutated twice"
    );
    let outside = resolved.with_mutated_operands([2]).unwrap_err();
    assert_eq!(
        outside.to_string(),
        "value error: mutated_operands index 2 of 'inplaceChecked.fill' is not a tensor operand"
    );
    // An operation without gradients writes in place under grad mode and records nothing.
    y.set_requires_grad(true)?;
    let out = operation.call(vec![x.clone().into(), y.clone().into()], &[])?;
    assert!(out[0].same_as(&x));
    assert!(out[0].grad_fn().is_none());
    assert_eq!((floats(&x), x.version()), (vec![2.0], 2));

    // With a gradient rule, recording an in-place write is refused before the kernel runs.
    let differentiable = in_place_operation_with(
        "CheckedGrad",
        strideweave::operation::Vjp::rule(|_, _| Ok(vec![None, None])),
    )?;
    let class = in_place_class("CheckedGrad", &differentiable, InPlace::Declared)?;
    let x = tensor(class, &[1.0])?;
    let y = tensor(class, &[2.0])?;
    y.set_requires_grad(true)?;
    let error = differentiable
        .call(vec![x.clone().into(), y.clone().into()], &[])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(
        error.to_string().contains("writes operands [0] in place"),
        "{error}"
    );
    assert_eq!((floats(&x), x.version()), (vec![1.0], 1));
    // Under no_grad the same call runs.
    {
        let _off = strideweave::autograd::no_grad();
        differentiable.call(vec![x.clone().into(), y.clone().into()], &[])?;
    }
    assert_eq!((floats(&x), x.version()), (vec![2.0], 2));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Item 3: operations inside provider work record no autograd node.

#[test]
fn operations_a_kernel_runs_inside_its_work_record_no_autograd_node() -> Result<()> {
    let class = independent("NestedOps");
    let weight = Tensor::compact(
        strideweave::carriers::Cpu::from_f32(&[1.0, -2.0], true)?,
        Shape::new(2)?,
    )?;
    weight.set_requires_grad(true)?;
    let inner: Arc<std::sync::Mutex<Vec<Tensor>>> = Arc::default();
    let (w, seen) = (weight.clone(), Arc::clone(&inner));
    let pattern = KernelPattern::new(
        &operation_definition("neg").unwrap(),
        [neg_plan()],
        "nested",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            // An operation in `prepare`, on a tensor that requires gradients.
            seen.lock().unwrap().push(strideweave::ops::relu(&w)?);
            let input = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            let (w, seen) = (w.clone(), Arc::clone(&seen));
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    // And one in `submit`.
                    seen.lock().unwrap().push(strideweave::ops::neg(&w)?);
                    let values: Vec<f64> = floats(&input).into_iter().map(|x| -x).collect();
                    ProviderResult::new([output(class, &spec, &values)?]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )?;
    define_kernels(class, vec![pattern]);
    let x = tensor(class, &[3.0])?;
    let y = strideweave::ops::neg(&x)?;
    assert_eq!(floats(&y), [-3.0]);
    let inner = inner.lock().unwrap();
    assert_eq!(inner.len(), 2);
    for t in inner.iter() {
        assert!(t.is_leaf(), "no node was recorded inside provider work");
        assert!(!t.requires_grad());
    }
    assert_eq!(floats(&inner[0]), [1.0, 0.0]);
    assert_eq!(floats(&inner[1]), [-1.0, 2.0]);
    // The same operation outside provider work records as usual.
    let outside = strideweave::ops::relu(&weight)?;
    assert!(!outside.is_leaf() && outside.requires_grad());
    Ok(())
}

/// A `neg` kernel whose submit hands its work to a thread of its own: the thread writes
/// operand slot 0 (inside the provider work when `entered`) and then the kernel returns
/// `outcome`'s result.
fn threaded_neg_class(tag: &str, entered: bool, fail: bool) -> CarrierClass {
    use strideweave::carriers::extension::ProviderWork;
    let class = independent(&format!("Threaded{tag}"));
    let pattern = KernelPattern::new(
        &operation_definition("neg").unwrap(),
        [neg_plan()],
        "threaded.neg",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let input = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let work = ProviderWork::current().expect("inside provider work");
                    let target = input.clone();
                    let wrote = std::thread::spawn(move || {
                        let write = || target.carrier().set(0, Value::Float(99.0));
                        if entered {
                            work.run(write)
                        } else {
                            write()
                        }
                    })
                    .join()
                    .expect("the worker ran");
                    wrote?;
                    if fail {
                        return Err(Error::Runtime("the device faulted".into()));
                    }
                    let values: Vec<f64> = floats(&input).into_iter().map(|x| -x).collect();
                    ProviderResult::new([output(class, &spec, &values)?]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )
    .unwrap();
    define_kernels(class, vec![pattern]);
    class
}

#[test]
fn writes_a_provider_makes_on_its_own_thread_inside_its_work_are_undone() -> Result<()> {
    use strideweave::carriers::extension::ProviderWork;
    assert!(
        ProviderWork::current().is_none(),
        "no work outside a provider"
    );

    // The worker entered the work: a failing kernel's write is undone, version included.
    let x = tensor(threaded_neg_class("Failing", true, true), &[1.0, 2.0])?;
    let version = x.version();
    let error = strideweave::ops::neg(&x).unwrap_err();
    assert_eq!(error.to_string(), "runtime error: the device faulted");
    assert_eq!((floats(&x), x.version()), (vec![1.0, 2.0], version));

    // A succeeding kernel's undeclared write from its thread is the provider's violation.
    let x = tensor(threaded_neg_class("Undeclared", true, false), &[1.0, 2.0])?;
    let error = strideweave::ops::neg(&x).unwrap_err();
    assert!(matches!(error, Error::ProviderContract(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("tensor operand 0 was mutated by the provider"),
        "{error}"
    );
    assert_eq!((floats(&x), x.version()), (vec![1.0, 2.0], version));

    // A thread that did not enter the work is another thread: its write is seen as a
    // concurrent change (results discarded) and stays.
    let x = tensor(threaded_neg_class("Outside", false, false), &[1.0, 2.0])?;
    let error = strideweave::ops::neg(&x).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(
        error.to_string().contains("was written by another thread"),
        "{error}"
    );
    assert_eq!((floats(&x), x.version()), (vec![99.0, 2.0], version + 1));
    Ok(())
}
