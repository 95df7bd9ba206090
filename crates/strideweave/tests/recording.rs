//! Recording honours an operation's definition: which operands a node saves and
//! differentiates, when no node is recorded, results that view an operand's storage, and
//! saved tensors freed by `backward` unless the graph is retained.

use std::sync::Arc;

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    InterfaceHandle, Preparation, PreparedKernel, ProviderResult, StorageProvider, Submitted,
};
use strideweave::operation::{
    define_operation, Arithmetic, BoundOperationCall, OperandKind, OperandPlan, OperandSpec,
    OperationCapability, OperationDefinition, OperationPlan, OperationSchema, ResolvedInvocation,
    ResultSpec, Vjp,
};
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, ErrorKind,
    KernelExecutionInterface, KernelPattern, KernelProvider, Result, Shape, Tensor, Value,
};

/// Float32 storage whose instances may hold a marker, so a test can count the live ones.
#[derive(Default)]
struct Counted {
    values: Vec<f32>,
    marker: Option<Arc<()>>,
}

fn counted_storage() -> StorageProvider {
    StorageProvider::new(
        |_: &Counted, dtype| dtype == DType::FLOAT32,
        |state: &Counted| state.values.len() as i64,
        |state: &mut Counted, slots, _| {
            state.values = vec![0.0; slots];
            Ok(())
        },
        |state: &mut Counted| {
            state.values.clear();
            state.marker = None;
            Ok(())
        },
        |state: &Counted, index| Ok(Value::Float(f64::from(state.values[index]))),
        |state: &mut Counted, index, value| match value {
            Value::Float(x) => {
                state.values[index] = x as f32;
                Ok(())
            }
            other => Err(Error::Type(format!("Counted stores floats, not {other:?}"))),
        },
    )
}

fn floats(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .into_iter()
        .map(|v| v.as_f64().expect("a float"))
        .collect()
}

/// A compact Float32 tensor of `class` holding `xs`, its storage marked with `marker`.
fn tensor(class: CarrierClass, xs: &[f64], marker: Option<&Arc<()>>) -> Result<Tensor> {
    let state = Counted {
        values: Vec::new(),
        marker: marker.cloned(),
    };
    let carrier = Carrier::create(class, state, xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(*x))?;
    }
    Tensor::compact(carrier, Shape::new(xs.len())?)
}

/// The plan of a custom operation over `arity` Float32 tensors.
fn plan(name: &str, arity: usize) -> Result<OperationPlan> {
    let operands = (0..arity)
        .map(|_| OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32))
        .collect::<Result<Vec<_>>>()?;
    OperationPlan::new(
        name,
        operands,
        Arithmetic::Binary32,
        None,
        None,
        DType::FLOAT32,
    )
}

/// A custom operation over tensors `x` and `k` whose differentiability is `differentiable`,
/// saving `saved` for its rule `vjp`; its result has `x`'s shape.
fn binary(
    name: &str,
    differentiable: [bool; 2],
    saved: Vec<usize>,
    vjp: Vjp,
) -> Result<OperationDefinition> {
    let schema = OperationSchema::new(
        [
            OperandSpec::new("x", OperandKind::Tensor, differentiable[0])?,
            OperandSpec::new("k", OperandKind::Tensor, differentiable[1])?,
        ],
        [],
    )?;
    let resolve = move |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let x = call.tensor(0)?;
        ResolvedInvocation::new(
            call.clone(),
            plan(call.definition().name(), 2)?,
            [ResultSpec::canonical(DType::FLOAT32, x.shape().clone())],
            saved.clone(),
            None,
        )
    };
    define_operation(name, schema, resolve, None, vjp)
}

/// A kernel for `operation` (of `arity` tensors) computing `f` of the operands' values into
/// fresh storage of `class`.
fn pattern(
    class: CarrierClass,
    operation: &OperationDefinition,
    arity: usize,
    f: fn(&[Vec<f64>]) -> Vec<f64>,
) -> Result<KernelPattern> {
    KernelPattern::new(
        operation,
        [OperationCapability::from_plan(plan(
            operation.name(),
            arity,
        )?)],
        &format!("{}.kernel", operation.name()),
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let inputs = (0..arity)
                .map(|i| invocation.call().tensor(i).map(floats))
                .collect::<Result<Vec<_>>>()?;
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let result = compact(class, &f(&inputs))?;
                    let result = Tensor::new(result.carrier().clone(), 0, spec.layout().clone())?;
                    ProviderResult::new([result]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )
}

/// A compact tensor of `class` with `values` and no marker.
fn compact(class: CarrierClass, values: &[f64]) -> Result<Tensor> {
    tensor(class, values, None)
}

/// Registers `class` as kernel-backed over `Counted` storage with `patterns`.
fn define_class(class: CarrierClass, patterns: Vec<KernelPattern>) -> Result<()> {
    let interface = InterfaceHandle::new(KernelExecutionInterface::new("1")?)?;
    let provider = KernelProvider::new(interface, patterns)?;
    register_carrier_definition(
        class,
        CarrierDefinition::new(counted_storage()).with_kernels(provider)?,
    )
}

fn shift(values: &[Vec<f64>]) -> Vec<f64> {
    values[0]
        .iter()
        .zip(&values[1])
        .map(|(x, k)| x + k)
        .collect()
}

fn scale(values: &[Vec<f64>]) -> Vec<f64> {
    values[0]
        .iter()
        .zip(&values[1])
        .map(|(x, k)| x * k)
        .collect()
}

/// `own.shift(x, k) = x + k` with `k` declared non-differentiable and nothing saved: its rule
/// passes the cotangent through to `x` (one answer, for the one differentiable operand).
fn shift_class(tag: &str) -> Result<(CarrierClass, OperationDefinition)> {
    let class = CarrierClass::mint(&format!("Shift{tag}"), ClassKind::Independent);
    let operation = binary(
        &format!("own{tag}.shift"),
        [true, false],
        vec![],
        Vjp::rule(|_, cotangents| Ok(vec![cotangents[0].clone()])),
    )?;
    define_class(class, vec![pattern(class, &operation, 2, shift)?])?;
    Ok((class, operation))
}

/// `own.scale(x, k) = x · k` with `k` non-differentiable but saved for the rule `g · k`.
fn scale_class(tag: &str) -> Result<(CarrierClass, OperationDefinition)> {
    let class = CarrierClass::mint(&format!("Scale{tag}"), ClassKind::Independent);
    let operation = binary(
        &format!("own{tag}.scale"),
        [true, false],
        vec![1],
        Vjp::rule(move |context, cotangents| {
            let Some(g) = &cotangents[0] else {
                return Ok(vec![None]);
            };
            let k = floats(&context.saved_operands()[0]);
            let values: Vec<f64> = floats(g).iter().zip(&k).map(|(g, k)| g * k).collect();
            Ok(vec![Some(compact(class, &values)?)])
        }),
    )?;
    define_class(class, vec![pattern(class, &operation, 2, scale)?])?;
    Ok((class, operation))
}

fn call(operation: &OperationDefinition, x: &Tensor, k: &Tensor) -> Result<Tensor> {
    let mut outputs = operation.call(vec![x.clone().into(), k.clone().into()], &[])?;
    Ok(outputs.remove(0))
}

#[test]
fn a_non_differentiable_operand_gets_no_gradient_and_is_not_saved() -> Result<()> {
    let (class, shift) = shift_class("Unsaved")?;
    let x = compact(class, &[1.0, 2.0])?;
    let k = compact(class, &[10.0, 20.0])?;
    x.set_requires_grad(true)?;
    k.set_requires_grad(true)?;
    let y = call(&shift, &x, &k)?;
    assert_eq!(floats(&y), [11.0, 22.0]);
    let node = y.grad_fn().expect("a node");
    assert_eq!(node.name(), "ownUnsaved.shift");
    let inputs = node.inputs();
    assert_eq!(inputs.len(), 1, "only the differentiable operand is saved");
    assert!(inputs[0].same_as(&x));
    assert_eq!(node.input_versions(), [(x.carrier().id(), x.version())]);

    // Writing the unsaved operand in place does not invalidate the graph.
    k.carrier().set(0, Value::Float(-5.0))?;
    let g = compact(class, &[0.5, 4.0])?;
    y.backward(Some(&g), false)?;
    assert_eq!(floats(&x.grad().expect("x has a gradient")), [0.5, 4.0]);
    assert!(k.grad().is_none(), "a non-differentiable operand gets none");
    Ok(())
}

#[test]
fn a_call_whose_differentiable_operands_need_no_gradient_records_nothing() -> Result<()> {
    let (class, shift) = shift_class("NoNode")?;
    let x = compact(class, &[1.0])?;
    let k = compact(class, &[2.0])?;
    // Only the operand declared non-differentiable requires a gradient.
    k.set_requires_grad(true)?;
    let y = call(&shift, &x, &k)?;
    assert_eq!(floats(&y), [3.0]);
    assert!(y.grad_fn().is_none());
    assert!(!y.requires_grad());
    assert!(k.grad().is_none());
    Ok(())
}

#[test]
fn a_non_differentiable_operand_the_rule_saves_is_version_checked() -> Result<()> {
    let (class, scale) = scale_class("Saved")?;
    let x = compact(class, &[1.0, 2.0])?;
    let k = compact(class, &[3.0, 4.0])?;
    x.set_requires_grad(true)?;
    let y = call(&scale, &x, &k)?;
    let inputs = y.grad_fn().expect("a node").inputs();
    assert_eq!(inputs.len(), 2);
    assert!(inputs[0].same_as(&x) && inputs[1].same_as(&k));
    let g = compact(class, &[1.0, 10.0])?;
    y.backward(Some(&g), false)?;
    assert_eq!(floats(&x.grad().expect("a gradient")), [3.0, 40.0]);
    assert!(k.grad().is_none());

    // A write to the saved operand after recording is caught before the rule runs.
    let y = call(&scale, &x, &k)?;
    k.carrier().set(1, Value::Float(0.0))?;
    let error = y.backward(Some(&g), false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        "runtime error: an input of 'ownSaved.scale' was modified by an in-place modification \
         after it was recorded (version 2 then, 3 now)"
    );
    assert_eq!(floats(&x.grad().expect("unchanged")), [3.0, 40.0]);
    Ok(())
}

#[test]
fn a_result_viewing_an_operands_storage_is_published_and_differentiated() -> Result<()> {
    let class = CarrierClass::mint("Viewing", ClassKind::Independent);
    let schema = OperationSchema::new([OperandSpec::new("x", OperandKind::Tensor, true)?], [])?;
    let resolve = |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let x = call.tensor(0)?;
        ResolvedInvocation::new(
            call.clone(),
            plan(call.definition().name(), 1)?,
            // The operation returns a view of its operand, and says so.
            [ResultSpec::canonical(DType::FLOAT32, x.shape().clone()).aliasing(0)],
            [],
            None,
        )
    };
    let view = define_operation(
        "own.view",
        schema,
        resolve,
        None,
        Vjp::rule(|_, cotangents| Ok(vec![cotangents[0].clone()])),
    )?;
    // The kernel returns a new tensor object over the operand's own storage.
    let kernel = KernelPattern::new(
        &view,
        [OperationCapability::from_plan(plan("own.view", 1)?)],
        "own.view.kernel",
        |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let x = invocation.call().tensor(0)?.clone();
            let layout = invocation.results()[0].layout().clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    ProviderResult::new([Tensor::new(x.carrier().clone(), 0, layout)?])
                        .map(Submitted::Ready)
                },
            )))
        },
        0,
    )?;
    define_class(class, vec![kernel])?;
    let x = compact(class, &[1.0, 2.0, 3.0])?;
    x.set_requires_grad(true)?;
    let y = view.call(vec![x.clone().into()], &[])?.remove(0);
    assert!(y.carrier().same_as(x.carrier()));
    assert!(!y.same_as(&x));
    assert_eq!(y.grad_fn().expect("recorded").name(), "own.view");

    let g = compact(class, &[7.0, 8.0, 9.0])?;
    y.backward(Some(&g), false)?;
    assert_eq!(floats(&x.grad().expect("a gradient")), [7.0, 8.0, 9.0]);
    // A write through the view is a write of the operand's storage.
    let before = x.version();
    y.carrier().set(0, Value::Float(5.0))?;
    assert_eq!(x.version(), before + 1);
    assert_eq!(floats(&x), [5.0, 2.0, 3.0]);
    Ok(())
}

#[test]
fn saved_tensors_are_freed_by_backward_unless_the_graph_is_retained() -> Result<()> {
    let (class, scale) = scale_class("Freed")?;
    let marker = Arc::new(());
    let y = {
        let x = tensor(class, &[1.0, 2.0], Some(&marker))?;
        let k = tensor(class, &[3.0, 4.0], Some(&marker))?;
        x.set_requires_grad(true)?;
        call(&scale, &x, &k)?
    };
    // The caller's handles are gone; the node keeps both operands alive.
    assert_eq!(Arc::strong_count(&marker), 3);
    let node = y.grad_fn().expect("a node");
    let g = compact(class, &[1.0, 1.0])?;

    y.backward(Some(&g), true)?;
    assert_eq!(Arc::strong_count(&marker), 3, "a retained graph keeps them");
    assert_eq!(node.inputs().len(), 2);
    assert!(!node.is_released());

    y.backward(Some(&g), false)?;
    assert_eq!(
        Arc::strong_count(&marker),
        1,
        "released: both storages freed"
    );
    assert!(node.is_released());
    assert!(node.inputs().is_empty());
    assert!(node.input_versions().is_empty());
    assert!(
        y.grad_fn().is_some_and(|n| n.is_released()),
        "still attached"
    );

    let error = y.backward(Some(&g), false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("retain_graph=true"), "{error}");
    let error = node.backward(&[Some(g.clone())]).unwrap_err();
    assert!(error.to_string().contains("retain_graph=true"), "{error}");
    Ok(())
}

#[test]
fn a_built_in_node_frees_its_saved_operands_on_release() -> Result<()> {
    let x = Tensor::compact(
        strideweave::carriers::Cpu::from_f32(&[1.0, -2.0], true)?,
        Shape::new(2)?,
    )?;
    x.set_requires_grad(true)?;
    let y = strideweave::ops::elementwise_mul(&x, &x)?;
    let node = y.grad_fn().expect("a node");
    assert_eq!(node.inputs().len(), 2, "every tensor operand of a built-in");
    let g = Tensor::compact(
        strideweave::carriers::Cpu::from_f32(&[1.0, 1.0], true)?,
        Shape::new(2)?,
    )?;
    y.backward(Some(&g), false)?;
    assert!(node.inputs().is_empty());
    let grad = x.grad().expect("a gradient").to_values()?;
    assert_eq!(grad, [Value::Float(2.0), Value::Float(-4.0)]);
    Ok(())
}
