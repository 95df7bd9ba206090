//! Gradients: the backward of every advertised differentiable operation on the carrier
//! against central finite differences of the carrier's own forward (design: "difference-test
//! values and gradients against the reference").

use strideweave::operation::{call, operation_definition, Builtin, Domain, Operand};
use strideweave::{DType, Tensor, Value};

use crate::cases::{Arg, Placement, Template};
use crate::operations::prototype;
use crate::support::{Check, Context, Result2};

/// Distinct inputs away from the kinks of `relu`, `abs` and the extrema: multiples of 1/8
/// with magnitude at least 1/4 (positive for `log` and `sqrt`), none repeated in a call and
/// none equal to an integer or a weak scalar of the suite.
fn inputs(cx: &mut Context<'_>, builtin: Builtin, count: usize) -> Vec<f64> {
    let positive = builtin.domain() == Domain::Positive;
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
    // (2,3) fits every shape rule: broadcast, reduced over mode 1, contracted with a
    // (2,3) right operand.
    vec![Placement::dense(&[2, 3]); template.args.len()]
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
        if !definition.is_builtin() {
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
    checked += crate::custom::custom_gradients(cx)?;
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

    crate::differences::check_gradients(
        cx,
        &what,
        &geometry,
        &base,
        differentiable,
        &make,
        &forward,
    )
}
