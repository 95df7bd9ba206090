//! Failure atomicity: a failure injected at each of the carrier's own fault points, at each
//! pass an action makes through it, publishes nothing (seed: provider exceptions "SHALL
//! propagate without changing Tensor metadata, public versions, ownership, or graph state").

use std::cell::RefCell;
use std::rc::Rc;

use strideweave::carriers::Cpu;
use strideweave::movement::move_to;
use strideweave::operation::call;
use strideweave::{Carrier, Result, Shape, Tensor, Value};

use crate::cases::Template;
use crate::faults::FaultInjector;
use crate::operations::{build, changed, operand_carriers, prototype, snapshots};
use crate::support::{Check, Context, Result2};

/// How many passes through one point the suite fails in turn, per action.
const MAX_PASSES: u64 = 12;

/// One action the suite fails: what it is, the carriers that must not change, and how to run
/// it.
struct Action<'a> {
    what: String,
    watched: Box<dyn Fn() -> Vec<Carrier> + 'a>,
    run: Box<dyn Fn() -> Result<()> + 'a>,
    /// Rebuilds what a successful run consumed (a move releases its source).
    refresh: Box<dyn Fn() -> Result<()> + 'a>,
}

fn keep() -> Result<()> {
    Ok(())
}

pub(crate) fn failures(cx: &mut Context<'_>) -> Check {
    let Some(faults) = cx.factory.faults().cloned() else {
        cx.not_applicable = Some(
            "the factory offers no FaultInjector, so no failure can be injected through the \
             carrier's own callbacks"
                .into(),
        );
        return Ok(());
    };
    let storable = cx.storable()?;
    let dtype = storable[0];
    let mut actions: Vec<Action<'_>> = Vec::new();

    let values = cx.rng.values(dtype, 5);
    let written = cx.carrier(dtype, &values)?;
    let target = written.clone();
    actions.push(Action {
        what: format!("writing slot 1 of a carrier of {dtype}"),
        watched: Box::new(move || vec![written.clone()]),
        // Each run writes a value other than the slot's, so a write that lands shows.
        run: Box::new(move || target.set(1, other_than(target.get(1)?))),
        refresh: Box::new(keep),
    });

    let prototype_carrier = prototype(cx)?;
    let source = prototype_carrier.clone();
    let size = if cx.factory.fixed_extent_factories() {
        source.size()
    } else {
        6
    };
    actions.push(Action {
        what: format!("allocate_like({size}) of a carrier"),
        watched: Box::new(move || vec![prototype_carrier.clone()]),
        run: Box::new(move || source.allocate_like(size, true, None, false).map(|_| ())),
        refresh: Box::new(keep),
    });

    let factory = cx.factory;
    let fresh_source = move || -> Result<Tensor> {
        Tensor::compact(factory.carrier(dtype, &values)?, Shape::new(5)?)
    };
    let moving = Rc::new(RefCell::new(
        fresh_source().map_err(|e| cx.broken(format!("a tensor to move: {e}")))?,
    ));
    let (watch, run, refresh) = (Rc::clone(&moving), Rc::clone(&moving), moving);
    actions.push(Action {
        what: "moving a 5-element tensor to the CPU".into(),
        watched: Box::new(move || vec![watch.borrow().carrier().clone()]),
        run: Box::new(move || {
            let tensor = run.borrow().clone();
            let destination = Cpu::carrier(5, tensor.dtype(), true, false)?;
            move_to(&tensor, &destination).map(|_| ())
        }),
        refresh: Box::new(move || {
            if refresh.borrow().carrier().is_released() {
                *refresh.borrow_mut() = fresh_source()?;
            }
            Ok(())
        }),
    });

    let capabilities = prototype(cx)?.capabilities();
    for capability in capabilities.iter() {
        let Some(template) = Template::for_plan(capability.plan()) else {
            continue;
        };
        let geometry = template.geometries().remove(1);
        let (operands, _) = build(cx, &template, &geometry)?;
        let watched = operand_carriers(&operands);
        let what = template.describe(&geometry);
        actions.push(Action {
            what,
            watched: Box::new(move || watched.clone()),
            run: Box::new(move || {
                call(
                    template.builtin.name(),
                    operands.clone(),
                    &template.options(),
                )
                .map(|_| ())
            }),
            refresh: Box::new(keep),
        });
    }

    let mut fired = 0;
    for point in faults.points() {
        for action in &actions {
            fired += fail_each_pass(cx, &faults, point, action)?;
        }
    }
    cx.notes.push(format!(
        "{} fault points armed around {} actions: {fired} injected failures",
        faults.points().len(),
        actions.len()
    ));
    Ok(())
}

/// Fails `action` at each pass through `point` in turn; returns how many failures fired.
fn fail_each_pass(
    cx: &Context<'_>,
    faults: &FaultInjector,
    point: &'static str,
    action: &Action<'_>,
) -> Result2<u64> {
    let mut fired = 0;
    for skip in 0..MAX_PASSES {
        let watched = (action.watched)();
        let before = snapshots(cx, &watched)?;
        cx.ok(faults.arm(point, skip), || format!("arming '{point}'"))?;
        let outcome = (action.run)();
        let reached = faults.disarm();
        cx.ok((action.refresh)(), || {
            format!("preparing {} again", action.what)
        })?;
        if !reached {
            break;
        }
        fired += 1;
        let what = format!(
            "{} with a fault injected at pass {} through '{point}'",
            action.what,
            skip + 1
        );
        if outcome.is_err() {
            let after = changed(cx, &watched, &before).map_err(|broken| {
                cx.broken(format!(
                    "{what} failed and left a watched carrier unreadable: {}",
                    broken.observed
                ))
            })?;
            if let Some(change) = after {
                return Err(cx.broken(format!("{what} failed but changed state: {change}")));
            }
        }
        let retry = (action.run)();
        cx.ok((action.refresh)(), || {
            format!("preparing {} again", action.what)
        })?;
        if let Err(error) = retry {
            if error.kind() != strideweave::ErrorKind::NotImplemented {
                return Err(cx.broken(format!(
                    "{} failed again after the fault was cleared: {error} (the failure at \
                     '{point}' left the carrier unusable)",
                    action.what
                )));
            }
        }
    }
    Ok(fired)
}

/// A value of the same kind as `value` that differs from it, so a write that lands shows.
fn other_than(value: Value) -> Value {
    match value {
        Value::Bool(b) => Value::Bool(!b),
        Value::Int(i) => Value::Int(if i == 0 { 1 } else { -i }),
        Value::Float(x) => Value::Float(if x == 0.0 { 1.0 } else { -x * 2.0 }),
    }
}
