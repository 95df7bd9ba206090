//! Kernel providers, patterns and packs on independent definition-backed carriers
//! (carrier-extension spec): sealing on first observation, exact-class pack attachment,
//! deterministic candidate order with `Unsupported` fallback, terminal preparation errors,
//! JIT and precompiled kernels behind one boundary, and asynchronous completion.
//!
//! The seed scenario "Reject a malformed prepared result" is enforced by the type system: a
//! preparation returns `Result<Preparation>`, whose only variants are a `PreparedKernel` and
//! an `Unsupported`, and a submission returns `Submitted<ProviderResult>`; no other value can
//! be produced, so there is no run-time case to test.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{f32_storage, F32s};

use strideweave::carrier::{capabilities_for_carrier_class, Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    self, CompletionCell, ExecutionInterface, InterfaceHandle, Preparation, PreparedKernel,
    ProviderResult, Submitted,
};
use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, operation_definition, resolve_operation_plan, OperationCapability, OperationDefinition,
    PlanOperand, ResolvedInvocation, ResultSpec,
};
use strideweave::{
    register_carrier_definition, register_kernel_pack, CarrierDefinition, DType, Error, ErrorKind,
    KernelExecutionInterface, KernelPack, KernelPattern, KernelProvider, Result, Shape, Tensor,
    Unsupported, Value,
};

/// A CUDA-like execution interface with an extra device facility.
struct CudaInterface {
    base: KernelExecutionInterface,
    device: u32,
}

impl ExecutionInterface for CudaInterface {
    fn version(&self) -> &str {
        ExecutionInterface::version(&self.base)
    }
}

/// A Metal-like execution interface: a distinct type.
struct MetalInterface {
    base: KernelExecutionInterface,
}

impl ExecutionInterface for MetalInterface {
    fn version(&self) -> &str {
        ExecutionInterface::version(&self.base)
    }
}

fn cuda(version: &str) -> InterfaceHandle {
    InterfaceHandle::new(CudaInterface {
        base: KernelExecutionInterface::new(version).unwrap(),
        device: 7,
    })
    .unwrap()
}

fn metal(version: &str) -> InterfaceHandle {
    InterfaceHandle::new(MetalInterface {
        base: KernelExecutionInterface::new(version).unwrap(),
    })
    .unwrap()
}

fn neg() -> OperationDefinition {
    operation_definition("neg").unwrap()
}

fn add() -> OperationDefinition {
    operation_definition("add").unwrap()
}

fn neg_plan() -> OperationCapability {
    OperationCapability::from_plan(
        resolve_operation_plan("neg", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap(),
    )
}

fn add_plan() -> OperationCapability {
    let f32 = PlanOperand::Tensor(DType::FLOAT32);
    OperationCapability::from_plan(resolve_operation_plan("add", &[f32, f32], None).unwrap())
}

fn sorted(mut plans: Vec<OperationCapability>) -> Vec<OperationCapability> {
    plans.sort_by(OperationCapability::cmp_order);
    plans
}

/// Registers a kernel-backed definition for the (already minted) `class`.
fn define(class: CarrierClass, interface: InterfaceHandle, patterns: Vec<KernelPattern>) {
    let provider = KernelProvider::new(interface, patterns).unwrap();
    let definition = CarrierDefinition::new(f32_storage())
        .with_kernels(provider)
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
}

fn independent(name: &str) -> CarrierClass {
    CarrierClass::mint(name, ClassKind::Independent)
}

fn tensor(class: CarrierClass, xs: &[f32]) -> Result<Tensor> {
    let carrier = Carrier::create(class, F32s::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(f64::from(*x)))?;
    }
    Tensor::compact(carrier, Shape::new(xs.len())?)
}

fn floats(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .into_iter()
        .map(|v| match v {
            Value::Float(x) => x,
            other => panic!("not a float: {other:?}"),
        })
        .collect()
}

/// A fresh result tensor of `class` laid out as `spec`, holding `values` in logical order.
fn output(class: CarrierClass, spec: &ResultSpec, values: &[f64]) -> Result<Tensor> {
    let layout = spec.layout().clone();
    let carrier = Carrier::create(class, F32s::default(), layout.cosize(), spec.dtype(), true)?;
    for (ordinal, value) in values.iter().enumerate() {
        carrier.set(layout.index_of(ordinal)?, Value::Float(*value))?;
    }
    Tensor::new(carrier, 0, layout)
}

/// The elementwise result of `f` over the invocation's tensor operands.
fn compute(
    class: CarrierClass,
    operands: &[Tensor],
    spec: &ResultSpec,
    f: &dyn Fn(&[f64]) -> f64,
) -> Result<ProviderResult> {
    let columns: Vec<Vec<f64>> = operands.iter().map(floats).collect();
    let n = columns.first().map_or(0, Vec::len);
    let values: Vec<f64> = (0..n)
        .map(|i| f(&columns.iter().map(|c| c[i]).collect::<Vec<_>>()))
        .collect();
    ProviderResult::new([output(class, spec, &values)?])
}

fn tensors(invocation: &ResolvedInvocation) -> Vec<Tensor> {
    invocation
        .call()
        .operands()
        .iter()
        .filter_map(|o| o.as_tensor().cloned())
        .collect()
}

/// Prepared synchronous work computing `f` through `interface`.
fn kernel(
    class: CarrierClass,
    invocation: &ResolvedInvocation,
    interface: &InterfaceHandle,
    f: impl Fn(&[f64]) -> f64 + Send + 'static,
) -> Preparation {
    let operands = tensors(invocation);
    let spec = invocation.results()[0].clone();
    Preparation::Kernel(PreparedKernel::new(interface.clone(), move || {
        compute(class, &operands, &spec, &f).map(Submitted::Ready)
    }))
}

fn neg_pattern(class: CarrierClass, id: &str, preference: i64) -> KernelPattern {
    KernelPattern::new(
        &neg(),
        [neg_plan()],
        id,
        move |invocation, interface| Ok(kernel(class, invocation, interface, |x| -x[0])),
        preference,
    )
    .unwrap()
}

fn add_pattern(class: CarrierClass, id: &str, preference: i64) -> KernelPattern {
    KernelPattern::new(
        &add(),
        [add_plan()],
        id,
        move |invocation, interface| Ok(kernel(class, invocation, interface, |x| x[0] + x[1])),
        preference,
    )
    .unwrap()
}

fn call_neg(x: &Tensor) -> Result<Vec<Tensor>> {
    call("neg", [x.clone().into()], &[])
}

fn call_add(x: &Tensor, y: &Tensor) -> Result<Vec<Tensor>> {
    call("add", [x.clone().into(), y.clone().into()], &[])
}

fn unsupported_reasons(error: &Error) -> Vec<String> {
    match error {
        Error::UnsupportedOperationPlan(plan) => plan.reasons().to_vec(),
        other => panic!("expected UnsupportedOperationPlan, got {other:?}"),
    }
}

#[test]
fn the_module_and_the_crate_root_export_the_same_items() {
    let _: fn(KernelPack) -> Result<()> = extension::register_kernel_pack;
    let _: fn(extension::KernelPack) -> Result<()> = strideweave::register_kernel_pack;
    let _: Option<extension::KernelPattern> = None::<KernelPattern>;
    let _: Option<extension::KernelProvider> = None::<KernelProvider>;
}

#[test]
fn patterns_providers_and_packs_validate_their_fields() {
    let class = independent("ValidatedAccel");
    let decline = |_: &ResolvedInvocation, _: &InterfaceHandle| {
        Ok(Preparation::Unsupported(Unsupported::new("no")?))
    };
    let empty = KernelPattern::new(&neg(), [], "neg.k", decline, 0).unwrap_err();
    assert_eq!(empty.kind(), ErrorKind::Value);
    assert!(empty.to_string().contains("at least one plan"), "{empty}");
    let no_id = KernelPattern::new(&neg(), [neg_plan()], "", decline, 0).unwrap_err();
    assert_eq!(no_id.kind(), ErrorKind::Value);
    assert!(no_id.to_string().contains("kernel_id"), "{no_id}");
    let twice =
        KernelPattern::new(&neg(), [neg_plan(), neg_plan()], "neg.k", decline, 0).unwrap_err();
    assert_eq!(twice.kind(), ErrorKind::Value);
    assert!(twice.to_string().contains("duplicate plan"), "{twice}");
    let foreign = KernelPattern::new(&neg(), [add_plan()], "neg.k", decline, 0).unwrap_err();
    assert_eq!(foreign.kind(), ErrorKind::Value);
    assert!(foreign.to_string().contains("plan of 'add'"), "{foreign}");

    let pattern = KernelPattern::new(&neg(), [neg_plan()], "neg.k", decline, 3).unwrap();
    assert_eq!(pattern.kernel_id(), "neg.k");
    assert_eq!(pattern.preference(), 3);
    assert!(pattern.operation().same_as(&neg()));
    assert_eq!(pattern.plans(), [neg_plan()]);

    let duplicate =
        KernelProvider::new(cuda("12.0"), [pattern.clone(), pattern.clone()]).unwrap_err();
    assert_eq!(duplicate.kind(), ErrorKind::Value);
    assert!(duplicate.to_string().contains("'neg.k'"), "{duplicate}");
    let provider = KernelProvider::new(cuda("12.0"), [pattern.clone()]).unwrap();
    assert_eq!(provider.patterns().len(), 1);
    let definition = CarrierDefinition::new(f32_storage())
        .with_kernels(provider.clone())
        .unwrap();
    assert!(definition.kernels().is_some());
    assert_eq!(
        definition.with_kernels(provider).unwrap_err().kind(),
        ErrorKind::Type
    );

    let pack = |ns: &str, version: &str, patterns: Vec<KernelPattern>| {
        KernelPack::new(ns, version, class, cuda("12.0"), patterns)
    };
    for (ns, version, patterns, needle) in [
        ("", "1", vec![pattern.clone()], "namespace"),
        ("vendor", "", vec![pattern.clone()], "version"),
        ("vendor", "1", vec![], "at least one pattern"),
        (
            "vendor",
            "1",
            vec![pattern.clone(), pattern.clone()],
            "duplicate kernel_id 'neg.k'",
        ),
    ] {
        let error = pack(ns, version, patterns).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value, "{error}");
        assert!(error.to_string().contains(needle), "{error}");
    }
    let built = pack("vendor", "1", vec![pattern]).unwrap();
    assert_eq!((built.namespace(), built.version()), ("vendor", "1"));
    assert_eq!(built.carrier_class(), class);
    assert_eq!(built.interface().identity(), cuda("12.0").identity());
}

#[test]
fn add_a_pack_before_construction() -> Result<()> {
    let class = independent("PackedAccel");
    define(
        class,
        cuda("12.0"),
        vec![neg_pattern(class, "neg.builtin", 0)],
    );
    let pack = KernelPack::new(
        "vendor",
        "1.0",
        class,
        cuda("12.0"),
        [add_pattern(class, "add.vendor", 0)],
    )?;
    register_kernel_pack(pack)?;

    // The first observation (construction) freezes provider + pack patterns as one set.
    let x = tensor(class, &[1.0, -2.0, 3.5])?;
    let y = tensor(class, &[10.0, 20.0, 30.0])?;
    let expected = sorted(vec![neg_plan(), add_plan()]);
    assert_eq!(x.carrier().capabilities().to_vec(), expected);
    assert_eq!(capabilities_for_carrier_class(class).to_vec(), expected);

    let negated = call_neg(&x)?;
    assert_eq!(floats(&negated[0]), [-1.0, 2.0, -3.5]);
    assert_eq!(negated[0].carrier().class(), class);
    let sum = call_add(&x, &y)?;
    assert_eq!(floats(&sum[0]), [11.0, 18.0, 33.5]);

    // The frozen set is immutable: a later pack is refused.
    let late = KernelPack::new(
        "vendor",
        "2.0",
        class,
        cuda("12.0"),
        [add_pattern(class, "add.vendor2", 9)],
    )?;
    let error = register_kernel_pack(late).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("sealed"), "{error}");
    assert_eq!(x.carrier().capabilities().to_vec(), expected);
    Ok(())
}

#[test]
fn reject_a_late_pack() -> Result<()> {
    // Observed by construction.
    let class = independent("LateAccel");
    define(
        class,
        cuda("12.0"),
        vec![neg_pattern(class, "neg.builtin", 0)],
    );
    let x = tensor(class, &[1.0, 2.0])?;
    let late = KernelPack::new(
        "vendor",
        "1.0",
        class,
        cuda("12.0"),
        [add_pattern(class, "add.vendor", 0)],
    )?;
    let error = register_kernel_pack(late).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(
        error.to_string().ends_with(
            "KernelPack 'vendor' 1.0: LateAccel was already observed (constructed or \
             queried); its kernel set is sealed"
        ),
        "{error}"
    );
    assert_eq!(x.carrier().capabilities().to_vec(), [neg_plan()]);
    assert_eq!(floats(&call_neg(&x)?[0]), [-1.0, -2.0]);
    let refused = call_add(&x, &x).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotImplemented);
    assert_eq!(
        unsupported_reasons(&refused),
        ["LateAccel declares no operation-plan capability for 'add'"]
    );

    // Observed by a capability query alone.
    let queried = independent("QueriedAccel");
    define(
        queried,
        cuda("12.0"),
        vec![neg_pattern(queried, "neg.builtin", 0)],
    );
    assert_eq!(
        capabilities_for_carrier_class(queried).to_vec(),
        [neg_plan()]
    );
    let late = KernelPack::new(
        "vendor",
        "1.0",
        queried,
        cuda("12.0"),
        [add_pattern(queried, "add.vendor", 0)],
    )?;
    assert_eq!(
        register_kernel_pack(late).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!(
        capabilities_for_carrier_class(queried).to_vec(),
        [neg_plan()]
    );
    let y = tensor(queried, &[4.0])?;
    assert_eq!(
        call_add(&y, &y).unwrap_err().kind(),
        ErrorKind::NotImplemented
    );
    Ok(())
}

#[test]
fn attach_a_cuda_kernel_pack_only_to_cuda_and_reject_it_on_metal() -> Result<()> {
    let cuda_class = independent("CudaAccel");
    let metal_class = independent("MetalAccel");
    define(
        cuda_class,
        cuda("12.0"),
        vec![neg_pattern(cuda_class, "neg.cuda", 0)],
    );
    define(
        metal_class,
        metal("3.0"),
        vec![neg_pattern(metal_class, "neg.metal", 0)],
    );

    let cutlass = |class: CarrierClass, interface: InterfaceHandle| {
        KernelPack::new(
            "cutlass",
            "3.5",
            class,
            interface,
            [add_pattern(class, "add.cutlass", 0)],
        )
        .unwrap()
    };
    // The same pack naming Metal (with the CUDA interface), or CUDA with the Metal
    // interface or another CUDA interface version: Type, nothing attached.
    for (pack, needle) in [
        (
            cutlass(metal_class, cuda("12.0")),
            "does not match the MetalAccel provider",
        ),
        (
            cutlass(cuda_class, metal("3.0")),
            "does not match the CudaAccel provider",
        ),
        (cutlass(cuda_class, cuda("11.8")), "version '11.8'"),
    ] {
        let error = register_kernel_pack(pack).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type, "{error}");
        assert!(error.to_string().contains(needle), "{error}");
    }
    // The exact CUDA class with a matching interface (another instance, same identity).
    register_kernel_pack(cutlass(cuda_class, cuda("12.0")))?;
    // Duplicate identity, and a kernel id already in the set: Value, nothing attached.
    let again = register_kernel_pack(KernelPack::new(
        "cutlass",
        "3.5",
        cuda_class,
        cuda("12.0"),
        [neg_pattern(cuda_class, "neg.other", 0)],
    )?)
    .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Value);
    assert!(again.to_string().contains("already registered"), "{again}");
    let clash = register_kernel_pack(KernelPack::new(
        "other",
        "1",
        cuda_class,
        cuda("12.0"),
        [neg_pattern(cuda_class, "neg.cuda", 0)],
    )?)
    .unwrap_err();
    assert_eq!(clash.kind(), ErrorKind::Value);
    assert!(
        clash.to_string().contains("kernel_id 'neg.cuda'"),
        "{clash}"
    );

    let x = tensor(cuda_class, &[1.0, 2.0])?;
    assert_eq!(
        x.carrier().capabilities().to_vec(),
        sorted(vec![neg_plan(), add_plan()])
    );
    assert_eq!(floats(&call_add(&x, &x)?[0]), [2.0, 4.0]);

    let m = tensor(metal_class, &[1.0, 2.0])?;
    assert_eq!(m.carrier().capabilities().to_vec(), [neg_plan()]);
    assert_eq!(floats(&call_neg(&m)?[0]), [-1.0, -2.0]);
    let error = call_add(&m, &m).unwrap_err();
    assert_eq!(
        unsupported_reasons(&error),
        ["MetalAccel declares no operation-plan capability for 'add'"]
    );
    Ok(())
}

#[test]
fn reject_a_pack_on_a_composite_storage_only_undefined_or_shipped_class() -> Result<()> {
    let dependent = CarrierClass::mint("TiledAccel", ClassKind::Dependent);
    let storage_only = independent("StorageOnlyAccel");
    register_carrier_definition(storage_only, CarrierDefinition::new(f32_storage()))?;
    let undefined = independent("UndefinedAccel");
    let shipped = CarrierClass::of::<Cpu>();
    for (class, needle) in [
        (dependent, "TiledAccel is a dependent carrier class"),
        (
            storage_only,
            "StorageOnlyAccel is a storage-only carrier class",
        ),
        (undefined, "UndefinedAccel has no carrier definition"),
        (shipped, "is a shipped definition-free carrier class"),
    ] {
        let pack = KernelPack::new(
            "vendor",
            "1",
            class,
            cuda("12.0"),
            [add_pattern(class, "add.vendor", 0)],
        )?;
        let error = register_kernel_pack(pack).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type, "{error}");
        assert!(error.to_string().contains(needle), "{error}");
    }
    // The storage-only class still advertises and dispatches nothing.
    let x = tensor(storage_only, &[1.0])?;
    assert!(x.carrier().capabilities().is_empty());
    let error = call_neg(&x).unwrap_err();
    assert_eq!(
        unsupported_reasons(&error),
        ["StorageOnlyAccel declares no operation-plan capability for 'neg'"]
    );
    assert_eq!(
        x.carrier().dispatch_op("neg").unwrap_err().kind(),
        ErrorKind::NotImplemented
    );
    Ok(())
}

#[test]
fn reject_a_pack_naming_the_shipped_evictable_or_tiled_evictable_class() -> Result<()> {
    let evictable = CarrierClass::of::<strideweave::carriers::Evictable>();
    let tiled = strideweave::carriers::TiledEvictable::class()?;
    for (class, needle) in [
        (evictable, "Evictable is a dependent carrier class"),
        (tiled, "TiledEvictable is a dependent carrier class"),
    ] {
        let before = capabilities_for_carrier_class(class);
        let pack = KernelPack::new(
            "vendor",
            "1",
            class,
            cuda("12.0"),
            [add_pattern(class, "add.vendor", 0)],
        )?;
        let error = register_kernel_pack(pack).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type, "{error}");
        assert!(error.to_string().contains(needle), "{error}");
        // The refused pack leaves the class's reach as it was.
        assert_eq!(capabilities_for_carrier_class(class), before);
    }
    Ok(())
}

#[test]
fn prefer_an_optimized_kernel_with_fallback() -> Result<()> {
    let class = independent("AlignedAccel");
    let ran: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let (aligned_ran, general_ran) = (Arc::clone(&ran), Arc::clone(&ran));
    let aligned = KernelPattern::new(
        &neg(),
        [neg_plan()],
        "neg.aligned4",
        move |invocation, interface| {
            if invocation.call().tensor(0)?.size() % 4 != 0 {
                return Ok(Preparation::Unsupported(Unsupported::new(
                    "needs a multiple of 4 elements",
                )?));
            }
            let ran = Arc::clone(&aligned_ran);
            Ok(kernel(class, invocation, interface, move |x| {
                ran.lock().unwrap().push("aligned");
                -x[0]
            }))
        },
        10,
    )?;
    let general = KernelPattern::new(
        &neg(),
        [neg_plan()],
        "neg.general",
        move |invocation, interface| {
            let ran = Arc::clone(&general_ran);
            Ok(kernel(class, invocation, interface, move |x| {
                ran.lock().unwrap().push("general");
                -x[0]
            }))
        },
        0,
    )?;
    // Built-in order lists the general kernel first; preference still decides.
    define(class, cuda("12.0"), vec![general, aligned]);
    let before = capabilities_for_carrier_class(class).to_vec();
    assert_eq!(before, [neg_plan()]);

    let four = tensor(class, &[1.0, 2.0, 3.0, 4.0])?;
    assert_eq!(floats(&call_neg(&four)?[0]), [-1.0, -2.0, -3.0, -4.0]);
    assert_eq!(*ran.lock().unwrap(), ["aligned"; 4]);
    ran.lock().unwrap().clear();

    let three = tensor(class, &[1.0, 2.0, 3.0])?;
    assert_eq!(floats(&call_neg(&three)?[0]), [-1.0, -2.0, -3.0]);
    assert_eq!(*ran.lock().unwrap(), ["general"; 3]);
    assert_eq!(capabilities_for_carrier_class(class).to_vec(), before);
    assert_eq!(three.carrier().capabilities().to_vec(), before);
    Ok(())
}

#[test]
fn break_equal_preference_ties_deterministically_and_report_every_rejection() -> Result<()> {
    let class = independent("TieAccel");
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let declining = |id: &'static str, preference: i64| {
        let order = Arc::clone(&order);
        KernelPattern::new(
            &add(),
            [add_plan()],
            id,
            move |_, _| {
                order.lock().unwrap().push(id.to_string());
                Ok(Preparation::Unsupported(Unsupported::new(format!(
                    "{id} declines"
                ))?))
            },
            preference,
        )
        .unwrap()
    };
    define(
        class,
        cuda("12.0"),
        vec![declining("b1", 5), declining("low", -1), declining("b2", 5)],
    );
    // Registered out of identity order; candidates follow sorted (namespace, version).
    for (ns, version, patterns) in [
        (
            "zeta",
            "1",
            vec![declining("z1", 5), declining("z_high", 7)],
        ),
        ("alpha", "2", vec![declining("a2", 5)]),
        ("alpha", "1", vec![declining("a1a", 5), declining("a1b", 5)]),
    ] {
        register_kernel_pack(KernelPack::new(ns, version, class, cuda("12.0"), patterns)?)?;
    }
    let expected = ["z_high", "b1", "b2", "a1a", "a1b", "a2", "z1", "low"];
    let x = tensor(class, &[1.0])?;
    for _ in 0..2 {
        let version = x.version();
        let error = call_add(&x, &x).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotImplemented);
        let reasons: Vec<String> = expected
            .iter()
            .map(|id| format!("{id}: {id} declines"))
            .collect();
        assert_eq!(unsupported_reasons(&error), reasons);
        assert_eq!(
            error.to_string(),
            format!(
                "unsupported operation plan for 'add': {}",
                reasons.join("; ")
            )
        );
        assert_eq!(*order.lock().unwrap(), expected);
        assert_eq!(x.version(), version);
        order.lock().unwrap().clear();
    }
    Ok(())
}

#[test]
fn treat_a_preparation_exception_as_terminal() -> Result<()> {
    let class = independent("FailingAccel");
    let fallback_prepared = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&fallback_prepared);
    let failing = KernelPattern::new(
        &neg(),
        [neg_plan()],
        "neg.broken",
        |_, _| Err(Error::Runtime("JIT compiler crashed".into())),
        10,
    )?;
    let panicking = KernelPattern::new(
        &add(),
        [add_plan()],
        "add.panics",
        |_, _| panic!("compiler assertion"),
        10,
    )?;
    let fallback = KernelPattern::new(
        &neg(),
        [neg_plan()],
        "neg.fallback",
        move |invocation, interface| {
            flag.store(true, Ordering::SeqCst);
            Ok(kernel(class, invocation, interface, |x| -x[0]))
        },
        0,
    )?;
    define(
        class,
        cuda("12.0"),
        vec![
            failing,
            panicking,
            fallback,
            add_pattern(class, "add.general", 0),
        ],
    );
    let x = tensor(class, &[1.0, 2.0])?;
    let version = x.version();
    let error = call_neg(&x).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(
        error.to_string().contains("JIT compiler crashed"),
        "{error}"
    );
    assert!(!fallback_prepared.load(Ordering::SeqCst));
    let error = call_add(&x, &x).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    let Error::ProviderPanicked(panic) = &error else {
        panic!("a panicking prepare is reported as a provider panic: {error:?}");
    };
    assert_eq!(panic.callback(), "prepare");
    assert_eq!(panic.detail(), "compiler assertion");
    assert!(
        error
            .to_string()
            .contains("kernel pattern 'add.panics' of "),
        "{error}"
    );
    assert_eq!(x.version(), version);
    assert_eq!(floats(&x), [1.0, 2.0]);
    Ok(())
}

#[test]
fn prepare_a_jit_specialization() -> Result<()> {
    let class = independent("JitAccel");
    let provider_interface = cuda("12.0");
    let owned = provider_interface.clone();
    let compiled: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&compiled);
    let jit = KernelPattern::new(
        &add(),
        [add_plan()],
        "add.jit",
        move |invocation, interface| {
            // The exact provider interface instance, with its concrete facilities.
            assert!(interface.same_instance(&owned));
            let device = interface
                .downcast_ref::<CudaInterface>()
                .expect("the CUDA interface")
                .device;
            let n = invocation.call().tensor(0)?.size();
            log.lock()
                .unwrap()
                .push(format!("add specialized for n={n} on device {device}"));
            // "Compile": a closure capturing the specialization data.
            let bias = f64::from(device) * 0.0;
            let specialized = move |x: &[f64]| x[0] + x[1] + bias;
            Ok(kernel(class, invocation, interface, specialized))
        },
        0,
    )?;
    define(class, provider_interface, vec![jit]);
    let x = tensor(class, &[1.0, 2.0, 3.0])?;
    let y = tensor(class, &[0.5, 0.5, 0.5])?;
    let sum = call_add(&x, &y)?;
    assert_eq!(floats(&sum[0]), [1.5, 2.5, 3.5]);
    assert_eq!(
        *compiled.lock().unwrap(),
        ["add specialized for n=3 on device 7"]
    );
    Ok(())
}

#[test]
fn reject_a_prepared_kernel_for_another_interface_before_submission() -> Result<()> {
    let class = independent("MismatchAccel");
    let submitted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&submitted);
    let wrong = KernelPattern::new(
        &neg(),
        [neg_plan()],
        "neg.wrong_interface",
        move |_, _| {
            let flag = Arc::clone(&flag);
            Ok(Preparation::Kernel(PreparedKernel::new(
                cuda("11.8"),
                move || {
                    flag.store(true, Ordering::SeqCst);
                    Err(Error::Runtime("must not run".into()))
                },
            )))
        },
        0,
    )?;
    define(class, cuda("12.0"), vec![wrong]);
    let x = tensor(class, &[1.0])?;
    let error = call_neg(&x).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(
        error.to_string().contains("kernel 'neg.wrong_interface'"),
        "{error}"
    );
    assert!(!submitted.load(Ordering::SeqCst));
    Ok(())
}

/// A precompiled kernel entry point.
type Precompiled = fn(&[f64]) -> f64;

/// Precompiled kernels: a table selected by plan, with no compilation step.
fn precompiled_neg(x: &[f64]) -> f64 {
    -x[0]
}

fn precompiled_add(x: &[f64]) -> f64 {
    x[0] + x[1]
}

#[test]
fn use_a_precompiled_kernel_through_the_same_boundary() -> Result<()> {
    let class = independent("PrecompiledAccel");
    let table: Vec<(OperationCapability, Precompiled)> =
        vec![(neg_plan(), precompiled_neg), (add_plan(), precompiled_add)];
    let table = Arc::new(table);
    let selected = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&selected);
    let pattern = |operation: OperationDefinition, plan: OperationCapability, id: &str| {
        let table = Arc::clone(&table);
        let count = Arc::clone(&count);
        KernelPattern::new(
            &operation,
            [plan],
            id,
            move |invocation, interface| {
                let (_, f) = table
                    .iter()
                    .find(|(plan, _)| plan.matches(invocation.plan()))
                    .expect("a precompiled kernel");
                count.fetch_add(1, Ordering::SeqCst);
                Ok(kernel(class, invocation, interface, *f))
            },
            0,
        )
        .unwrap()
    };
    define(
        class,
        cuda("12.0"),
        vec![
            pattern(add(), add_plan(), "add.precompiled"),
            pattern(neg(), neg_plan(), "neg.precompiled"),
        ],
    );
    let x = tensor(class, &[2.0, -4.0])?;
    assert_eq!(floats(&call_neg(&x)?[0]), [-2.0, 4.0]);
    assert_eq!(floats(&call_add(&x, &x)?[0]), [4.0, -8.0]);
    assert_eq!(selected.load(Ordering::SeqCst), 2);
    assert_eq!(
        x.carrier().capabilities().to_vec(),
        sorted(vec![neg_plan(), add_plan()])
    );
    Ok(())
}

#[test]
fn complete_a_jit_kernel_asynchronously() -> Result<()> {
    let class = independent("AsyncAccel");
    let asynchronous = |id: &str, fail: bool| {
        KernelPattern::new(
            &neg(),
            [neg_plan()],
            id,
            move |invocation, interface| {
                let operands = tensors(invocation);
                let spec = invocation.results()[0].clone();
                Ok(Preparation::Kernel(PreparedKernel::new(
                    interface.clone(),
                    move || {
                        let cell = CompletionCell::new();
                        let worker = cell.clone();
                        thread::spawn(move || {
                            thread::sleep(Duration::from_millis(20));
                            let outcome = if fail {
                                Err(Error::Runtime("device fault".into()))
                            } else {
                                compute(class, &operands, &spec, &|x| -x[0])
                            };
                            worker.complete(outcome);
                        });
                        Ok(Submitted::pending(cell))
                    },
                )))
            },
            0,
        )
        .unwrap()
    };
    define(class, cuda("12.0"), vec![asynchronous("neg.async", false)]);
    let x = tensor(class, &[1.0, -2.0, 3.0])?;
    let negated = call_neg(&x)?;
    assert_eq!(floats(&negated[0]), [-1.0, 2.0, -3.0]);

    let failing = independent("AsyncFailingAccel");
    define(failing, cuda("12.0"), vec![asynchronous("neg.async", true)]);
    let y = tensor(failing, &[1.0])?;
    let error = call_neg(&y).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("device fault"), "{error}");
    Ok(())
}
