//! The streamed sum of two gradients of one TiledEvictable tensor ([`streamed_sum`]): how a
//! second backward pass accumulates into a `.grad` that is already a TiledEvictable, tile by
//! tile through the primary tier within the policy's capacity.

use crate::gradient_sink::{gradient_homes, GradientSink};
use crate::tile_footprint::TileFootprint;
use crate::tile_stream::TileStream;
use crate::tiled_operand::{column_major_strides, flat, TiledOperand};
use crate::tiled_operations::{prefetch_depth_with, primary_room, Demand};
use crate::{TileProgress, TileResidency};
use strideweave_core::autograd::no_grad;
use strideweave_core::error::{Error, Result};
use strideweave_core::ops;
use strideweave_core::tensor::Tensor;

/// The name progress reports of the sum carry.
const NAME: &str = "add_gradients";

/// `a + b` for two gradients of one TiledEvictable tensor, streamed: `None` unless both are
/// TiledEvictable tensors of one grid, tile shape and dtype, on tiers of one primary class,
/// laid out alike (same offset and layout) with a tile-footprint compatible layout — then
/// their slots sum slot for slot, tile by tile.
///
/// Each tile of both is streamed through the primary tier (staged within the capacity of
/// `a`'s policy like any tiled work, the tile's sum counted as one more tile per item),
/// summed there with the primary tier's `add`, and placed in a fresh TiledEvictable made by
/// `a`'s factory where the policy's gradient plan says (asked with `ResidencyPurpose::Backward`;
/// by default the secondary tier when the policy bounds the primary). The result is laid out
/// like `a` and marked as a fresh gradient, so the engine keeps it without a copy. Neither
/// input changes; a failure releases everything made and returns the error.
pub(crate) fn streamed_sum(a: &Tensor, b: &Tensor) -> Option<Result<Tensor>> {
    let (ta, tb) = (
        TileResidency::table(a.carrier()).ok()?,
        TileResidency::table(b.carrier()).ok()?,
    );
    let (ga, gb) = (ta.grid(), tb.grid());
    let alike = ga.grid_shape() == gb.grid_shape()
        && ga.tile_shape() == gb.tile_shape()
        && a.dtype() == b.dtype()
        && a.offset() == b.offset()
        && a.layout() == b.layout()
        && a.carrier().size() == ga.logical_size()
        && b.carrier().size() == gb.logical_size();
    if !alike {
        return None;
    }
    let canonical = flat(
        ga.logical_shape(),
        &column_major_strides(ga.logical_shape()),
    )
    .ok()?;
    let compatible = (a.offset() == 0 && *a.layout() == canonical)
        || TileFootprint::check(a, ga, "summing gradients").is_ok();
    if !compatible {
        return None;
    }
    Some(sum(a, b, canonical))
}

/// The streamed sum of the storage of `a` and `b`, read through `canonical` (the logical
/// shape's canonical layout, under which each tile is its own slots).
fn sum(a: &Tensor, b: &Tensor, canonical: strideweave_core::Layout) -> Result<Tensor> {
    let _recording = no_grad();
    let storage_a = Tensor::new(a.carrier().clone(), 0, canonical.clone())?;
    let storage_b = Tensor::new(b.carrier().clone(), 0, canonical)?;
    let operands = vec![
        TiledOperand::new(&storage_a, NAME, 0)?,
        TiledOperand::new(&storage_b, NAME, 1)?,
    ];
    if operands[0].tier(crate::tile_copy::Tier::Primary).class()
        != operands[1].tier(crate::tile_copy::Tier::Primary).class()
    {
        return Err(Error::Type(format!(
            "'{NAME}' needs two TiledEvictable gradients computing on one primary tier class"
        )));
    }
    let count = operands[0].grid().tile_count();
    let items: Vec<Vec<(usize, usize)>> = (0..count).map(|t| vec![(0, t), (1, t)]).collect();
    // Each item holds its sum tile on the primary tier beside its staged tiles.
    let demand = Demand::new(&items).holding(operands[0].grid().tile_size(), 0);
    let depth = prefetch_depth_with(&operands, &demand);
    let room = primary_room(&operands, &demand, depth, 0, 0);
    let homes = gradient_homes(operands[0].table(), room)?;
    let mut sink = GradientSink::new(&operands[0], vec![1; count], homes)?;
    let policy = operands[0].table().policy().cloned();
    let stream = TileStream::new(&operands, depth);
    let streamed = stream.run(&items, |index, tiles, counters| {
        let summed = add_tiles(&tiles[0], &tiles[1])?;
        let slots = summed.carrier().size();
        stream.hold(slots);
        let kept_before = sink.held();
        let placed = sink.add(index, Some(summed));
        // The sum is gone, or it is the tile the sink placed on the primary tier.
        stream.let_go(slots);
        stream.hold(sink.held().saturating_sub(kept_before));
        let peak = stream.peak();
        placed?;
        if let Some(policy) = &policy {
            policy.try_on_progress(
                &TileProgress::new(
                    NAME,
                    (index + 1, count),
                    (counters.staged_tiles, counters.staged_slots),
                    depth,
                    peak,
                )
                .with_allocated(counters.allocated),
            )?;
        }
        Ok(())
    });
    drop(operands);
    match streamed {
        Ok(()) => sink.finish(a.offset(), a.layout()),
        Err(error) => {
            sink.release();
            Err(error)
        }
    }
}

/// `x + y` for two tiles on the primary tier's class: its `add`, or value by value through
/// its factory when it does not run `add`.
fn add_tiles(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    match ops::add(x, y) {
        Err(Error::UnsupportedOperationPlan(_)) => {
            let sums: Vec<strideweave_core::Value> = x
                .to_values()?
                .iter()
                .zip(y.to_values()?)
                .map(|(p, q)| {
                    strideweave_core::Value::Float(
                        p.as_f64().unwrap_or(0.0) + q.as_f64().unwrap_or(0.0),
                    )
                })
                .collect();
            Tensor::compact(
                x.carrier().new_like(&sums, true, Some(x.dtype()))?,
                x.shape().clone(),
            )
        }
        outcome => outcome,
    }
}
