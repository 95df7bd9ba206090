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
    carrier_definition, InterfaceHandle, Preparation, PreparedKernel, ProviderResult, Submitted,
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
