//! [`TileFootprint`]: the tile-footprint compatibility every full-tensor TiledEvictable API
//! demands (docs/tiers.md, Tile-footprint compatibility), and the logical-coordinate → slot map it
//! certifies.

use strideweave_layout::Layout;

use crate::tile_grid::{decode, encode, show, TileGrid};
use strideweave_core::error::{Error, Result};
use strideweave_core::tensor::Tensor;

/// A tensor's placement over a TiledEvictable, checked to be tile-footprint compatible.
///
/// Compatible means (docs/tiers.md, Tile-footprint compatibility): the tensor has one top-level
/// mode per grid axis, mode `a` of size `logical[a]` (an integer coordinate of a nested mode is its
/// colexicographic ordinal), and the slots `offset + layout(c)` of every logical tile `T` (the
/// coordinates `c` with `c / tile = T`) are exactly the slots of carrier tile `T`, each once.
/// A permutation inside a tile is fine; a tile spanning into another carrier tile (including
/// any remapping of tiles), two coordinates aliasing one slot, or a slot no coordinate reaches
/// (a gap) are Value errors.
///
/// Invariants of a constructed footprint:
/// 1. `slot(L)` is in tile `L / tile` for every logical coordinate `L`;
/// 2. `L ↦ slot(L)` is a bijection from the logical coordinates onto the carrier's slots.
#[derive(Debug, Clone)]
pub(crate) struct TileFootprint {
    grid: TileGrid,
    offset: usize,
    layout: Layout,
}

impl TileFootprint {
    /// Checks `tensor` (over a TiledEvictable of geometry `grid`) for tile-footprint
    /// compatibility; `action` names the API in messages. Reads no slot, changes nothing.
    pub(crate) fn check(tensor: &Tensor, grid: &TileGrid, action: &str) -> Result<TileFootprint> {
        let logical = grid.logical_shape();
        let shape = tensor.shape();
        let modes = (0..shape.rank())
            .map(|k| shape.mode(k).map(|m| m.size()))
            .collect::<std::result::Result<Vec<usize>, _>>()?;
        if modes != logical {
            return Err(Error::Value(format!(
                "{action} needs a tensor whose top-level modes cover the TiledEvictable's logical \
                 shape {logical:?} one to one; got Shape {shape} (mode sizes {modes:?})"
            )));
        }
        let footprint = TileFootprint {
            grid: grid.clone(),
            offset: tensor.offset(),
            layout: tensor.layout().clone(),
        };
        let slots = grid.logical_size();
        let mut seen = vec![false; slots];
        for ordinal in 0..slots {
            let slot = footprint.offset + footprint.layout.index_of(ordinal)?;
            let coord = decode(ordinal, logical);
            if slot >= slots {
                return Err(Error::Value(format!(
                    "{action} needs a tile-footprint compatible tensor (its tile footprints must match the carrier's \
                     tiles): logical coordinate {} \
                     maps to slot {slot}, outside the TiledEvictable's {slots} slots (offset {}, \
                     layout {})",
                    show(&coord),
                    footprint.offset,
                    footprint.layout
                )));
            }
            let (tile, _) = grid.split(slot);
            let own = tile_of(&coord, grid);
            if tile != own {
                return Err(Error::Value(format!(
                    "{action} needs a tile-footprint compatible tensor (its tile footprints must match the carrier's \
                     tiles): logical coordinate {} of \
                     tile {} maps to slot {slot} of carrier tile {} (layout {} spans or remaps \
                     tiles of shape {:?})",
                    show(&coord),
                    show(&grid.tile_coord(own)),
                    show(&grid.tile_coord(tile)),
                    footprint.layout,
                    grid.tile_shape()
                )));
            }
            if std::mem::replace(&mut seen[slot], true) {
                return Err(Error::Value(format!(
                    "{action} needs a tile-footprint compatible tensor (its tile footprints must match the carrier's \
                     tiles): logical coordinate {} \
                     aliases slot {slot}, which an earlier coordinate already maps to (layout {})",
                    show(&coord),
                    footprint.layout
                )));
            }
        }
        // `slots` coordinates landed injectively on `slots` slots: there is no gap.
        Ok(footprint)
    }

    /// The geometry of the TiledEvictable.
    pub(crate) fn grid(&self) -> &TileGrid {
        &self.grid
    }

    /// The carrier slot of the logical coordinate `coord` (in range by construction of the
    /// callers: a coordinate of the logical shape).
    pub(crate) fn slot(&self, coord: &[usize]) -> Result<usize> {
        let ordinal = encode(coord, self.grid.logical_shape());
        Ok(self.offset + self.layout.index_of(ordinal)?)
    }
}

/// The tile index (canonical over the grid) of the logical coordinate `coord`.
pub(crate) fn tile_of(coord: &[usize], grid: &TileGrid) -> usize {
    let tile: Vec<usize> = coord
        .iter()
        .zip(grid.tile_shape())
        .map(|(c, t)| c / t)
        .collect();
    encode(&tile, grid.grid_shape())
}
