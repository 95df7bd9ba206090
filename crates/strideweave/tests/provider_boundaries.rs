//! Where a provider's reach ends and the framework's begins: factories check the extent a
//! provider made as construction does, a result over an operand's storage is the provider's
//! violation unless declared, operations a provider runs inside its callbacks record no graph,
//! a dependent carrier dispatches only within its reach, and a released operand is refused
//! before any alias or recording rule.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{f32_storage, F32s};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind, DefinitionFreeCarrier};
use strideweave::carriers::extension::{
    CompositePreparation, Preparation, PreparedComposite, PreparedKernel, ProviderResult, Submitted,
};
use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, define_operation, operation_definition, resolve_operation_plan, Arithmetic,
    BoundOperationCall, OperandKind, OperandPlan, OperandSpec, OperationCapability, OperationPlan,
    OperationSchema, PlanOperand, ResolvedInvocation, ResultSpec, Vjp,
};
use strideweave::{
    ops, register_carrier_definition, CarrierDefinition, CompositeProvider, DType, Error,
    ErrorKind, KernelPattern, KernelProvider, Result, Shape, StorageProvider, Tensor, Value,
};

fn f32_tensor(class: CarrierClass, xs: &[f32]) -> Result<Tensor> {
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
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn plan_of(name: &str, operands: &[PlanOperand]) -> OperationCapability {
    OperationCapability::from_plan(resolve_operation_plan(name, operands, None).unwrap())
}

fn neg_plan() -> OperationCapability {
    plan_of("neg", &[PlanOperand::Tensor(DType::FLOAT32)])
}

/// A kernel-backed class named `name` whose one `neg` pattern submits `kernel`.
fn neg_class(
    name: &str,
    kernel: impl Fn(&ResolvedInvocation) -> Result<Tensor> + Send + Sync + Clone + 'static,
) -> CarrierClass {
    let class = CarrierClass::mint(name, ClassKind::Independent);
    let pattern = KernelPattern::new(
        &operation_definition("neg").unwrap(),
        [neg_plan()],
        "neg.boundary",
        move |invocation, interface| {
            let invocation = invocation.clone();
            let kernel = kernel.clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    Ok(Submitted::Ready(ProviderResult::new([kernel(
                        &invocation,
                    )?])?))
                },
            )))
        },
        0,
    )
    .unwrap();
    let definition = CarrierDefinition::new(f32_storage())
        .with_kernels(KernelProvider::with_default_interface([pattern]).unwrap())
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
    class
}

// ---- Factories validate what construction validates ----------------------------------------

/// A definition-free carrier whose factories make `lie` more (or fewer) slots than asked.
#[derive(Debug)]
struct Liar {
    values: Mutex<Vec<Value>>,
    lie: isize,
    releases: Arc<AtomicUsize>,
}

impl Liar {
    fn sized(&self, slots: usize) -> Liar {
        Liar {
            values: Mutex::new(vec![
                Value::Float(0.0);
                slots.saturating_add_signed(self.lie)
            ]),
            lie: self.lie,
            releases: Arc::clone(&self.releases),
        }
    }
}

impl DefinitionFreeCarrier for Liar {
    const NAME: &'static str = "Liar";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }
    fn size(&self) -> usize {
        self.values.lock().unwrap().len()
    }
    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        Ok(self.values.lock().unwrap()[index])
    }
    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.values.lock().unwrap()[index] = value;
        Ok(())
    }
    fn release(&self) -> Result<()> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        let made = self.sized(values.len());
        for (slot, value) in made.values.lock().unwrap().iter_mut().zip(values) {
            *slot = *value;
        }
        Ok(made)
    }
    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Ok(self.sized(size))
    }
}

#[test]
fn definition_free_factories_refuse_a_carrier_of_another_extent() -> Result<()> {
    for lie in [1, -1, -3] {
        let releases = Arc::new(AtomicUsize::new(0));
        let body = Liar {
            values: Mutex::new(vec![Value::Float(1.0), Value::Float(2.0)]),
            lie,
            releases: Arc::clone(&releases),
        };
        let template = Carrier::new(body, DType::FLOAT32, true)?;
        template.set(0, Value::Float(5.0))?;
        let version = template.version();
        let values = [Value::Float(7.0); 4];
        for (callback, made) in [
            ("new_like", template.new_like(&values, true, None)),
            (
                "allocate_like",
                template.allocate_like(4, true, None, false),
            ),
        ] {
            let error = made.unwrap_err();
            assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
            let reported = 4 + lie;
            let message = error.to_string();
            assert!(
                message.contains(&format!("Liar.{callback}"))
                    && message.contains("asked for 4 slots")
                    && message.contains(&format!("carrier of {reported}")),
                "{message}"
            );
        }
        // Each refused body was released exactly once; the template is as it was.
        assert_eq!(releases.load(Ordering::SeqCst), 2, "lie {lie}");
        assert_eq!(template.version(), version);
        assert_eq!(
            (template.get(0)?, template.get(1)?),
            (Value::Float(5.0), Value::Float(2.0))
        );
        assert!(!template.is_released());
    }
    Ok(())
}

#[test]
fn definition_backed_factories_refuse_a_lying_physical_size() -> Result<()> {
    for lie in [1i64, -1, -3] {
        let lying = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let releases = Arc::new(AtomicUsize::new(0));
        let (flag, released) = (Arc::clone(&lying), Arc::clone(&releases));
        let storage = StorageProvider::new(
            |_: &F32s, dtype| dtype == DType::FLOAT32,
            move |state: &F32s| {
                let extra = if flag.load(Ordering::SeqCst) { lie } else { 0 };
                state.0.len() as i64 + extra
            },
            |state: &mut F32s, slots, _| {
                state.0 = vec![0.0; slots];
                Ok(())
            },
            move |state: &mut F32s| {
                released.fetch_add(1, Ordering::SeqCst);
                state.0.clear();
                Ok(())
            },
            |state: &F32s, index| Ok(Value::Float(f64::from(state.0[index]))),
            |state: &mut F32s, index, value| {
                state.0[index] = value.as_f64().unwrap_or(0.0) as f32;
                Ok(())
            },
        );
        let class = CarrierClass::mint(&format!("LyingSize{}", lie + 3), ClassKind::Independent);
        register_carrier_definition(class, CarrierDefinition::new(storage))?;
        let template = f32_tensor(class, &[1.0, 2.0])?;
        let version = template.version();
        lying.store(true, Ordering::SeqCst);
        let expected = format!("physical_size reports {}", 4 + lie);
        for made in [
            template
                .carrier()
                .new_like(&[Value::Float(3.0); 4], true, None),
            template.carrier().allocate_like(4, true, None, false),
        ] {
            let error = made.unwrap_err();
            assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("LyingSize{}", lie + 3))
                    && message.contains("allocate 4 slots")
                    && message.contains(&expected),
                "{message}"
            );
        }
        lying.store(false, Ordering::SeqCst);
        assert_eq!(
            releases.load(Ordering::SeqCst),
            2,
            "each refused carrier released once"
        );
        assert_eq!(template.version(), version);
        assert_eq!(floats(&template), [1.0, 2.0]);
    }
    Ok(())
}

// ---- A result that shares storage with an operand ------------------------------------------

#[test]
fn a_kernel_result_over_an_operands_storage_is_refused_unless_declared() -> Result<()> {
    // A fresh tensor object over the operand's carrier: not the operand, the same storage.
    let class = neg_class("ViewReturning", |invocation| {
        let x = invocation.call().tensor(0)?;
        Tensor::new(
            x.carrier().clone(),
            0,
            invocation.results()[0].layout().clone(),
        )
    });
    let x = f32_tensor(class, &[1.0, -2.0])?;
    let version = x.version();
    let error = ops::neg(&x).unwrap_err();
    assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
    assert!(
        error.to_string().contains("shares storage with operand 0"),
        "{error}"
    );
    assert_eq!((x.version(), floats(&x)), (version, vec![1.0, -2.0]));
    Ok(())
}

#[test]
fn a_composite_result_over_an_operands_storage_is_refused() -> Result<()> {
    let class = CarrierClass::mint("ViewComposite", ClassKind::Dependent);
    let provider = CompositeProvider::new(
        |_: &Carrier| Ok(vec![neg_plan()]),
        move |carrier: &Carrier, _: &ResolvedInvocation| Ok(vec![carrier.class()]),
        |_: &Carrier, invocation: &ResolvedInvocation| {
            let x = invocation.call().tensor(0)?.clone();
            let layout = invocation.results()[0].layout().clone();
            Ok(CompositePreparation::Composite(PreparedComposite::new(
                move || {
                    let view = Tensor::new(x.carrier().clone(), 0, layout)?;
                    Ok(Submitted::Ready(ProviderResult::new([view])?))
                },
            )))
        },
    );
    let definition = CarrierDefinition::new(f32_storage()).with_composite(provider)?;
    register_carrier_definition(class, definition)?;
    let x = f32_tensor(class, &[3.0])?;
    let error = ops::neg(&x).unwrap_err();
    assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
    assert!(
        error.to_string().contains("shares storage with operand 0"),
        "{error}"
    );
    assert_eq!(floats(&x), [3.0]);
    Ok(())
}

/// The Float32 plan of a one-operand operation `name`.
fn unary_plan(name: &str) -> Result<OperationPlan> {
    OperationPlan::new(
        name,
        [OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?],
        Arithmetic::Binary32,
        None,
        None,
        DType::FLOAT32,
    )
}

/// Defines `name(x)`, a differentiable operation whose one result is declared an alias of `x`
/// with the layout `view` gives for `x` (gradients pass through).
fn aliasing_operation(
    name: &str,
    view: fn(&Tensor) -> Result<strideweave::Layout>,
) -> strideweave::operation::OperationDefinition {
    let schema = OperationSchema::new(
        [OperandSpec::new("x", OperandKind::Tensor, true).unwrap()],
        [],
    )
    .unwrap();
    let resolve = move |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let result = ResultSpec::new(DType::FLOAT32, view(call.tensor(0)?)?).aliasing(0);
        ResolvedInvocation::new(
            call.clone(),
            unary_plan(call.definition().name())?,
            [result],
            [],
            None,
        )
    };
    let vjp = Vjp::rule(|_, cotangents| Ok(cotangents.to_vec()));
    define_operation(name, schema, resolve, None, vjp).unwrap()
}

/// `views.first(x)`: a view of the first element of `x`.
fn first_element_view() -> strideweave::operation::OperationDefinition {
    static DEFINITION: std::sync::OnceLock<strideweave::operation::OperationDefinition> =
        std::sync::OnceLock::new();
    *DEFINITION.get_or_init(|| aliasing_operation("views.first", |_| Ok("1:1".parse()?)))
}

#[test]
fn a_declared_view_of_an_operand_is_published() -> Result<()> {
    let operation = first_element_view();
    let plan = unary_plan(operation.name())?;
    let class = CarrierClass::mint("DeclaredView", ClassKind::Independent);
    let pattern = KernelPattern::new(
        &operation,
        [OperationCapability::from_plan(plan)],
        "views.first",
        |invocation, interface| {
            let x = invocation.call().tensor(0)?.clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let view = Tensor::new(x.carrier().clone(), 0, "1:1".parse()?)?;
                    Ok(Submitted::Ready(ProviderResult::new([view])?))
                },
            )))
        },
        0,
    )?;
    let definition = CarrierDefinition::new(f32_storage())
        .with_kernels(KernelProvider::with_default_interface([pattern])?)?;
    register_carrier_definition(class, definition)?;
    let x = f32_tensor(class, &[4.0, 5.0])?;
    let view = call("views.first", [x.clone().into()], &[])?.remove(0);
    assert!(view.carrier().same_as(x.carrier()));
    assert_eq!(floats(&view), [4.0]);
    x.carrier().set(0, Value::Float(9.0))?;
    assert_eq!(
        floats(&view),
        [9.0],
        "the result is a view of the operand's storage"
    );
    Ok(())
}

/// `views.same(x)`: `x` itself.
fn same_operation() -> strideweave::operation::OperationDefinition {
    static DEFINITION: std::sync::OnceLock<strideweave::operation::OperationDefinition> =
        std::sync::OnceLock::new();
    *DEFINITION.get_or_init(|| aliasing_operation("views.same", |x| Ok(x.layout().clone())))
}

#[test]
fn an_exact_alias_leaves_its_operands_autograd_state_alone() -> Result<()> {
    let same = same_operation();
    let plan = unary_plan(same.name())?;
    let echo = KernelPattern::new(
        &same,
        [OperationCapability::from_plan(plan)],
        "views.same",
        |invocation, interface| {
            let x = invocation.call().tensor(0)?.clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || Ok(Submitted::Ready(ProviderResult::new([x])?)),
            )))
        },
        0,
    )?;
    let negate = KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()],
        "neg",
        |invocation, interface| {
            let x = invocation.call().tensor(0)?.clone();
            let layout = invocation.results()[0].layout().clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let values: Vec<f32> = floats(&x).iter().map(|v| -*v as f32).collect();
                    let out = f32_tensor(x.carrier().class(), &values)?;
                    let out = Tensor::new(out.carrier().clone(), 0, layout)?;
                    Ok(Submitted::Ready(ProviderResult::new([out])?))
                },
            )))
        },
        0,
    )?;
    let class = CarrierClass::mint("ExactAlias", ClassKind::Independent);
    let definition = CarrierDefinition::new(f32_storage())
        .with_kernels(KernelProvider::with_default_interface([echo, negate])?)?;
    register_carrier_definition(class, definition)?;
    let w = f32_tensor(class, &[1.0, 2.0])?;
    w.set_requires_grad(true)?;
    let x = ops::neg(&w)?;
    let node = x.grad_fn().expect("neg recorded a node");
    {
        let _off = strideweave::autograd::no_grad();
        let y = call("views.same", [x.clone().into()], &[])?.remove(0);
        assert!(y.same_as(&x));
    }
    assert!(
        x.grad_fn().is_some_and(|n| n.same_as(&node)),
        "the operand keeps its node"
    );
    // Under recording the operand object itself cannot take a node: refused, nothing changed.
    let error = call("views.same", [x.clone().into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(
        error.to_string().contains("returns its operand 0 itself"),
        "{error}"
    );
    assert!(x.grad_fn().is_some_and(|n| n.same_as(&node)));
    Ok(())
}

// ---- Provider callbacks record no graph ----------------------------------------------------

#[test]
fn operations_inside_a_kernels_submit_record_nothing() -> Result<()> {
    let inner: Arc<Mutex<Option<Tensor>>> = Arc::default();
    let seen = Arc::clone(&inner);
    let class = neg_class("ScratchAdding", move |invocation| {
        // Scratch work on CPU tensors that ask for gradients, under the caller's grad mode.
        let a = Tensor::compact(Cpu::from_f32(&[1.0, 2.0], true)?, Shape::new(2)?)?;
        a.set_requires_grad(true)?;
        let sum = ops::add(&a, &a)?;
        *seen.lock().unwrap() = Some(sum);
        let x = invocation.call().tensor(0)?;
        let values: Vec<f64> = floats(x).iter().map(|v| -v).collect();
        let out = Carrier::create(
            x.carrier().class(),
            F32s::default(),
            values.len(),
            DType::FLOAT32,
            true,
        )?;
        for (i, v) in values.iter().enumerate() {
            out.set(i, Value::Float(*v))?;
        }
        Tensor::new(out, 0, invocation.results()[0].layout().clone())
    });
    let x = f32_tensor(class, &[1.0, 2.0])?;
    x.set_requires_grad(true)?;
    let y = ops::neg(&x)?;
    assert_eq!(floats(&y), [-1.0, -2.0]);
    assert!(y.grad_fn().is_some(), "the outer call records its node");
    let sum = inner.lock().unwrap().take().expect("the kernel ran");
    assert_eq!(floats(&sum), [2.0, 4.0]);
    assert!(
        sum.grad_fn().is_none(),
        "an operation inside a provider callback records no node"
    );
    assert!(strideweave::autograd::is_grad_enabled());
    Ok(())
}

// ---- A dependent carrier dispatches within its reach ---------------------------------------

#[test]
fn a_dependent_carriers_dispatch_op_outside_its_reach_is_an_unsupported_plan() -> Result<()> {
    let class = CarrierClass::mint("NegOnlyComposite", ClassKind::Dependent);
    let provider = CompositeProvider::new(
        |_: &Carrier| Ok(vec![neg_plan()]),
        |carrier: &Carrier, _: &ResolvedInvocation| Ok(vec![carrier.class()]),
        |_: &Carrier, _: &ResolvedInvocation| {
            Ok(CompositePreparation::Unsupported(
                strideweave::Unsupported::new("not in this test")?,
            ))
        },
    );
    register_carrier_definition(
        class,
        CarrierDefinition::new(f32_storage()).with_composite(provider)?,
    )?;
    let x = f32_tensor(class, &[1.0])?;
    assert!(x.carrier().dispatch_op("neg").is_ok());
    let error = x.carrier().dispatch_op("matmul").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    let Error::UnsupportedOperationPlan(plan) = &error else {
        panic!("expected UnsupportedOperationPlan, got {error:?}");
    };
    assert_eq!(plan.operation(), "matmul");
    assert_eq!(plan.reasons().len(), 1);
    assert!(
        plan.reasons()[0] == "NegOnlyComposite declares no operation-plan capability for 'matmul'",
        "{:?}",
        plan.reasons()
    );
    // An unknown name is still NotImplemented, not a plan refusal.
    let unknown = x.carrier().dispatch_op("no_such_operation").unwrap_err();
    assert!(matches!(unknown, Error::NotImplemented(_)), "{unknown:?}");
    Ok(())
}

// ---- Order of refusals ---------------------------------------------------------------------

#[test]
fn a_released_operand_is_refused_before_the_alias_and_recording_rules() -> Result<()> {
    first_element_view();
    let x = Tensor::compact(Cpu::from_f32(&[1.0, 2.0], true)?, Shape::new(2)?)?;
    x.set_requires_grad(true)?;
    x.carrier().release()?;
    // Under recording, an alias result would be refused as unrecordable; the released
    // operand is reported first.
    let error = call("views.first", [x.clone().into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(
        error.to_string().contains("released") && error.to_string().contains("views.first"),
        "{error}"
    );
    Ok(())
}
