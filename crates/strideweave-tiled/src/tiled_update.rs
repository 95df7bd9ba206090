//! `TiledEvictable::add_scaled`: an in-place update `target ← target + α · source` written
//! back tile by tile, streamed through the primary tier (the SGD step of out-of-core
//! training).

use crate::tile_copy::{Tier, TileCopy};
use crate::tile_stream::TileStream;
use crate::tile_table::TileTable;
use crate::tiled_operand::{column_major_strides, flat, TiledOperand};
use crate::tiled_operations::{prefetch_depth_with, Demand};
use crate::{TileLocation, TileProgress, TiledEvictable};
use strideweave_core::autograd::no_grad;
use strideweave_core::carrier::Carrier;
use strideweave_core::error::{Error, Result};
use strideweave_core::internal;
use strideweave_core::movement::move_to_scratch;
use strideweave_core::ops;
use strideweave_core::tensor::Tensor;

impl TiledEvictable {
    /// Updates `target` in place to `target + alpha · source`, tile by tile: each tile of
    /// both is streamed through the primary tier (within the target policy's
    /// [`primary_capacity`](crate::ResidencyPolicy::primary_capacity), prefetching
    /// like a tiled operation), computed there with the primary tier's `mul` and `add`, and
    /// written back as a new copy **on the tier the target tile was on** (an implicit target
    /// tile's new copy goes to the secondary tier when the capacity bounds the primary, else
    /// to the primary). A new copy on a tier of another class than the primary's is moved
    /// into a carrier of that tier: a spare the target keeps (a tile an earlier update
    /// replaced, or one a dropped gradient of the target gave back; at most two per tile, on
    /// the secondary tier, released with the target), otherwise a fresh one from the tier's
    /// factory. The SGD step of out-of-core
    /// training: `add_scaled(&w, &w.grad(), -lr)`.
    ///
    /// All or nothing: every new copy is made first and the table is switched in one step,
    /// so a failure (a staging read, a kernel, a tier write) changes nothing, releases what
    /// it made and keeps the spares it took. Then every tile is valid and dirty, the old
    /// copies are dropped (or kept as spares), and the target's version moves by exactly 1.
    /// Records no autograd node (a saved use of the target sees the version move). Both tiles
    /// pinned meanwhile (docs/tiers.md, Pinned tiles).
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
        // New copies on a tier of another class than the computing one are moved into
        // carriers of that tier: the ones an earlier update replaced first.
        let mut spares = table.take_spares();
        let mut made: Vec<Made> = Vec::with_capacity(count);
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
            let (copy, spare) = if home.class() == compact.class() {
                (compact, false)
            } else {
                let (destination, spare) = match spares.iter().position(|c| fits(c, home, size)) {
                    Some(found) => (spares.swap_remove(found), true),
                    None => (home.allocate_like(size, true, None, true)?, false),
                };
                // The destination is fresh or a spare: its old contents are not kept.
                let moved = Tensor::new(compact, 0, flat(&[size], &[1])?)
                    .and_then(|tile| move_to_scratch(&tile, &destination));
                if let Err(error) = moved {
                    if spare {
                        spares.push(destination);
                    } else {
                        let _ = destination.release();
                    }
                    return Err(error);
                }
                (destination, spare)
            };
            stream.let_go(transient);
            if tier == Tier::Primary {
                stream.hold(copy.size());
            }
            made.push(Made { tier, copy, spare });
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
            give_back(&table, made, spares);
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
            give_back(&table, made, spares);
            return Err(Error::Runtime(format!(
                "'{name}' cannot replace tile {} of its target: another running operation \
                 reads it (it is pinned)",
                crate::tile_grid::show(&to.grid().tile_coord(tile))
            )));
        }
        let mut replaced = Vec::with_capacity(count);
        for (entry, made) in inner.tiles.iter_mut().zip(made) {
            replaced.extend(entry.copy.take().map(|copy| (entry.location, copy)));
            entry.location = made.tier.location();
            entry.copy = Some(TileCopy::Own(made.copy));
            entry.dirty = true;
        }
        drop(inner);
        drop(operands);
        // A replaced secondary copy that a later update would move into a fresh carrier is
        // kept for it; nothing reads its contents again (no operation holds it: every tile
        // was pinned by this update alone).
        let secondary = table.token(Tier::Secondary).carrier();
        let moved_there = secondary.class() != table.token(Tier::Primary).carrier().class();
        for (location, copy) in replaced {
            match copy {
                TileCopy::Own(carrier)
                    if moved_there
                        && location == TileLocation::Secondary
                        && fits(&carrier, secondary, size) =>
                {
                    spares.push(carrier);
                }
                copy => copy.discard(),
            }
        }
        table.keep_spares(spares);
        internal::bump_version(target.carrier());
        Ok(())
    }
}

/// A new copy of a tile made by an update: the tier it goes to, its carrier, and whether
/// that carrier was a spare of the target.
struct Made {
    tier: Tier,
    copy: Carrier,
    spare: bool,
}

/// Whether `carrier` can take the new copy of a tile of `size` slots moved to the tier
/// `home`: a live carrier of that tier's class and dtype, of exactly that size.
fn fits(carrier: &Carrier, home: &Carrier, size: usize) -> bool {
    carrier.class() == home.class()
        && carrier.dtype() == home.dtype()
        && !carrier.is_released()
        && carrier.size() == size
}

/// After a failed update: the spares it took go back to the target's table, the carriers it
/// made are released, so the update leaves nothing more alive than before.
fn give_back(table: &TileTable, made: Vec<Made>, mut spares: Vec<Carrier>) {
    for made in made {
        if made.spare {
            spares.push(made.copy);
        } else {
            let _ = made.copy.release();
        }
    }
    table.keep_spares(spares);
}
