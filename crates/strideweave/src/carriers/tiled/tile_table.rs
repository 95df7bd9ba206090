//! [`TileTable`]: the shared tile states, tile copies, owned tiers and pending residency
//! requests of one TiledEvictable.

use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::carrier::OwnershipToken;
use crate::carriers::tiled::await_residency::{AwaitResidency, ResidencyRequest};
use crate::carriers::tiled::tile_copy::{Tier, TileCopy};
use crate::carriers::tiled::tile_grid::{show, TileGrid};
use crate::carriers::tiled::tile_transfer::TileTransfer;
use crate::carriers::tiled::{ResidencyPolicy, TileLocation, TileSet, TileState};
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};

/// One tile: its location, the storage of its valid copy, its dirty bit, and the residency
/// request it takes part in.
#[derive(Debug)]
pub(crate) struct TileEntry {
    pub(crate) location: TileLocation,
    /// The valid copy; `Some` exactly for the primary and secondary locations.
    pub(crate) copy: Option<TileCopy>,
    pub(crate) dirty: bool,
    /// The id of the pending residency request moving this tile.
    pub(crate) pending: Option<u64>,
}

impl TileEntry {
    fn new(location: TileLocation, copy: Option<TileCopy>) -> TileEntry {
        TileEntry {
            location,
            copy,
            dirty: false,
            pending: None,
        }
    }
}

/// The mutable part of a [`TileTable`].
pub(crate) struct TableInner {
    pub(crate) tiles: Vec<TileEntry>,
    pub(crate) pending: Vec<Arc<ResidencyRequest>>,
    pub(crate) released: bool,
    next_request: u64,
}

/// How a new table's tiles start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seeding {
    /// From the full tier (primary preferred); invalid when neither tier is full.
    FromTiers,
    /// Every tile implicit (reads as zero, no storage).
    Implicit,
}

/// The state shared by a TiledEvictable's storage provider and its residency facet.
///
/// Invariants:
/// 1. the table owns both tiers (two ownership tokens) until it is dropped; its tile carriers
///    are private to it;
/// 2. every primary or secondary tile has exactly one valid copy, on that tier;
/// 3. a tile takes part in at most one pending residency request; element access to it waits
///    for nothing and fails with a Runtime error while the request is pending;
/// 4. residency changes never write through the TiledEvictable handle, so its version never
///    moves with them.
pub(crate) struct TileTable {
    grid: TileGrid,
    dtype: DType,
    primary: OwnershipToken,
    secondary: OwnershipToken,
    policy: Option<Arc<dyn ResidencyPolicy>>,
    inner: Mutex<TableInner>,
}

/// Which way a residency request moves tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Promote,
    Evict,
}

impl Direction {
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Direction::Promote => "promote",
            Direction::Evict => "evict",
        }
    }

    /// The tiers a moving tile leaves and reaches.
    fn tiers(self) -> (Tier, Tier) {
        match self {
            Direction::Promote => (Tier::Secondary, Tier::Primary),
            Direction::Evict => (Tier::Primary, Tier::Secondary),
        }
    }
}

impl TileTable {
    /// The table over the owned tiers, seeded as `seeding` says.
    pub(crate) fn new(
        grid: TileGrid,
        primary: OwnershipToken,
        secondary: OwnershipToken,
        policy: Option<Arc<dyn ResidencyPolicy>>,
        seeding: Seeding,
    ) -> TileTable {
        let full = grid.logical_size();
        let entry = || match seeding {
            Seeding::Implicit => TileEntry::new(TileLocation::Implicit, None),
            Seeding::FromTiers if primary.carrier().size() == full => {
                TileEntry::new(TileLocation::Primary, Some(TileCopy::Seed))
            }
            Seeding::FromTiers if secondary.carrier().size() == full => {
                TileEntry::new(TileLocation::Secondary, Some(TileCopy::Seed))
            }
            Seeding::FromTiers => TileEntry::new(TileLocation::Invalid, None),
        };
        let tiles = (0..grid.tile_count()).map(|_| entry()).collect();
        TileTable {
            dtype: primary.carrier().dtype(),
            grid,
            primary,
            secondary,
            policy,
            inner: Mutex::new(TableInner {
                tiles,
                pending: Vec::new(),
                released: false,
                next_request: 0,
            }),
        }
    }

    pub(crate) fn grid(&self) -> &TileGrid {
        &self.grid
    }

    pub(crate) fn policy(&self) -> Option<&Arc<dyn ResidencyPolicy>> {
        self.policy.as_ref()
    }

    /// The owned tier carrier's token.
    pub(crate) fn token(&self, tier: Tier) -> &OwnershipToken {
        match tier {
            Tier::Primary => &self.primary,
            Tier::Secondary => &self.secondary,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, TableInner> {
        self.inner.lock()
    }

    /// The table locked, once tile `tile` has no pending request (a request whose transfers
    /// have all finished is committed first); Runtime while it is still pending.
    fn settled(&self, tile: usize, action: &str) -> Result<MutexGuard<'_, TableInner>> {
        let inner = self.lock();
        let Some(id) = inner.tiles[tile].pending else {
            return Ok(inner);
        };
        let request = inner.pending.iter().find(|r| r.id() == id).cloned();
        drop(inner);
        if let Some(request) = request {
            request.poll();
        }
        let inner = self.lock();
        if inner.tiles[tile].pending.is_some() {
            return Err(Error::Runtime(format!(
                "cannot {action} tile {} of the TiledEvictable: a residency request moving it is \
                 pending; wait for it first",
                show(&self.grid.tile_coord(tile))
            )));
        }
        Ok(inner)
    }

    fn zero(&self) -> Result<Value> {
        self.dtype.zero().ok_or_else(|| {
            Error::Runtime(format!(
                "an implicit TiledEvictable tile reads as zero, but dtype {} has no zero",
                self.dtype
            ))
        })
    }

    fn invalid(&self, action: &str, slot: usize, tile: usize) -> Error {
        Error::Runtime(format!(
            "cannot {action} slot {slot}: tile {} of the TiledEvictable is invalid (it has no \
             valid copy)",
            show(&self.grid.tile_coord(tile))
        ))
    }

    /// The value of the logical `slot`, from its tile's valid copy (zero for an implicit
    /// tile); Runtime for an invalid or pending tile.
    pub(crate) fn read(&self, slot: usize) -> Result<Value> {
        let (tile, local) = self.grid.split(slot);
        let inner = self.settled(tile, "read")?;
        let entry = &inner.tiles[tile];
        match (entry.location, &entry.copy) {
            (TileLocation::Implicit, _) => self.zero(),
            (TileLocation::Primary, Some(copy)) => copy.read(&self.primary, slot, local),
            (TileLocation::Secondary, Some(copy)) => copy.read(&self.secondary, slot, local),
            _ => Err(self.invalid("read", slot, tile)),
        }
    }

    /// Writes `value` at the logical `slot` of its tile's valid copy and marks the tile dirty.
    ///
    /// An implicit tile stays implicit for a write of exactly the dtype's zero (it already
    /// reads so); any other value materializes it as a zeroed carrier of the primary tier's
    /// factory. Runtime for an invalid or pending tile.
    pub(crate) fn write(&self, slot: usize, value: Value) -> Result<()> {
        let (tile, local) = self.grid.split(slot);
        let mut inner = self.settled(tile, "write")?;
        let entry = &mut inner.tiles[tile];
        match (entry.location, &entry.copy) {
            (TileLocation::Implicit, _) => {
                let zero = self.zero()?;
                let negative_zero =
                    matches!(value, Value::Float(x) if x == 0.0 && x.is_sign_negative());
                if value == zero && !negative_zero {
                    return Ok(());
                }
                let fresh = self.primary.carrier().allocate_like(
                    self.grid.tile_size(),
                    true,
                    None,
                    false,
                )?;
                if let Err(error) = fresh.set(local, value) {
                    let _ = fresh.release();
                    return Err(error);
                }
                entry.location = TileLocation::Primary;
                entry.copy = Some(TileCopy::Own(fresh));
            }
            (TileLocation::Primary, Some(copy)) => copy.write(&self.primary, slot, local, value)?,
            (TileLocation::Secondary, Some(copy)) => {
                copy.write(&self.secondary, slot, local, value)?
            }
            _ => return Err(self.invalid("write", slot, tile)),
        }
        entry.dirty = true;
        Ok(())
    }

    /// Releases every tile copy and both tiers (inside the owner's access), and gives up the
    /// ownership of both; Runtime while a residency request is pending. Idempotent.
    pub(crate) fn release(&self) -> Result<()> {
        let mut inner = self.lock();
        if inner.released {
            return Ok(());
        }
        if let Some(request) = inner.pending.first() {
            return Err(Error::Runtime(format!(
                "cannot release the TiledEvictable: a residency request to {} tiles {:?} is \
                 pending; wait for it first",
                request.direction().verb(),
                request.tiles()
            )));
        }
        if let Some(tile) = inner.tiles.iter().position(|t| t.pending.is_some()) {
            return Err(Error::Runtime(format!(
                "cannot release the TiledEvictable: a residency request moving tile {} is \
                 starting",
                show(&self.grid.tile_coord(tile))
            )));
        }
        inner.released = true;
        for entry in &mut inner.tiles {
            if let Some(copy) = entry.copy.take() {
                copy.discard();
            }
            entry.location = TileLocation::Invalid;
            entry.dirty = false;
        }
        let mut outcome = Ok(());
        for token in [&self.secondary, &self.primary] {
            let released = token.access().and_then(|_access| token.carrier().release());
            outcome = outcome.and(released);
            // A released tier is given up: nothing owns it any more.
            token.relinquish_released();
        }
        outcome
    }

    /// Makes every tile of a freshly allocated table invalid (no valid copy): the contents of
    /// `allocate_like(.., empty = true)`. Runtime for a table whose tiles have copies or
    /// pending requests (only a fresh all-implicit table is invalidated).
    pub(crate) fn invalidate_all(&self) -> Result<()> {
        let mut inner = self.lock();
        if let Some(tile) = inner
            .tiles
            .iter()
            .position(|t| t.copy.is_some() || t.pending.is_some())
        {
            return Err(Error::Runtime(format!(
                "cannot make the tiles of a TiledEvictable unspecified: tile {} already has \
                 contents",
                show(&self.grid.tile_coord(tile))
            )));
        }
        for entry in &mut inner.tiles {
            entry.location = TileLocation::Invalid;
            entry.dirty = false;
        }
        Ok(())
    }

    /// Commits every pending request whose transfers have finished, so that a state query
    /// is current even when nobody waits on or touches the tiles (a dropped handle's request
    /// included). Polled with no lock held: committing takes the lock.
    fn commit_finished(&self) {
        let pending: Vec<Arc<ResidencyRequest>> = self.lock().pending.clone();
        for request in pending {
            request.poll();
        }
    }

    /// The state of tile `coord` (Value for a wrong rank or a coordinate outside the grid).
    pub(crate) fn tile_state(&self, coord: &[usize]) -> Result<TileState> {
        let index = self.grid.tile_index(coord)?;
        self.commit_finished();
        let inner = self.lock();
        let entry = &inner.tiles[index];
        Ok(TileState::new(entry.location, entry.dirty))
    }

    /// The tiles whose state satisfies `keep`.
    pub(crate) fn tiles_where(&self, keep: impl Fn(&TileEntry) -> bool) -> TileSet {
        self.commit_finished();
        let inner = self.lock();
        let coordinates = inner
            .tiles
            .iter()
            .enumerate()
            .filter(|(_, entry)| keep(entry))
            .map(|(index, _)| self.grid.tile_coord(index));
        TileSet::new(coordinates.collect::<Vec<_>>()).unwrap_or_else(|_| TileSet::empty())
    }

    /// The tile indices of `tiles`, checked against the grid.
    fn indices(&self, tiles: &TileSet) -> Result<Vec<usize>> {
        tiles
            .coordinates()
            .iter()
            .map(|c| self.grid.tile_index(c))
            .collect()
    }

    /// Gives the reserved implicit `tiles` a zeroed copy each on the primary tier, so they are
    /// valid, resident and read zero; all or none (a failed allocation releases the copies
    /// already made and leaves every tile implicit and reserved).
    fn materialize(&self, tiles: &[usize]) -> Result<()> {
        let mut fresh = Vec::with_capacity(tiles.len());
        for _ in tiles {
            let allocated =
                self.primary
                    .carrier()
                    .allocate_like(self.grid.tile_size(), true, None, false);
            match allocated {
                Ok(carrier) => fresh.push(carrier),
                Err(error) => {
                    for carrier in fresh {
                        let _ = carrier.release();
                    }
                    return Err(error);
                }
            }
        }
        let mut inner = self.lock();
        for (&tile, carrier) in tiles.iter().zip(fresh) {
            let entry = &mut inner.tiles[tile];
            entry.location = TileLocation::Primary;
            entry.copy = Some(TileCopy::Own(carrier));
            entry.pending = None;
        }
        Ok(())
    }

    /// Clears the reservation of `tiles` after a failed request.
    fn unreserve(&self, tiles: &[usize]) {
        let mut inner = self.lock();
        for &tile in tiles {
            inner.tiles[tile].pending = None;
        }
    }

    /// Starts moving `tiles` in `direction` (see `TiledEvictable::promote_async`).
    pub(crate) fn request(
        self: &Arc<Self>,
        tiles: &TileSet,
        direction: Direction,
    ) -> Result<AwaitResidency> {
        let verb = direction.verb();
        let indices = self.indices(tiles)?;
        let mut inner = self.lock();
        // A pending request whose transfers have finished is committed before the clash check.
        let overlapping: Vec<Arc<ResidencyRequest>> = inner
            .pending
            .iter()
            .filter(|r| r.overlaps(&indices))
            .cloned()
            .collect();
        if !overlapping.is_empty() {
            drop(inner);
            for request in &overlapping {
                request.poll();
            }
            inner = self.lock();
        }
        if inner.released {
            return Err(Error::Runtime(format!(
                "cannot {verb} tiles of a released TiledEvictable"
            )));
        }
        if let Some(&tile) = indices.iter().find(|&&t| inner.tiles[t].pending.is_some()) {
            return Err(Error::Runtime(format!(
                "cannot {verb} tiles {tiles:?}: tile {} clashes with a pending residency \
                 request; wait for it first",
                show(&self.grid.tile_coord(tile))
            )));
        }
        if let Some(&tile) = indices
            .iter()
            .find(|&&t| inner.tiles[t].location == TileLocation::Invalid)
        {
            return Err(Error::Runtime(format!(
                "cannot {verb} tile {}: it is invalid (it has no valid copy to move)",
                show(&self.grid.tile_coord(tile))
            )));
        }
        // Promoting an implicit tile materializes it: a zeroed copy on the primary tier.
        let implicit: Vec<usize> = match direction {
            Direction::Promote => indices
                .iter()
                .copied()
                .filter(|&t| inner.tiles[t].location == TileLocation::Implicit)
                .collect(),
            Direction::Evict => Vec::new(),
        };
        let (from, to) = direction.tiers();
        let mut sources = Vec::new();
        for &tile in &indices {
            let entry = &inner.tiles[tile];
            if entry.location != from.location() {
                continue;
            }
            let copy = entry.copy.clone().ok_or_else(|| {
                Error::Runtime(format!(
                    "tile {} is {} but has no copy there",
                    show(&self.grid.tile_coord(tile)),
                    from.name()
                ))
            })?;
            sources.push((tile, copy));
        }
        // Reserve the moving tiles — from now on any other request on them clashes — and
        // start their transfers with no lock held (the tiers' factories and movement may run
        // provider callbacks).
        let id = inner.next_request;
        inner.next_request += 1;
        for &tile in sources.iter().map(|(tile, _)| tile).chain(&implicit) {
            inner.tiles[tile].pending = Some(id);
        }
        drop(inner);
        let tiles: Vec<usize> = sources.iter().map(|&(tile, _)| tile).collect();
        let mut transfers = Vec::with_capacity(sources.len());
        let mut failure = None;
        for (tile, source) in sources {
            let started = TileTransfer::start(
                &self.grid,
                tile,
                (from, self.token(from)),
                (to, self.token(to)),
                source,
            );
            match started {
                Ok(transfer) => transfers.push(transfer),
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        let request = ResidencyRequest::new(id, self, direction, tiles, transfers);
        let failure = failure.or_else(|| self.materialize(&implicit).err());
        if let Some(error) = failure {
            // Undo the transfers already started; every tile keeps its state.
            self.unreserve(&implicit);
            request.finish_with(Some(error.clone()));
            return Err(error);
        }
        if request.is_empty() {
            request.finish_with(None);
            return Ok(AwaitResidency::new(request));
        }
        self.lock().pending.push(Arc::clone(&request));
        request.poll();
        Ok(AwaitResidency::new(request))
    }
}
