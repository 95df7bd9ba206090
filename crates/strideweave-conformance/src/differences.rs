//! The finite-difference check every gradient promise runs: `backward` with a non-uniform
//! cotangent against central differences of Σ w·y computed from the carrier's own forward.

use strideweave::operation::Operand;
use strideweave::{DType, Tensor, Value};

use crate::cases::Placement;
use crate::support::{Check, Context};

/// The finite-difference step: a power of two, so `x ± H` is exact for the suite's inputs.
pub(crate) const H: f64 = 1.0 / 64.0;

/// Builds a call's operands from slot values.
pub(crate) type MakeOperands<'a> = dyn Fn(&[Vec<Value>]) -> strideweave::Result<Vec<Operand>> + 'a;
/// Runs a call's forward and returns its (first) result.
pub(crate) type Forward<'a> = dyn Fn(Vec<Operand>) -> strideweave::Result<Tensor> + 'a;

/// Σ w·y over the result's elements in colexicographic order, in f64.
fn weighted(y: &Tensor, weights: &[f64]) -> strideweave::Result<f64> {
    Ok(y.to_values()?
        .iter()
        .zip(weights)
        .map(|(v, w)| v.as_f64().unwrap_or(f64::NAN) * w)
        .sum())
}

/// Checks the gradient of the call `what` with respect to each operand position in
/// `differentiable`, at the slot values `base` laid out by `geometry`.
pub(crate) fn check_gradients(
    cx: &mut Context<'_>,
    what: &str,
    geometry: &[Placement],
    base: &[Vec<Value>],
    differentiable: &[usize],
    make: &MakeOperands<'_>,
    forward: &Forward<'_>,
) -> Check {
    let operands = cx.ok(make(base), || format!("building the operands of {what}"))?;
    for &i in differentiable {
        if let Some(t) = operands[i].as_tensor() {
            cx.ok(t.set_requires_grad(true), || "set_requires_grad".into())?;
        }
    }
    let y = cx.ok(forward(operands.clone()), || {
        format!("the forward of {what}")
    })?;
    let span = y.offset() + y.layout().cosize();
    let slot_weights: Vec<Value> = (0..span)
        .map(|k| Value::Float(((k % 7) as f64 - 3.0) / 4.0 + 0.125))
        .collect();
    let cotangent_carrier = cx.ok(
        y.carrier()
            .new_like(&slot_weights, true, Some(DType::FLOAT32)),
        || format!("a cotangent for {what} through new_like of its result"),
    )?;
    let cotangent = cx.ok(
        Tensor::new(cotangent_carrier, y.offset(), y.layout().clone()),
        || "the cotangent tensor".into(),
    )?;
    let weights: Vec<f64> = cx
        .ok(cotangent.to_values(), || "reading the cotangent".into())?
        .iter()
        .map(|v| v.as_f64().unwrap_or(0.0))
        .collect();
    cx.ok(y.backward(Some(&cotangent), false), || {
        format!("backward of {what}")
    })?;

    for &i in differentiable {
        let Some(x) = operands[i].as_tensor() else {
            continue;
        };
        let grad = x.grad().ok_or_else(|| {
            cx.broken(format!(
                "backward of {what} left operand {i} without a gradient"
            ))
        })?;
        cx.ensure(grad.shape() == x.shape(), || {
            format!(
                "the gradient of operand {i} of {what} has shape {}, the operand {}",
                grad.shape(),
                x.shape()
            )
        })?;
        let analytic = cx.ok(grad.to_values(), || "reading a gradient".into())?;
        let layout = cx.ok(geometry[i].layout(), || "a layout".into())?;
        for (element, got) in analytic.iter().enumerate() {
            let slot = geometry[i].offset
                + cx.ok(
                    layout.index_of(element).map_err(strideweave::Error::from),
                    || "an element's slot".into(),
                )?;
            let mut estimate = [0.0; 2];
            for (side, sign) in [(0, 1.0), (1, -1.0)] {
                let mut nudged = base.to_vec();
                let old = nudged[i][slot].as_f64().unwrap_or(0.0);
                nudged[i][slot] = Value::Float(old + sign * H);
                let operands = cx.ok(make(&nudged), || "building nudged operands".into())?;
                let y = cx.ok(forward(operands), || {
                    format!("the forward of {what} (nudged)")
                })?;
                estimate[side] =
                    cx.ok(weighted(&y, &weights), || "reading a nudged result".into())?;
            }
            let fd = (estimate[0] - estimate[1]) / (2.0 * H);
            let got = got.as_f64().unwrap_or(f64::NAN);
            cx.ensure((got - fd).abs() <= 1e-2 + 1e-2 * fd.abs(), || {
                format!(
                    "d(Σ w·{what})/d operand {i} element {element} (colexicographic) is {got} by \
                     backward but {fd} by central differences (step {H})"
                )
            })?;
        }
    }
    Ok(())
}
