//! [`TiledOperand`]: one raw TiledEvictable tensor operand of a tiled operation, checked and
//! snapshotted, and [`TileSource`], where the contents of one of its tiles come from.

use std::sync::Arc;

use strideweave_layout::Layout;

use crate::capacity::Budget;
use crate::tile_copy::{Tier, TileCopy};
use crate::tile_footprint::TileFootprint;
use crate::tile_grid::{decode, encode, show, TileGrid};
use crate::tile_pins::TilePins;
use crate::tile_stream::reusable;
use crate::tile_table::TileTable;
use crate::{TileLocation, TileResidency};
use strideweave_core::carrier::Carrier;
use strideweave_core::error::{Error, Result};
use strideweave_core::movement::copy_to_scratch;
use strideweave_core::tensor::Tensor;

/// The column-major strides of `shape`.
pub(crate) fn column_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut stride = 1;
    shape
        .iter()
        .map(|&e| {
            let s = stride;
            stride *= e;
            s
        })
        .collect()
}

/// The flat layout `shape : strides` (one top-level mode per axis).
pub(crate) fn flat(shape: &[usize], strides: &[usize]) -> Result<Layout> {
    Ok(Layout::from_flat(shape, strides)?)
}

/// How an operand's tensor covers its carrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// The canonical layout of the logical shape at offset 0: tile `t` is the strided block
    /// of its slots, read directly from the tile's copy.
    Canonical,
    /// Another tile-footprint compatible layout (a permutation inside tiles): each tile is
    /// gathered element by element in the tensor's order (a slow path).
    Permuted,
}

/// Where the contents of one tile of an operand come from, in the tensor's tile-local order
/// (first axis fastest).
#[derive(Debug, Clone)]
pub(crate) enum TileSource {
    /// Already readable on the primary tier's class — a primary tile, or a secondary tile when
    /// the secondary tier is of the primary's class: no staging.
    Resident(Tensor),
    /// A view of the tile's copy on the secondary tier, to be copied onto the primary class.
    Secondary(Tensor),
    /// An implicit tile: zeros of the tile's size.
    Zero,
    /// A tile of a permuted tensor, gathered slot by slot through the TiledEvictable.
    Gathered,
}

/// One raw TiledEvictable tensor operand of a tiled operation: its tensor, geometry, tiers
/// and a snapshot of where each tile's valid copy was when the operation was prepared.
///
/// Invariants: every tile was valid and not in a pending residency request at the snapshot,
/// and every tile stays pinned — no residency request moves it — until the operand is
/// dropped, so the snapshotted copies stay the tiles' valid copies; the tensor is
/// tile-footprint compatible (docs/tiers.md, Tile-footprint compatibility).
pub(crate) struct TiledOperand {
    tensor: Tensor,
    table: Arc<TileTable>,
    grid: TileGrid,
    placement: Placement,
    tiles: Vec<(TileLocation, Option<TileCopy>)>,
    /// Every tile is pinned while the operand lives (docs/tiers.md, Pinned tiles).
    _pins: TilePins,
}

impl TiledOperand {
    /// Checks operand `position` of `operation` and snapshots its tiles; nothing changes on
    /// any error.
    ///
    /// A pending residency request on its tiles is waited for first; then every tile is
    /// pinned. Errors: not a TiledEvictable tensor (Type); a released carrier (Runtime); a
    /// tensor that is not tile-footprint compatible (Value); an invalid tile (Runtime, naming
    /// the tile).
    pub(crate) fn new(tensor: &Tensor, operation: &str, position: usize) -> Result<TiledOperand> {
        let carrier = tensor.carrier();
        let table = TileResidency::table(carrier)?;
        if carrier.is_released() {
            return Err(Error::Runtime(format!(
                "'{operation}' operand {position}: the TiledEvictable carrier is released"
            )));
        }
        let grid = table.grid().clone();
        let canonical = flat(
            grid.logical_shape(),
            &column_major_strides(grid.logical_shape()),
        )?;
        let placement = if tensor.offset() == 0 && *tensor.layout() == canonical {
            Placement::Canonical
        } else {
            let action = format!("'{operation}' on raw TiledEvictable operand {position}");
            TileFootprint::check(tensor, &grid, &action)?;
            Placement::Permuted
        };
        let (pins, tiles) = table.pin_all(&|| format!("'{operation}' operand {position}"))?;
        Ok(TiledOperand {
            tensor: tensor.clone(),
            table,
            grid,
            placement,
            tiles,
            _pins: pins,
        })
    }

    /// Whether the tensor is the canonical layout of the logical shape at offset 0 (its tile
    /// views are its tiles' slots in tile-local canonical order).
    pub(crate) fn is_canonical(&self) -> bool {
        self.placement == Placement::Canonical
    }

    /// The geometry.
    pub(crate) fn grid(&self) -> &TileGrid {
        &self.grid
    }

    /// The logical shape (the sizes of the tensor's top-level modes).
    pub(crate) fn logical(&self) -> &[usize] {
        self.grid.logical_shape()
    }

    /// The tile shape.
    pub(crate) fn tile_shape(&self) -> &[usize] {
        self.grid.tile_shape()
    }

    /// The tensor.
    pub(crate) fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// The TiledEvictable carrier of the operand (its factory makes gradients like it).
    pub(crate) fn tier_owner(&self) -> &Carrier {
        self.tensor.carrier()
    }

    /// The owned tier carrier `tier`.
    pub(crate) fn tier(&self, tier: Tier) -> &Carrier {
        self.table.token(tier).carrier()
    }

    /// The tile table (shared with the carrier).
    pub(crate) fn table(&self) -> &Arc<TileTable> {
        &self.table
    }

    /// Where tile `tile`'s valid copy was at the snapshot.
    pub(crate) fn location(&self, tile: usize) -> TileLocation {
        self.tiles[tile].0
    }

    /// The id of the pin this operand holds on every tile.
    pub(crate) fn pin_id(&self) -> u64 {
        self._pins.id()
    }

    /// The whole tensor readable on the primary tier's class, when the tensor is canonical
    /// and every tile is still in the full tier it was seeded from (whose slots are then the
    /// tensor's contents), so the operation can run as one call with no tiling:
    ///
    /// - seeded on the primary tier: a view of the primary tier, nothing staged;
    /// - seeded on a secondary tier of the primary's class: a view of it, nothing staged;
    /// - seeded on a secondary tier of another class, when the carrier's
    ///   [`primary_capacity`](crate::ResidencyPolicy::primary_capacity) allows every
    ///   tile at once (or is unbounded): one `copy_to` of the whole seed tier into a fresh
    ///   carrier of the primary class, returned as the second element (to keep in the
    ///   carrier's staging pool after use: [`TileTable::keep_whole_staging`]). The buffer
    ///   is the one the pool kept from an earlier call when there is one; the third element
    ///   says whether it was allocated by this call.
    pub(crate) fn whole(&self) -> Result<Option<(Tensor, Option<Carrier>, bool)>> {
        let Some(tier) = self.whole_candidate() else {
            return Ok(None);
        };
        let layout = self.tensor.layout().clone();
        let seed = Tensor::new(self.tier(tier).clone(), 0, layout)?;
        if !self.whole_stages() {
            return Ok(Some((seed, None, false)));
        }
        let primary = self.tier(Tier::Primary);
        let size = self.grid.logical_size();
        let (staged, allocated) = match self.table.take_whole_staging() {
            Some(kept) if reusable(&kept, primary, size) => (kept, false),
            other => {
                if let Some(unfit) = other {
                    let _ = unfit.release();
                }
                (primary.allocate_like(size, true, None, true)?, true)
            }
        };
        // A staging buffer: its old contents are not kept.
        match copy_to_scratch(&seed, &staged) {
            Ok(view) => Ok(Some((view, Some(staged), allocated))),
            Err(error) => {
                let _ = staged.release();
                Err(error)
            }
        }
    }

    /// The tier [`whole`](Self::whole) would read the tensor from, if it can (checks only).
    pub(crate) fn whole_candidate(&self) -> Option<Tier> {
        if self.placement != Placement::Canonical {
            return None;
        }
        let &(location, _) = self.tiles.first()?;
        let seeded = self
            .tiles
            .iter()
            .all(|(at, copy)| *at == location && matches!(copy, Some(TileCopy::Seed)));
        if !seeded {
            return None;
        }
        match location {
            TileLocation::Primary => Some(Tier::Primary),
            TileLocation::Secondary if self.secondary_computes() => Some(Tier::Secondary),
            TileLocation::Secondary => {
                let fits = Budget::of(&self.table, &[&self.table])
                    .is_none_or(|budget| budget.free(0) >= self.grid.logical_size());
                fits.then_some(Tier::Secondary)
            }
            _ => None,
        }
    }

    /// Whether [`whole`](Self::whole) copies the tensor (a secondary seed tier of another
    /// class than the primary's).
    pub(crate) fn whole_stages(&self) -> bool {
        self.whole_candidate() == Some(Tier::Secondary) && !self.secondary_computes()
    }

    /// Whether the secondary tier is of the primary tier's class, so that the primary's
    /// dispatch reads secondary copies in place (no staging needed: the copy *is* a tensor of
    /// the computing class).
    fn secondary_computes(&self) -> bool {
        self.tier(Tier::Secondary).class() == self.tier(Tier::Primary).class()
    }

    /// Whether fetching tile `tile` stages a copy on the primary class.
    pub(crate) fn stages(&self, tile: usize) -> bool {
        match self.tiles[tile].0 {
            _ if self.placement == Placement::Permuted => true,
            TileLocation::Primary => false,
            TileLocation::Secondary => !self.secondary_computes(),
            TileLocation::Implicit | TileLocation::Invalid => true,
        }
    }

    /// The slots the staged copy of tile `tile` takes on the primary tier's class when it is
    /// fetched in `pieces` pieces of its mode 1 (0 when the tile is read in place): see
    /// [`span`](Self::span).
    pub(crate) fn staged_slots(&self, tile: usize, pieces: usize) -> usize {
        if self.stages(tile) {
            self.span(tile, pieces)
        } else {
            0
        }
    }

    /// The slots the fetched view of tile `tile` (one of `pieces` pieces of its mode 1)
    /// spans in its carrier: a tile in a full seed tier spans the gaps between its columns
    /// there (as much is staged, and a gradient taken against such a view is laid out like
    /// it); an own copy, an implicit tile (zeros) and a gathered tile are compact.
    pub(crate) fn span(&self, tile: usize, pieces: usize) -> usize {
        let pieces = pieces.max(1);
        let shape = self.grid.tile_shape();
        let seeded = self.placement == Placement::Canonical
            && matches!(
                self.tiles[tile],
                (
                    TileLocation::Primary | TileLocation::Secondary,
                    Some(TileCopy::Seed)
                )
            );
        if !seeded {
            return self.grid.tile_size() / pieces;
        }
        let strides = column_major_strides(self.grid.logical_shape());
        let last = shape.len().saturating_sub(1);
        1 + shape
            .iter()
            .zip(&strides)
            .enumerate()
            .map(|(a, (&extent, &stride))| {
                let extent = if a == last { extent / pieces } else { extent };
                extent.saturating_sub(1) * stride
            })
            .sum::<usize>()
    }

    /// Where the contents of tile `tile` (canonical index over the grid) come from.
    pub(crate) fn source(&self, tile: usize) -> Result<TileSource> {
        if self.placement == Placement::Permuted {
            return Ok(TileSource::Gathered);
        }
        let (location, copy) = &self.tiles[tile];
        let tier = match location {
            TileLocation::Implicit => return Ok(TileSource::Zero),
            TileLocation::Primary => Tier::Primary,
            TileLocation::Secondary => Tier::Secondary,
            TileLocation::Invalid => {
                return Err(Error::Runtime(format!(
                    "tile {} has no valid copy",
                    show(&self.grid.tile_coord(tile))
                )))
            }
        };
        let shape = self.grid.tile_shape();
        let view = match copy {
            Some(TileCopy::Seed) => Tensor::new(
                self.tier(tier).clone(),
                self.grid.join(tile, 0),
                flat(shape, &column_major_strides(self.grid.logical_shape()))?,
            )?,
            Some(TileCopy::Own(carrier)) => Tensor::new(
                carrier.clone(),
                0,
                flat(shape, &column_major_strides(shape))?,
            )?,
            None => {
                return Err(Error::Runtime(format!(
                    "tile {} is {location} but has no copy there",
                    show(&self.grid.tile_coord(tile))
                )))
            }
        };
        Ok(match tier {
            Tier::Secondary if !self.secondary_computes() => TileSource::Secondary(view),
            _ => TileSource::Resident(view),
        })
    }

    /// The values of tile `tile` of a permuted tensor in its tile-local order, read slot by
    /// slot through the TiledEvictable (each slot from its tile's valid copy).
    pub(crate) fn gather(&self, tile: usize) -> Result<Vec<strideweave_core::Value>> {
        let shape = self.grid.tile_shape();
        let origin: Vec<usize> = self
            .grid
            .tile_coord(tile)
            .iter()
            .zip(shape)
            .map(|(t, e)| t * e)
            .collect();
        let logical = self.grid.logical_shape();
        (0..self.grid.tile_size())
            .map(|local| {
                let coord: Vec<usize> = decode(local, shape)
                    .iter()
                    .zip(&origin)
                    .map(|(l, o)| l + o)
                    .collect();
                let ordinal = encode(&coord, logical);
                let slot = self.tensor.offset() + self.tensor.layout().index_of(ordinal)?;
                self.tensor.carrier().get(slot)
            })
            .collect()
    }
}
