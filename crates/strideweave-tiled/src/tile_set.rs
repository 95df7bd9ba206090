//! [`TileSet`]: a set of tile coordinates in the deterministic tile order.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::tile_grid::show;
use strideweave_core::error::{Error, Result};

/// A set of tile coordinates, all of one rank, sorted by their reversed tuple (the last axis
/// most significant, so the first axis varies fastest, as everywhere in StrideWeave).
///
/// `TileSet(coordinates=())` (docs/tiers.md, Tile state and residency) holds any set of
/// coordinates; duplicates collapse. Coordinates are non-negative by construction (`usize`,
/// enforced by the type system); whether they lie inside a carrier's grid is checked where the set
/// is used (Index error). An immutable record; cloning shares the coordinates.
///
/// ```
/// use strideweave::carriers::TileSet;
/// let set = TileSet::new([vec![1, 0], vec![0, 1], vec![0, 0], vec![1, 0]])?;
/// assert_eq!(set.coordinates(), &[vec![0, 0], vec![1, 0], vec![0, 1]]);
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TileSet {
    coordinates: Arc<[Vec<usize>]>,
}

/// The deterministic tile order: compare reversed tuples.
pub(crate) fn tile_order(a: &[usize], b: &[usize]) -> Ordering {
    a.iter().rev().cmp(b.iter().rev())
}

impl TileSet {
    /// The set of `coordinates`, materialized once, deduplicated and sorted by reversed tuple.
    ///
    /// A Value error when two coordinates have different ranks or a coordinate has rank 0.
    pub fn new(coordinates: impl IntoIterator<Item = Vec<usize>>) -> Result<TileSet> {
        let mut all: Vec<Vec<usize>> = coordinates.into_iter().collect();
        if let Some(empty) = all.iter().find(|c| c.is_empty()) {
            return Err(Error::Value(format!(
                "a TileSet coordinate needs at least one axis, got {}",
                show(empty)
            )));
        }
        if let Some(first) = all.first() {
            let rank = first.len();
            if let Some(other) = all.iter().find(|c| c.len() != rank) {
                return Err(Error::Value(format!(
                    "TileSet coordinates must share one rank: {} has rank {rank}, {} has rank {}",
                    show(first),
                    show(other),
                    other.len()
                )));
            }
        }
        all.sort_by(|a, b| tile_order(a, b));
        all.dedup();
        Ok(TileSet {
            coordinates: all.into(),
        })
    }

    /// The empty set.
    pub fn empty() -> TileSet {
        TileSet {
            coordinates: Arc::from([]),
        }
    }

    /// The coordinates, sorted by reversed tuple.
    pub fn coordinates(&self) -> &[Vec<usize>] {
        &self.coordinates
    }

    /// The number of tiles.
    pub fn len(&self) -> usize {
        self.coordinates.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.coordinates.is_empty()
    }

    /// The rank of the coordinates, or `None` for the empty set.
    pub fn rank(&self) -> Option<usize> {
        self.coordinates.first().map(Vec::len)
    }

    /// Whether `coordinate` is in the set.
    pub fn contains(&self, coordinate: &[usize]) -> bool {
        self.coordinates
            .binary_search_by(|c| tile_order(c, coordinate))
            .is_ok()
    }

    /// The tiles of this set that are also in `other`.
    pub fn intersection(&self, other: &TileSet) -> TileSet {
        self.filtered(|c| other.contains(c))
    }

    /// The tiles of this set that are not in `other`.
    pub fn difference(&self, other: &TileSet) -> TileSet {
        self.filtered(|c| !other.contains(c))
    }

    /// The tiles in either set (a Value error when the ranks differ).
    pub fn union(&self, other: &TileSet) -> Result<TileSet> {
        TileSet::new(
            self.coordinates
                .iter()
                .chain(other.coordinates.iter())
                .cloned(),
        )
    }

    fn filtered(&self, keep: impl Fn(&[usize]) -> bool) -> TileSet {
        TileSet {
            coordinates: self
                .coordinates
                .iter()
                .filter(|c| keep(c))
                .cloned()
                .collect(),
        }
    }
}

impl fmt::Debug for TileSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self.coordinates.iter().map(|c| show(c)).collect();
        write!(f, "TileSet[{}]", shown.join(", "))
    }
}
