//! The execution promises: every advertised capability runs and matches the Generic
//! reference, and a plan that is not advertised is refused before allocation (design:
//! Capabilities and Dispatch; seed: "Kernel patterns are authoritative and deterministically
//! selected").

use strideweave::carrier::constructed_on_this_thread;
use strideweave::operation::{call, Accuracy, Builtin, Operand, ShapeRule};
use strideweave::{Carrier, DType, Error, Tensor, Value};

use crate::cases::{dense, Arg, Placement, Template};
use crate::support::{close, Check, Context, Result2, Snapshot};

/// The carriers of a call's tensor operands.
pub(crate) fn operand_carriers(operands: &[Operand]) -> Vec<Carrier> {
    operands
        .iter()
        .filter_map(Operand::as_tensor)
        .map(|t| t.carrier().clone())
        .collect()
}

/// Snapshots of every operand carrier.
pub(crate) fn snapshots(cx: &Context<'_>, carriers: &[Carrier]) -> Result2<Vec<Snapshot>> {
    carriers
        .iter()
        .map(|c| {
            cx.ok(Snapshot::of(c), || {
                "reading an operand for a snapshot".into()
            })
        })
        .collect()
}

/// The first operand whose carrier changed since `before`, as a message.
pub(crate) fn changed(
    cx: &Context<'_>,
    carriers: &[Carrier],
    before: &[Snapshot],
) -> Result2<Option<String>> {
    let after = snapshots(cx, carriers)?;
    Ok(before
        .iter()
        .zip(&after)
        .enumerate()
        .find_map(|(i, (b, a))| b.difference(a).map(|d| format!("operand carrier {i}: {d}"))))
}

/// A prototype carrier of the class, whose capabilities the suite runs.
pub(crate) fn prototype(cx: &mut Context<'_>) -> Result2<Carrier> {
    let dtype = cx.storable()?[0];
    let values = cx.rng.values(dtype, 4);
    cx.carrier(dtype, &values)
}

/// Builds the operands of `template` under `geometry` on the class under test and their
/// slot values (for the reference).
pub(crate) fn build(
    cx: &mut Context<'_>,
    template: &Template,
    geometry: &[Placement],
) -> Result2<(Vec<Operand>, Vec<Vec<Value>>)> {
    let slots = (0..template.args.len())
        .map(|i| template.slot_values(i, &geometry[i], &mut cx.rng))
        .collect::<strideweave::Result<Vec<_>>>();
    let slots = cx.ok(slots, || "laying out operands".into())?;
    let factory = cx.factory;
    let operands = cx.ok(
        template.operands(geometry, &slots, &|d, v, offset, layout| {
            factory.tensor(d, v, offset, layout)
        }),
        || format!("building the operands of {}", template.describe(geometry)),
    )?;
    Ok((operands, slots))
}

/// The largest magnitude among the slot values (at least 1).
fn magnitude(slots: &[Vec<Value>]) -> f64 {
    slots
        .iter()
        .flatten()
        .filter_map(|v| v.as_f64())
        .fold(1.0, |m, x| m.max(x.abs()))
}

/// Compares the carrier's results of `what` with the reference's.
pub(crate) fn compare(
    cx: &Context<'_>,
    template: &Template,
    geometry: &[Placement],
    slots: &[Vec<Value>],
    results: &[Tensor],
    reference: &[Tensor],
) -> Check {
    let what = template.describe(geometry);
    cx.ensure(results.len() == reference.len(), || {
        format!(
            "{what} gave {} results, the reference {}",
            results.len(),
            reference.len()
        )
    })?;
    let (atol, rtol) = cx.factory.tolerance(template.builtin.name());
    // Sums whose order is the carrier's: the tolerance grows with the terms and their size.
    let summed = template.builtin.accuracy() == Accuracy::OrderDependent;
    let contraction = if summed {
        geometry[0].extents.get(1).copied().unwrap_or(1)
    } else {
        1
    } as f64;
    let scale = match template.builtin.shape_rule() {
        ShapeRule::ReduceMode1 if summed => contraction * magnitude(slots),
        ShapeRule::Contract if summed => contraction * magnitude(slots).powi(2),
        _ => 1.0,
    };
    for (k, (got, want)) in results.iter().zip(reference).enumerate() {
        cx.ensure(got.shape() == want.shape(), || {
            format!(
                "{what} result {k} has shape {}, the reference {}",
                got.shape(),
                want.shape()
            )
        })?;
        cx.ensure(got.dtype() == want.dtype(), || {
            format!(
                "{what} result {k} has dtype {}, the reference {}",
                got.dtype(),
                want.dtype()
            )
        })?;
        let got_values = cx.ok(got.to_values(), || format!("reading result {k} of {what}"))?;
        let want_values = cx.ok(want.to_values(), || "reading the reference".into())?;
        for (i, (g, w)) in got_values.iter().zip(&want_values).enumerate() {
            cx.ensure(close(w, g, atol * scale, rtol), || {
                format!(
                    "{what} result {k} element {i} (colexicographic) is {g}, the Generic \
                     reference {w} (tolerance {} + {rtol}·|reference|)",
                    atol * scale
                )
            })?;
        }
    }
    Ok(())
}

/// Every capability the carrier advertises, on every geometry of its operation.
pub(crate) fn advertised(cx: &mut Context<'_>) -> Check {
    let prototype = prototype(cx)?;
    let capabilities = prototype.capabilities();
    if capabilities.is_empty() {
        cx.not_applicable = Some("advertises no capability".into());
        return Ok(());
    }
    for capability in capabilities.iter() {
        let plan = capability.plan();
        cx.ensure(prototype.supports_operation_plan(plan), || {
            format!("advertises {capability} but supports_operation_plan answers false for it")
        })?;
        let Some(template) = Template::for_plan(plan) else {
            if Builtin::from_name(plan.operation()).is_some() {
                return Err(cx.broken(format!(
                    "advertises {capability}, which no call of the built-in '{}' resolves to",
                    plan.operation()
                )));
            }
            cx.notes.push(format!(
                "not run: {capability} (a custom operation; the suite knows shapes only for the \
                 built-ins)"
            ));
            continue;
        };
        let geometries = template.geometries();
        let mut declined = Vec::new();
        for geometry in &geometries {
            let (operands, slots) = build(cx, &template, geometry)?;
            let carriers = operand_carriers(&operands);
            let before = snapshots(cx, &carriers)?;
            let what = template.describe(geometry);
            let results = match call(template.builtin.name(), operands, &template.options()) {
                // Kernels may decline a layout at run time (seed: "Prefer an optimized kernel
                // with fallback"); that refusal's atomicity is the refusal promise's.
                Err(Error::UnsupportedOperationPlan(_)) if !dense(geometry) => {
                    declined.push(what);
                    continue;
                }
                other => cx.ok(other, || format!("{what}, advertised as {capability},"))?,
            };
            let reference = cx.ok(template.reference(geometry, &slots), || {
                format!("the Generic reference of {what}")
            })?;
            compare(cx, &template, geometry, &slots, &results, &reference)?;
            if let Some(change) = changed(cx, &carriers, &before)? {
                return Err(cx.broken(format!("{what} changed an operand: {change}")));
            }
        }
        cx.notes.push(format!(
            "ran {capability} on {} geometries{}",
            geometries.len() - declined.len(),
            if declined.is_empty() {
                String::new()
            } else {
                format!("; declined at run time: {}", declined.join(", "))
            }
        ));
    }
    Ok(())
}

/// The templates the suite probes for refusals, from the table of built-ins: for each
/// built-in, tensors of every storable dtype (a Bool condition for one that selects), a
/// tensor with a weak scalar for the binary elementwise operations, and the Float64
/// accumulator where one is taken.
fn probes(storable: &[DType]) -> Vec<Template> {
    let mut probes = Vec::new();
    for builtin in Builtin::ALL {
        let arity = builtin.operand_count();
        let elementwise = builtin.shape_rule() == ShapeRule::Broadcast;
        for &dtype in storable {
            let mut argsets = Vec::new();
            if builtin.selects() {
                if storable.contains(&DType::BOOL) {
                    argsets.push(vec![
                        Arg::Tensor(DType::BOOL),
                        Arg::Tensor(dtype),
                        Arg::Tensor(dtype),
                    ]);
                }
            } else {
                argsets.push(vec![Arg::Tensor(dtype); arity]);
                if arity == 2 && elementwise {
                    argsets.push(vec![Arg::Tensor(dtype), Arg::Scalar(Value::Float(0.5))]);
                    argsets.push(vec![Arg::Tensor(dtype), Arg::Scalar(Value::Int(2))]);
                }
            }
            for args in argsets {
                let wide = builtin.takes_accumulator() && dtype == DType::FLOAT32;
                let accumulators = if wide {
                    vec![None, Some(DType::FLOAT64)]
                } else {
                    vec![None]
                };
                for accumulator in accumulators {
                    probes.push(Template {
                        builtin,
                        args: args.clone(),
                        accumulator,
                    });
                }
            }
        }
    }
    probes
}

/// One refusal: the call must fail with `UnsupportedOperationPlan`, construct no carrier and
/// change no operand. `advertised` says whether the plan is advertised (a run-time decline,
/// where running is also acceptable) or not (the capability gate must refuse it).
fn refuse(
    cx: &mut Context<'_>,
    template: &Template,
    geometry: &[Placement],
    advertised: bool,
) -> Result2<bool> {
    let plan = cx.ok(template.plan(), || "planning".into())?;
    let (operands, _) = build(cx, template, geometry)?;
    let carriers = operand_carriers(&operands);
    let before = snapshots(cx, &carriers)?;
    let what = template.describe(geometry);
    let constructed = constructed_on_this_thread();
    let outcome = call(template.builtin.name(), operands, &template.options());
    let built = constructed_on_this_thread() - constructed;
    match outcome {
        Err(Error::UnsupportedOperationPlan(_)) => {}
        Ok(_) | Err(_) if advertised => return Ok(false),
        Ok(_) => {
            return Err(cx.broken(format!(
                "{what} ran although the carrier does not advertise its plan {plan}"
            )))
        }
        Err(other) => {
            return Err(cx.broken(format!(
                "{what}, whose plan {plan} is not advertised, failed with {:?} instead of \
                 UnsupportedOperationPlan: {other}",
                other.kind()
            )))
        }
    }
    let refusal = if advertised {
        format!("declining {what} at run time (its plan {plan} is advertised)")
    } else {
        format!("refusing {what}")
    };
    cx.ensure(built == 0, || {
        format!(
            "{refusal} constructed {built} carrier{} first; a refusal must come before any \
             allocation",
            if built == 1 { "" } else { "s" }
        )
    })?;
    if let Some(change) = changed(cx, &carriers, &before)? {
        return Err(cx.broken(format!("{refusal} changed an operand: {change}")));
    }
    Ok(true)
}

/// Every plan planning accepts on the carrier's dtypes but the carrier does not advertise is
/// refused with `UnsupportedOperationPlan` before any carrier is constructed and with nothing
/// changed; an advertised plan a kernel declines at run time on some layout is refused the
/// same way.
pub(crate) fn unadvertised(cx: &mut Context<'_>) -> Check {
    let storable = cx.storable()?;
    let prototype = prototype(cx)?;
    for capability in prototype.capabilities().iter() {
        let matching = prototype.matching_capability(capability.plan());
        cx.ensure(matching.as_ref() == Some(capability), || {
            format!("matching_capability of its own advertised {capability} is {matching:?}")
        })?;
    }
    let mut refused = 0;
    let mut advertised = 0;
    let mut declined = 0;
    for template in probes(&storable) {
        let Ok(plan) = template.plan() else { continue };
        if prototype.supports_operation_plan(&plan) {
            advertised += 1;
            for geometry in template.geometries() {
                if !dense(&geometry) && refuse(cx, &template, &geometry, true)? {
                    declined += 1;
                }
            }
            continue;
        }
        let geometry = template.geometries().remove(1);
        refuse(cx, &template, &geometry, false)?;
        refused += 1;
    }
    cx.notes.push(format!(
        "{refused} unadvertised plans refused, {advertised} probed plans advertised ({declined} \
         run-time declines on their strided layouts); carriers constructed during each refusal \
         counted"
    ));
    Ok(())
}
