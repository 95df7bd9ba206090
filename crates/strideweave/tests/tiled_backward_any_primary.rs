//! The streamed backward of a tiled operation over a primary tier that runs only the forward:
//! TiledEvictable over a definition-backed class whose one kernel is `relu` still gets the
//! gradient of `relu` (its per-tile copies fall back from `mul` to the tier's factory).

mod common;

use common::slots::{slots_carrier, slots_class};
use strideweave::carrier::CarrierClass;
use strideweave::carriers::TiledEvictable;
use strideweave::operation::{call_one, OperationCapability};
use strideweave::{DType, KernelPattern, Result, Shape, Tensor, Value};

fn relu_only() -> Result<CarrierClass> {
    let relu = KernelPattern::synchronous(
        [OperationCapability::builtin("relu", &[DType::FLOAT32])?],
        "relu_only_tier.relu",
        |invocation, _| {
            let x = invocation.call().tensor(0)?.to_f32_vec()?;
            let y: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
            Ok(vec![invocation.result_from_f32(0, &y)?])
        },
    )?;
    slots_class("ReluOnlyTier", [relu], true)
}

#[test]
fn relu_on_a_tiled_evictable_over_a_relu_only_tier_has_its_gradient() -> Result<()> {
    let class = relu_only()?;
    let xs = [1.0, -2.0, 3.0, -0.5, 0.25, -4.0];
    let tiled = TiledEvictable::carrier(
        &slots_carrier(class, &xs)?,
        &slots_carrier(class, &[])?,
        &[2, 3],
        &[1, 1],
        None,
    )?;
    let x = Tensor::compact(tiled, Shape::new((2, 3))?)?;
    x.set_requires_grad(true)?;
    let y = call_one("relu", [x.clone().into()], &[])?;
    assert_eq!(y.to_f32_vec()?, [1.0, 0.0, 3.0, 0.0, 0.25, 0.0]);
    let weights = [0.5f32, 1.0, -1.5, 2.0, 3.0, -0.25];
    let g = Tensor::new(
        y.carrier()
            .new_like(&weights.map(|w| Value::Float(f64::from(w))), true, None)?,
        0,
        y.layout().clone(),
    )?;
    y.backward(Some(&g), false)?;
    let grad = x.grad().expect("x has a gradient");
    assert_eq!(grad.to_f32_vec()?, [0.5, 0.0, -1.5, 0.0, 3.0, 0.0]);
    Ok(())
}
