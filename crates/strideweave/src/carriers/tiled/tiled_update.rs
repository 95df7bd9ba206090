//! `TiledEvictable::add_scaled`: an in-place update `target ← target + α · source` written
//! back tile by tile, streamed through the primary tier (the SGD step of out-of-core
//! training).

use crate::autograd::no_grad;
use crate::carrier::Carrier;
use crate::carriers::tiled::tile_copy::{Tier, TileCopy};
use crate::carriers::tiled::tile_stream::TileStream;
use crate::carriers::tiled::tiled_operand::{column_major_strides, flat, TiledOperand};
use crate::carriers::tiled::tiled_operations::{prefetch_depth_with, Demand};
use crate::carriers::tiled::{TileLocation, TileProgress, TiledEvictable};
use crate::error::{Error, Result};
use crate::movement::move_to_scratch;
use crate::ops;
use crate::tensor::Tensor;

impl TiledEvictable {
    /// Updates `target` in place to `target + alpha · source`, tile by tile: each tile of
    /// both is streamed through the primary tier (within the target policy's
    /// [`primary_capacity`](crate::carriers::ResidencyPolicy::primary_capacity), prefetching
    /// like a tiled operation), computed there with the primary tier's `mul` and `add`, and
    /// written back as a new copy **on the tier the target tile was on** (an implicit target
    /// tile's new copy goes to the secondary tier when the capacity bounds the primary, else
    /// to the primary). The SGD step of out-of-core training: `add_scaled(&w, &w.grad(), -lr)`.
    ///
    /// All or nothing: every new copy is made first and the table is switched in one step,
    /// so a failure (a staging read, a kernel, a tier write) changes nothing and releases what
    /// it made. Then every tile is valid and dirty, the old copies are dropped, and the
    /// target's version moves by exactly 1. Records no autograd node (a saved use of the
    /// target sees the version move). Both tiles pinned meanwhile (docs/tiers.md, Pinned
    /// tiles).
    ///
    /// Errors before anything changes: a tensor that is not a TiledEvictable (Type); a
    /// released or immutable target (Runtime); tensors that are not the canonical layout of
    /// their logical shape at offset 0, or of different grids or tile shapes (Value); an
    /// invalid tile of either (Runtime, naming it).
    pub fn add_scaled(target: &Tensor, source: &Tensor, alpha: f64) -> Result<()> {
        let _recording = no_grad();
        let name = "add_scaled";
        if !target.carrier().is_mutable() {
            return Err(Error::Runtime(format!(
                "'{name}' writes its target, but the TiledEvictable {} is immutable",
                target.carrier().class()
            )));
        }
        let operands = vec![
            TiledOperand::new(target, name, 0)?,
            TiledOperand::new(source, name, 1)?,
        ];
        let (to, from) = (&operands[0], &operands[1]);
        if !to.is_canonical() || !from.is_canonical() {
            return Err(Error::Value(format!(
                "'{name}' needs both tensors in the canonical layout of their logical shape"
            )));
        }
        if to.grid().grid_shape() != from.grid().grid_shape()
            || to.tile_shape() != from.tile_shape()
        {
            return Err(Error::Value(format!(
                "'{name}' needs one tiling: the target has grid {:?} of tiles {:?}, the \
                 source grid {:?} of tiles {:?}",
                to.grid().grid_shape(),
                to.tile_shape(),
                from.grid().grid_shape(),
                from.tile_shape()
            )));
        }
        let table = to.table().clone();
        let bounded = table
            .policy()
            .and_then(|policy| policy.primary_capacity())
            .is_some();
        let count = to.grid().tile_count();
        let items: Vec<Vec<(usize, usize)>> = (0..count).map(|t| vec![(0, t), (1, t)]).collect();
        let shape = to.tile_shape().to_vec();
        let size = to.grid().tile_size();
        // The computing item holds its scaled tile and its sum; each new copy of a primary
        // tile waits on the primary tier beside the old one until all are installed.
        let waiting = (0..count)
            .filter(|&t| to.location(t) == TileLocation::Primary)
            .count();
        let demand = Demand::new(&items).holding(0, (2 + waiting) * size);
        let depth = prefetch_depth_with(&operands, &demand);
        let policy = table.policy().cloned();
        let mut made: Vec<(Tier, Carrier)> = Vec::with_capacity(count);
        let stream = TileStream::new(&operands, depth);
        let streamed = stream.run(&items, |index, tiles, counters| {
            let scaled = ops::mul(&tiles[1], alpha)?;
            stream.hold(scaled.carrier().size());
            let sum = ops::add(&tiles[0], &scaled)?;
            let transient = scaled.carrier().size() + sum.carrier().size();
            stream.hold(sum.carrier().size());
            drop(scaled);
            let compact = if sum.offset() == 0
                && sum.carrier().size() == size
                && *sum.layout() == flat(&shape, &column_major_strides(&shape))?
            {
                sum.carrier().clone()
            } else {
                ops::mul(&sum, 1.0)?.carrier().clone()
            };
            let tier = match to.location(index) {
                TileLocation::Primary => Tier::Primary,
                TileLocation::Implicit if !bounded => Tier::Primary,
                _ => Tier::Secondary,
            };
            let home = table.token(tier).carrier();
            let copy = if home.class() == compact.class() {
                compact
            } else {
                let destination = home.allocate_like(size, true, None, true)?;
                let moved = Tensor::new(compact, 0, flat(&[size], &[1])?)
                    .and_then(|tile| move_to_scratch(&tile, &destination));
                if let Err(error) = moved {
                    let _ = destination.release();
                    return Err(error);
                }
                destination
            };
            stream.let_go(transient);
            if tier == Tier::Primary {
                stream.hold(copy.size());
            }
            made.push((tier, copy));
            if let Some(policy) = &policy {
                policy.try_on_progress(
                    &TileProgress::new(
                        name,
                        (index + 1, count),
                        (counters.staged_tiles, counters.staged_slots),
                        depth,
                        stream.peak(),
                    )
                    .with_allocated(counters.allocated),
                )?;
            }
            Ok(())
        });
        if let Err(error) = streamed {
            for (_, carrier) in made {
                let _ = carrier.release();
            }
            return Err(error);
        }
        let ours = [to.pin_id(), from.pin_id()];
        let mut inner = table.lock();
        let foreign = inner
            .tiles
            .iter()
            .position(|entry| entry.pins.iter().any(|pin| !ours.contains(pin)));
        if let Some(tile) = foreign {
            drop(inner);
            for (_, carrier) in made {
                let _ = carrier.release();
            }
            return Err(Error::Runtime(format!(
                "'{name}' cannot replace tile {} of its target: another running operation \
                 reads it (it is pinned)",
                crate::carriers::tiled::tile_grid::show(&to.grid().tile_coord(tile))
            )));
        }
        let mut replaced = Vec::with_capacity(count);
        for (entry, (tier, carrier)) in inner.tiles.iter_mut().zip(made) {
            replaced.extend(entry.copy.take());
            entry.location = tier.location();
            entry.copy = Some(TileCopy::Own(carrier));
            entry.dirty = true;
        }
        drop(inner);
        drop(operands);
        for copy in replaced {
            copy.discard();
        }
        target.carrier().bump_version();
        Ok(())
    }
}
