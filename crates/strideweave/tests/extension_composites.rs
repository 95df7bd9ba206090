//! Composite providers on definition-backed dependent carriers (carrier-extension spec,
//! "Independent and dependent definitions have distinct execution ownership"): registration
//! rules, per-instance capability snapshots frozen at construction, result-carrier validation
//! before preparation, `Unsupported` rejection, and synchronous and pending composite work
//! composed from a definition-free CPU dependency.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{f32_storage, F32s};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    self, carrier_definition, CompletionCell, CompositePreparation, InterfaceHandle,
    PreparedComposite, ProviderResult, Submitted,
};
use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, resolve_operation_plan, Operand, OperationCapability, PlanOperand, ResolvedInvocation,
};
use strideweave::{
    register_carrier_definition, CarrierDefinition, CompositeProvider, DType, Error, ErrorKind,
    KernelExecutionInterface, KernelProvider, Result, Shape, StorageProvider, Tensor, Unsupported,
    Value,
};

/// The provider-owned state of the test composites: the dependency carrier the instance is
/// configured over, and the dependency-class carrier holding its slots.
#[derive(Clone)]
struct Tiers {
    dependency: Carrier,
    slots: Option<Carrier>,
}

impl Tiers {
    fn over(dependency: Carrier) -> Tiers {
        Tiers {
            dependency,
            slots: None,
        }
    }

    fn slots(&self) -> Result<&Carrier> {
        self.slots
            .as_ref()
            .ok_or_else(|| Error::Runtime("the composite has no slots".to_string()))
    }
}

/// Storage delegating every slot to a carrier of the dependency's class.
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

fn cpu() -> CarrierClass {
    CarrierClass::of::<Cpu>()
}

fn dependency(carrier: &Carrier) -> Result<Carrier> {
    carrier.with_provider_state(|state: &Tiers| state.dependency.clone())
}

/// The capabilities callback: the `offered` plans the instance's dependency executes, asked
/// through the dependency's public capability query.
fn derived(
    offered: Vec<OperationCapability>,
) -> impl Fn(&Carrier) -> Result<Vec<OperationCapability>> + Send + Sync + 'static {
    move |carrier| {
        let dependency = dependency(carrier)?;
        Ok(offered
            .iter()
            .filter(|plan| dependency.supports_operation_plan(plan.plan()))
            .cloned()
            .collect())
    }
}

/// Every result lives on the CPU dependency class.
fn on_cpu(_: &Carrier, invocation: &ResolvedInvocation) -> Result<Vec<CarrierClass>> {
    Ok(vec![cpu(); invocation.results().len()])
}

/// The invocation's tensor operands viewed on the dependency carriers holding their slots.
fn dependency_operands(invocation: &ResolvedInvocation) -> Result<Vec<Operand>> {
    invocation
        .call()
        .operands()
        .iter()
        .filter_map(Operand::as_tensor)
        .map(|t| {
            let slots = t
                .carrier()
                .with_provider_state(|state: &Tiers| state.slots.clone())?
                .ok_or_else(|| Error::Runtime("released composite operand".to_string()))?;
            Ok(Tensor::new(slots, t.offset(), t.layout().clone())?.into())
        })
        .collect()
}

/// Runs the invocation's operation on the dependency through its public dispatch.
fn run_on_dependency(name: &str, operands: Vec<Operand>) -> Result<ProviderResult> {
    ProviderResult::new(call(name, operands, &[])?)
}

/// Synchronous composite preparation: the operation runs on the dependency at submission.
fn delegate(_: &Carrier, invocation: &ResolvedInvocation) -> Result<CompositePreparation> {
    let name = invocation.call().definition().name().to_string();
    let operands = dependency_operands(invocation)?;
    Ok(CompositePreparation::Composite(PreparedComposite::new(
        move || run_on_dependency(&name, operands).map(Submitted::Ready),
    )))
}

fn delegating(offered: Vec<OperationCapability>) -> CompositeProvider {
    CompositeProvider::new(derived(offered), on_cpu, delegate)
}

fn composite_class(name: &str, provider: CompositeProvider) -> CarrierClass {
    let class = CarrierClass::mint(name, ClassKind::Dependent);
    let definition = CarrierDefinition::new(tiers_storage())
        .with_composite(provider)
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
    class
}

fn cpu_dependency() -> Result<Carrier> {
    Cpu::from_f32(&[], true)
}

/// A Float32 tensor of the composite `class` over `dependency`, holding `xs`.
fn tensor_over(class: CarrierClass, dependency: Carrier, xs: &[f32]) -> Result<Tensor> {
    let carrier = Carrier::create(
        class,
        Tiers::over(dependency),
        xs.len(),
        DType::FLOAT32,
        true,
    )?;
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

fn interface() -> InterfaceHandle {
    InterfaceHandle::new(KernelExecutionInterface::new("1.0").unwrap()).unwrap()
}

#[test]
fn the_module_and_the_crate_root_export_the_same_provider() {
    let module: fn(Vec<OperationCapability>) -> extension::CompositeProvider = delegating;
    let root: fn(Vec<OperationCapability>) -> CompositeProvider = module;
    let provider = root(vec![neg_plan()]);
    assert!(format!("{provider:?}").contains("CompositeProvider"));
}

#[test]
fn reject_kernels_on_a_dependent_carrier() -> Result<()> {
    let class = CarrierClass::mint("KernelTiles", ClassKind::Dependent);
    let kernels = KernelProvider::new(interface(), [])?;
    for definition in [
        CarrierDefinition::new(tiers_storage()).with_kernels(kernels.clone())?,
        CarrierDefinition::new(tiers_storage())
            .with_kernels(kernels.clone())?
            .with_composite(delegating(vec![neg_plan()]))?,
    ] {
        let error = register_carrier_definition(class, definition).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type, "{error}");
        assert!(error.to_string().contains("kernel provider"), "{error}");
        assert!(!class.is_definition_backed());
        assert!(carrier_definition(class).is_none());
    }
    // Nothing was published: a valid composite definition still registers.
    let definition =
        CarrierDefinition::new(tiers_storage()).with_composite(delegating(vec![neg_plan()]))?;
    register_carrier_definition(class, definition)?;
    assert!(class.is_definition_backed());
    Ok(())
}

#[test]
fn reject_a_composite_on_an_independent_carrier() -> Result<()> {
    let class = CarrierClass::mint("CompositeAccel", ClassKind::Independent);
    let definition =
        CarrierDefinition::new(f32_storage()).with_composite(delegating(vec![neg_plan()]))?;
    let error = register_carrier_definition(class, definition).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type, "{error}");
    assert!(error.to_string().contains("composite"), "{error}");
    assert!(!class.is_definition_backed());
    assert!(carrier_definition(class).is_none());

    // One composite per definition.
    let error = CarrierDefinition::new(f32_storage())
        .with_composite(delegating(vec![]))?
        .with_composite(delegating(vec![]))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    Ok(())
}

#[test]
fn compose_a_definition_free_compute_carrier() -> Result<()> {
    let class = composite_class("CpuTiles", delegating(vec![neg_plan(), add_plan()]));
    let x = tensor_over(class, cpu_dependency()?, &[1.0, -2.0, 3.0])?;
    let y = tensor_over(class, cpu_dependency()?, &[10.0, 20.0, 30.0])?;
    assert_eq!(
        x.carrier().capabilities().to_vec(),
        sorted(vec![neg_plan(), add_plan()])
    );
    assert!(x.carrier().supports_operation_plan(neg_plan().plan()));

    let sum = call("add", [x.clone().into(), y.clone().into()], &[])?;
    assert_eq!(sum.len(), 1);
    assert_eq!(sum[0].carrier().class(), cpu());
    assert_eq!(floats(&sum[0]), [11.0, 18.0, 33.0]);
    let negated = call("neg", [x.clone().into()], &[])?;
    assert_eq!(negated[0].carrier().class(), cpu());
    assert_eq!(floats(&negated[0]), [-1.0, 2.0, -3.0]);

    // The operands are untouched, and the CPU dependency class gained no definition.
    assert_eq!(floats(&x), [1.0, -2.0, 3.0]);
    assert_eq!(x.carrier().version(), 3);
    assert!(carrier_definition(cpu()).is_none());
    assert!(!cpu().is_definition_backed());
    Ok(())
}

#[test]
fn two_instances_derive_different_reach_from_their_dependencies() -> Result<()> {
    let class = composite_class("ReachTiles", delegating(vec![neg_plan()]));
    let storage_only = CarrierClass::mint("InertAccel", ClassKind::Independent);
    register_carrier_definition(storage_only, CarrierDefinition::new(f32_storage()))?;
    let inert = Carrier::create(storage_only, F32s::default(), 0, DType::FLOAT32, true)?;

    let computing = tensor_over(class, cpu_dependency()?, &[1.0, 2.0])?;
    let idle = tensor_over(class, inert, &[1.0, 2.0])?;
    assert_eq!(computing.carrier().capabilities().to_vec(), [neg_plan()]);
    assert!(idle.carrier().capabilities().is_empty());
    // Each instance's snapshot is frozen: asking again answers the same.
    assert_eq!(computing.carrier().capabilities().to_vec(), [neg_plan()]);

    assert_eq!(
        floats(&call("neg", [computing.into()], &[])?[0]),
        [-1.0, -2.0]
    );
    let error = call("neg", [idle.clone().into()], &[]).unwrap_err();
    assert!(
        matches!(error, Error::UnsupportedOperationPlan(_)),
        "{error:?}"
    );
    assert!(error.to_string().contains("ReachTiles"), "{error}");
    assert!(idle
        .carrier()
        .unsupported_plan_reason(neg_plan().plan())
        .is_some());
    Ok(())
}

#[test]
fn reject_a_duplicate_capability_at_construction() -> Result<()> {
    let seen: Arc<Mutex<Option<Carrier>>> = Arc::default();
    let witness = Arc::clone(&seen);
    let provider = CompositeProvider::new(
        move |carrier: &Carrier| {
            *witness.lock().unwrap() = Some(carrier.clone());
            Ok(vec![neg_plan(), add_plan(), neg_plan()])
        },
        on_cpu,
        delegate,
    );
    let class = composite_class("DuplicateTiles", provider);
    let error = Carrier::create(
        class,
        Tiers::over(cpu_dependency()?),
        2,
        DType::FLOAT32,
        true,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(
        error.to_string().contains("duplicate capability"),
        "{error}"
    );
    // The callback saw the constructed carrier, which was released and never exposed.
    let constructed = seen.lock().unwrap().take().expect("capabilities ran");
    assert!(constructed.is_released());

    // A failing callback propagates the same way.
    let failing = composite_class(
        "FailingTiles",
        CompositeProvider::new(
            |_: &Carrier| Err(Error::Runtime("tier offline".to_string())),
            on_cpu,
            delegate,
        ),
    );
    let error = Carrier::create(
        failing,
        Tiers::over(cpu_dependency()?),
        2,
        DType::FLOAT32,
        true,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("tier offline"), "{error}");
    Ok(())
}

#[test]
fn reject_a_wrong_result_carrier_count_before_prepare() -> Result<()> {
    let prepared = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&prepared);
    let provider = CompositeProvider::new(
        derived(vec![neg_plan()]),
        |_: &Carrier, _: &ResolvedInvocation| Ok(vec![cpu(), cpu()]),
        move |carrier: &Carrier, invocation: &ResolvedInvocation| {
            counter.fetch_add(1, Ordering::SeqCst);
            delegate(carrier, invocation)
        },
    );
    let class = composite_class("MiscountTiles", provider);
    let x = tensor_over(class, cpu_dependency()?, &[1.0])?;
    let error = call("neg", [x.into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(error.to_string().contains("result carrier"), "{error}");
    assert_eq!(prepared.load(Ordering::SeqCst), 0);
    Ok(())
}

#[test]
fn results_must_live_on_the_declared_result_classes() -> Result<()> {
    let class = composite_class(
        "MisplacedTiles",
        CompositeProvider::new(
            derived(vec![neg_plan()]),
            |carrier: &Carrier, invocation: &ResolvedInvocation| {
                Ok(vec![carrier.class(); invocation.results().len()])
            },
            delegate,
        ),
    );
    let x = tensor_over(class, cpu_dependency()?, &[1.0])?;
    let error = call("neg", [x.into()], &[]).unwrap_err();
    assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
    assert!(
        error.to_string().contains("expected MisplacedTiles"),
        "{error}"
    );
    Ok(())
}

#[test]
fn reject_an_unsupported_composite_preparation() -> Result<()> {
    let class = composite_class(
        "PickyTiles",
        CompositeProvider::new(
            derived(vec![neg_plan()]),
            on_cpu,
            |_: &Carrier, _: &ResolvedInvocation| {
                Ok(CompositePreparation::Unsupported(Unsupported::new(
                    "tiles are cold",
                )?))
            },
        ),
    );
    let x = tensor_over(class, cpu_dependency()?, &[1.0, 2.0])?;
    let error = call("neg", [x.clone().into()], &[]).unwrap_err();
    assert!(
        matches!(error, Error::UnsupportedOperationPlan(_)),
        "{error:?}"
    );
    assert!(error.to_string().contains("tiles are cold"), "{error}");
    assert_eq!(floats(&x), [1.0, 2.0]);
    Ok(())
}

#[test]
fn finish_a_pending_composite_on_another_thread() -> Result<()> {
    let class = composite_class(
        "AsyncTiles",
        CompositeProvider::new(
            derived(vec![neg_plan()]),
            on_cpu,
            |_: &Carrier, invocation: &ResolvedInvocation| {
                let name = invocation.call().definition().name().to_string();
                let operands = dependency_operands(invocation)?;
                Ok(CompositePreparation::Composite(PreparedComposite::new(
                    move || {
                        let cell = CompletionCell::new();
                        let worker = cell.clone();
                        thread::spawn(move || {
                            thread::sleep(Duration::from_millis(20));
                            worker.complete(run_on_dependency(&name, operands));
                        });
                        Ok(Submitted::pending(cell))
                    },
                )))
            },
        ),
    );
    let x = tensor_over(class, cpu_dependency()?, &[1.5, -2.5])?;
    let negated = call("neg", [x.into()], &[])?;
    assert_eq!(negated[0].carrier().class(), cpu());
    assert_eq!(floats(&negated[0]), [-1.5, 2.5]);
    Ok(())
}
