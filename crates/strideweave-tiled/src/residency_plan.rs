//! [`ResidencyPlan`], [`ResidencyPurpose`] and the [`ResidencyPolicy`] trait: how a
//! TiledEvictable may be told which tiles to keep on its primary tier.

use std::fmt;

use crate::tile_grid::show;
use crate::TileSet;
use strideweave_core::error::{Error, Result};

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

/// Why tiles are required: the work a residency plan prepares for.
///
/// `Read` and `Write` ask for the tiles **on the primary tier**: the corrected plan promotes
/// every required tile that is not resident. `Operation` and `Backward` are *streamed* work —
/// a tiled operation's forward, and the backward pass of one — whose tiles stream through the
/// primary tier whether resident or not: their plan promotes, retains and evicts only what the
/// policy asks, within its [`primary_capacity`](ResidencyPolicy::primary_capacity), and the
/// work runs that plan before it reads a tile (docs/tiers.md, Tile state and residency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResidencyPurpose {
    /// The tiles will be read.
    Read,
    /// The tiles will be written.
    Write,
    /// The tiles are operands of a tiled operation's forward (streamed).
    Operation,
    /// The tiles are saved operands read by the backward pass of a tiled operation
    /// (streamed), or the tiles of a gradient that backward pass (or the accumulation of two
    /// gradients) builds, asked of the gradient's fresh carrier: its plan's promotions are
    /// placed on the primary tier within the room the capacity leaves beside the streamed
    /// tiles, its evictions on the secondary tier, and every other gradient tile where the
    /// default puts it (the secondary tier when the policy bounds the primary, else the
    /// primary).
    Backward,
}

impl ResidencyPurpose {
    /// Whether work of this purpose streams its tiles (`Operation`, `Backward`) rather than
    /// needing them resident (`Read`, `Write`).
    pub fn is_streamed(self) -> bool {
        matches!(
            self,
            ResidencyPurpose::Operation | ResidencyPurpose::Backward
        )
    }
}

/// A strategy choosing which tiles to keep on the primary tier.
///
/// Every tiled operation and every backward pass of one asks the policy of each operand
/// carrier for its plan (`plan(every tile it reads, Operation | Backward)`) and runs the
/// corrected plan before streaming; [`CapacityPolicy`] is the shipped default, and a carrier
/// built without a policy behaves as under `CapacityPolicy::unbounded()`.
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
    /// [`TileProgress`]: crate::TileProgress
    fn on_progress(&self, progress: &crate::TileProgress) {
        let _ = progress;
    }

    /// [`on_progress`](ResidencyPolicy::on_progress) for an observer that can fail: the
    /// framework calls this one after every work item, and an error stops the tiled
    /// operation (or backward pass, or accumulation) right there; the call fails with that
    /// error and publishes nothing (no result, no gradient, no version step; staged and
    /// partial carriers are released). Calls `on_progress` and succeeds by default; a policy
    /// whose observer runs code that can raise (the Python binding's) overrides it.
    fn try_on_progress(&self, progress: &crate::TileProgress) -> Result<()> {
        self.on_progress(progress);
        Ok(())
    }
}

/// The shipped default [`ResidencyPolicy`]: it bounds the primary tier at `capacity` tiles (or
/// not at all) and suggests nothing beyond what the framework's correction requires.
///
/// Its plans are empty, so the corrected plan promotes exactly the required non-resident
/// tiles for [`Read`](ResidencyPurpose::Read) / [`Write`](ResidencyPurpose::Write), and moves
/// nothing for streamed work: a tiled operation or backward streams its non-resident tiles
/// through the primary tier within the capacity and leaves every tile where it was.
///
/// ```
/// use strideweave::carriers::{CapacityPolicy, ResidencyPolicy, ResidencyPurpose, TileSet};
/// let policy = CapacityPolicy::new(4);
/// assert_eq!(policy.primary_capacity(), Some(4));
/// let plan = policy.plan(&TileSet::new([vec![0]])?, ResidencyPurpose::Operation)?;
/// assert!(plan.promote().is_empty() && plan.evict().is_empty());
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityPolicy {
    capacity: Option<usize>,
}

impl CapacityPolicy {
    /// The default policy bounding the primary tier at `capacity` tiles.
    pub fn new(capacity: usize) -> CapacityPolicy {
        CapacityPolicy {
            capacity: Some(capacity),
        }
    }

    /// The default policy with no bound (what a carrier without a policy does).
    pub fn unbounded() -> CapacityPolicy {
        CapacityPolicy { capacity: None }
    }
}

impl ResidencyPolicy for CapacityPolicy {
    fn plan(&self, _required: &TileSet, _purpose: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }

    fn primary_capacity(&self) -> Option<usize> {
        self.capacity
    }
}
