//! [`TilePins`]: the tiles a running operation (or one element access) reads or writes, held
//! so that no residency request replaces their copies meanwhile, and the pins the current
//! thread works for.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::tile_table::TileTable;

/// Pin ids are unique in the process, so a thread can tell its own pins from others'.
static NEXT_PIN: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The pins held by the work this thread runs for: its own, plus those of the operation
    /// it stages tiles for (see [`WorkingFor`]).
    static HELD: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A fresh pin id.
pub(crate) fn next_pin() -> u64 {
    NEXT_PIN.fetch_add(1, Ordering::Relaxed)
}

/// Whether the pin `id` is held by the work this thread runs for (waiting for it here would
/// wait for ourselves).
pub(crate) fn held_here(id: u64) -> bool {
    HELD.with(|held| held.borrow().contains(&id))
}

/// The pins this thread holds, for a helper thread to work under (see [`WorkingFor`]).
pub(crate) fn held() -> Vec<u64> {
    HELD.with(|held| held.borrow().clone())
}

fn push_held(ids: &[u64]) {
    HELD.with(|held| held.borrow_mut().extend_from_slice(ids));
}

fn pop_held(ids: &[u64]) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        for id in ids {
            if let Some(at) = held.iter().rposition(|h| h == id) {
                held.remove(at);
            }
        }
    });
}

/// Marks the current thread as working for the pins `ids` (a tiled operation's staging
/// worker works for the operation's pins) until dropped.
pub(crate) struct WorkingFor {
    ids: Vec<u64>,
}

impl WorkingFor {
    pub(crate) fn new(ids: Vec<u64>) -> WorkingFor {
        push_held(&ids);
        WorkingFor { ids }
    }
}

impl Drop for WorkingFor {
    fn drop(&mut self) {
        pop_held(&self.ids);
    }
}

/// The pin of some tiles of one TiledEvictable, released when dropped.
///
/// Invariants: while it lives, each of its tiles counts it among its pins, so a residency
/// request that would move the tile waits (or fails); the current thread — and any helper
/// working for it — knows the pin as its own, so a request made from inside the pinned work
/// fails instead of waiting for itself.
pub(crate) struct TilePins {
    table: Arc<TileTable>,
    id: u64,
    tiles: Vec<usize>,
}

impl TilePins {
    /// The pin `id` of `tiles`, already recorded on their entries by the caller.
    pub(crate) fn new(table: Arc<TileTable>, id: u64, tiles: Vec<usize>) -> TilePins {
        push_held(&[id]);
        TilePins { table, id, tiles }
    }

    /// The pin id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for TilePins {
    fn drop(&mut self) {
        pop_held(&[self.id]);
        self.table.unpin(self.id, &self.tiles);
    }
}

impl std::fmt::Debug for TilePins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TilePins")
            .field("id", &self.id)
            .field("tiles", &self.tiles.len())
            .finish()
    }
}
