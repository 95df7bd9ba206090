//! [`ResidencyPlan`], [`ResidencyPurpose`] and the [`ResidencyPolicy`] trait: how a
//! TiledEvictable may be told which tiles to keep on its primary tier.

use std::fmt;

use crate::carriers::tiled::tile_grid::show;
use crate::carriers::tiled::TileSet;
use crate::error::{Error, Result};

/// Three disjoint tile sets: tiles to promote to the primary tier, tiles to keep there, and
/// tiles to evict to the secondary tier.
///
/// `ResidencyPlan(promote, retain, evict)` (docs/tiers.md, Tile state and residency) with disjoint
/// sets (ValueError otherwise). An immutable record.
///
/// ```
/// use strideweave::carriers::{ResidencyPlan, TileSet};
/// let a = TileSet::new([vec![0]])?;
/// let b = TileSet::new([vec![1]])?;
/// assert!(ResidencyPlan::new(a.clone(), TileSet::empty(), b).is_ok());
/// assert!(ResidencyPlan::new(a.clone(), a, TileSet::empty()).is_err());
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResidencyPlan {
    promote: TileSet,
    retain: TileSet,
    evict: TileSet,
}

impl ResidencyPlan {
    /// The plan `(promote, retain, evict)`.
    ///
    /// Value errors: a tile in two of the sets (naming the tile and both fields), or sets
    /// whose coordinates have different ranks.
    pub fn new(promote: TileSet, retain: TileSet, evict: TileSet) -> Result<ResidencyPlan> {
        let fields = [
            ("promote", &promote),
            ("retain", &retain),
            ("evict", &evict),
        ];
        let ranks: Vec<(&str, usize)> = fields
            .iter()
            .filter_map(|(name, set)| set.rank().map(|r| (*name, r)))
            .collect();
        if let Some(((a, ra), (b, rb))) = ranks
            .iter()
            .flat_map(|x| ranks.iter().map(move |y| (x, y)))
            .find(|((_, ra), (_, rb))| ra != rb)
        {
            return Err(Error::Value(format!(
                "ResidencyPlan sets must share one rank: {a} has rank {ra}, {b} has rank {rb}"
            )));
        }
        for (i, (first, left)) in fields.iter().enumerate() {
            for (second, right) in &fields[i + 1..] {
                if let Some(tile) = left.intersection(right).coordinates().first() {
                    return Err(Error::Value(format!(
                        "ResidencyPlan sets must be disjoint: tile {} is in both {first} and \
                         {second}",
                        show(tile)
                    )));
                }
            }
        }
        Ok(ResidencyPlan {
            promote,
            retain,
            evict,
        })
    }

    /// The tiles to promote to the primary tier.
    pub fn promote(&self) -> &TileSet {
        &self.promote
    }

    /// The tiles to keep on the primary tier.
    pub fn retain(&self) -> &TileSet {
        &self.retain
    }

    /// The tiles to evict to the secondary tier.
    pub fn evict(&self) -> &TileSet {
        &self.evict
    }
}

/// Why tiles are required on the primary tier: the work a residency plan prepares for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResidencyPurpose {
    /// The tiles will be read.
    Read,
    /// The tiles will be written.
    Write,
    /// The tiles are operands of an operation (the tiled operations of a later phase).
    Operation,
}

/// A strategy choosing which tiles to keep on the primary tier.
///
/// `ResidencyPolicy.plan(required, purpose)` **only optimizes** (docs/tiers.md, Tile state and
/// residency): the framework corrects every plan so that the required tiles end up resident and are
/// never evicted, whatever the policy answers (see `TiledEvictable::plan_residency`). A policy can
/// therefore add prefetches and evictions, never break correctness.
///
/// ```
/// use strideweave::carriers::{ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileSet};
/// #[derive(Debug)]
/// struct EvictTileZero;
/// impl ResidencyPolicy for EvictTileZero {
///     fn plan(&self, required: &TileSet, _: ResidencyPurpose) -> strideweave::Result<ResidencyPlan> {
///         let zero = TileSet::new([vec![0, 0]])?;
///         ResidencyPlan::new(required.difference(&zero), TileSet::empty(), zero)
///     }
/// }
/// ```
pub trait ResidencyPolicy: fmt::Debug + Send + Sync {
    /// The plan this policy suggests for making `required` resident for `purpose`.
    fn plan(&self, required: &TileSet, purpose: ResidencyPurpose) -> Result<ResidencyPlan>;

    /// How many tiles the primary tier should hold at most, if this policy bounds it (a hint
    /// for the out-of-core phase; `None` by default, meaning unbounded).
    fn primary_capacity(&self) -> Option<usize> {
        None
    }

    /// Observes the progress of a tiled operation dispatched on this policy's carrier: called
    /// after every work item, on the calling thread (see [`TileProgress`]). Does nothing by
    /// default. An operation over a tensor larger than the primary tier streams many tiles, so
    /// this is the place to report progress of long runs.
    ///
    /// [`TileProgress`]: crate::carriers::TileProgress
    fn on_progress(&self, progress: &crate::carriers::TileProgress) {
        let _ = progress;
    }
}
