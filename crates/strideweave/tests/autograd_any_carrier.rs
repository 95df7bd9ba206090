//! Autograd stays framework-owned: the gradient of a built-in works on any carrier that can
//! run the forward, even one whose kernels cannot run the operations the gradient rule needs.

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    InterfaceHandle, Preparation, PreparedKernel, ProviderResult, Submitted,
};
use strideweave::operation::{
    call, operation_definition, resolve_operation_plan, OperationCapability, PlanOperand,
    ResolvedInvocation,
};
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, KernelExecutionInterface, KernelPattern,
    KernelProvider, Result, Shape, StorageProvider, Tensor, Value,
};

/// Plain Float32 slots.
#[derive(Default)]
struct Slots(Vec<Value>);

fn storage() -> StorageProvider {
    StorageProvider::new(
        |_: &Slots, dtype| dtype == DType::FLOAT32,
        |state: &Slots| state.0.len() as i64,
        |state: &mut Slots, slots, _dtype| {
            state.0 = vec![Value::Float(0.0); slots];
            Ok(())
        },
        |state: &mut Slots| {
            state.0.clear();
            Ok(())
        },
        |state: &Slots, index| Ok(state.0[index]),
        |state: &mut Slots, index, value| {
            state.0[index] = value;
            Ok(())
        },
    )
}

/// A carrier class whose only kernel is a Float32 `relu`.
fn relu_only_class() -> CarrierClass {
    let class = CarrierClass::mint("ReluOnly", ClassKind::Independent);
    let plan = OperationCapability::from_plan(
        resolve_operation_plan("relu", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap(),
    );
    let pattern = KernelPattern::new(
        &operation_definition("relu").unwrap(),
        [plan],
        "relu_only.relu",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let x = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let values: Vec<Value> = x
                        .to_values()?
                        .into_iter()
                        .map(|v| Value::Float(v.as_f64().unwrap_or(0.0).max(0.0)))
                        .collect();
                    let carrier = x.carrier().new_like(&values, true, Some(spec.dtype()))?;
                    let out = Tensor::new(carrier, 0, spec.layout().clone())?;
                    ProviderResult::new([out]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )
    .unwrap();
    let interface = InterfaceHandle::new(KernelExecutionInterface::new("1").unwrap()).unwrap();
    let kernels = KernelProvider::new(interface, [pattern]).unwrap();
    register_carrier_definition(
        class,
        CarrierDefinition::new(storage())
            .with_kernels(kernels)
            .unwrap(),
    )
    .unwrap();
    class
}

fn tensor(class: CarrierClass, xs: &[f64]) -> Result<Tensor> {
    let carrier = Carrier::create(class, Slots::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, &x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(x))?;
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

#[test]
fn a_carrier_that_runs_only_relu_gets_the_gradient_of_relu() -> Result<()> {
    let class = relu_only_class();
    let x = tensor(class, &[-1.0, 2.0, -3.0, 4.0])?;
    x.set_requires_grad(true)?;
    let version = x.version();
    let y = call("relu", [x.clone().into()], &[])?.remove(0);
    assert_eq!(floats(&y), [0.0, 2.0, 0.0, 4.0]);
    // The rule of relu needs `le` and `select`, which this carrier cannot run.
    let unsupported = call("le", [x.clone().into(), Value::Float(0.0).into()], &[]).unwrap_err();
    assert_eq!(
        unsupported.kind(),
        strideweave::ErrorKind::NotImplemented,
        "{unsupported}"
    );
    let cotangent = tensor(class, &[10.0, 20.0, 30.0, 40.0])?;
    y.backward(Some(&cotangent), false)?;
    let grad = x.grad().expect("x received a gradient");
    assert_eq!(
        grad.carrier().class(),
        class,
        "the gradient lives on the operand's class"
    );
    assert_eq!(grad.shape(), x.shape());
    assert_eq!(floats(&grad), [0.0, 20.0, 0.0, 40.0]);
    assert_eq!(
        x.version(),
        version,
        "the backward pass wrote nothing into the operand"
    );
    Ok(())
}
