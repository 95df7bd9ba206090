//! The storage promises: sizes and reads, writes and versions, release, factories, and
//! dtype answers by identity (design: semantics of the carrier core; seed: "Storage
//! providers define the complete generic storage surface").

use std::sync::atomic::{AtomicUsize, Ordering};

use strideweave::{Carrier, DType, ErrorKind, Value};

use crate::support::{same_value, Check, Context, Snapshot};

fn read_all(
    cx: &Context<'_>,
    carrier: &Carrier,
    what: &str,
) -> crate::support::Result2<Vec<Value>> {
    (0..carrier.size())
        .map(|i| cx.ok(carrier.get(i), || format!("reading slot {i} of {what}")))
        .collect()
}

fn normalized(dtype: DType, values: &[Value]) -> Vec<Value> {
    values
        .iter()
        .map(|v| dtype.normalize(*v).unwrap_or(*v))
        .collect()
}

fn expect_values(cx: &Context<'_>, carrier: &Carrier, expected: &[Value], what: &str) -> Check {
    let got = read_all(cx, carrier, what)?;
    cx.ensure(got.len() == expected.len(), || {
        format!(
            "{what} has {} slots, expected {}",
            got.len(),
            expected.len()
        )
    })?;
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        cx.ensure(same_value(g, e), || {
            format!("{what} reads {g} at slot {i} where {e} was stored")
        })?;
    }
    Ok(())
}

/// Sizes 0, 1 and 7 of every storable dtype: size, dtype identity, reads, and an Index error
/// one past the end.
pub(crate) fn reads(cx: &mut Context<'_>) -> Check {
    let min = cx.factory.min_slots();
    if min > 0 {
        cx.notes.push(format!(
            "sizes below {min} skipped: the factory declares min_slots {min}"
        ));
    }
    for dtype in cx.storable()? {
        for n in [0usize, 1, 7].into_iter().filter(|&n| n >= min) {
            let values = cx.rng.values(dtype, n);
            let carrier = cx.carrier(dtype, &values)?;
            let what = format!("a carrier of {dtype} made with {n} values");
            cx.ensure(carrier.size() == n, || {
                format!("{what} reports size {}", carrier.size())
            })?;
            cx.ensure(carrier.dtype() == dtype, || {
                format!("{what} reports dtype {}", carrier.dtype())
            })?;
            expect_values(cx, &carrier, &normalized(dtype, &values), &what)?;
            cx.expect_error(carrier.get(n), ErrorKind::Index, || {
                format!("reading slot {n} of {what}")
            })?;
        }
        cx.notes
            .push(format!("{dtype}: sizes 0, 1 and 7 (from {min}) read back"));
    }
    Ok(())
}

/// The values a `dtype` slot refuses, from a fixed list of candidates.
fn refused_values(dtype: DType) -> Vec<Value> {
    [
        Value::Bool(true),
        Value::Int(3),
        Value::Float(0.5),
        Value::Int(1 << 40),
    ]
    .into_iter()
    .filter(|v| dtype.normalize(*v).is_err())
    .collect()
}

/// Writes land normalized with exactly one version step each; refused writes (out of range,
/// a value the dtype refuses, an immutable carrier) change nothing.
pub(crate) fn writes(cx: &mut Context<'_>) -> Check {
    for dtype in cx.storable()? {
        let values = cx.rng.values(dtype, 5);
        let carrier = cx.carrier(dtype, &values)?;
        let mut expected = normalized(dtype, &values);
        let start = carrier.version();
        for (step, slot) in [3usize, 0, 3, 4].into_iter().enumerate() {
            let value = if dtype == DType::FLOAT32 {
                Value::Float(0.1 * (step as f64 + 1.0))
            } else {
                cx.rng.value(dtype)
            };
            cx.ok(carrier.set(slot, value), || {
                format!("writing {value} to slot {slot} of a carrier of {dtype}")
            })?;
            expected[slot] = cx.ok(dtype.normalize(value), || "normalizing".into())?;
            let version = carrier.version();
            cx.ensure(version == start + step as u64 + 1, || {
                format!(
                    "after {} writes to a carrier of {dtype} its version is {version}, expected {} \
                     (each write bumps exactly once)",
                    step + 1,
                    start + step as u64 + 1
                )
            })?;
            expect_values(
                cx,
                &carrier,
                &expected,
                &format!("a carrier of {dtype} after writing {value} to slot {slot}"),
            )?;
        }
        let before = cx.ok(Snapshot::of(&carrier), || "a snapshot".into())?;
        cx.expect_error(carrier.set(5, expected[0]), ErrorKind::Index, || {
            format!("writing slot 5 of a 5-slot {dtype} carrier")
        })?;
        for value in refused_values(dtype) {
            let result = carrier.set(1, value);
            cx.ensure(result.is_err(), || {
                format!(
                    "writing {} value {value} to a carrier of {dtype} succeeded",
                    value.type_name()
                )
            })?;
        }
        let immutable = cx.ok(carrier.new_like(&values, false, None), || {
            format!("new_like(.., mutable = false) of a carrier of {dtype}")
        })?;
        cx.ensure(!immutable.is_mutable(), || {
            "new_like(.., mutable = false) made a mutable carrier".into()
        })?;
        let frozen = cx.ok(Snapshot::of(&immutable), || "a snapshot".into())?;
        cx.expect_error(immutable.set(0, expected[1]), ErrorKind::Runtime, || {
            format!("writing an immutable carrier of {dtype}")
        })?;
        let after = cx.ok(Snapshot::of(&carrier), || "a snapshot".into())?;
        if let Some(change) = before.difference(&after) {
            return Err(cx.broken(format!("a refused write to a carrier of {dtype}: {change}")));
        }
        let thawed = cx.ok(Snapshot::of(&immutable), || "a snapshot".into())?;
        if let Some(change) = frozen.difference(&thawed) {
            return Err(cx.broken(format!(
                "a refused write to an immutable carrier of {dtype}: {change}"
            )));
        }
        cx.notes.push(format!(
            "{dtype}: 4 writes, an out-of-range write, {} refused values and an immutable write",
            refused_values(dtype).len()
        ));
    }
    Ok(())
}

/// Release: idempotent, size 0, version kept, access refused (Runtime), dtype answers and
/// factories kept.
pub(crate) fn release(cx: &mut Context<'_>) -> Check {
    for dtype in cx.storable()? {
        let values = cx.rng.values(dtype, 4);
        let carrier = cx.carrier(dtype, &values)?;
        cx.ok(carrier.set(2, values[0]), || {
            "a write before release".into()
        })?;
        let version = carrier.version();
        cx.ok(carrier.release(), || {
            format!("releasing a carrier of {dtype}")
        })?;
        cx.ensure(carrier.is_released(), || {
            "is_released is false after release".into()
        })?;
        cx.ensure(carrier.size() == 0, || {
            format!("a released carrier reports size {}", carrier.size())
        })?;
        cx.ensure(carrier.version() == version, || {
            format!(
                "release moved the version from {version} to {}",
                carrier.version()
            )
        })?;
        cx.expect_error(carrier.get(0), ErrorKind::Runtime, || {
            "reading a released carrier".into()
        })?;
        cx.expect_error(carrier.set(0, values[1]), ErrorKind::Runtime, || {
            "writing a released carrier".into()
        })?;
        cx.ok(carrier.release(), || {
            "releasing a released carrier again".into()
        })?;
        cx.ensure(carrier.dtype() == dtype, || {
            "a released carrier lost its dtype".into()
        })?;
        let own = cx.ok(carrier.supports_storage_dtype(dtype), || {
            "supports_storage_dtype on a released carrier".into()
        })?;
        cx.ensure(own, || {
            format!("a released carrier of {dtype} answers supports_storage_dtype({dtype}) = false")
        })?;
        let fresh = cx.ok(carrier.new_like(&values, true, None), || {
            "new_like of a released prototype".into()
        })?;
        expect_values(
            cx,
            &fresh,
            &normalized(dtype, &values),
            "new_like of a released prototype",
        )?;
        let size = if cx.factory.fixed_extent_factories() {
            values.len()
        } else {
            3
        };
        let zeros = cx.ok(carrier.allocate_like(size, true, None, false), || {
            format!("allocate_like({size}) of a released prototype")
        })?;
        cx.ensure(!zeros.is_released() && zeros.size() == size, || {
            format!(
                "allocate_like({size}) of a released prototype gave size {} (released {})",
                zeros.size(),
                zeros.is_released()
            )
        })?;
        cx.notes.push(format!(
            "{dtype}: released, released again, used as a prototype"
        ));
    }
    Ok(())
}

/// `new_like` and `allocate_like`: same exact class, size, values or zeros, version 0,
/// independent of the prototype, size 0 allowed, other storable dtypes by identity, an
/// unstorable dtype refused (Value).
pub(crate) fn factories(cx: &mut Context<'_>) -> Check {
    let storable = cx.storable()?;
    let fixed = cx.factory.fixed_extent_factories();
    let min = cx.factory.min_slots();
    for &dtype in &storable {
        let values = cx.rng.values(dtype, 4);
        let prototype = cx.carrier(dtype, &values)?;
        cx.ok(prototype.set(0, values[1]), || {
            "a write to the prototype".into()
        })?;
        let before = cx.ok(Snapshot::of(&prototype), || "a snapshot".into())?;
        let others = cx.rng.values(dtype, if fixed { 4 } else { 3 });
        let copy = cx.ok(prototype.new_like(&others, true, None), || {
            format!("new_like({} values) of a carrier of {dtype}", others.len())
        })?;
        cx.ensure(copy.class() == prototype.class(), || {
            format!(
                "new_like made a {} carrier from a {}",
                copy.class(),
                prototype.class()
            )
        })?;
        cx.ensure(!copy.same_as(&prototype), || {
            "new_like returned the prototype itself".into()
        })?;
        cx.ensure(
            copy.version() == 0 && copy.dtype() == dtype && copy.is_mutable(),
            || {
                format!(
                    "new_like made a carrier with version {}, dtype {}, mutable {}",
                    copy.version(),
                    copy.dtype(),
                    copy.is_mutable()
                )
            },
        )?;
        expect_values(
            cx,
            &copy,
            &normalized(dtype, &others),
            "new_like of fresh values",
        )?;
        cx.ok(copy.set(1, values[2]), || {
            "a write to a new_like carrier".into()
        })?;
        let after = cx.ok(Snapshot::of(&prototype), || "a snapshot".into())?;
        if let Some(change) = before.difference(&after) {
            return Err(cx.broken(format!(
                "writing a new_like carrier changed its prototype: {change}"
            )));
        }
        let sizes: Vec<usize> = if fixed {
            cx.expect_error(
                prototype.new_like(&values[..3], true, None),
                ErrorKind::Value,
                || {
                    "new_like(3 values) of a 4-slot prototype whose factories keep its extent"
                        .into()
                },
            )?;
            cx.expect_error(
                prototype.allocate_like(5, true, None, false),
                ErrorKind::Value,
                || "allocate_like(5) of a 4-slot prototype whose factories keep its extent".into(),
            )?;
            vec![4]
        } else {
            if min == 0 {
                let empty = cx.ok(prototype.new_like(&[], true, None), || {
                    "new_like(no values)".into()
                })?;
                cx.ensure(empty.size() == 0, || {
                    format!("new_like(no values) has size {}", empty.size())
                })?;
            }
            [0usize, 1, 5].into_iter().filter(|&n| n >= min).collect()
        };
        for &size in &sizes {
            let zeros = cx.ok(prototype.allocate_like(size, true, None, false), || {
                format!("allocate_like({size}) of a carrier of {dtype}")
            })?;
            cx.ensure(
                zeros.class() == prototype.class() && zeros.version() == 0,
                || {
                    format!(
                        "allocate_like({size}) made a {} carrier at version {}",
                        zeros.class(),
                        zeros.version()
                    )
                },
            )?;
            let zero = dtype.zero().unwrap_or(Value::Bool(false));
            expect_values(
                cx,
                &zeros,
                &vec![zero; size],
                &format!("allocate_like({size})"),
            )?;
            let unspecified = cx.ok(prototype.allocate_like(size, true, None, true), || {
                format!("allocate_like({size}, empty = true)")
            })?;
            cx.ensure(unspecified.size() == size, || {
                format!(
                    "allocate_like({size}, empty = true) has size {}",
                    unspecified.size()
                )
            })?;
        }
        let two = if fixed { 4 } else { 2 };
        for &other in &storable {
            let converted = cx.ok(
                prototype.allocate_like(two, true, Some(other), false),
                || format!("allocate_like({two}, dtype = {other}) of a carrier of {dtype}"),
            )?;
            cx.ensure(converted.dtype() == other, || {
                format!(
                    "allocate_like(dtype = {other}) made a {} carrier",
                    converted.dtype()
                )
            })?;
        }
        cx.expect_error(
            prototype.allocate_like(two, true, Some(DType::FLOAT64), false),
            ErrorKind::Value,
            || "allocate_like(dtype = Float64), a dtype no carrier stores".into(),
        )?;
        cx.notes.push(format!(
            "{dtype}: new_like and allocate_like of sizes {sizes:?}{}, {} dtypes",
            if fixed {
                " (fixed extent: other sizes refused)"
            } else {
                ""
            },
            storable.len()
        ));
    }
    Ok(())
}

/// A counter for the names of impostor dtypes, unique within the process.
static IMPOSTORS: AtomicUsize = AtomicUsize::new(0);

/// Identity answers: the same in every state (fresh, written, empty, factory-made,
/// released), true for the carrier's own dtype, false for Float64, categories, narrow
/// and a freshly registered 32-bit floating dtype that only shares Float32's shape.
pub(crate) fn dtype_answers(cx: &mut Context<'_>) -> Check {
    let storable = cx.storable()?;
    let dtype = storable[0];
    let impostor = {
        let n = IMPOSTORS.fetch_add(1, Ordering::Relaxed);
        let name = format!("conformance_impostor_f32_{}_{n}", std::process::id());
        cx.ok(DType::register_simple(&name, 32, DType::FLOATING), || {
            "registering an impostor dtype".into()
        })?
    };
    let mut candidates = DType::registered();
    if !candidates.contains(&impostor) {
        candidates.push(impostor);
    }
    let values = cx.rng.values(dtype, 3);
    let carrier = cx.carrier(dtype, &values)?;
    let answers = |c: &Carrier, state: &str| -> crate::support::Result2<Vec<bool>> {
        candidates
            .iter()
            .map(|d| {
                cx.ok(c.supports_storage_dtype(*d), || {
                    format!("supports_storage_dtype({d}) on a {state} carrier")
                })
            })
            .collect()
    };
    let fresh = answers(&carrier, "fresh")?;
    for (d, answer) in candidates.iter().zip(&fresh) {
        let never = *d == DType::FLOAT64 || d.is_category() || *d == impostor;
        cx.ensure(!(never && *answer), || {
            format!(
                "supports_storage_dtype({d}) = true; {d} is {}",
                if *d == impostor {
                    "a freshly registered 32-bit floating dtype, equal to Float32 in name \
                     shape and bits but not in identity"
                } else if *d == DType::FLOAT64 {
                    "accumulator-only"
                } else {
                    "a category"
                }
            )
        })?;
        cx.ensure(*d != dtype || *answer, || {
            format!("supports_storage_dtype({dtype}) = false on a carrier of {dtype}")
        })?;
    }
    cx.ok(carrier.set(0, values[1]), || "a write".into())?;
    let mut states: Vec<(&str, Carrier)> = vec![("written", carrier.clone())];
    if cx.factory.fixed_extent_factories() {
        states.push((
            "allocate_like",
            cx.ok(carrier.allocate_like(3, true, None, false), || {
                "allocate_like(3)".into()
            })?,
        ));
    } else {
        if cx.factory.min_slots() == 0 {
            states.push((
                "empty",
                cx.ok(carrier.new_like(&[], true, None), || {
                    "new_like(no values)".into()
                })?,
            ));
        }
        states.push((
            "allocate_like(9)",
            cx.ok(carrier.allocate_like(9, true, None, false), || {
                "allocate_like(9)".into()
            })?,
        ));
    }
    for (state, c) in &states {
        let got = answers(c, state)?;
        if let Some((d, (a, b))) = candidates
            .iter()
            .zip(fresh.iter().zip(&got))
            .find(|(_, (a, b))| a != b)
        {
            return Err(cx.broken(format!(
                "supports_storage_dtype({d}) answered {a} on a fresh carrier but {b} on a {state} \
                 one; the answer must not depend on the carrier's state"
            )));
        }
    }
    cx.ok(carrier.release(), || "release".into())?;
    let got = answers(&carrier, "released")?;
    if let Some((d, (a, b))) = candidates
        .iter()
        .zip(fresh.iter().zip(&got))
        .find(|(_, (a, b))| a != b)
    {
        return Err(cx.broken(format!(
            "supports_storage_dtype({d}) answered {a} before release and {b} after; the answer \
             must not depend on release"
        )));
    }
    cx.notes.push(format!(
        "{} dtypes asked in 5 states; stores {}",
        candidates.len(),
        storable
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}
