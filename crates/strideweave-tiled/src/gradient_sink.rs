//! [`GradientSink`]: a gradient of a TiledEvictable tensor built tile by tile into a fresh
//! TiledEvictable, each complete tile placed where the policy's gradient plan says
//! ([`gradient_homes`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::tile_copy::{Tier, TileCopy};
use crate::tile_grid::{decode, encode, TileGrid};
use crate::tile_table::TileTable;
use crate::tiled_operand::{column_major_strides, flat, TiledOperand};
use crate::{ResidencyPurpose, TileLocation, TileResidency, TileSet};
use strideweave_core::carrier::Carrier;
use strideweave_core::error::{Error, Result};
use strideweave_core::movement::move_to_scratch;
use strideweave_core::ops;
use strideweave_core::tensor::Tensor;

/// Where each tile of a fresh gradient of the carrier of `table` goes, by the policy's plan
/// for purpose [`Backward`](ResidencyPurpose::Backward) over every tile of the gradient.
///
/// The plan only optimizes: its promotions (in the set's order, at most as many tiles as fit
/// in `room` slots when the capacity leaves only that room) go to the primary tier, its evictions to the
/// secondary tier, and every other tile where the default puts it — the secondary tier when
/// the policy bounds the primary tier, the primary tier otherwise (and always without a
/// policy). A coordinate outside the grid is a Value error naming it.
pub(crate) fn gradient_homes(table: &TileTable, room: Option<usize>) -> Result<Vec<Tier>> {
    let grid = table.grid();
    let Some(policy) = table.policy() else {
        return Ok(vec![Tier::Primary; grid.tile_count()]);
    };
    let default = match policy.primary_capacity() {
        Some(_) => Tier::Secondary,
        None => Tier::Primary,
    };
    let mut homes = vec![default; grid.tile_count()];
    let every = TileSet::new((0..grid.tile_count()).map(|t| grid.tile_coord(t)))?;
    let plan = policy.plan(&every, ResidencyPurpose::Backward)?;
    for coord in plan.evict().coordinates() {
        homes[grid.tile_index(coord)?] = Tier::Secondary;
    }
    let mut left = room.map_or(usize::MAX, |slots| slots / grid.tile_size().max(1));
    for coord in plan.promote().coordinates() {
        let tile = grid.tile_index(coord)?;
        if left == 0 {
            break;
        }
        homes[tile] = Tier::Primary;
        left -= 1;
    }
    Ok(homes)
}

/// How many of `homes` are on the primary tier.
pub(crate) fn on_primary(homes: &[Tier]) -> usize {
    homes.iter().filter(|home| **home == Tier::Primary).count()
}

/// The gradient of one TiledEvictable tensor being built tile by tile.
///
/// Invariants: `fresh` is a TiledEvictable made by the tensor carrier's factory (same tier
/// classes, geometry and policy) whose tiles are all invalid until placed; a placed tile is
/// valid and dirty, its copy compact (local index `l` at slot `l`) on the tier `homes` names
/// for it; on any failure the caller releases the sink ([`release`](Self::release)) and
/// nothing made by it stays alive.
pub(crate) struct GradientSink {
    fresh: Carrier,
    table: Arc<TileTable>,
    /// The table of the tensor's carrier: its spares are the first destinations of the
    /// gradient's secondary tiles, and get them back when the gradient is dropped.
    home: Arc<TileTable>,
    /// The partial gradient of each tile not yet complete.
    parts: Vec<Option<Tensor>>,
    /// How many contributions each tile still expects.
    remaining: Vec<usize>,
    /// Where each complete tile goes.
    homes: Vec<Tier>,
    /// For a tensor permuted within its tiles: the tensor, whose layout says where each
    /// logical coordinate of a tile is stored (contributions arrive in the tile's logical
    /// order).
    permuted: Option<Tensor>,
    /// How many complete tiles were placed on the primary tier.
    placed_primary: usize,
}

impl GradientSink {
    /// A sink for the gradient of `operand`'s tensor, tile `t` expecting `remaining[t]`
    /// contributions (in the tile's logical order) and going to `homes[t]` once complete.
    pub(crate) fn new(
        operand: &TiledOperand,
        remaining: Vec<usize>,
        homes: Vec<Tier>,
    ) -> Result<GradientSink> {
        let grid = operand.grid();
        let fresh = operand
            .tier_owner()
            .allocate_like(grid.logical_size(), true, None, true)?;
        let table = match TileResidency::table(&fresh) {
            Ok(table) => table,
            Err(error) => {
                let _ = fresh.release();
                return Err(error);
            }
        };
        table.set_spare_home(operand.table());
        Ok(GradientSink {
            fresh,
            table,
            home: Arc::clone(operand.table()),
            parts: vec![None; grid.tile_count()],
            remaining,
            homes,
            permuted: (!operand.is_canonical()).then(|| operand.tensor().clone()),
            placed_primary: 0,
        })
    }

    /// Adds one contribution to tile `tile`; the tile is placed once it is complete.
    pub(crate) fn add(&mut self, tile: usize, contribution: Option<Tensor>) -> Result<()> {
        if let Some(part) = contribution {
            self.parts[tile] = Some(match self.parts[tile].take() {
                None => part,
                Some(sum) => ops::add(&sum, &part)?,
            });
        }
        self.remaining[tile] = self.remaining[tile].saturating_sub(1);
        if self.remaining[tile] == 0 {
            self.place(tile)?;
        }
        Ok(())
    }

    /// Makes the complete gradient of `tile` a valid, dirty tile of the fresh carrier, on
    /// the tier its home names.
    fn place(&mut self, tile: usize) -> Result<()> {
        let grid = self.table.grid().clone();
        let shape = grid.tile_shape();
        let compact_layout = flat(shape, &column_major_strides(shape))?;
        let part = match self.parts[tile].take() {
            Some(part) => part,
            None => return Ok(()),
        };
        let compact = if let Some(tensor) = &self.permuted {
            stored_order(&part, tensor, &grid, tile)?
        } else if part.offset() == 0
            && part.carrier().size() == grid.tile_size()
            && *part.layout() == compact_layout
        {
            part.carrier().clone()
        } else {
            compact_copy(&part)?.carrier().clone()
        };
        let tier = self.homes[tile];
        let home = self.table.token(tier).carrier();
        let carrier = if home.class() == compact.class() {
            compact
        } else {
            let size = grid.tile_size();
            let spare = self.home.take_spare(|c| {
                c.class() == home.class()
                    && c.dtype() == home.dtype()
                    && c.size() == size
                    && !c.is_released()
            });
            let (destination, spare) = match spare {
                Some(spare) => (spare, true),
                None => (home.allocate_like(size, true, None, true)?, false),
            };
            // A fresh carrier or a spare: its old contents are not kept.
            let moved = Tensor::new(compact, 0, flat(&[size], &[1])?)
                .and_then(|tile| move_to_scratch(&tile, &destination));
            if let Err(error) = moved {
                if spare {
                    self.home.keep_spares(vec![destination]);
                } else {
                    let _ = destination.release();
                }
                return Err(error);
            }
            destination
        };
        let mut inner = self.table.lock();
        let entry = &mut inner.tiles[tile];
        entry.location = tier.location();
        entry.copy = Some(TileCopy::Own(carrier));
        entry.dirty = true;
        if tier == Tier::Primary {
            self.placed_primary += 1;
        }
        Ok(())
    }

    /// How many slots of the primary tier's class the sink holds: its partial gradient
    /// tiles (on the computing class) and the complete tiles it placed on the primary tier.
    pub(crate) fn held(&self) -> usize {
        let parts: usize = self
            .parts
            .iter()
            .flatten()
            .map(|p| p.carrier().size())
            .sum();
        parts + self.placed_primary * self.table.grid().tile_size()
    }

    /// The finished gradient, at `offset` with `layout` (those of the tensor it belongs to);
    /// the engine may keep it without a copy. Runtime (the sink released) when a tile was
    /// never placed.
    pub(crate) fn finish(self, offset: usize, layout: &strideweave_core::Layout) -> Result<Tensor> {
        let inner = self.table.lock();
        let incomplete = inner
            .tiles
            .iter()
            .position(|entry| entry.location == TileLocation::Invalid);
        drop(inner);
        if let Some(tile) = incomplete {
            let _ = self.fresh.release();
            return Err(Error::Runtime(format!(
                "a streamed gradient left tile {tile} without contents"
            )));
        }
        self.table.fresh_gradient.store(true, Ordering::SeqCst);
        Tensor::new(self.fresh, offset, layout.clone())
    }

    /// Releases the fresh carrier and every tile placed in it.
    pub(crate) fn release(self) {
        let _ = self.fresh.release();
    }

    /// How many slots of this sink's tiles go to the primary tier.
    pub(crate) fn primary_homes(&self) -> usize {
        on_primary(&self.homes) * self.table.grid().tile_size()
    }
}

/// The gradient `part` of tile `tile` (in the tile's logical order) rearranged into the
/// order its slots are stored in for `tensor`, a tensor permuted within its tiles: the value
/// of logical local index `l` goes to the local index of the slot `tensor` stores that
/// coordinate at. A compact carrier of `part`'s class, made by its factory.
fn stored_order(part: &Tensor, tensor: &Tensor, grid: &TileGrid, tile: usize) -> Result<Carrier> {
    let values = part.to_values()?;
    let shape = grid.tile_shape();
    let origin: Vec<usize> = grid
        .tile_coord(tile)
        .iter()
        .zip(shape)
        .map(|(t, e)| t * e)
        .collect();
    let mut stored = values.clone();
    for (local, value) in values.into_iter().enumerate() {
        let coord: Vec<usize> = decode(local, shape)
            .iter()
            .zip(&origin)
            .map(|(l, o)| l + o)
            .collect();
        let ordinal = encode(&coord, grid.logical_shape());
        let slot = tensor.offset() + tensor.layout().index_of(ordinal)?;
        let (home, at) = grid.split(slot);
        if home != tile {
            return Err(Error::Runtime(format!(
                "a tile-footprint compatible tensor stores a coordinate of tile {tile} in tile \
                 {home}"
            )));
        }
        stored[at] = value;
    }
    part.carrier().new_like(&stored, true, Some(part.dtype()))
}

/// A compact copy of `t` on its own carrier class: `mul(t, 1.0)` where the class runs it,
/// else `t`'s values through the class's factory, so a primary tier that runs only the
/// forward still gets its gradient (as the framework evaluates a rule the carrier cannot run
/// on the reference kernels).
pub(crate) fn compact_copy(t: &Tensor) -> Result<Tensor> {
    match ops::mul(t, 1.0) {
        Err(Error::UnsupportedOperationPlan(_)) => {
            let values = t.to_values()?;
            Tensor::compact(
                t.carrier().new_like(&values, true, None)?,
                t.shape().clone(),
            )
        }
        outcome => outcome,
    }
}
