//! Gradients: the backward of every advertised differentiable operation on the carrier
//! against central finite differences of the carrier's own forward (design: "difference-test
//! values and gradients against the reference").

use strideweave::operation::{call, operation_definition, Builtin, Operand};
use strideweave::{DType, Tensor, Value};

use crate::cases::{Arg, Placement, Template};
use crate::operations::prototype;
use crate::support::{Check, Context, Result2};

/// The finite-difference step: a power of two, so `x ± H` is exact for the suite's inputs.
const H: f64 = 1.0 / 64.0;

/// Distinct inputs away from the kinks of `relu`, `abs` and the extrema: multiples of 1/8
/// with magnitude at least 1/4 (positive for `log` and `sqrt`), none repeated in a call and
/// none equal to an integer or a weak scalar of the suite.
fn inputs(cx: &mut Context<'_>, builtin: Builtin, count: usize) -> Vec<f64> {
    let positive = matches!(builtin, Builtin::Log | Builtin::Sqrt);
    // No integer and no ±0.5 or ±1.5: those are the weak scalars and Int32 operands the
    // suite pairs with, and a tie is a kink of maximum and minimum.
    let away_from_ties = |i: &i64| i % 8 != 0 && i.abs() != 4 && i.abs() != 12;
    let mut pool: Vec<i64> = if positive {
        (2..=40).filter(away_from_ties).collect()
    } else {
        (-28i64..=28)
            .filter(|i| i.abs() >= 2 && away_from_ties(i))
            .collect()
    };
    let mut chosen = Vec::with_capacity(count);
    for _ in 0..count {
        if pool.is_empty() {
            break;
        }
        let k = cx.rng.int(0, pool.len() as i64 - 1) as usize;
        chosen.push(pool.swap_remove(k) as f64 / 8.0);
    }
    chosen
}

/// The geometry gradients run on: small, dense, more than one element.
fn geometry(template: &Template) -> Vec<Placement> {
    let n = template.args.len();
    match template.builtin {
        Builtin::ReduceSum | Builtin::ReduceMax => vec![Placement::dense(&[2, 3]); n],
        Builtin::Matmul => vec![Placement::dense(&[2, 3]), Placement::dense(&[2, 3])],
        _ => vec![Placement::dense(&[2, 3]); n],
    }
}

pub(crate) fn gradients(cx: &mut Context<'_>) -> Check {
    let capabilities = prototype(cx)?.capabilities();
    let mut checked = 0;
    for capability in capabilities.iter() {
        let plan = capability.plan();
        if plan.output() != DType::FLOAT32 {
            continue;
        }
        let Ok(definition) = operation_definition(plan.operation()) else {
            continue;
        };
        if !definition.is_builtin() && definition.vjp().is_none() {
            continue;
        }
        let Some(template) = Template::for_plan(plan) else {
            continue;
        };
        let differentiable: Vec<usize> = template
            .tensor_positions()
            .into_iter()
            .filter(|&i| template.args[i] == Arg::Tensor(DType::FLOAT32))
            .collect();
        if differentiable.is_empty() {
            continue;
        }
        check_one(cx, &template, &differentiable)?;
        checked += 1;
        cx.notes.push(format!("gradient of {capability}"));
    }
    if checked == 0 {
        cx.not_applicable = Some("advertises no differentiable Float32 operation".into());
    }
    Ok(())
}

/// The slot values of every operand: distinct inputs for Float32 tensors, the suite's random
/// values for the others.
fn slots(
    cx: &mut Context<'_>,
    template: &Template,
    geometry: &[Placement],
) -> Result2<Vec<Vec<Value>>> {
    let count: usize = geometry.iter().map(Placement::size).sum();
    let mut pool = inputs(cx, template.builtin, count).into_iter();
    let mut all = Vec::new();
    for (i, arg) in template.args.iter().enumerate() {
        all.push(match arg {
            Arg::Tensor(d) if *d == DType::FLOAT32 => (0..geometry[i].size())
                .map(|_| Value::Float(pool.next().unwrap_or(0.5)))
                .collect(),
            _ => {
                let values = template.slot_values(i, &geometry[i], &mut cx.rng);
                cx.ok(values, || "values".into())?
            }
        });
    }
    Ok(all)
}

/// Σ w·y over the result's elements in colexicographic order, in f64.
fn weighted(y: &Tensor, weights: &[f64]) -> strideweave::Result<f64> {
    Ok(y.to_values()?
        .iter()
        .zip(weights)
        .map(|(v, w)| v.as_f64().unwrap_or(f64::NAN) * w)
        .sum())
}

fn check_one(cx: &mut Context<'_>, template: &Template, differentiable: &[usize]) -> Check {
    let geometry = geometry(template);
    let base = slots(cx, template, &geometry)?;
    let what = template.describe(&geometry);
    let factory = cx.factory;
    let make = |slots: &[Vec<Value>]| -> strideweave::Result<Vec<Operand>> {
        template.operands(&geometry, slots, &|d, v, offset, layout| {
            factory.tensor(d, v, offset, layout)
        })
    };
    let forward = |operands: Vec<Operand>| -> strideweave::Result<Tensor> {
        call(template.builtin.name(), operands, &template.options())?
            .into_iter()
            .next()
            .ok_or_else(|| strideweave::Error::Runtime("no result".into()))
    };

    let operands = cx.ok(make(&base), || format!("building the operands of {what}"))?;
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
                let mut nudged = base.clone();
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
