//! [`TileResidency`]: the tiled-residency facet of the TiledEvictable definition.

use std::sync::Arc;

use crate::capacity::Budget;
use crate::tile_table::{Direction, TileEntry, TileTable};
use crate::tiled_state::TiledState;
use crate::{
    AwaitResidency, ResidencyPlan, ResidencyPurpose, TileLocation, TileSet, TileState,
    TiledEvictable, WhenPinned,
};
use strideweave_core::carrier::Carrier;
use strideweave_core::error::{Error, Result};
use strideweave_core::extension::CarrierFacet;

/// The carrier-specific residency control plane of a TiledEvictable: tile states, promotion
/// and eviction, and residency planning.
///
/// Seed rule: "A CarrierFacet SHALL own only its declared carrier-specific behavior" — this
/// facet never changes dtype support, capabilities, routes or operation meaning. Only the
/// TiledEvictable definition registers it, so `carrier.facet::<TileResidency>()` is `None` and
/// `require_facet` a NotImplemented error for every other carrier (seed scenario "Query an
/// absent residency facet"). The `TiledEvictable::*` functions delegate to it.
///
/// ```
/// use strideweave::carriers::{Generic, TileLocation, TileResidency, TiledEvictable};
/// use strideweave::DType;
/// let values: Vec<_> = (0..4).map(|i| (i as f64).into()).collect();
/// let primary = Generic::carrier(&values, DType::FLOAT32, true)?;
/// let secondary = Generic::carrier(&[], DType::FLOAT32, true)?;
/// let tiled = TiledEvictable::carrier(&primary, &secondary, &[2], &[2], None)?;
/// let residency = tiled.require_facet::<TileResidency>()?;
/// assert_eq!(residency.tile_state(&tiled, &[1])?.location(), TileLocation::Primary);
/// assert!(primary.facet::<TileResidency>().is_none());
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug)]
pub struct TileResidency {
    _private: (),
}

impl CarrierFacet for TileResidency {}

impl TileResidency {
    pub(crate) fn new() -> TileResidency {
        TileResidency { _private: () }
    }

    /// The tile table of the TiledEvictable `carrier` (Type for another carrier).
    pub(crate) fn table(carrier: &Carrier) -> Result<Arc<TileTable>> {
        carrier
            .with_provider_state(|state: &TiledState| state.table().cloned())
            .map_err(|_| {
                Error::Type(format!(
                    "expected a TiledEvictable carrier, got {}",
                    carrier.class()
                ))
            })?
    }

    /// The state of the tile at `coord` (docs/tiers.md, Tile state and residency): Value for a
    /// wrong rank or a coordinate outside the grid.
    pub fn tile_state(&self, carrier: &Carrier, coord: &[usize]) -> Result<TileState> {
        TileResidency::table(carrier)?.tile_state(coord)
    }

    /// The tiles at `location` (docs/tiers.md, Tile state and residency).
    pub fn tiles_at(&self, carrier: &Carrier, location: TileLocation) -> Result<TileSet> {
        Ok(TileResidency::table(carrier)?.tiles_where(|e: &TileEntry| e.location == location))
    }

    /// The dirty tiles.
    pub fn dirty_tiles(&self, carrier: &Carrier) -> Result<TileSet> {
        Ok(TileResidency::table(carrier)?.tiles_where(|e: &TileEntry| e.dirty))
    }

    /// The tiles pinned by running operations or element accesses (docs/tiers.md, Pinned
    /// tiles): no residency request moves them until their pins are released.
    pub fn pinned_tiles(&self, carrier: &Carrier) -> Result<TileSet> {
        Ok(TileResidency::table(carrier)?.tiles_where(|e: &TileEntry| !e.pins.is_empty()))
    }

    /// How many tiles are pinned now (the size of [`pinned_tiles`](Self::pinned_tiles)).
    pub fn pinned_count(&self, carrier: &Carrier) -> Result<usize> {
        Ok(self.pinned_tiles(carrier)?.len())
    }

    fn request(
        &self,
        carrier: &Carrier,
        tiles: &TileSet,
        direction: Direction,
        when: WhenPinned,
    ) -> Result<AwaitResidency> {
        let table = TileResidency::table(carrier)?;
        if carrier.is_released() {
            return Err(Error::Runtime(format!(
                "cannot {} tiles of a released TiledEvictable",
                direction.verb()
            )));
        }
        table.request(tiles, direction, when)
    }

    /// Starts promoting `tiles` to the primary tier, waiting for pinned tiles; see
    /// `TiledEvictable::promote_async`.
    pub fn promote_async(&self, carrier: &Carrier, tiles: &TileSet) -> Result<AwaitResidency> {
        self.request(carrier, tiles, Direction::Promote, WhenPinned::Wait)
    }

    /// Starts evicting `tiles` to the secondary tier, waiting for pinned tiles; see
    /// `TiledEvictable::evict_async`.
    pub fn evict_async(&self, carrier: &Carrier, tiles: &TileSet) -> Result<AwaitResidency> {
        self.request(carrier, tiles, Direction::Evict, WhenPinned::Wait)
    }

    /// [`promote_async`](Self::promote_async), doing `when` about pinned tiles.
    pub fn promote_async_with(
        &self,
        carrier: &Carrier,
        tiles: &TileSet,
        when: WhenPinned,
    ) -> Result<AwaitResidency> {
        self.request(carrier, tiles, Direction::Promote, when)
    }

    /// [`evict_async`](Self::evict_async), doing `when` about pinned tiles.
    pub fn evict_async_with(
        &self,
        carrier: &Carrier,
        tiles: &TileSet,
        when: WhenPinned,
    ) -> Result<AwaitResidency> {
        self.request(carrier, tiles, Direction::Evict, when)
    }

    /// The corrected residency plan for `required`; see `TiledEvictable::plan_residency`.
    pub fn plan_residency(
        &self,
        carrier: &Carrier,
        required: &TileSet,
        purpose: ResidencyPurpose,
    ) -> Result<ResidencyPlan> {
        let table = TileResidency::table(carrier)?;
        let grid = table.grid();
        for coord in required.coordinates() {
            grid.tile_index(coord)?;
        }
        let at = |location: TileLocation| table.tiles_where(|e: &TileEntry| e.location == location);
        let (primary, implicit, invalid) = (
            at(TileLocation::Primary),
            at(TileLocation::Implicit),
            at(TileLocation::Invalid),
        );
        if let Some(tile) = required.intersection(&invalid).coordinates().first() {
            return Err(Error::Runtime(format!(
                "tile {tile:?} is required but invalid (it has no valid copy to make resident)"
            )));
        }
        let suggested = match table.policy() {
            Some(policy) => policy.plan(required, purpose)?,
            None => ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())?,
        };
        for set in [suggested.promote(), suggested.retain(), suggested.evict()] {
            for coord in set.coordinates() {
                grid.tile_index(coord)?;
            }
        }
        if purpose.is_streamed() {
            // The capacity is shared with every carrier steered by the same policy object.
            let capacity = Budget::tiles_for(&table);
            return streamed_plan(&suggested, &primary, &invalid, capacity);
        }
        let promote = suggested
            .promote()
            .union(required)?
            .difference(&primary)
            .difference(&implicit)
            .difference(&invalid);
        let retain = suggested
            .retain()
            .union(&required.intersection(&primary))?
            .intersection(&primary);
        let evict = suggested
            .evict()
            .intersection(&primary)
            .difference(required)
            .difference(&retain);
        ResidencyPlan::new(promote, retain, evict)
    }
}

/// The correction of a policy's plan for streamed work (`Operation`, `Backward`), whose tiles
/// stream through the primary tier whether resident or not: only primary tiles are retained or
/// evicted (a retained tile never), only valid non-primary tiles are promoted, and with a
/// `capacity` (the tiles of this carrier the policy's capacity leaves beside what the other
/// carriers it steers hold on the primary tier) the promotions are cut, in the set's order,
/// so that the primary tiles after the plan number at most that.
fn streamed_plan(
    suggested: &ResidencyPlan,
    primary: &TileSet,
    invalid: &TileSet,
    capacity: Option<usize>,
) -> Result<ResidencyPlan> {
    let retain = suggested.retain().intersection(primary);
    let evict = suggested.evict().intersection(primary).difference(&retain);
    let mut promote = suggested.promote().difference(primary).difference(invalid);
    if let Some(capacity) = capacity {
        let room = capacity.saturating_sub(primary.len() - evict.len());
        if promote.len() > room {
            promote = TileSet::new(promote.coordinates()[..room].to_vec())?;
        }
    }
    ResidencyPlan::new(promote, retain, evict)
}

impl TileResidency {
    /// Asks the policy of the TiledEvictable `carrier` for the streamed plan of `purpose`
    /// over every tile of the carrier (the tiles a tiled operation or its backward reads) and
    /// runs it: the evictions, then the promotions, each waited for. Each request is
    /// failure-atomic; a failure is returned and the work does not start.
    pub(crate) fn run_streamed_plan(carrier: &Carrier, purpose: ResidencyPurpose) -> Result<()> {
        let table = TileResidency::table(carrier)?;
        let grid = table.grid();
        let every = TileSet::new((0..grid.tile_count()).map(|t| grid.tile_coord(t)))?;
        let facet = TiledEvictable::residency(carrier)?;
        let plan = facet.plan_residency(carrier, &every, purpose)?;
        if !plan.evict().is_empty() {
            facet.evict_async(carrier, plan.evict())?.wait()?;
        }
        if !plan.promote().is_empty() {
            facet.promote_async(carrier, plan.promote())?.wait()?;
        }
        Ok(())
    }
}
