//! Asynchronous moves: `move_async` to the CPU and to every destination the factory names
//! gives a handle that is done once, waits to one tensor, carries the values, bumps the
//! destination's version once and releases the source; a move that fails — at a fault point,
//! or at a Tripwire end — publishes nothing (docs/movement.md, Completion; seed: "repeated or
//! concurrent waits SHALL observe the same terminal value identity or the same terminal
//! exception").

use strideweave::carriers::Cpu;
use strideweave::movement::{move_async, MoveHandle};
use strideweave::{Carrier, DType, Error, ErrorKind, Result, Shape, Tensor, Value};

use crate::faults::PASS_BOUND;
use crate::support::{same_value, Check, Context, Result2, Snapshot};
use crate::tripwire::Tripwire;

/// Where a move goes: the CPU or a destination the factory names.
#[derive(Clone)]
enum Target {
    Cpu,
    Named(String),
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Cpu => "the CPU",
            Target::Named(name) => name,
        }
    }

    /// A fresh destination carrier of `n` slots, or `None` when a named destination does not
    /// store `dtype`.
    fn carrier(&self, cx: &Context<'_>, dtype: DType, n: usize) -> Result2<Option<Carrier>> {
        match self {
            Target::Cpu => cx
                .ok(Cpu::carrier(n, dtype, true, false), || {
                    "a CPU carrier".into()
                })
                .map(Some),
            Target::Named(name) => Ok(cx.factory.destination(name, dtype, n).ok()),
        }
    }
}

/// A compact tensor of `n` elements over `carrier`.
fn compact(cx: &Context<'_>, carrier: Carrier, n: usize) -> Result2<Tensor> {
    let shape = Shape::new(n).map_err(|e| cx.broken(e))?;
    cx.ok(Tensor::compact(carrier, shape), || {
        "a compact tensor".into()
    })
}

pub(crate) fn async_moves(cx: &mut Context<'_>) -> Check {
    let storable = cx.storable()?;
    let mut targets = vec![Target::Cpu];
    targets.extend(cx.factory.destinations().into_iter().map(Target::Named));
    let mut moved = 0;
    for target in &targets {
        for &dtype in &storable {
            for n in [1usize, 6] {
                let Some(destination) = target.carrier(cx, dtype, n)? else {
                    continue;
                };
                moved += completes(cx, target, dtype, n, &destination)?;
            }
        }
    }
    let mut failed = tripwire(cx, storable[0])?;
    if let Some(faults) = cx.factory.faults() {
        for target in &targets {
            failed += injected(cx, faults, target, storable[0])?;
        }
    }
    if moved + failed == 0 {
        cx.not_applicable = Some(
            "no asynchronous move has a route: move_async to the CPU and to every named \
             destination was refused before anything changed"
                .into(),
        );
    }
    cx.notes.push(format!(
        "{moved} asynchronous moves completed; {failed} failing ones published nothing"
    ));
    Ok(())
}

/// One asynchronous move of `n` fresh values to `destination`: returns 1 when it ran, 0 when
/// it was refused for want of a route (with nothing changed).
fn completes(
    cx: &mut Context<'_>,
    target: &Target,
    dtype: DType,
    n: usize,
    destination: &Carrier,
) -> Result2<usize> {
    let values = cx.rng.values(dtype, n);
    let source = cx.carrier(dtype, &values)?;
    let tensor = compact(cx, source.clone(), n)?;
    let before = cx.ok(Snapshot::of(&source), || "a snapshot".into())?;
    let destination_version = destination.version();
    let what = format!("move_async of {n} {dtype} values to {}", target.name());
    let handle = match move_async(&tensor, destination) {
        Err(error) if error.kind() == ErrorKind::NotImplemented => {
            unchanged(cx, &what, &source, &before)?;
            return Ok(0);
        }
        other => cx.ok(other, || what.clone())?,
    };
    let first = cx.ok(handle.wait(), || format!("waiting for {what}"))?;
    cx.ensure(handle.done(), || {
        format!("after waiting for {what}, its handle is not done")
    })?;
    let again = cx.ok(handle.clone().wait(), || {
        format!("waiting again (on a clone of the handle) for {what}")
    })?;
    cx.ensure(again.same_as(&first), || {
        format!(
            "waiting twice for {what} gave two different tensors; every wait returns the same one"
        )
    })?;
    cx.ensure(first.carrier().same_as(destination), || {
        format!(
            "{what} gave a tensor over another {} carrier, not the destination",
            first.carrier().class()
        )
    })?;
    let got = cx.ok(first.to_values(), || {
        format!("reading the tensor of {what}")
    })?;
    for (i, (g, e)) in got.iter().zip(&before.values).enumerate() {
        cx.ensure(same_value(g, e), || {
            format!("{what}: the handle's tensor reads {g} at {i}, not {e}")
        })?;
    }
    cx.ensure(destination.version() == destination_version + 1, || {
        format!(
            "{what} moved the destination's version from {destination_version} to {}; a move \
             publishes once",
            destination.version()
        )
    })?;
    cx.ensure(source.is_released(), || {
        format!("{what} left its source live (a move releases its source)")
    })?;
    cx.ensure(source.version() == before.version, || {
        format!(
            "{what} moved its source's version from {} to {}",
            before.version,
            source.version()
        )
    })?;
    Ok(1)
}

/// Checks that `carrier` is as `before` showed it.
fn unchanged(cx: &Context<'_>, what: &str, carrier: &Carrier, before: &Snapshot) -> Check {
    let after = cx.ok(Snapshot::of(carrier), || format!("reading after {what}"))?;
    match before.difference(&after) {
        Some(change) => Err(cx.broken(format!("{what} failed but changed state: {change}"))),
        None => Ok(()),
    }
}

/// The outcome of a failing asynchronous move: the error (returned directly, or by every
/// wait of its handle, the same each time, with the handle done).
fn failure(cx: &Context<'_>, what: &str, started: Result<MoveHandle>) -> Result2<Option<Error>> {
    let handle = match started {
        Err(error) => return Ok(Some(error)),
        Ok(handle) => handle,
    };
    let first = handle.wait();
    cx.ensure(handle.done(), || {
        format!("after waiting for {what}, its handle is not done")
    })?;
    let second = handle.wait();
    match (first, second) {
        (Ok(_), Ok(_)) => Ok(None),
        (Err(a), Err(b)) => {
            cx.ensure(a.to_string() == b.to_string(), || {
                format!("waiting twice for {what} gave two different errors: '{a}', then '{b}'")
            })?;
            Ok(Some(a))
        }
        (a, b) => Err(cx.broken(format!(
            "waiting twice for {what} gave {} then {}; every wait observes one outcome",
            if a.is_ok() { "a tensor" } else { "an error" },
            if b.is_ok() { "a tensor" } else { "an error" },
        ))),
    }
}

/// `move_async` to a Tripwire whose third write fails: the handle (or the call) fails, the
/// source stays live with its values and version, the Tripwire keeps its values. Returns 1
/// when the pair has a route, 0 when it was refused before anything changed.
fn tripwire(cx: &mut Context<'_>, dtype: DType) -> Result2<usize> {
    let values = cx.rng.values(dtype, 5);
    let zeros = vec![dtype.zero().unwrap_or(Value::Bool(false)); 5];
    let source = cx.carrier(dtype, &values)?;
    let tensor = compact(cx, source.clone(), 5)?;
    let (wire, trigger) = cx.ok(Tripwire::carrier(dtype, &zeros), || "a Tripwire".into())?;
    let before = cx.ok(Snapshot::of(&source), || "a snapshot".into())?;
    let wire_before = cx.ok(Snapshot::of(&wire), || "a snapshot".into())?;
    trigger.fail_write_after(2);
    let what = "move_async to a definition-free carrier whose third write fails";
    let started = move_async(&tensor, &wire);
    let outcome = failure(cx, what, started);
    let fired = trigger.disarm();
    let outcome = outcome?;
    if !fired {
        unchanged(cx, what, &source, &before)?;
        return Ok(0);
    }
    cx.ensure(outcome.is_some(), || {
        format!("{what} succeeded although the Tripwire failed a write")
    })?;
    unchanged(cx, what, &source, &before)?;
    cx.ensure(!source.is_released(), || {
        format!("{what} failed but released its source")
    })?;
    unchanged(cx, what, &wire, &wire_before)?;
    Ok(1)
}

/// `move_async` to `target` with each fault point armed at each pass in turn, until a move
/// completes without reaching the armed pass (or the hook cannot skip passes, or the pair
/// has no route): a failure publishes nothing (source live and unchanged, destination
/// unchanged) and the retry carries the values. Returns how many failures fired; a point
/// still reached at pass [`PASS_BOUND`] breaks the promise.
fn injected(
    cx: &mut Context<'_>,
    faults: &dyn crate::faults::FaultHook,
    target: &Target,
    dtype: DType,
) -> Result2<usize> {
    let mut fired = 0;
    for point in faults.points() {
        for skip in 0.. {
            if skip == PASS_BOUND {
                return Err(cx.broken(format!(
                    "move_async to {} reached the fault point '{point}' on each of its first \
                     {PASS_BOUND} passes, every one failed in turn; a move of 5 values passing \
                     one point more than {PASS_BOUND} times is taken not to finish",
                    target.name()
                )));
            }
            let values = cx.rng.values(dtype, 5);
            let source = cx.carrier(dtype, &values)?;
            let tensor = compact(cx, source.clone(), 5)?;
            let Some(destination) = target.carrier(cx, dtype, 5)? else {
                return Ok(fired);
            };
            let before = cx.ok(Snapshot::of(&source), || "a snapshot".into())?;
            let destination_before = cx.ok(Snapshot::of(&destination), || "a snapshot".into())?;
            if !cx.ok(faults.arm(point, skip), || format!("arming '{point}'"))? {
                break;
            }
            let what = format!(
                "move_async to {} with a fault injected at pass {} through '{point}'",
                target.name(),
                skip + 1
            );
            let started = move_async(&tensor, &destination);
            let outcome = failure(cx, &what, started);
            let reached = faults.disarm();
            let outcome = outcome?;
            if !reached {
                break;
            }
            let Some(error) = outcome else { continue };
            if error.kind() == ErrorKind::NotImplemented {
                break;
            }
            fired += 1;
            let failed = format!("{what} (failing with '{error}')");
            unchanged(cx, &format!("{failed}, its source,"), &source, &before)?;
            cx.ensure(!source.is_released(), || {
                format!("{failed} released its source")
            })?;
            unchanged(
                cx,
                &format!("{failed}, its destination,"),
                &destination,
                &destination_before,
            )?;
            let retried = cx.ok(move_async(&tensor, &destination), || {
                format!("the same move after {what}")
            })?;
            let moved = cx.ok(retried.wait(), || format!("the same move after {what}"))?;
            let got = cx.ok(moved.to_values(), || "reading the moved tensor".into())?;
            cx.ensure(
                got.iter()
                    .zip(&before.values)
                    .all(|(g, e)| same_value(g, e)),
                || {
                    format!(
                        "after {what}, the retried move carried {got:?}, not {:?}",
                        before.values
                    )
                },
            )?;
        }
    }
    Ok(fired)
}
