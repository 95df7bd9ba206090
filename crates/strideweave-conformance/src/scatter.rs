//! Scatter and projection: where the class supports carrier scatter, a scatter writes exactly
//! the slots its mapping names, once, and a refused one changes nothing (docs/carriers.md,
//! Scatter); where its tensors are TiledEvictable tensors, the projections of
//! [`crate::tiled`] run too.

use strideweave::carriers::Cpu;
use strideweave::{Carrier, DType, ErrorKind, Layout, Shape, Stride, Tensor, Value};

use crate::cases::generic_tensor;
use crate::support::{same_value, Check, Context, Result2, Snapshot};

/// The slots of the receiver and the mappings the suite scatters through: `(extents,
/// strides, mapping offset)`, each landing on distinct slots inside 9.
const MAPPINGS: [(&[usize], &[usize], usize); 2] = [(&[4], &[2], 1), (&[2, 2], &[3, 1], 0)];

fn layout(cx: &Context<'_>, extents: &[usize], strides: &[usize]) -> Result2<Layout> {
    let shape = Shape::flat(extents).map_err(|e| cx.broken(e))?;
    let stride = Stride::flat(strides).map_err(|e| cx.broken(e))?;
    Layout::new(shape, stride).map_err(|e| cx.broken(e))
}

pub(crate) fn scatter(cx: &mut Context<'_>) -> Check {
    let dtype = cx.storable()?[0];
    let scattered = carrier_scatter(cx, dtype)?;
    let projected = crate::tiled::tiled(cx, dtype)?;
    if !scattered && !projected {
        cx.not_applicable = Some(
            "the class supports no carrier scatter (NotImplemented, nothing changed) and its \
             tensors are not TiledEvictable tensors (no project)"
                .into(),
        );
    }
    Ok(())
}

/// Where a scatter source lives: a carrier of the class under test, Generic or the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Own,
    Generic,
    Cpu,
}

impl Source {
    /// A source tensor of this kind holding `elements` under `layout`.
    fn tensor(
        self,
        cx: &Context<'_>,
        dtype: DType,
        elements: &[Value],
        layout: Layout,
    ) -> Result2<Tensor> {
        let tensor = match self {
            Source::Own => cx.factory.tensor(dtype, elements, 0, layout),
            Source::Generic => generic_tensor(dtype, elements, 0, layout),
            Source::Cpu => Cpu::from_values(elements, dtype, true)
                .and_then(|carrier| Tensor::new(carrier, 0, layout)),
        };
        cx.ok(tensor, || format!("a scatter source on {self:?}"))
    }
}

/// `Carrier::scatter` into a 9-slot carrier of the class through each mapping, from a tensor
/// of the class, a Generic and a CPU one (a class may refuse a source class: Type, nothing
/// changed); then the refusals, from a source the class took. Returns whether the class
/// supports scatter from any of them.
fn carrier_scatter(cx: &mut Context<'_>, dtype: DType) -> Result2<bool> {
    let mut ran = 0;
    let mut refused_sources = Vec::new();
    let mut taken = None;
    for (extents, strides, mapping_offset) in MAPPINGS {
        let mapping = layout(cx, extents, strides)?;
        for kind in [Source::Own, Source::Generic, Source::Cpu] {
            let elements = cx.rng.values(dtype, mapping.size());
            let canonical: Vec<usize> = extents
                .iter()
                .scan(1, |running, e| {
                    let stride = *running;
                    *running *= e;
                    Some(stride)
                })
                .collect();
            let dense = layout(cx, extents, &canonical)?;
            let source = kind.tensor(cx, dtype, &elements, dense)?;
            let slots = cx.rng.values(dtype, 9);
            let receiver = cx.carrier(dtype, &slots)?;
            let destination = cx.ok(
                Tensor::compact(receiver.clone(), Shape::new(9).map_err(|e| cx.broken(e))?),
                || "the scatter destination".into(),
            )?;
            let before = cx.ok(Snapshot::of(&receiver), || "a snapshot".into())?;
            let what = format!(
                "scattering {} {dtype} values from a {} tensor through {mapping} at mapping \
                 offset {mapping_offset} into a 9-slot carrier",
                mapping.size(),
                source.carrier().class()
            );
            match receiver.scatter(&source, &destination, &mapping, mapping_offset) {
                Err(error) if error.kind() == ErrorKind::NotImplemented => {
                    unchanged(cx, &what, &receiver, &before)?;
                    cx.notes
                        .push(format!("carrier scatter is not supported: {error}"));
                    return Ok(false);
                }
                Err(error) if error.kind() == ErrorKind::Type => {
                    unchanged(cx, &what, &receiver, &before)?;
                    let refusal = format!("{} ({error})", source.carrier().class());
                    if !refused_sources.contains(&refusal) {
                        refused_sources.push(refusal);
                    }
                    continue;
                }
                other => cx.ok(other, || what.clone())?,
            }
            taken.get_or_insert(kind);
            let mut expected = before.values.clone();
            let sent = cx.ok(source.to_values(), || "reading the source".into())?;
            for (index, value) in mapping.indices().zip(&sent) {
                expected[mapping_offset + index] = dtype.normalize(*value).unwrap_or(*value);
            }
            let after = cx.ok(Snapshot::of(&receiver), || "a snapshot".into())?;
            for (slot, (got, want)) in after.values.iter().zip(&expected).enumerate() {
                cx.ensure(same_value(got, want), || {
                    format!("after {what}, slot {slot} is {got}, expected {want}")
                })?;
            }
            cx.ensure(after.version == before.version + 1, || {
                format!(
                    "{what} moved the version from {} to {}; a scatter bumps it once",
                    before.version, after.version
                )
            })?;
            ran += 1;
        }
    }
    let Some(kind) = taken else {
        cx.notes.push(format!(
            "carrier scatter refused every source: {}",
            refused_sources.join(", ")
        ));
        return Ok(false);
    };
    refusals(cx, dtype, kind)?;
    cx.notes.push(format!(
        "{ran} scatters through {} mappings wrote exactly their slots{}; non-injective, \
         out-of-range and immutable scatters refused with nothing changed",
        MAPPINGS.len(),
        if refused_sources.is_empty() {
            String::new()
        } else {
            format!("; refused sources: {}", refused_sources.join(", "))
        }
    ));
    Ok(true)
}

/// A scatter that must be refused, with the kind due, changing nothing; the source is of a
/// kind the class took.
fn refusals(cx: &mut Context<'_>, dtype: DType, kind: Source) -> Check {
    let slots = cx.rng.values(dtype, 9);
    let receiver = cx.carrier(dtype, &slots)?;
    let nine = Shape::new(9).map_err(|e| cx.broken(e))?;
    let destination = cx.ok(Tensor::compact(receiver.clone(), nine.clone()), || {
        "the scatter destination".into()
    })?;
    let values = cx.rng.values(dtype, 4);
    let source = kind.tensor(cx, dtype, &values, layout(cx, &[4], &[1])?)?;
    let cases = [
        (
            layout(cx, &[4], &[0])?,
            0,
            ErrorKind::Value,
            "a mapping that is not injective",
        ),
        (
            layout(cx, &[4], &[1])?,
            7,
            ErrorKind::Value,
            "a mapping landing past slot 8",
        ),
    ];
    for (mapping, offset, kind, why) in cases {
        let before = cx.ok(Snapshot::of(&receiver), || "a snapshot".into())?;
        let what = format!("scattering through {why} ({mapping} at mapping offset {offset})");
        cx.expect_error(
            receiver.scatter(&source, &destination, &mapping, offset),
            kind,
            || what.clone(),
        )?;
        unchanged(cx, &what, &receiver, &before)?;
    }
    let frozen = cx.ok(receiver.new_like(&slots, false, None), || {
        "an immutable new_like".into()
    })?;
    let frozen_tensor = cx.ok(Tensor::compact(frozen.clone(), nine), || {
        "an immutable destination".into()
    })?;
    let before = cx.ok(Snapshot::of(&frozen), || "a snapshot".into())?;
    let what = "scattering into an immutable carrier";
    cx.expect_error(
        frozen.scatter(&source, &frozen_tensor, &layout(cx, &[4], &[1])?, 0),
        ErrorKind::Runtime,
        || what.into(),
    )?;
    unchanged(cx, what, &frozen, &before)
}

fn unchanged(cx: &Context<'_>, what: &str, carrier: &Carrier, before: &Snapshot) -> Check {
    let after = cx.ok(Snapshot::of(carrier), || format!("reading after {what}"))?;
    match before.difference(&after) {
        Some(change) => Err(cx.broken(format!("{what} changed the carrier: {change}"))),
        None => Ok(()),
    }
}
