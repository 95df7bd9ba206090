//! [`AwaitResidency`]: the completion handle of a residency request, and the request itself.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::tile_copy::TileCopy;
use crate::tile_table::{Direction, TileTable};
use crate::tile_transfer::{move_back, Landed, TileTransfer};
use strideweave_core::error::{Error, Result};
use strideweave_core::extension::{CompletionCell, ProviderCompletion};

/// One promote or evict request: its tiles' transfers until they are committed, then its
/// terminal outcome.
pub(crate) struct ResidencyRequest {
    id: u64,
    table: Weak<TileTable>,
    direction: Direction,
    /// The indices of the tiles it reserved (a transfer was started for each of them unless
    /// starting one failed).
    tiles: Vec<usize>,
    /// The coordinates of those tiles, for messages.
    coordinates: Vec<Vec<usize>>,
    /// Taken once by whoever commits the request; polling only looks (it clones the `Arc` and
    /// asks the transfers with the mutex released, so a tier calling back into the carrier
    /// while a move is polled cannot deadlock on it).
    transfers: Mutex<Option<Arc<Vec<TileTransfer>>>>,
    outcome: CompletionCell<()>,
}

impl ResidencyRequest {
    pub(crate) fn new(
        id: u64,
        table: &Arc<TileTable>,
        direction: Direction,
        tiles: Vec<usize>,
        transfers: Vec<TileTransfer>,
    ) -> Arc<ResidencyRequest> {
        let coordinates = tiles.iter().map(|&t| table.grid().tile_coord(t)).collect();
        Arc::new(ResidencyRequest {
            id,
            table: Arc::downgrade(table),
            direction,
            tiles,
            coordinates,
            transfers: Mutex::new(Some(Arc::new(transfers))),
            outcome: CompletionCell::new(),
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn direction(&self) -> Direction {
        self.direction
    }

    /// The coordinates of the tiles this request moves.
    pub(crate) fn tiles(&self) -> &[Vec<usize>] {
        &self.coordinates
    }

    /// Whether this request moves any of the tile `indices`.
    pub(crate) fn overlaps(&self, indices: &[usize]) -> bool {
        self.tiles.iter().any(|t| indices.contains(t))
    }

    /// Whether the request moves no tile.
    pub(crate) fn is_empty(&self) -> bool {
        self.tiles.is_empty()
    }

    /// Commits the request when every transfer has finished; whether it is terminal.
    pub(crate) fn poll(&self) -> bool {
        if self.outcome.done() {
            return true;
        }
        let transfers = self.transfers.lock().clone();
        let finished =
            transfers.is_some_and(|transfers| transfers.iter().all(TileTransfer::is_done));
        if finished {
            self.finish_with(None);
        }
        self.outcome.done()
    }

    /// Waits for every transfer, then commits all of them or — on `failure` or any failed
    /// transfer — none: a landed move is moved back into a fresh carrier of its source tier, a
    /// landed copy is discarded. Runs once; later calls return at once.
    ///
    /// If moving a landed tile back fails too, the tile keeps its one valid copy where it
    /// landed and its location says so (every tile always has a valid copy).
    pub(crate) fn finish_with(&self, failure: Option<Error>) {
        let Some(transfers) = self.transfers.lock().take() else {
            return;
        };
        let landed: Vec<Landed> = transfers.iter().map(TileTransfer::land).collect();
        let failure = failure.or_else(|| {
            landed.iter().find_map(|l| match l {
                Landed::Failed(error) => Some(error.clone()),
                Landed::Arrived(_) => None,
            })
        });
        let Some(table) = self.table.upgrade() else {
            self.outcome.complete(Err(Error::Runtime(
                "the TiledEvictable of this residency request was dropped".to_string(),
            )));
            return;
        };
        let mut placed = Vec::with_capacity(transfers.len());
        for (transfer, landed) in transfers.iter().zip(landed) {
            let Landed::Arrived(destination) = landed else {
                continue;
            };
            if failure.is_none() {
                placed.push((transfer.tile(), transfer.to(), destination));
                continue;
            }
            if !transfer.consumed_source() {
                // The source copy is intact: drop the copy.
                let _ = destination.release();
                continue;
            }
            match move_back(table.grid(), &destination, table.token(transfer.from())) {
                Ok(back) => placed.push((transfer.tile(), transfer.from(), back)),
                Err(_) => placed.push((transfer.tile(), transfer.to(), destination)),
            }
        }
        let mut inner = table.lock();
        let mut stale = Vec::new();
        for (tile, tier, carrier) in placed {
            let entry = &mut inner.tiles[tile];
            entry.location = tier.location();
            entry.copy = Some(TileCopy::Own(carrier));
            if failure.is_none() && self.direction == Direction::Evict {
                entry.dirty = false;
            }
        }
        if failure.is_none() {
            stale.extend(
                transfers
                    .iter()
                    .filter(|transfer| !transfer.consumed_source())
                    .map(|transfer| transfer.source().clone()),
            );
        }
        for &tile in &self.tiles {
            if inner.tiles[tile].pending == Some(self.id) {
                inner.tiles[tile].pending = None;
            }
        }
        inner.pending.retain(|r| r.id != self.id);
        drop(inner);
        // The replaced copies are dropped with no lock held.
        for copy in stale {
            copy.discard();
        }
        table.notify();
        self.outcome.complete(match failure {
            None => Ok(()),
            Some(error) => Err(error),
        });
    }
}

/// The completion handle of `TiledEvictable::promote_async` / `evict_async`.
///
/// Residency requests return `AwaitResidency` (docs/tiers.md, Tile state and residency); like every
/// completion of the carrier extension it is a blocking [`ProviderCompletion`], never a `Future`.
/// `done()` is true exactly once the request is terminal (polling it commits a request whose tier
/// moves have all finished); `wait()` blocks until then and returns `Ok(())` or the request's
/// error, the same on every call and from every thread. Cloning shares the request. Dropping every
/// handle does not cancel it: the tiles stay pending until the next access, clash check or wait
/// commits it.
#[derive(Clone)]
pub struct AwaitResidency {
    request: Arc<ResidencyRequest>,
}

impl AwaitResidency {
    pub(crate) fn new(request: Arc<ResidencyRequest>) -> AwaitResidency {
        AwaitResidency { request }
    }

    /// Whether the request is terminal (committed or failed).
    pub fn done(&self) -> bool {
        self.request.poll()
    }

    /// Blocks until the request is terminal and returns its outcome.
    pub fn wait(&self) -> Result<()> {
        self.request.finish_with(None);
        self.request.outcome.wait()
    }
}

impl ProviderCompletion<()> for AwaitResidency {
    fn done(&self) -> bool {
        AwaitResidency::done(self)
    }

    fn wait(&self) -> Result<()> {
        AwaitResidency::wait(self)
    }
}

impl std::fmt::Debug for AwaitResidency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwaitResidency")
            .field("direction", &self.request.direction().verb())
            .field("tiles", &self.request.tiles())
            .field("done", &self.request.outcome.done())
            .finish()
    }
}
