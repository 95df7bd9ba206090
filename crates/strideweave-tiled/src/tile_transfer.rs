//! [`TileTransfer`]: copying one tile's valid copy to the other tier through the tiers' public
//! behaviour (factories, element access and movement).

use crate::tile_copy::{Tier, TileCopy};
use crate::tile_grid::TileGrid;
use crate::tiled_operand::{column_major_strides, flat};
use parking_lot::ReentrantMutex;
use strideweave_core::autograd::no_grad;
use strideweave_core::carrier::{Carrier, OwnershipToken};
use strideweave_core::error::Result;
use strideweave_core::movement::{
    copy_to_scratch, move_async_to_scratch, move_to_scratch, MoveHandle,
};
use strideweave_core::tensor::Tensor;
use strideweave_core::Layout;

/// The work started for one tile.
enum Work {
    /// A tier move of the tile's own carrier into a fresh carrier of the destination tier
    /// (the move releases the source at its commit).
    Moving(MoveHandle),
    /// The tile's seed slots, already copied into `destination` (a move would release the
    /// whole seed tier, so a seed tile is copied, not moved: see [`copy_seed`]).
    Copied(Carrier),
}

/// One tile on its way from tier `from` to tier `to`.
pub(crate) struct TileTransfer {
    tile: usize,
    from: Tier,
    to: Tier,
    source: TileCopy,
    work: Work,
}

/// How one transfer ended once waited.
pub(crate) enum Landed {
    /// The tile's contents are in `destination`, a carrier of the destination tier; a moved
    /// source is released, a copied one is still intact.
    Arrived(Carrier),
    /// The transfer failed; the source copy is intact.
    Failed(strideweave_core::Error),
}

/// The flat layout of a tile carrier.
fn tile_layout(grid: &TileGrid) -> Result<Layout> {
    Ok(Layout::from_flat(&[grid.tile_size()], &[1])?)
}

impl TileTransfer {
    /// Starts copying `tile`'s `source` copy from tier `from` (owned through `from_token`) to
    /// a fresh carrier made by the factory of the tier owned through `to_token`.
    ///
    /// Errors from the factory, a seed read, a destination write or the move's pre-submission
    /// checks return here with nothing changed (a fresh destination is released). `seed` is
    /// the table's seed lock (see [`copy_seed`]).
    pub(crate) fn start(
        grid: &TileGrid,
        tile: usize,
        (from, from_token): (Tier, &OwnershipToken),
        (to, to_token): (Tier, &OwnershipToken),
        source: TileCopy,
        seed: &ReentrantMutex<()>,
    ) -> Result<TileTransfer> {
        // Residency records no autograd node: the move runs with recording off.
        let _grad = no_grad();
        let size = grid.tile_size();
        let fresh = to_token.carrier().allocate_like(size, true, None, true)?;
        let work = match &source {
            TileCopy::Own(carrier) => {
                let started = tile_layout(grid)
                    .and_then(|layout| Tensor::new(carrier.clone(), 0, layout))
                    .and_then(|tensor| move_async_to_scratch(&tensor, &fresh));
                match started {
                    Ok(handle) => Work::Moving(handle),
                    Err(error) => {
                        let _ = fresh.release();
                        return Err(error);
                    }
                }
            }
            TileCopy::Seed => {
                if let Err(error) = copy_seed(grid, tile, from_token.carrier(), &fresh, seed) {
                    let _ = fresh.release();
                    return Err(error);
                }
                Work::Copied(fresh)
            }
        };
        Ok(TileTransfer {
            tile,
            from,
            to,
            source,
            work,
        })
    }

    /// The tile index.
    pub(crate) fn tile(&self) -> usize {
        self.tile
    }

    /// The source tier.
    pub(crate) fn from(&self) -> Tier {
        self.from
    }

    /// The destination tier.
    pub(crate) fn to(&self) -> Tier {
        self.to
    }

    /// The source copy.
    pub(crate) fn source(&self) -> &TileCopy {
        &self.source
    }

    /// Whether the transfer has reached its terminal outcome.
    pub(crate) fn is_done(&self) -> bool {
        match &self.work {
            Work::Moving(handle) => handle.done(),
            Work::Copied(_) => true,
        }
    }

    /// Blocks until the transfer is terminal.
    pub(crate) fn land(&self) -> Landed {
        match &self.work {
            Work::Moving(handle) => match handle.wait() {
                Ok(moved) => Landed::Arrived(moved.carrier().clone()),
                Err(error) => Landed::Failed(error),
            },
            Work::Copied(destination) => Landed::Arrived(destination.clone()),
        }
    }

    /// Whether the source copy was consumed (released) by a successful move.
    pub(crate) fn consumed_source(&self) -> bool {
        matches!(self.work, Work::Moving(_))
    }
}

/// Copies tile `tile`'s slots of the full seed tier `seed` into `fresh`, a carrier of
/// `tile_size` slots (local index `l` at slot `l`) whose old contents nobody reads.
///
/// The tile's slots are one strided region of the seed tier, starting at the tile's first
/// slot and spanning its cosize. That span is copied in bulk with the tiers' public
/// non-destructive copy (`movement::copy_to`, here without saving the destination first): for
/// a tile whose span is exactly its slots (a tile covering the leading axes, or a rank-1
/// grid) straight into `fresh`; otherwise into a scratch carrier of `fresh`'s class, from
/// which the tile's slots are compacted one by one (reading the scratch, not the seed tier).
/// A copy claims the seed tier while it runs, so copies hold the table's `lock` (writes to
/// seed slots wait for it): when another thread holds it, or the seed tier is already
/// claimed (a tier calling back into its carrier from inside a copy), the slots are read one
/// by one instead, which claims nothing. Any failure leaves `seed` unchanged; `fresh` may
/// hold part of the tile.
fn copy_seed(
    grid: &TileGrid,
    tile: usize,
    seed: &Carrier,
    fresh: &Carrier,
    lock: &ReentrantMutex<()>,
) -> Result<()> {
    let size = grid.tile_size();
    let slot_by_slot = || {
        (0..size).try_for_each(|local| {
            let value = seed.get(grid.join(tile, local))?;
            fresh.set(local, value)
        })
    };
    let Some(_copying) = lock.try_lock() else {
        return slot_by_slot();
    };
    if seed.is_claimed() {
        return slot_by_slot();
    }
    let region = flat(
        grid.tile_shape(),
        &column_major_strides(grid.logical_shape()),
    )?;
    let span = region.cosize();
    let origin = grid.join(tile, 0);
    if span == size {
        // The region is the tile's canonical order: element `l` lands on slot `l`.
        copy_to_scratch(&Tensor::new(seed.clone(), origin, region)?, fresh)?;
        return Ok(());
    }
    let scratch = fresh.allocate_like(span, true, None, true)?;
    let compacted = Layout::from_flat(&[span], &[1])
        .map_err(Into::into)
        .and_then(|whole| copy_to_scratch(&Tensor::new(seed.clone(), origin, whole)?, &scratch))
        .and_then(|_| {
            (0..size).try_for_each(|local| {
                let at = region.index_of(local)?;
                fresh.set(local, scratch.get(at)?)
            })
        });
    let _ = scratch.release();
    compacted
}

/// Moves a landed tile back from `destination` into a fresh carrier of the source tier (the
/// compensation of a request that failed elsewhere): the new own copy on the source tier.
pub(crate) fn move_back(
    grid: &TileGrid,
    destination: &Carrier,
    source_tier: &OwnershipToken,
) -> Result<Carrier> {
    let _grad = no_grad();
    let fresh = source_tier
        .carrier()
        .allocate_like(grid.tile_size(), true, None, true)?;
    let moved = tile_layout(grid)
        .and_then(|layout| Tensor::new(destination.clone(), 0, layout))
        .and_then(|tensor| move_to_scratch(&tensor, &fresh));
    match moved {
        Ok(_) => Ok(fresh),
        Err(error) => {
            let _ = fresh.release();
            Err(error)
        }
    }
}
