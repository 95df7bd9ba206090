//! `TiledEvictable`: the shipped definition-backed dependent carrier spreading a tensor's tiles
//! over a primary (fast) and a secondary (slow) tier (docs/tiers.md, TiledEvictable).

use std::sync::Arc;

use crate::tile_copy::Tier;
use crate::tile_grid::{decode, TileGrid};
use crate::tile_table::{Seeding, TileTable};
use crate::tiled_definition::tiled_evictable_class;
use crate::tiled_state::TiledState;
use crate::{
    AwaitResidency, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation, TileResidency,
    TileSet, TileState, WhenPinned,
};
use strideweave_core::carrier::check_tier_pair;
use strideweave_core::carrier::Carrier;
use strideweave_core::error::{Error, Result};
use strideweave_core::CarrierClass;

/// The TiledEvictable carrier: a logical tensor of shape `grid_shape · tile_shape` whose tiles
/// live on a primary or a secondary tier, moved tile by tile.
///
/// It is the only shipped definition-backed carrier (seed: "TiledEvictable SHALL be the only
/// definition-backed shipped carrier"): its `CarrierDefinition` — a [`StorageProvider`] over
/// the tiles, a [`CompositeProvider`] (the six central operations on raw tiled operands —
/// `add`, `elementwise_mul`, `mul`, `relu`, `reduce_sum`, `matmul` — computed tile by tile
/// through the primary tier's public dispatch into a dense result on the primary tier's class,
/// streaming secondary tiles through the primary within the policy's
/// [`primary_capacity`](ResidencyPolicy::primary_capacity)) and the [`TileResidency`] facet —
/// is registered through the public extension surface on first use. It composes its tiers
/// only through their public behaviour: factories, element access, dispatch and movement.
///
/// Invariants:
/// 1. slot `s` is the canonical (first-mode-fastest) index over the logical shape; logical
///    coordinate `c` lies in tile `c / tile` at local coordinate `c % tile`;
/// 2. the TiledEvictable owns both tiers from construction until it is dropped (dropping
///    unowns them, [`release`](Carrier::release) releases them);
/// 3. every tile is primary, secondary, implicit (reads as zero) or invalid (reads fail
///    with a Runtime error naming the tile); a primary or secondary tile has exactly one
///    valid copy, on that tier;
/// 4. residency changes ([`promote`](TiledEvictable::promote),
///    [`evict`](TiledEvictable::evict)) never move the carrier's version, record no autograd
///    node and are failure-atomic; a write through the carrier moves the version by 1.
///
/// ```
/// use strideweave::carriers::{Generic, TileLocation, TileSet, TiledEvictable};
/// use strideweave::{DType, Value};
/// let values: Vec<Value> = (0..8).map(|i| Value::Float(i as f64)).collect();
/// let primary = Generic::carrier(&values, DType::FLOAT32, true)?;
/// let secondary = Generic::carrier(&[], DType::FLOAT32, true)?;
/// // A 4×2 tensor in 2×1 tiles of 2×2.
/// let tiled = TiledEvictable::carrier(&primary, &secondary, &[2, 1], &[2, 2], None)?;
/// let tile = TileSet::new([vec![1, 0]])?;
/// TiledEvictable::evict(&tiled, &tile)?;
/// assert_eq!(TiledEvictable::tile_state(&tiled, &[1, 0])?.location(), TileLocation::Secondary);
/// assert_eq!(tiled.get(3)?, Value::Float(3.0)); // read from the secondary copy
/// assert_eq!(tiled.version(), 0);
/// # Ok::<(), strideweave::Error>(())
/// ```
///
/// [`StorageProvider`]: crate::StorageProvider
/// [`CompositeProvider`]: crate::CompositeProvider
#[derive(Debug)]
pub struct TiledEvictable {
    _private: (),
}

impl TiledEvictable {
    /// The exact TiledEvictable class (registering its definition on first use).
    pub fn class() -> Result<CarrierClass> {
        tiled_evictable_class()
    }

    /// A TiledEvictable over `primary` and `secondary` with `grid_shape` tiles of
    /// `tile_shape`, optionally steered by `policy`; it owns both tiers afterwards.
    ///
    /// Checks, in order (docs/tiers.md, Construction and geometry; mirroring `Evictable::carrier`):
    /// 1. `grid_shape` and `tile_shape`: at least one axis, the same rank, extents ≥ 1, sizes
    ///    that fit `usize` (Value);
    /// 2. the same carrier twice (Value);
    /// 3. a released tier (Runtime), primary first;
    /// 4. an owned tier (Runtime), primary first;
    /// 5. different dtypes (Type);
    /// 6. an immutable secondary (Runtime);
    /// 7. a tier that is neither empty nor full — full means `grid · tile` slots (Value);
    /// 8. the class's definition is registered if it is not yet; both tiers are claimed
    ///    (a failed claim, e.g. of a tier claimed by a pending move, gives back the first:
    ///    Runtime);
    /// 9. the storage provider's dtype support — the identity intersection of the tiers'
    ///    (seed scenario "Derive composite dtype support from configured tiers") — must cover
    ///    the dtype (Value).
    ///
    /// On any failure nothing is left owned, claimed or released. The tiles are seeded from
    /// the full tier (the primary when both are full) and are all invalid when neither is.
    /// The carrier is mutable exactly when the primary tier is.
    pub fn carrier(
        primary: &Carrier,
        secondary: &Carrier,
        grid_shape: &[usize],
        tile_shape: &[usize],
        policy: Option<Arc<dyn ResidencyPolicy>>,
    ) -> Result<Carrier> {
        TiledEvictable::construct(
            primary,
            secondary,
            grid_shape,
            tile_shape,
            policy,
            Seeding::FromTiers,
        )
    }

    /// A TiledEvictable whose tiles are all implicit (they read as zero and have no storage
    /// until written) over two **empty** tiers: the fresh implicit-zero carrier the later
    /// gradient scatter needs. The checks of [`carrier`](TiledEvictable::carrier) apply, with
    /// step 7 requiring both tiers empty (Value).
    pub fn zeros(
        primary: &Carrier,
        secondary: &Carrier,
        grid_shape: &[usize],
        tile_shape: &[usize],
        policy: Option<Arc<dyn ResidencyPolicy>>,
    ) -> Result<Carrier> {
        TiledEvictable::construct(
            primary,
            secondary,
            grid_shape,
            tile_shape,
            policy,
            Seeding::Implicit,
        )
    }

    fn construct(
        primary: &Carrier,
        secondary: &Carrier,
        grid_shape: &[usize],
        tile_shape: &[usize],
        policy: Option<Arc<dyn ResidencyPolicy>>,
        seeding: Seeding,
    ) -> Result<Carrier> {
        let grid = TileGrid::new(grid_shape, tile_shape)?;
        check_tiers(primary, secondary, &grid, seeding)?;
        let class = tiled_evictable_class()?;
        let primary_token = primary.claim_ownership()?;
        // A failed second claim drops the first token, which gives the primary back.
        let secondary_token = secondary.claim_ownership()?;
        let slots = grid.logical_size();
        let table = TileTable::new(grid, primary_token, secondary_token, policy, seeding);
        // On failure the state — and with it both tokens — is dropped: the tiers are unowned
        // and still live.
        Carrier::create(
            class,
            TiledState::configured(table),
            slots,
            primary.dtype(),
            primary.is_intrinsically_mutable(),
        )
    }

    /// The residency facet of `carrier`: NotImplemented naming the facet for a carrier that
    /// is not a TiledEvictable.
    pub fn residency(carrier: &Carrier) -> Result<&TileResidency> {
        carrier.require_facet::<TileResidency>()
    }

    /// The state of the tile at `coord` (Value for a wrong rank or a coordinate outside the
    /// grid, naming both).
    pub fn tile_state(carrier: &Carrier, coord: &[usize]) -> Result<TileState> {
        TiledEvictable::residency(carrier)?.tile_state(carrier, coord)
    }

    /// The tiles whose valid copy is on the primary tier.
    pub fn primary_tiles(carrier: &Carrier) -> Result<TileSet> {
        TiledEvictable::residency(carrier)?.tiles_at(carrier, TileLocation::Primary)
    }

    /// The tiles whose valid copy is on the secondary tier.
    pub fn secondary_tiles(carrier: &Carrier) -> Result<TileSet> {
        TiledEvictable::residency(carrier)?.tiles_at(carrier, TileLocation::Secondary)
    }

    /// The implicit tiles (no storage, read as zero).
    pub fn implicit_tiles(carrier: &Carrier) -> Result<TileSet> {
        TiledEvictable::residency(carrier)?.tiles_at(carrier, TileLocation::Implicit)
    }

    /// The invalid tiles (no valid copy).
    pub fn invalid_tiles(carrier: &Carrier) -> Result<TileSet> {
        TiledEvictable::residency(carrier)?.tiles_at(carrier, TileLocation::Invalid)
    }

    /// The tiles written since they were seeded or last evicted.
    pub fn dirty_tiles(carrier: &Carrier) -> Result<TileSet> {
        TiledEvictable::residency(carrier)?.dirty_tiles(carrier)
    }

    /// Starts promoting `tiles` to the primary tier and returns its completion handle.
    ///
    /// Idempotent (docs/tiers.md, Tile state and residency): a primary or implicit tile is left as
    /// it is, no autograd node, the carrier's version never moves. Each secondary tile is copied
    /// into a fresh carrier of the primary tier's factory — by the tiers' public movement
    /// (`move_async`, which releases the secondary copy at its commit), or element by element for a
    /// tile still in the secondary seed tier — and the secondary copy is dropped.
    ///
    /// Errors returned here, with nothing changed: not a TiledEvictable (NotImplemented); a
    /// wrong rank (Value) or a tile outside the grid (Index); a released carrier, an invalid
    /// tile, or a tile in a pending request — a clash (Runtime); a factory, seed-copy or
    /// move-submission failure. A tier move failing later is the handle's outcome. Either way
    /// the request is failure-atomic: moves that landed are moved back, every tile keeps a
    /// valid copy, its state is unchanged and the call can be retried.
    pub fn promote_async(carrier: &Carrier, tiles: &TileSet) -> Result<AwaitResidency> {
        TiledEvictable::residency(carrier)?.promote_async(carrier, tiles)
    }

    /// Starts evicting `tiles` to the secondary tier: the mirror of
    /// [`promote_async`](TiledEvictable::promote_async) (a secondary or implicit tile is left as
    /// it is; the primary copy is dropped; an evicted tile is clean).
    pub fn evict_async(carrier: &Carrier, tiles: &TileSet) -> Result<AwaitResidency> {
        TiledEvictable::residency(carrier)?.evict_async(carrier, tiles)
    }

    /// [`promote_async`](TiledEvictable::promote_async), doing `when` about a pinned tile:
    /// wait for its pins ([`WhenPinned::Wait`], what `promote_async` does) or fail at once
    /// with a Runtime error naming it ([`WhenPinned::Fail`]). A tile is pinned while a running
    /// tiled operation (or one element access) reads or writes it; a request from inside that
    /// work — a policy's progress hook, a tier calling back — fails rather than wait for
    /// itself.
    pub fn promote_async_with(
        carrier: &Carrier,
        tiles: &TileSet,
        when: WhenPinned,
    ) -> Result<AwaitResidency> {
        TiledEvictable::residency(carrier)?.promote_async_with(carrier, tiles, when)
    }

    /// [`evict_async`](TiledEvictable::evict_async), doing `when` about a pinned tile (see
    /// [`promote_async_with`](TiledEvictable::promote_async_with)).
    pub fn evict_async_with(
        carrier: &Carrier,
        tiles: &TileSet,
        when: WhenPinned,
    ) -> Result<AwaitResidency> {
        TiledEvictable::residency(carrier)?.evict_async_with(carrier, tiles, when)
    }

    /// The tiles pinned now by running operations or element accesses (their copies cannot
    /// move until the pins are released).
    pub fn pinned_tiles(carrier: &Carrier) -> Result<TileSet> {
        TiledEvictable::residency(carrier)?.pinned_tiles(carrier)
    }

    /// [`promote_async`](TiledEvictable::promote_async)`(carrier, tiles)?.wait()`.
    pub fn promote(carrier: &Carrier, tiles: &TileSet) -> Result<()> {
        TiledEvictable::promote_async(carrier, tiles)?.wait()
    }

    /// [`evict_async`](TiledEvictable::evict_async)`(carrier, tiles)?.wait()`.
    pub fn evict(carrier: &Carrier, tiles: &TileSet) -> Result<()> {
        TiledEvictable::evict_async(carrier, tiles)?.wait()
    }

    /// The residency plan making `required` resident for `purpose`: the carrier's
    /// [`ResidencyPolicy`] suggests, the framework corrects (the policy only optimizes).
    ///
    /// For [`Read`](ResidencyPurpose::Read) and [`Write`](ResidencyPurpose::Write) the
    /// result promotes every required tile that is not primary or implicit (plus the policy's
    /// other valid non-primary suggestions), retains the required primary tiles (plus the
    /// policy's primary suggestions), and evicts only primary tiles the policy names that are
    /// neither required nor retained. Without a policy it promotes and retains exactly the
    /// required tiles.
    ///
    /// For streamed work ([`Operation`](ResidencyPurpose::Operation),
    /// [`Backward`](ResidencyPurpose::Backward): what every tiled operation and backward asks
    /// and runs) the required tiles stream whether resident or not, so the result is the
    /// policy's plan kept to what can run: it promotes only valid non-primary tiles, cut (in
    /// the set's order) so that the primary tiles after the plan number at most the policy's
    /// [`primary_capacity`](ResidencyPolicy::primary_capacity), retains only primary tiles
    /// and evicts only primary tiles it does not retain. Without a policy (or under the
    /// default [`CapacityPolicy`](crate::CapacityPolicy)) it is empty: nothing
    /// moves. Errors: a tile outside the grid (Index) or of another rank
    /// (Value), in `required` or in the policy's answer; a required invalid tile (Runtime);
    /// the policy's own error.
    pub fn plan_residency(
        carrier: &Carrier,
        required: &TileSet,
        purpose: ResidencyPurpose,
    ) -> Result<ResidencyPlan> {
        TiledEvictable::residency(carrier)?.plan_residency(carrier, required, purpose)
    }

    /// The grid shape (tiles per axis).
    pub fn grid_shape(carrier: &Carrier) -> Result<Vec<usize>> {
        Ok(TileResidency::table(carrier)?.grid().grid_shape().to_vec())
    }

    /// The shape of every tile.
    pub fn tile_shape(carrier: &Carrier) -> Result<Vec<usize>> {
        Ok(TileResidency::table(carrier)?.grid().tile_shape().to_vec())
    }

    /// The logical shape `grid · tile`.
    pub fn logical_shape(carrier: &Carrier) -> Result<Vec<usize>> {
        Ok(TileResidency::table(carrier)?
            .grid()
            .logical_shape()
            .to_vec())
    }

    /// The slot of the logical coordinate `coord` (canonical, first-mode-fastest); Value for
    /// a wrong rank, Index outside the logical shape.
    pub fn slot(carrier: &Carrier, coord: &[usize]) -> Result<usize> {
        TileResidency::table(carrier)?.grid().slot(coord)
    }

    /// The (tile coordinate, local coordinate) of `slot`: `coord / tile` and `coord % tile`
    /// per axis. Index error outside the logical size.
    pub fn locate(carrier: &Carrier, slot: usize) -> Result<(Vec<usize>, Vec<usize>)> {
        let table = TileResidency::table(carrier)?;
        let grid = table.grid();
        if slot >= grid.logical_size() {
            return Err(Error::Index(format!(
                "slot {slot} is out of range for a TiledEvictable of {} slots",
                grid.logical_size()
            )));
        }
        let (tile, local) = grid.split(slot);
        Ok((grid.tile_coord(tile), decode(local, grid.tile_shape())))
    }

    /// The primary tier carrier it was constructed over (owned by the TiledEvictable).
    pub fn primary(carrier: &Carrier) -> Result<Carrier> {
        Ok(TileResidency::table(carrier)?
            .token(Tier::Primary)
            .carrier()
            .clone())
    }

    /// The secondary tier carrier it was constructed over (owned by the TiledEvictable).
    pub fn secondary(carrier: &Carrier) -> Result<Carrier> {
        Ok(TileResidency::table(carrier)?
            .token(Tier::Secondary)
            .carrier()
            .clone())
    }

    /// The residency policy it was constructed with.
    pub fn policy(carrier: &Carrier) -> Result<Option<Arc<dyn ResidencyPolicy>>> {
        Ok(TileResidency::table(carrier)?.policy().cloned())
    }
}

/// Steps 2–7 of [`TiledEvictable::carrier`]'s check order.
fn check_tiers(
    primary: &Carrier,
    secondary: &Carrier,
    grid: &TileGrid,
    seeding: Seeding,
) -> Result<()> {
    check_tier_pair(primary, secondary, "a TiledEvictable")?;
    let tiers = [("primary", primary), ("secondary", secondary)];
    let full = grid.logical_size();
    for (role, tier) in tiers {
        let size = tier.size();
        let accepted = match seeding {
            Seeding::FromTiers => size == 0 || size == full,
            Seeding::Implicit => size == 0,
        };
        if !accepted {
            let expected = match seeding {
                Seeding::FromTiers => format!("0 (empty) or {full} (grid_shape · tile_shape)"),
                Seeding::Implicit => "0 (an implicit-zero TiledEvictable starts empty)".into(),
            };
            return Err(Error::Value(format!(
                "the {role} {} tier of a TiledEvictable has size {size}; expected {expected} for \
                 grid_shape {:?} and tile_shape {:?}",
                tier.class(),
                grid.grid_shape(),
                grid.tile_shape()
            )));
        }
    }
    Ok(())
}
