//! [`TileGrid`]: the geometry of a TiledEvictable — its grid of tiles, the tile shape, the
//! logical shape `grid · tile`, and the maps between slots, tiles and local coordinates.

use crate::tile_table::TileEntry;
use strideweave_core::error::{Error, Result};
use strideweave_core::limits;

/// The geometry of one TiledEvictable (docs/tiers.md, Construction and geometry).
///
/// Invariants:
/// 1. `grid` and `tile` have the same rank ≥ 1 and every extent is ≥ 1;
/// 2. `logical[a] = grid[a] · tile[a]`, and every size fits in `usize`;
/// 3. every index is canonical, first-mode-fastest (column-major) over its shape: a slot over
///    the logical shape, a tile index over the grid, a local index over the tile shape;
/// 4. a logical coordinate `c` lies in tile `c / tile` at local coordinate `c % tile`
///    (per axis).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TileGrid {
    grid: Vec<usize>,
    tile: Vec<usize>,
    logical: Vec<usize>,
    tile_count: usize,
    tile_size: usize,
    logical_size: usize,
}

/// The product of `extents`, or a Value error naming `what` when it overflows.
fn product(extents: &[usize], what: &str) -> Result<usize> {
    extents.iter().try_fold(1usize, |acc, &e| {
        acc.checked_mul(e).ok_or_else(|| {
            Error::Value(format!(
                "the TiledEvictable {what} {extents:?} has more elements than fit in usize"
            ))
        })
    })
}

/// The canonical (first-mode-fastest) index of `coord` over `shape`; the caller checked range.
pub(crate) fn encode(coord: &[usize], shape: &[usize]) -> usize {
    let mut index = 0;
    let mut stride = 1;
    for (&c, &e) in coord.iter().zip(shape) {
        index += c * stride;
        stride *= e;
    }
    index
}

/// The coordinate of the canonical `index` over `shape`; the caller checked range.
pub(crate) fn decode(mut index: usize, shape: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .map(|&e| {
            let c = index % e;
            index /= e;
            c
        })
        .collect()
}

/// `coord` written as a tuple for messages: `(1, 0)`.
pub(crate) fn show(coord: &[usize]) -> String {
    let parts: Vec<String> = coord.iter().map(ToString::to_string).collect();
    format!("({})", parts.join(", "))
}

impl TileGrid {
    /// The geometry of `grid_shape` tiles of `tile_shape` each.
    ///
    /// Value errors: an empty shape, different ranks, an extent of 0, or a size that
    /// overflows `usize`; each names the field and the value at fault. A Memory error: a
    /// grid with more tiles than this machine's memory can keep a table entry for.
    pub(crate) fn new(grid_shape: &[usize], tile_shape: &[usize]) -> Result<TileGrid> {
        for (field, shape) in [("grid_shape", grid_shape), ("tile_shape", tile_shape)] {
            if shape.is_empty() {
                return Err(Error::Value(format!(
                    "TiledEvictable {field} must have at least one axis, got []"
                )));
            }
            if let Some(axis) = shape.iter().position(|&e| e == 0) {
                return Err(Error::Value(format!(
                    "TiledEvictable {field} extents must be >= 1, got {shape:?} (axis {axis} is 0)"
                )));
            }
        }
        if grid_shape.len() != tile_shape.len() {
            return Err(Error::Value(format!(
                "TiledEvictable grid_shape {grid_shape:?} and tile_shape {tile_shape:?} must \
                 have the same rank"
            )));
        }
        let logical = grid_shape
            .iter()
            .zip(tile_shape)
            .map(|(&g, &t)| {
                g.checked_mul(t).ok_or_else(|| {
                    Error::Value(format!(
                        "the TiledEvictable logical shape grid_shape {grid_shape:?} · tile_shape \
                         {tile_shape:?} overflows usize"
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let tile_count = product(grid_shape, "grid_shape")?;
        // The tile table keeps one entry per tile: refuse a grid whose table cannot exist.
        limits::check_fits::<TileEntry>(tile_count, || {
            format!("the tile table of a TiledEvictable grid_shape {grid_shape:?}")
        })?;
        Ok(TileGrid {
            tile_count,
            tile_size: product(tile_shape, "tile_shape")?,
            logical_size: product(&logical, "logical shape")?,
            grid: grid_shape.to_vec(),
            tile: tile_shape.to_vec(),
            logical,
        })
    }

    /// The grid shape (tiles per axis).
    pub(crate) fn grid_shape(&self) -> &[usize] {
        &self.grid
    }

    /// The shape of every tile.
    pub(crate) fn tile_shape(&self) -> &[usize] {
        &self.tile
    }

    /// The logical shape `grid · tile`.
    pub(crate) fn logical_shape(&self) -> &[usize] {
        &self.logical
    }

    /// The number of tiles.
    pub(crate) fn tile_count(&self) -> usize {
        self.tile_count
    }

    /// The number of slots in one tile.
    pub(crate) fn tile_size(&self) -> usize {
        self.tile_size
    }

    /// The number of logical slots.
    pub(crate) fn logical_size(&self) -> usize {
        self.logical_size
    }

    /// The (tile index, local index) of the logical `slot` (invariant 4).
    pub(crate) fn split(&self, slot: usize) -> (usize, usize) {
        let coord = decode(slot, &self.logical);
        let tile: Vec<usize> = coord.iter().zip(&self.tile).map(|(c, t)| c / t).collect();
        let local: Vec<usize> = coord.iter().zip(&self.tile).map(|(c, t)| c % t).collect();
        (encode(&tile, &self.grid), encode(&local, &self.tile))
    }

    /// The logical slot of `local` in tile `tile` (the inverse of [`split`](Self::split)).
    pub(crate) fn join(&self, tile: usize, local: usize) -> usize {
        let tile = decode(tile, &self.grid);
        let local = decode(local, &self.tile);
        let coord: Vec<usize> = tile
            .iter()
            .zip(&local)
            .zip(&self.tile)
            .map(|((t, l), e)| t * e + l)
            .collect();
        encode(&coord, &self.logical)
    }

    /// The coordinate of tile `index` in the grid.
    pub(crate) fn tile_coord(&self, index: usize) -> Vec<usize> {
        decode(index, &self.grid)
    }

    /// The index of the tile at `coord`: a Value error naming the coordinate and the grid for
    /// a wrong rank or a coordinate outside the grid.
    pub(crate) fn tile_index(&self, coord: &[usize]) -> Result<usize> {
        if coord.len() != self.grid.len() {
            return Err(Error::Value(format!(
                "tile coordinate {} has rank {}, but the TiledEvictable grid {:?} has rank {}",
                show(coord),
                coord.len(),
                self.grid,
                self.grid.len()
            )));
        }
        if coord.iter().zip(&self.grid).any(|(c, g)| c >= g) {
            return Err(Error::Value(format!(
                "tile coordinate {} is outside the TiledEvictable grid {:?}",
                show(coord),
                self.grid
            )));
        }
        Ok(encode(coord, &self.grid))
    }

    /// The canonical slot of the logical `coord`: Value for a wrong rank, Index out of range.
    pub(crate) fn slot(&self, coord: &[usize]) -> Result<usize> {
        if coord.len() != self.logical.len() {
            return Err(Error::Value(format!(
                "logical coordinate {} has rank {}, but the TiledEvictable logical shape {:?} \
                 has rank {}",
                show(coord),
                coord.len(),
                self.logical,
                self.logical.len()
            )));
        }
        if coord.iter().zip(&self.logical).any(|(c, e)| c >= e) {
            return Err(Error::Index(format!(
                "logical coordinate {} is outside the TiledEvictable logical shape {:?}",
                show(coord),
                self.logical
            )));
        }
        Ok(encode(coord, &self.logical))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join_are_inverse_over_every_slot() {
        let grid = TileGrid::new(&[3, 2], &[2, 3]).unwrap();
        assert_eq!(grid.logical_shape(), &[6, 6]);
        for slot in 0..grid.logical_size() {
            let (tile, local) = grid.split(slot);
            assert!(tile < grid.tile_count() && local < grid.tile_size());
            assert_eq!(grid.join(tile, local), slot);
        }
        // Logical (5, 4): tile (2, 1), local (1, 1).
        let slot = grid.slot(&[5, 4]).unwrap();
        let (tile, local) = grid.split(slot);
        assert_eq!(grid.tile_coord(tile), vec![2, 1]);
        assert_eq!(decode(local, grid.tile_shape()), vec![1, 1]);
    }
}
