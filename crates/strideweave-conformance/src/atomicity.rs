//! Failure atomicity: a failure injected at each of the carrier's own fault points, at each
//! pass an action makes through it, publishes nothing (seed: provider exceptions "SHALL
//! propagate without changing Tensor metadata, public versions, ownership, or graph state").
//! Without fault points the suite still provokes the failures it can reach from outside: a
//! checked Int32 kernel of the carrier's own that overflows, and a move whose other end (the
//! suite's definition-free Tripwire) fails half way.

use std::cell::RefCell;
use std::rc::Rc;

use strideweave::carriers::Cpu;
use strideweave::movement::move_to;
use strideweave::operation::{call, Accumulation, Arithmetic};
use strideweave::{Carrier, DType, Error, ErrorKind, Layout, Result, Shape, Stride, Tensor, Value};

use crate::cases::{dense, generic_tensor, Arg, Placement, Template};
use crate::faults::{FaultHook, PASS_BOUND};
use crate::operations::{build, changed, operand_carriers, prototype, snapshots};
use crate::support::{Check, Context, Result2, Snapshot};
use crate::tripwire::Tripwire;

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
    let dtype = cx.storable()?[0];
    let overflows = overflows(cx)?;
    let move_ends = failing_move_ends(cx, dtype)?;
    let factory = cx.factory;
    match factory.faults() {
        Some(faults) => injected(cx, faults)?,
        None if overflows + move_ends == 0 => {
            cx.not_applicable = Some(
                "no failure can be provoked in this carrier: the factory gives no fault points \
                 (Factory::with_faults: a FaultInjector its callbacks consult, or a FaultHook \
                 bridging the carrier's own fault mechanism), it advertises no checked Int32 \
                 operation whose overflow would fail its own kernel, and it has no move route \
                 to or from a definition-free carrier whose reads or writes could fail"
                    .into(),
            );
        }
        None => cx.notes.push(
            "no fault points: the factory gives no FaultHook, so no failure is injected inside \
             the carrier's storage or kernel callbacks; only the provoked failures above ran"
                .into(),
        ),
    }
    Ok(())
}

/// Whether `plan` is checked Int32 arithmetic, which fails with Overflow when a result
/// leaves the Int32 range.
fn checked(plan: &strideweave::operation::OperationPlan) -> bool {
    plan.output() == DType::INT32
        && (plan.compute() == Arithmetic::Int32ExactChecked
            || plan.accumulation() == Some(Accumulation::ExactInteger))
}

/// Slot values of `template` under `geometry` whose last results leave the Int32 range:
/// every element at the last mode-0 coordinate is the Int32 maximum, the others small; where
/// the Generic reference does not overflow on that (`sub`, `neg`, `abs` leave the range only
/// from below), the first operand's are the Int32 minimum instead.
fn overflowing(
    cx: &mut Context<'_>,
    template: &Template,
    geometry: &[Placement],
) -> Result2<Vec<Vec<Value>>> {
    let mut all = Vec::new();
    for (i, placement) in geometry.iter().enumerate() {
        let slots = template.slot_values(i, placement, &mut cx.rng);
        all.push(cx.ok(slots, || "laying out operands".into())?);
    }
    let mut marked = all.clone();
    extremes(cx, template, geometry, &mut marked, |_| i32::MAX)?;
    let overflows = matches!(
        template.reference(geometry, &marked),
        Err(Error::Overflow(_))
    );
    if overflows {
        return Ok(marked);
    }
    let first_low = |i: usize| if i == 0 { i32::MIN } else { i32::MAX };
    extremes(cx, template, geometry, &mut all, first_low)?;
    Ok(all)
}

/// Sets every element at the last mode-0 coordinate of each Int32 tensor operand `i` in
/// `slots` to `big(i)`.
fn extremes(
    cx: &mut Context<'_>,
    template: &Template,
    geometry: &[Placement],
    slots: &mut [Vec<Value>],
    big: impl Fn(usize) -> i32,
) -> Result2<()> {
    for (i, placement) in geometry.iter().enumerate() {
        if template.args[i] != Arg::Tensor(DType::INT32) {
            continue;
        }
        let layout = cx.ok(placement.layout(), || "a layout".into())?;
        let rows = placement.extents[0];
        for element in (0..placement.size()).filter(|e| e % rows == rows - 1) {
            let slot = cx.ok(layout.index_of(element).map_err(Into::into), || {
                "an element's slot".into()
            })?;
            slots[i][placement.offset + slot] = Value::Int(big(i).into());
        }
    }
    Ok(())
}

/// Every advertised checked Int32 plan, called on values whose last results overflow where
/// the Generic reference says they do: the carrier's own kernel must fail with Overflow and
/// change no operand. Returns how many ran.
fn overflows(cx: &mut Context<'_>) -> Result2<usize> {
    let capabilities = prototype(cx)?.capabilities();
    let mut ran = 0;
    for capability in capabilities.iter() {
        let plan = capability.plan();
        if !checked(plan) {
            continue;
        }
        let Some(template) = Template::for_plan(plan) else {
            continue;
        };
        let Some(geometry) = template.geometries().into_iter().rev().find(|g| dense(g)) else {
            continue;
        };
        let slots = overflowing(cx, &template, &geometry)?;
        match template.reference(&geometry, &slots) {
            Err(error) if error.kind() == ErrorKind::Overflow => {}
            _ => continue,
        }
        let factory = cx.factory;
        let operands = cx.ok(
            template.operands(&geometry, &slots, &|d, v, offset, layout| {
                factory.tensor(d, v, offset, layout)
            }),
            || format!("building the operands of {}", template.describe(&geometry)),
        )?;
        let carriers = operand_carriers(&operands);
        let before = snapshots(cx, &carriers)?;
        let what = format!(
            "{} on Int32 values whose last results leave the Int32 range",
            template.describe(&geometry)
        );
        match call(template.builtin.name(), operands, &template.options()) {
            Err(error) if error.kind() == ErrorKind::Overflow => {}
            Ok(results) => {
                let got = results
                    .first()
                    .and_then(|r| r.to_values().ok())
                    .and_then(|v| v.last().copied());
                return Err(cx.broken(format!(
                    "{what} returned a result (last element {}) instead of failing with \
                     Overflow; its plan {plan} is checked Int32 arithmetic",
                    got.map_or_else(|| "unreadable".into(), |v| v.to_string())
                )));
            }
            Err(error) => {
                return Err(cx.broken(format!(
                    "{what} failed with a {:?} error where Overflow was due: {error}",
                    error.kind()
                )))
            }
        }
        if let Some(change) = changed(cx, &carriers, &before)? {
            return Err(cx.broken(format!(
                "{what} failed with Overflow but changed state: {change}"
            )));
        }
        ran += 1;
    }
    if ran > 0 {
        cx.notes.push(format!(
            "{ran} checked Int32 plans failed in the carrier's own kernel (overflow) and \
             published nothing"
        ));
    }
    Ok(ran)
}

/// A snapshot, as a broken promise when the carrier cannot be read.
fn snapshot(cx: &Context<'_>, carrier: &Carrier, what: &str) -> Result2<Snapshot> {
    cx.ok(Snapshot::of(carrier), || format!("reading {what}"))
}

/// Moves between the class under test and a Tripwire that fails its third write (as a
/// destination) or its third read (as a source): the move fails, neither end changes, the
/// source stays live, and the same move succeeds once the tripwire is disarmed. Returns how
/// many directions had a route.
fn failing_move_ends(cx: &mut Context<'_>, dtype: DType) -> Result2<usize> {
    let values = cx.rng.values(dtype, 5);
    let zeros = vec![dtype.zero().unwrap_or(Value::Bool(false)); 5];
    let shape = Shape::new(5).map_err(|e| cx.broken(e))?;
    let mut routes = 0;

    let source = cx.carrier(dtype, &values)?;
    let tensor = cx.ok(Tensor::compact(source.clone(), shape.clone()), || {
        "a tensor".into()
    })?;
    let (wire, trigger) = cx.ok(Tripwire::carrier(dtype, &zeros), || "a Tripwire".into())?;
    let (before, wire_before) = (
        snapshot(cx, &source, "the source")?,
        snapshot(cx, &wire, "the Tripwire")?,
    );
    trigger.fail_write_after(2);
    let outcome = move_to(&tensor, &wire);
    let fired = trigger.disarm();
    match outcome {
        Err(error) if error.kind() == ErrorKind::NotImplemented && !fired => {}
        Err(error) => {
            routes += 1;
            let what = "a move to a definition-free carrier whose third write fails";
            cx.ensure(fired, || {
                format!("{what} failed before reaching it: {error}")
            })?;
            if let Some(change) = before.difference(&snapshot(cx, &source, "the source")?) {
                return Err(cx.broken(format!("{what} failed but changed its source: {change}")));
            }
            if let Some(change) = wire_before.difference(&snapshot(cx, &wire, "the Tripwire")?) {
                return Err(cx.broken(format!(
                    "{what} failed but left its destination changed: {change}"
                )));
            }
            let moved = cx.ok(move_to(&tensor, &wire), || {
                format!("the same move after {what}")
            })?;
            let got = cx.ok(moved.to_values(), || "reading the moved tensor".into())?;
            cx.ensure(got == before.values, || {
                format!(
                    "after {what}, the retried move carried {got:?}, not {:?}",
                    before.values
                )
            })?;
        }
        Ok(_) => routes += 1,
    }

    let (wire, trigger) = cx.ok(Tripwire::carrier(dtype, &values), || "a Tripwire".into())?;
    let from_wire = cx.ok(Tensor::compact(wire.clone(), shape), || "a tensor".into())?;
    let destination = cx.carrier(dtype, &zeros)?;
    let untouched = snapshot(cx, &destination, "the destination")?;
    trigger.fail_read_after(2);
    let outcome = move_to(&from_wire, &destination);
    let fired = trigger.disarm();
    match outcome {
        Err(error) if error.kind() == ErrorKind::NotImplemented && !fired => {}
        Err(error) => {
            routes += 1;
            let what = "a move from a definition-free carrier whose third read fails";
            cx.ensure(fired, || {
                format!("{what} failed before reaching it: {error}")
            })?;
            let after = snapshot(cx, &destination, "the destination")?;
            if let Some(change) = untouched.difference(&after) {
                return Err(cx.broken(format!(
                    "{what} failed but changed its destination: {change}"
                )));
            }
            cx.ensure(!wire.is_released(), || {
                format!("{what} failed but released its source")
            })?;
            retry_carries(cx, what, &from_wire, &destination, dtype, &values)?;
        }
        Ok(_) => routes += 1,
    }
    routes += failing_move_into_empty(cx, dtype, &values)?;
    if routes > 0 {
        cx.notes.push(format!(
            "{routes} moves with a definition-free end failing half way left both ends unchanged"
        ));
    }
    Ok(routes)
}

/// A move from a Tripwire whose third read fails into an empty carrier of the class under
/// test, when the class grows as a move destination: the destination must be empty again
/// afterwards (the framework shrinks it back through the class's own `set_extent`), the
/// source live, and the retry must land every value. Returns 1 when the class grew, 0 when
/// it refused the empty destination before anything changed.
fn failing_move_into_empty(cx: &mut Context<'_>, dtype: DType, values: &[Value]) -> Result2<usize> {
    if cx.factory.min_slots() > 0 {
        return Ok(0);
    }
    let shape = Shape::new(values.len()).map_err(|e| cx.broken(e))?;
    let (wire, trigger) = cx.ok(Tripwire::carrier(dtype, values), || "a Tripwire".into())?;
    let from_wire = cx.ok(Tensor::compact(wire.clone(), shape), || "a tensor".into())?;
    let empty = cx.carrier(dtype, &[])?;
    let untouched = snapshot(cx, &empty, "the empty destination")?;
    trigger.fail_read_after(2);
    let outcome = move_to(&from_wire, &empty);
    let fired = trigger.disarm();
    let what = "a move from a definition-free carrier whose third read fails into an empty \
                carrier of the class (which grows as a move destination)";
    match outcome {
        Ok(_) => Err(cx.broken(format!(
            "{what} succeeded although the Tripwire failed a read"
        ))),
        Err(_) if !fired => {
            let after = snapshot(cx, &empty, "the empty destination")?;
            match untouched.difference(&after) {
                Some(change) => Err(cx.broken(format!(
                    "refusing a move into an empty carrier of the class changed it: {change}"
                ))),
                None => Ok(0),
            }
        }
        Err(_) => {
            let after = snapshot(cx, &empty, "the destination")?;
            if let Some(change) = untouched.difference(&after) {
                return Err(cx.broken(format!(
                    "{what} failed but changed its destination: {change}; a grown destination \
                     must shrink back to empty (set_extent(0))"
                )));
            }
            cx.ensure(!wire.is_released(), || {
                format!("{what} failed but released its source")
            })?;
            retry_carries(cx, what, &from_wire, &empty, dtype, values)?;
            Ok(1)
        }
    }
}

/// The same move, retried after `what` failed, carries `values` (normalized to `dtype`).
fn retry_carries(
    cx: &Context<'_>,
    what: &str,
    tensor: &Tensor,
    destination: &Carrier,
    dtype: DType,
    values: &[Value],
) -> Check {
    let moved = cx.ok(move_to(tensor, destination), || {
        format!("the same move after {what}")
    })?;
    let got = cx.ok(moved.to_values(), || "reading the moved tensor".into())?;
    let want: Vec<Value> = values
        .iter()
        .map(|v| dtype.normalize(*v).unwrap_or(*v))
        .collect();
    cx.ensure(got == want, || {
        format!("after {what}, the retried move carried {got:?}, not {want:?}")
    })
}

/// The failures injected through the factory's fault points.
fn injected(cx: &mut Context<'_>, faults: &dyn FaultHook) -> Check {
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
    let destination_values = values.clone();
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

    for name in factory.destinations() {
        let values = destination_values.clone();
        let fresh = move || -> Result<Tensor> {
            Tensor::compact(factory.carrier(dtype, &values)?, Shape::new(5)?)
        };
        let moving = Rc::new(RefCell::new(
            fresh().map_err(|e| cx.broken(format!("a tensor to move: {e}")))?,
        ));
        let (watch, run, refresh) = (Rc::clone(&moving), Rc::clone(&moving), moving);
        let target = name.clone();
        actions.push(Action {
            what: format!("moving a 5-element tensor to {name}"),
            watched: Box::new(move || vec![watch.borrow().carrier().clone()]),
            run: Box::new(move || {
                let tensor = run.borrow().clone();
                let destination = factory.destination(&target, tensor.dtype(), 5)?;
                move_to(&tensor, &destination).map(|_| ())
            }),
            refresh: Box::new(move || {
                if refresh.borrow().carrier().is_released() {
                    *refresh.borrow_mut() = fresh()?;
                }
                Ok(())
            }),
        });
    }

    if let Some(action) = scatter_action(cx, dtype)? {
        actions.push(action);
    }

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
            fired += fail_each_pass(cx, faults, point, action)?;
        }
    }
    cx.notes.push(format!(
        "{} fault points armed around {} actions: {fired} injected failures",
        faults.points().len(),
        actions.len()
    ));
    Ok(())
}

/// Scattering into slots 1, 3, 5 and 7 of a 9-slot carrier of the class values other than
/// theirs (so a write that lands shows), when the class takes a scatter from a Generic
/// source; `None` when it does not (NotImplemented or a refused source, nothing changed).
fn scatter_action<'a>(cx: &mut Context<'a>, dtype: DType) -> Result2<Option<Action<'a>>> {
    let values = cx.rng.values(dtype, 9);
    let receiver = cx.carrier(dtype, &values)?;
    let scatter = {
        let receiver = receiver.clone();
        move || -> Result<()> {
            let slots = [1usize, 3, 5, 7];
            let others = slots
                .iter()
                .map(|&s| Ok(other_than(receiver.get(s)?)))
                .collect::<Result<Vec<Value>>>()?;
            let dense = Layout::new(Shape::new(4)?, Stride::new(1)?)?;
            let source = generic_tensor(dtype, &others, 0, dense)?;
            let destination = Tensor::compact(receiver.clone(), Shape::new(9)?)?;
            let mapping = Layout::new(Shape::new(4)?, Stride::new(2)?)?;
            receiver.scatter(&source, &destination, &mapping, 1)
        }
    };
    match scatter() {
        Err(error) if matches!(error.kind(), ErrorKind::NotImplemented | ErrorKind::Type) => {
            Ok(None)
        }
        other => {
            cx.ok(other, || "scattering into a 9-slot carrier".into())?;
            Ok(Some(Action {
                what: "scattering 4 values into a 9-slot carrier".into(),
                watched: Box::new(move || vec![receiver.clone()]),
                run: Box::new(scatter),
                refresh: Box::new(keep),
            }))
        }
    }
}

/// Fails `action` at each pass through `point` in turn, until a run completes without
/// reaching the armed pass (or the hook cannot skip passes); returns how many failures
/// fired. An action still reaching `point` at pass [`PASS_BOUND`] breaks the promise.
fn fail_each_pass(
    cx: &Context<'_>,
    faults: &dyn FaultHook,
    point: &'static str,
    action: &Action<'_>,
) -> Result2<u64> {
    let mut fired = 0;
    for skip in 0.. {
        if skip == PASS_BOUND {
            return Err(cx.broken(format!(
                "{} reached the fault point '{point}' on each of its first {PASS_BOUND} \
                 passes, every one failed in turn; an action passing one point more than \
                 {PASS_BOUND} times is taken not to finish",
                action.what
            )));
        }
        let watched = (action.watched)();
        let before = snapshots(cx, &watched)?;
        if !cx.ok(faults.arm(point, skip), || format!("arming '{point}'"))? {
            break;
        }
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
