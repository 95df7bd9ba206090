//! [`CompactMap`]: how a [`TileSelection`] lays the selected tiles of a TiledEvictable out as
//! one dense compact tensor (docs/tiers.md, project and scatter).

use strideweave_layout::Shape;

use crate::tile_grid::{decode, encode, show, TileGrid};
use crate::TileSelection;
use strideweave_core::error::{Error, Result};

/// A selection checked against a grid, with the compact ↔ logical coordinate map.
///
/// Invariants:
/// 1. the compact shape is `count[a] · tile[a]` per axis, `count[a]` the number of indices
///    the selection picks on axis `a`; the compact tensor is dense, canonical column-major;
/// 2. compact coordinate `c` is logical coordinate `per_axis[a][c_a / t_a] · t_a + c_a % t_a`
///    (per axis `a`) — an injective map, since each axis picks distinct tiles;
/// 3. compact tile `k` (canonical over the compact grid) is the selection's `k`-th coordinate
///    ([`TileSelection::coordinates`]).
#[derive(Debug, Clone)]
pub(crate) struct CompactMap {
    grid: TileGrid,
    per_axis: Vec<Vec<usize>>,
    compact: Vec<usize>,
}

impl CompactMap {
    /// The map of `selection` over `grid`: a Value error when the ranks differ, an Index
    /// error naming the axis and the index for a tile index outside the grid.
    pub(crate) fn new(grid: &TileGrid, selection: &TileSelection) -> Result<CompactMap> {
        let grid_shape = grid.grid_shape();
        if selection.rank() != grid_shape.len() {
            return Err(Error::Value(format!(
                "a TileSelection of rank {} cannot select tiles of a TiledEvictable grid \
                 {grid_shape:?} of rank {}",
                selection.rank(),
                grid_shape.len()
            )));
        }
        for (axis, (indices, &extent)) in selection.per_axis().iter().zip(grid_shape).enumerate() {
            if let Some(index) = indices.iter().find(|&&i| i >= extent) {
                return Err(Error::Index(format!(
                    "TileSelection axis {axis} selects tile index {index}, outside the \
                     TiledEvictable grid {grid_shape:?} ({extent} tiles on that axis)"
                )));
            }
        }
        let compact = selection
            .per_axis()
            .iter()
            .zip(grid.tile_shape())
            .map(|(indices, t)| indices.len() * t)
            .collect();
        Ok(CompactMap {
            grid: grid.clone(),
            per_axis: selection.per_axis().to_vec(),
            compact,
        })
    }

    /// The compact shape, `count · tile` per axis (invariant 1), as a flat [`Shape`].
    pub(crate) fn shape(&self) -> Result<Shape> {
        Ok(Shape::flat(&self.compact)?)
    }

    /// The number of compact elements.
    pub(crate) fn size(&self) -> usize {
        self.compact.iter().product()
    }

    /// The logical coordinate of the compact element with canonical `ordinal` (invariant 2).
    pub(crate) fn logical(&self, ordinal: usize) -> Vec<usize> {
        decode(ordinal, &self.compact)
            .iter()
            .zip(&self.per_axis)
            .zip(self.grid.tile_shape())
            .map(|((c, indices), t)| indices[c / t] * t + c % t)
            .collect()
    }

    /// The canonical logical ordinal (= TiledEvictable slot of a canonical tensor) of the
    /// compact element `ordinal`.
    pub(crate) fn logical_ordinal(&self, ordinal: usize) -> usize {
        encode(&self.logical(ordinal), self.grid.logical_shape())
    }

    /// The selected tile indices (canonical over the grid), in compact order (invariant 3).
    pub(crate) fn tiles(&self) -> Vec<usize> {
        let counts: Vec<usize> = self.per_axis.iter().map(Vec::len).collect();
        let total: usize = counts.iter().product();
        (0..total)
            .map(|k| {
                let chosen: Vec<usize> = decode(k, &counts)
                    .iter()
                    .zip(&self.per_axis)
                    .map(|(&i, indices)| indices[i])
                    .collect();
                encode(&chosen, self.grid.grid_shape())
            })
            .collect()
    }

    /// The tile coordinate of tile index `tile`, written for messages.
    pub(crate) fn show_tile(&self, tile: usize) -> String {
        show(&self.grid.tile_coord(tile))
    }

    /// Checks that `shape` is the compact shape (one top-level mode per axis, mode `a` of
    /// size `compact[a]`); `what` names the tensor in the Value error.
    pub(crate) fn check_shape(&self, shape: &Shape, what: &str) -> Result<()> {
        let modes = (0..shape.rank())
            .map(|k| shape.mode(k).map(|m| m.size()))
            .collect::<std::result::Result<Vec<usize>, _>>()?;
        if modes != self.compact {
            return Err(Error::Value(format!(
                "{what} must have the compact shape {:?} (selected tiles · tile_shape {:?} per \
                 axis); got Shape {shape} (mode sizes {modes:?})",
                self.compact,
                self.grid.tile_shape()
            )));
        }
        Ok(())
    }
}
