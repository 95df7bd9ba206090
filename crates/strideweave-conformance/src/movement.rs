//! Moves to and from the CPU: values carried where a route exists, nothing changed where none
//! does (design: Movement; seed: "Transfer routes expose exact preparation and submission").

use strideweave::carriers::Cpu;
use strideweave::movement::move_to;
use strideweave::{Carrier, CarrierClass, DType, Error, ErrorKind, Shape, Tensor};

use crate::support::{same_value, Check, Context, Result2, Snapshot};

fn compact(cx: &Context<'_>, carrier: Carrier, n: usize) -> Result2<Tensor> {
    let shape = Shape::new(n).map_err(|e| cx.broken(e))?;
    cx.ok(Tensor::compact(carrier, shape), || {
        "a compact tensor".into()
    })
}

/// Whether a failed move is the "no route" refusal.
fn no_route(error: &Error) -> bool {
    error.kind() == ErrorKind::NotImplemented
}

pub(crate) fn cpu_moves(cx: &mut Context<'_>) -> Check {
    let storable = cx.storable()?;
    let mut routes = 0;
    let cpu_class = CarrierClass::of::<Cpu>();
    for dtype in storable {
        if ![DType::FLOAT32, DType::INT32, DType::BOOL].contains(&dtype) {
            continue;
        }
        for n in [1usize, 6] {
            let values = cx.rng.values(dtype, n);
            let source = cx.carrier(dtype, &values)?;
            let expected = cx.ok(Snapshot::of(&source), || "a snapshot".into())?;
            let tensor = compact(cx, source.clone(), n)?;
            let destination = cx.ok(Cpu::carrier(n, dtype, true, false), || {
                "a CPU carrier".into()
            })?;
            match move_to(&tensor, &destination) {
                Ok(moved) => {
                    routes += 1;
                    cx.ensure(moved.carrier().class() == cpu_class, || {
                        format!(
                            "a move to the CPU returned a {} tensor",
                            moved.carrier().class()
                        )
                    })?;
                    let got = cx.ok(moved.to_values(), || "reading the moved tensor".into())?;
                    for (i, (g, e)) in got.iter().zip(&expected.values).enumerate() {
                        cx.ensure(same_value(g, e), || {
                            format!("moving {n} {dtype} values to the CPU gave {g} at {i}, not {e}")
                        })?;
                    }
                    cx.ensure(source.is_released(), || {
                        "a move to the CPU left its source live (a move releases its source)".into()
                    })?;
                }
                Err(error) if no_route(&error) => {
                    let after = cx.ok(Snapshot::of(&source), || "a snapshot".into())?;
                    if let Some(change) = expected.difference(&after) {
                        return Err(cx.broken(format!(
                            "a refused move to the CPU changed its source: {change}"
                        )));
                    }
                }
                Err(error) => {
                    return Err(cx.broken(format!(
                        "moving {n} {dtype} values to the CPU failed: {error}"
                    )))
                }
            }

            let cpu = cx.ok(Cpu::from_values(&values, dtype, true), || {
                "a CPU carrier".into()
            })?;
            let from_cpu = compact(cx, cpu.clone(), n)?;
            let zeros = vec![dtype.zero().unwrap_or(values[0]); n];
            let target = cx.carrier(dtype, &zeros)?;
            let untouched = cx.ok(Snapshot::of(&target), || "a snapshot".into())?;
            match move_to(&from_cpu, &target) {
                Ok(moved) => {
                    routes += 1;
                    let got = cx.ok(moved.to_values(), || "reading the moved tensor".into())?;
                    for (i, (g, e)) in got.iter().zip(&expected.values).enumerate() {
                        cx.ensure(same_value(g, e), || {
                            format!(
                                "moving {n} {dtype} values from the CPU gave {g} at {i}, not {e}"
                            )
                        })?;
                    }
                    cx.ensure(cpu.is_released(), || {
                        "a move from the CPU left its CPU source live".into()
                    })?;
                }
                Err(error) if no_route(&error) => {
                    let after = cx.ok(Snapshot::of(&target), || "a snapshot".into())?;
                    if let Some(change) = untouched.difference(&after) {
                        return Err(cx.broken(format!(
                            "a refused move from the CPU changed its destination: {change}"
                        )));
                    }
                    cx.ensure(!cpu.is_released(), || {
                        "a refused move from the CPU released its source".into()
                    })?;
                }
                Err(error) => {
                    return Err(cx.broken(format!(
                        "moving {n} {dtype} values from the CPU failed: {error}"
                    )))
                }
            }
        }
    }
    let named = destinations(cx)?;
    if routes + named == 0 {
        cx.not_applicable =
            Some("no route to or from the CPU; refused moves changed nothing".into());
    }
    cx.notes.push(format!("{routes} moves took a route"));
    Ok(())
}

/// Moves to every destination the factory names: 1 and 6 values of each storable dtype the
/// destination stores arrive, and the source is released. Returns how many moves ran.
fn destinations(cx: &mut Context<'_>) -> Result2<usize> {
    let mut moved = 0;
    for name in cx.factory.destinations() {
        for dtype in cx.storable()? {
            for n in [1usize, 6] {
                let Ok(destination) = cx.factory.destination(&name, dtype, n) else {
                    continue;
                };
                let values = cx.rng.values(dtype, n);
                let source = cx.carrier(dtype, &values)?;
                let expected = cx.ok(Snapshot::of(&source), || "a snapshot".into())?;
                let tensor = compact(cx, source.clone(), n)?;
                let what = format!("moving {n} {dtype} values to {name}");
                let result = cx.ok(move_to(&tensor, &destination), || what.clone())?;
                let got = cx.ok(result.to_values(), || format!("reading after {what}"))?;
                for (i, (g, e)) in got.iter().zip(&expected.values).enumerate() {
                    cx.ensure(same_value(g, e), || {
                        format!("{what} gave {g} at {i}, not {e}")
                    })?;
                }
                cx.ensure(source.is_released(), || {
                    format!("{what} left its source live (a move releases its source)")
                })?;
                moved += 1;
            }
        }
        cx.notes
            .push(format!("moves to {name} carried their values"));
    }
    Ok(moved)
}
