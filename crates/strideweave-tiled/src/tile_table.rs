//! [`TileTable`]: the shared tile states, tile copies, owned tiers and pending residency
//! requests of one TiledEvictable.

use std::sync::{Arc, Weak};

use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard, ReentrantMutex};

use crate::await_residency::{AwaitResidency, ResidencyRequest};
use crate::tile_copy::{Tier, TileCopy};
use crate::tile_grid::{show, TileGrid};
use crate::tile_pins::{held_here, next_pin, TilePins};
use crate::tile_transfer::TileTransfer;
use crate::{ResidencyPolicy, TileLocation, TileSet, TileState, WhenPinned};
use strideweave_core::carrier::{Carrier, OwnershipToken};
use strideweave_core::dtype::{DType, Value};
use strideweave_core::error::{Error, Result};
use strideweave_core::internal;

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
    /// The pins on this tile (one id per holder): while any is held, no residency request
    /// moves the tile.
    pub(crate) pins: Vec<u64>,
}

impl TileEntry {
    fn new(location: TileLocation, copy: Option<TileCopy>) -> TileEntry {
        TileEntry {
            location,
            copy,
            dirty: false,
            pending: None,
            pins: Vec::new(),
        }
    }
}

/// Where one tile's valid copy was when an operation pinned it.
pub(crate) type TileSnapshot = (TileLocation, Option<TileCopy>);

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
///    moves with them;
/// 5. a pinned tile (read or written by a running operation or element access) is never
///    moved: a request waits for its pins before it reserves anything, and an operation
///    waits for pending requests before it pins, so neither holds what the other waits for;
/// 6. the table's lock is never held while a tier (or a tile carrier) is accessed, so a tier
///    that calls back into this carrier's residency cannot deadlock on it.
pub(crate) struct TileTable {
    grid: TileGrid,
    dtype: DType,
    primary: OwnershipToken,
    secondary: OwnershipToken,
    policy: Option<Arc<dyn ResidencyPolicy>>,
    inner: Mutex<TableInner>,
    /// Notified whenever pins are released or a request is published or finished.
    changed: Condvar,
    /// Set when a streamed backward built this carrier as a gradient: the autograd engine may
    /// keep it without a copy, once.
    pub(crate) fresh_gradient: std::sync::atomic::AtomicBool,
    /// Staging carriers of the primary tier's class kept between tiled operations (a pool
    /// bounded by the policy's capacity), released with the carrier.
    staging: Mutex<Vec<Carrier>>,
    /// The staging carrier of the whole tensor (a copy of a secondary seed tier on the
    /// primary tier's class, for an operation that runs as one call), kept between
    /// operations; part of the staging pool.
    whole_staging: Mutex<Option<Carrier>>,
    /// Carriers of the secondary tier, one tile's size each, that an in-place update
    /// replaced: the destinations of the next update's new copies, so that repeated updates
    /// overwrite what the tier already holds instead of making (and later freeing) a carrier
    /// per tile each time; the gradients its streamed backward builds take theirs from here
    /// too and give them back when they are dropped. At most two per tile; released with the
    /// carrier.
    spares: Mutex<Vec<Carrier>>,
    /// The carrier (a parameter) whose spares this one's secondary tiles go back to when it
    /// is dropped: set for a gradient its streamed backward built.
    spare_home: Mutex<Option<Weak<TileTable>>>,
    /// Held while a residency transfer copies a tile out of a full seed tier in bulk (the
    /// copy claims that tier, so a write to it would fail meanwhile): seed-slot writes wait
    /// for it, and a transfer that cannot take it copies slot by slot instead. Reentrant, so
    /// a tier calling back into this carrier from inside such a copy does not deadlock.
    seed: ReentrantMutex<()>,
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
            changed: Condvar::new(),
            fresh_gradient: std::sync::atomic::AtomicBool::new(false),
            staging: Mutex::new(Vec::new()),
            whole_staging: Mutex::new(None),
            spares: Mutex::new(Vec::new()),
            spare_home: Mutex::new(None),
            seed: ReentrantMutex::new(()),
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

    /// The staging carriers kept from earlier operations (taken: a concurrent operation
    /// allocates its own).
    pub(crate) fn take_staging(&self) -> Vec<Carrier> {
        std::mem::take(&mut *self.staging.lock())
    }

    /// Keeps `carriers` for the next operation; released at once after release.
    pub(crate) fn keep_staging(&self, carriers: Vec<Carrier>) {
        // Checked and kept under the table's lock, so a release either sees the carriers or
        // happened first (and they are released here).
        let inner = self.lock();
        if inner.released {
            drop(inner);
            for carrier in carriers {
                let _ = carrier.release();
            }
            return;
        }
        self.staging.lock().extend(carriers);
        drop(inner);
    }

    /// The whole-tensor staging carrier kept from an earlier operation (taken: a concurrent
    /// operation allocates its own).
    pub(crate) fn take_whole_staging(&self) -> Option<Carrier> {
        self.whole_staging.lock().take()
    }

    /// Keeps `carrier` as the whole-tensor staging carrier for the next operation; released
    /// at once when the table is released or already keeps one.
    pub(crate) fn keep_whole_staging(&self, carrier: Carrier) {
        let inner = self.lock();
        let mut kept = self.whole_staging.lock();
        if inner.released || kept.is_some() {
            drop(kept);
            drop(inner);
            let _ = carrier.release();
            return;
        }
        *kept = Some(carrier);
    }

    /// The spare secondary carriers kept by earlier updates (taken: a concurrent update
    /// makes its own).
    pub(crate) fn take_spares(&self) -> Vec<Carrier> {
        std::mem::take(&mut *self.spares.lock())
    }

    /// One kept spare for which `fits` holds, taken.
    pub(crate) fn take_spare(&self, fits: impl Fn(&Carrier) -> bool) -> Option<Carrier> {
        let mut spares = self.spares.lock();
        let found = spares.iter().position(fits)?;
        Some(spares.swap_remove(found))
    }

    /// Keeps `carriers` (secondary carriers of one tile's size whose contents nobody reads
    /// again) for the next update or backward, at most two per tile; the others are released,
    /// and all of them once the table is released.
    pub(crate) fn keep_spares(&self, carriers: Vec<Carrier>) {
        let inner = self.lock();
        let rest = self.keep_spares_under(&inner, carriers);
        drop(inner);
        release_all(rest);
    }

    /// [`keep_spares`](Self::keep_spares) with the table's lock held as `inner`; returns the
    /// carriers not kept.
    fn keep_spares_under(&self, inner: &TableInner, carriers: Vec<Carrier>) -> Vec<Carrier> {
        if inner.released {
            return carriers;
        }
        let mut kept = self.spares.lock();
        let room = (2 * self.grid.tile_count()).saturating_sub(kept.len());
        let mut carriers = carriers;
        let rest = carriers.split_off(room.min(carriers.len()));
        kept.extend(carriers);
        rest
    }

    /// Makes `home`'s spares the place this carrier's secondary tiles go to when it is
    /// dropped (see [`Drop`]).
    pub(crate) fn set_spare_home(&self, home: &Arc<TileTable>) {
        *self.spare_home.lock() = Some(Arc::downgrade(home));
    }

    /// The slots this carrier has on its primary tier: its primary tiles (none once released).
    pub(crate) fn primary_slots(&self) -> usize {
        let inner = self.lock();
        if inner.released {
            return 0;
        }
        let tiles = inner
            .tiles
            .iter()
            .filter(|entry| entry.location == TileLocation::Primary)
            .count();
        tiles * self.grid.tile_size()
    }

    /// The slots of the staging buffers this carrier keeps between operations.
    pub(crate) fn kept_slots(&self) -> usize {
        let tiles: usize = self.staging.lock().iter().map(Carrier::size).sum();
        tiles + self.whole_staging.lock().as_ref().map_or(0, Carrier::size)
    }

    /// Wakes every thread waiting for pins to go or requests to finish.
    pub(crate) fn notify(&self) {
        self.changed.notify_all();
    }

    /// Pins tile `tile` for one element access by the current thread (see invariant 5).
    fn pin_element(&self, inner: &mut TableInner, tile: usize) -> ElementPin<'_> {
        let id = next_pin();
        inner.tiles[tile].pins.push(id);
        ElementPin {
            table: self,
            id,
            tile,
        }
    }

    /// Releases the pin `id` of `tiles` and wakes the waiting requests.
    pub(crate) fn unpin(&self, id: u64, tiles: &[usize]) {
        let mut inner = self.lock();
        for &tile in tiles {
            let pins = &mut inner.tiles[tile].pins;
            if let Some(at) = pins.iter().position(|&p| p == id) {
                pins.swap_remove(at);
            }
        }
        drop(inner);
        self.notify();
    }

    /// Pins every tile for a running operation and snapshots where each valid copy is,
    /// once no tile is in a pending residency request (a pending request is waited for, with
    /// no lock held). Runtime naming `action()` for a released carrier or an invalid tile.
    pub(crate) fn pin_all(
        self: &Arc<Self>,
        action: &dyn Fn() -> String,
    ) -> Result<(TilePins, Vec<TileSnapshot>)> {
        let mut inner = self.lock();
        loop {
            if inner.released {
                return Err(Error::Runtime(format!(
                    "{}: the TiledEvictable carrier is released",
                    action()
                )));
            }
            if let Some(id) = inner.tiles.iter().find_map(|t| t.pending) {
                let requests: Vec<Arc<ResidencyRequest>> = inner
                    .pending
                    .iter()
                    .filter(|r| r.id() == id)
                    .cloned()
                    .collect();
                if requests.is_empty() {
                    // The request is still starting its transfers: it publishes itself soon.
                    self.changed.wait_for(&mut inner, Duration::from_millis(1));
                    continue;
                }
                drop(inner);
                for request in requests {
                    request.finish_with(None);
                }
                inner = self.lock();
                continue;
            }
            if let Some(tile) = inner
                .tiles
                .iter()
                .position(|t| t.location == TileLocation::Invalid)
            {
                return Err(Error::Runtime(format!(
                    "{}: tile {} is invalid (it has no valid copy to compute with)",
                    action(),
                    show(&self.grid.tile_coord(tile))
                )));
            }
            let id = next_pin();
            let mut snapshot = Vec::with_capacity(inner.tiles.len());
            for entry in inner.tiles.iter_mut() {
                entry.pins.push(id);
                snapshot.push((entry.location, entry.copy.clone()));
            }
            let tiles = (0..snapshot.len()).collect();
            drop(inner);
            return Ok((TilePins::new(Arc::clone(self), id, tiles), snapshot));
        }
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
        let mut inner = self.settled(tile, "read")?;
        let entry = &inner.tiles[tile];
        let (tier, copy) = match (entry.location, &entry.copy) {
            (TileLocation::Implicit, _) => return self.zero(),
            (TileLocation::Primary, Some(copy)) => (Tier::Primary, copy.clone()),
            (TileLocation::Secondary, Some(copy)) => (Tier::Secondary, copy.clone()),
            _ => return Err(self.invalid("read", slot, tile)),
        };
        // Read the copy with no lock held; the pin keeps it in place meanwhile.
        let _pin = self.pin_element(&mut inner, tile);
        drop(inner);
        copy.read(self.token(tier), slot, local)
    }

    /// Writes `value` at the logical `slot` of its tile's valid copy and marks the tile dirty.
    ///
    /// An implicit tile stays implicit for a write of exactly the dtype's zero (it already
    /// reads so); any other value materializes it as a zeroed carrier of the primary tier's
    /// factory. Runtime for an invalid or pending tile.
    pub(crate) fn write(&self, slot: usize, value: Value) -> Result<()> {
        let (tile, local) = self.grid.split(slot);
        loop {
            let mut inner = self.settled(tile, "write")?;
            let entry = &inner.tiles[tile];
            let (tier, copy) = match (entry.location, &entry.copy) {
                (TileLocation::Implicit, _) => {
                    let zero = self.zero()?;
                    let negative_zero =
                        matches!(value, Value::Float(x) if x == 0.0 && x.is_sign_negative());
                    if value == zero && !negative_zero {
                        return Ok(());
                    }
                    drop(inner);
                    if self.materialize_with(tile, local, value)? {
                        return Ok(());
                    }
                    // Another writer materialized the tile first: write into its copy.
                    continue;
                }
                (TileLocation::Primary, Some(copy)) => (Tier::Primary, copy.clone()),
                (TileLocation::Secondary, Some(copy)) => (Tier::Secondary, copy.clone()),
                _ => return Err(self.invalid("write", slot, tile)),
            };
            // Write the copy with no lock held; the pin keeps it in place meanwhile.
            let pin = self.pin_element(&mut inner, tile);
            drop(inner);
            let seeding = matches!(copy, TileCopy::Seed).then(|| self.seed.lock());
            copy.write(self.token(tier), slot, local, value)?;
            drop(seeding);
            self.lock().tiles[tile].dirty = true;
            drop(pin);
            return Ok(());
        }
    }

    /// Gives the implicit `tile` a zeroed copy of the primary tier's factory holding `value`
    /// at `local`, made with no lock held; `false` (the fresh copy released) when the tile
    /// stopped being implicit meanwhile.
    fn materialize_with(&self, tile: usize, local: usize, value: Value) -> Result<bool> {
        let fresh =
            self.primary
                .carrier()
                .allocate_like(self.grid.tile_size(), true, None, false)?;
        if let Err(error) = fresh.set(local, value) {
            let _ = fresh.release();
            return Err(error);
        }
        let mut inner = self.lock();
        let entry = &mut inner.tiles[tile];
        if entry.location != TileLocation::Implicit || entry.pending.is_some() {
            drop(inner);
            let _ = fresh.release();
            return Ok(false);
        }
        entry.location = TileLocation::Primary;
        entry.copy = Some(TileCopy::Own(fresh));
        entry.dirty = true;
        Ok(true)
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
        if let Some(tile) = inner.tiles.iter().position(|t| !t.pins.is_empty()) {
            return Err(Error::Runtime(format!(
                "cannot release the TiledEvictable: tile {} is pinned by a running operation",
                show(&self.grid.tile_coord(tile))
            )));
        }
        inner.released = true;
        let mut copies = Vec::new();
        for entry in &mut inner.tiles {
            copies.extend(entry.copy.take());
            entry.location = TileLocation::Invalid;
            entry.dirty = false;
        }
        drop(inner);
        for copy in copies {
            copy.discard();
        }
        for carrier in self
            .take_staging()
            .into_iter()
            .chain(self.take_whole_staging())
            .chain(self.take_spares())
        {
            let _ = carrier.release();
        }
        let mut outcome = Ok(());
        for token in [&self.secondary, &self.primary] {
            let released = token.access().and_then(|_access| token.carrier().release());
            outcome = outcome.and(released);
            // A released tier is given up: nothing owns it any more.
            internal::relinquish_released(token);
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
        drop(inner);
        self.notify();
    }

    /// Starts moving `tiles` in `direction` (see `TiledEvictable::promote_async`); a moving
    /// tile that is pinned is waited for or refused as `when` says.
    pub(crate) fn request(
        self: &Arc<Self>,
        tiles: &TileSet,
        direction: Direction,
        when: WhenPinned,
    ) -> Result<AwaitResidency> {
        let verb = direction.verb();
        let indices = self.indices(tiles)?;
        let (from, to) = direction.tiers();
        let mut inner = self.lock();
        let (implicit, sources) = loop {
            // A pending request whose transfers have finished is committed before the clash
            // check.
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
            // A pinned tile's copy is in use: wait for its pins (nothing is reserved yet),
            // unless told not to or the pin is this thread's own work.
            let Some(&(tile, _)) = sources
                .iter()
                .find(|(tile, _)| !inner.tiles[*tile].pins.is_empty())
            else {
                break (implicit, sources);
            };
            let ours = inner.tiles[tile].pins.iter().any(|&pin| held_here(pin));
            if when == WhenPinned::Fail || ours {
                let why = if when == WhenPinned::Fail {
                    "by a running operation, and the request was asked not to wait \
                     (WhenPinned::Fail)"
                } else {
                    "by the work running on this thread, which a request from inside it \
                     cannot wait for"
                };
                return Err(Error::Runtime(format!(
                    "cannot {verb} tile {}: it is pinned {why}",
                    show(&self.grid.tile_coord(tile))
                )));
            }
            self.changed.wait(&mut inner);
        };
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
                &self.seed,
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
        self.notify();
        request.poll();
        Ok(AwaitResidency::new(request))
    }
}

/// The pin of one tile for one element access, released when dropped.
struct ElementPin<'a> {
    table: &'a TileTable,
    id: u64,
    tile: usize,
}

impl Drop for ElementPin<'_> {
    fn drop(&mut self) {
        self.table.unpin(self.id, &[self.tile]);
    }
}

/// A dropped gradient gives its secondary tiles to the spares of the carrier it is the
/// gradient of (when that carrier is alive and not busy: its lock is only tried, so a drop
/// never waits), for that carrier's next backward or update to write into; anything else
/// is dropped with the table. A released table gave up its tiles already.
impl Drop for TileTable {
    fn drop(&mut self) {
        let Some(home) = self
            .spare_home
            .get_mut()
            .take()
            .and_then(|home| home.upgrade())
        else {
            return;
        };
        let inner = self.inner.get_mut();
        if inner.released {
            return;
        }
        let secondary = self.secondary.carrier();
        let size = self.grid.tile_size();
        let mut spares = Vec::new();
        for entry in &mut inner.tiles {
            if entry.location != TileLocation::Secondary {
                continue;
            }
            if let Some(TileCopy::Own(carrier)) = &entry.copy {
                if carrier.class() == secondary.class()
                    && carrier.dtype() == secondary.dtype()
                    && carrier.size() == size
                    && !carrier.is_released()
                {
                    spares.push(carrier.clone());
                    entry.copy = None;
                    entry.location = TileLocation::Invalid;
                }
            }
        }
        if spares.is_empty() {
            return;
        }
        let rest = match home.inner.try_lock() {
            Some(home_inner) => home.keep_spares_under(&home_inner, spares),
            None => spares,
        };
        release_all(rest);
    }
}

fn release_all(carriers: Vec<Carrier>) {
    for carrier in carriers {
        let _ = carrier.release();
    }
}
