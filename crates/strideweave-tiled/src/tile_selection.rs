//! [`TileSelection`]: a per-axis choice of tile indices (the cartesian product of the axes).

use std::sync::Arc;

use crate::TileSet;
use strideweave_core::error::{Error, Result};

/// A per-axis selection of tile indices: the selected tiles are the cartesian product of the
/// axes' index lists, in the order given (first axis fastest).
///
/// `TileSelection(per_axis)` (docs/tiers.md, Tile state and residency) holds unique non-negative
/// ints per axis and offers `coordinates`, `rank`, `compact_grid_shape` and `tile_set`.
/// Non-negativity is enforced by the type system (`usize`). The later `project`/`scatter` phase
/// uses [`compact_grid_shape`](TileSelection::compact_grid_shape) to size the compact tensor
/// (`count · tile` per axis). An immutable record; cloning shares the axes.
///
/// ```
/// use strideweave::carriers::TileSelection;
/// let selection = TileSelection::new(vec![vec![2, 0], vec![1]])?;
/// assert_eq!(selection.rank(), 2);
/// assert_eq!(selection.compact_grid_shape(), vec![2, 1]);
/// assert_eq!(selection.coordinates(), vec![vec![2, 1], vec![0, 1]]);
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TileSelection {
    per_axis: Arc<[Vec<usize>]>,
}

impl TileSelection {
    /// The selection of `per_axis[a]` tile indices on each axis `a`.
    ///
    /// Value errors naming the axis and the value: no axis at all, an axis with no index, or
    /// an index repeated within one axis.
    pub fn new(per_axis: Vec<Vec<usize>>) -> Result<TileSelection> {
        if per_axis.is_empty() {
            return Err(Error::Value(
                "a TileSelection needs at least one axis, got per_axis []".to_string(),
            ));
        }
        for (axis, indices) in per_axis.iter().enumerate() {
            if indices.is_empty() {
                return Err(Error::Value(format!(
                    "TileSelection axis {axis} selects no tile index"
                )));
            }
            for (position, index) in indices.iter().enumerate() {
                if indices[..position].contains(index) {
                    return Err(Error::Value(format!(
                        "TileSelection axis {axis} repeats tile index {index}: {indices:?}"
                    )));
                }
            }
        }
        Ok(TileSelection {
            per_axis: per_axis.into(),
        })
    }

    /// The selected tile indices of each axis, in the given order.
    pub fn per_axis(&self) -> &[Vec<usize>] {
        &self.per_axis
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.per_axis.len()
    }

    /// The number of selected tiles on each axis: the grid shape of the compact tensor.
    pub fn compact_grid_shape(&self) -> Vec<usize> {
        self.per_axis.iter().map(Vec::len).collect()
    }

    /// The selected tile coordinates in compact order: compact tile `k` (canonical,
    /// first-mode-fastest over [`compact_grid_shape`](Self::compact_grid_shape)) is the
    /// `k`-th entry.
    pub fn coordinates(&self) -> Vec<Vec<usize>> {
        let counts = self.compact_grid_shape();
        let total: usize = counts.iter().product();
        (0..total)
            .map(|mut k| {
                self.per_axis
                    .iter()
                    .map(|indices| {
                        let chosen = indices[k % indices.len()];
                        k /= indices.len();
                        chosen
                    })
                    .collect()
            })
            .collect()
    }

    /// The selected tiles as a [`TileSet`] (sorted by reversed tuple).
    pub fn tile_set(&self) -> TileSet {
        // Every coordinate has this selection's rank ≥ 1, which TileSet::new accepts.
        TileSet::new(self.coordinates()).unwrap_or_else(|_| TileSet::empty())
    }
}
