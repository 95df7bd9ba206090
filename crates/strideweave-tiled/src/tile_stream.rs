//! [`TileStream`]: streaming the tiles of a tiled operation's work items through the primary
//! tier's class, staging the next items' non-resident tiles on a worker thread while the
//! current item computes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread;

use crate::capacity::Budget;
use crate::tile_copy::Tier;
use crate::tile_pins::{held, WorkingFor};
use crate::tile_progress::Peak;
use crate::tiled_operand::{column_major_strides, flat, TileSource, TiledOperand};
use crate::tiled_operations::operand_tables;
use strideweave_core::autograd::no_grad;
use strideweave_core::carrier::Carrier;
use strideweave_core::error::{Error, Result};
use strideweave_core::movement::copy_to_scratch;
use strideweave_core::tensor::Tensor;

/// One tile an item needs: `(operand index, tile index)`.
pub(crate) type Fetch = (usize, usize);

/// Staged pieces of a tile stay below this many slots (512 KiB of Float32, a quarter of the
/// per-core L2 cache of the machines measured), so a piece copied onto the primary tier is
/// still in the cache when it is computed. A piece is above the CPU kernels' threading
/// threshold (100 000 elements), so its kernel is run sequentially, on the thread that copied
/// it (`tiled_operations::execute`); with the per-step cost of a piece (≈ 3 µs of dispatch,
/// copy set-up and partial sum) a 64 MiB sum in pieces of 128 Ki slots made 0.86–0.90× the
/// aligned read's rate in one process, against 0.80–0.82× at 64 Ki slots (docs/tiled-design.md).
pub(crate) const PIECE_SLOTS: usize = 1 << 17;

/// One step of a stream: piece `piece` of `count` of item `item`.
#[derive(Debug, Clone, Copy)]
struct Step {
    item: usize,
    piece: usize,
    count: usize,
}

/// The tiles of one work item, fetched and readable on the primary tier's class, in the
/// order the item listed them; `staged` are the copy destinations staged for it (handed back
/// for reuse once the item is done), `transient` the zero and gathered tiles made for it
/// (released once the item is done).
pub(crate) struct Fetched {
    pub(crate) tiles: Vec<Tensor>,
    staged: Vec<Carrier>,
    transient: Vec<Carrier>,
    slots: usize,
}

impl Fetched {
    /// How many tiles were staged for the item.
    fn staged_tiles(&self) -> usize {
        self.staged.len() + self.transient.len()
    }

    /// The slots of the transient carriers.
    fn transient_slots(&self) -> usize {
        self.transient.iter().map(Carrier::size).sum()
    }

    /// Drops the tile views, releases the transient carriers and returns the reusable ones.
    fn finish(self) -> Vec<Carrier> {
        drop(self.tiles);
        release_all(self.transient);
        self.staged
    }
}

/// What a stream staged so far.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamCounters {
    pub(crate) staged_tiles: usize,
    pub(crate) staged_slots: usize,
    /// The staging carriers allocated so far (not taken from the pool).
    pub(crate) allocated: usize,
    /// The copies that staged those tiles (one per piece of a tile fetched in pieces).
    pub(crate) staged_copies: usize,
    /// Whether the call this record comes with computed the last piece of its item (always,
    /// for items computed whole).
    pub(crate) item_done: bool,
}

/// How many slots of carriers on the primary tier's class one stream has alive (staged, or
/// held by its computation), and the most at once.
#[derive(Debug, Default)]
struct Occupancy {
    live: AtomicUsize,
    peak: AtomicUsize,
    allocated: AtomicUsize,
}

impl Occupancy {
    /// A staging carrier of `slots` allocated by this stream.
    fn allocated(&self, slots: usize) {
        self.allocated.fetch_add(1, Ordering::SeqCst);
        self.made(slots);
    }

    fn made(&self, slots: usize) {
        let live = self.live.fetch_add(slots, Ordering::SeqCst) + slots;
        self.peak.fetch_max(live, Ordering::SeqCst);
    }

    fn released(&self, slots: usize) {
        let _ = self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |live| {
                Some(live.saturating_sub(slots))
            });
    }

    fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    fn allocations(&self) -> usize {
        self.allocated.load(Ordering::SeqCst)
    }
}

/// The staging pipeline of one tiled operation.
///
/// Invariants:
/// 1. at most `depth` items' staged tiles exist at once: one computing, at most `depth − 2`
///    waiting in the queue, and one being staged by the worker (`depth` 1 stages inline,
///    with no worker);
/// 2. staging never changes a tile's residency, state or the TiledEvictable's version: a
///    secondary tile is **copied** (`movement::copy_to`, the tiers' public non-destructive
///    movement) into a carrier of the primary tier's class, which is reused for later items
///    and released at the end;
/// 3. the first error (staging or computing) stops the stream; every staged carrier is
///    released and nothing else has changed;
/// 4. its occupancy counts, in slots, every staged carrier alive and every carrier the
///    computation says it holds ([`hold`](Self::hold)), so its peak is what the work had
///    on the primary tier's class beside the resident tiles; a stream with a worker makes
///    the staged carriers of its first `depth` items before the worker starts and reuses
///    them, so what it counts does not depend on how far the worker gets ahead.
pub(crate) struct TileStream<'a> {
    operands: &'a [TiledOperand],
    depth: usize,
    occupancy: Occupancy,
    /// The capacity the stream's reports compare with, taken when it was made.
    accounting: Accounting,
    /// How many pieces each item is staged and computed in (see
    /// [`with_pieces`](Self::with_pieces)); an item not listed is computed whole.
    pieces: Vec<usize>,
}

impl<'a> TileStream<'a> {
    pub(crate) fn new(operands: &'a [TiledOperand], depth: usize) -> TileStream<'a> {
        TileStream {
            operands,
            depth: depth.max(1),
            occupancy: Occupancy::default(),
            accounting: Accounting::of(operands),
            pieces: Vec::new(),
        }
    }

    /// Splits item `n` into `pieces[n]` steps: step `q` of `p` fetches, of every tile the
    /// item lists, only the columns `[q·w, (q+1)·w)` of its mode 1 (`w` = the tile's mode-1
    /// extent / `p`, which `p` divides), and the computation is called once per step with
    /// the item's index. Only for work whose result combines partial results over mode 1
    /// (a sum over mode 1) and for two-mode operands of canonical layout.
    pub(crate) fn with_pieces(mut self, pieces: Vec<usize>) -> Self {
        self.pieces = pieces;
        self
    }

    /// The steps of `count` items, in order.
    fn steps(&self, count: usize) -> Vec<Step> {
        (0..count)
            .flat_map(|item| {
                let pieces = self.pieces.get(item).copied().unwrap_or(1).max(1);
                (0..pieces).map(move |piece| Step {
                    item,
                    piece,
                    count: pieces,
                })
            })
            .collect()
    }

    /// Counts `slots` of carriers the computation holds on the primary tier's class (partial
    /// output blocks, an item's result tile, a backward's per-tile outputs, cotangent blocks
    /// and gradient tiles) as live beside the staged carriers, until
    /// [`let_go`](Self::let_go).
    pub(crate) fn hold(&self, slots: usize) {
        self.occupancy.made(slots);
    }

    /// `slots` counted by [`hold`](Self::hold) are gone.
    pub(crate) fn let_go(&self, slots: usize) {
        self.occupancy.released(slots);
    }

    /// The most slots of the primary tier's class this stream had alive at once so far,
    /// with the capacity to compare them with.
    pub(crate) fn peak(&self) -> Peak {
        self.accounting.peak(self.occupancy.peak())
    }

    /// Fetches every item of `items` in order (piece by piece when
    /// [`with_pieces`](Self::with_pieces) split it) and calls `compute(index, fetched tiles)`
    /// on this thread for each, staging ahead on a worker thread when the depth allows.
    pub(crate) fn run(
        &self,
        items: &[Vec<Fetch>],
        mut compute: impl FnMut(usize, &[Tensor], StreamCounters) -> Result<()>,
    ) -> Result<()> {
        let mut counters = StreamCounters::default();
        let steps = self.steps(items.len());
        let staged_per_step = steps
            .iter()
            .map(|step| {
                items[step.item]
                    .iter()
                    .map(|&(operand, tile)| self.operands[operand].staged_slots(tile, step.count))
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        let needed = self.depth * staged_per_step;
        if self.depth == 1 || steps.len() < 2 {
            let mut pool = self.take_pooled(needed);
            let outcome = steps.iter().try_for_each(|&step| {
                let fetched = self.fetch(&items[step.item], step, &mut pool)?;
                self.count(&mut counters, &fetched, step);
                let done = compute(step.item, &fetched.tiles, counters);
                pool.extend(self.finish(fetched));
                done
            });
            self.keep_or_release(pool);
            return outcome;
        }
        let (ready_tx, ready_rx) = sync_channel::<Result<Fetched>>(self.depth - 2);
        let (back_tx, back_rx) = channel::<Carrier>();
        thread::scope(|scope| {
            // The worker stages for this operation: it works under the operation's pins.
            let pins = held();
            let pooled = match self.pool_for(items, &steps[..self.depth.min(steps.len())]) {
                Ok(pooled) => pooled,
                Err(error) => {
                    drop((ready_tx, back_rx));
                    return Err(error);
                }
            };
            let worker = scope.spawn(move || {
                let _working = WorkingFor::new(pins);
                self.stage_ahead(items, &self.steps(items.len()), ready_tx, back_rx, pooled)
            });
            let outcome = self.consume(&steps, &ready_rx, &back_tx, &mut counters, compute);
            // Release what is still queued; dropping the queue stops a worker still staging
            // (its next send fails).
            for fetched in ready_rx.try_iter().flatten() {
                let carriers = self.finish(fetched);
                self.release_all(carriers);
            }
            drop(ready_rx);
            drop(back_tx);
            let pool = worker.join().unwrap_or_else(|_| {
                // The worker panicked: its carriers were dropped with it.
                Vec::new()
            });
            self.keep_or_release(pool);
            outcome
        })
    }

    /// Adds what `fetched` (step `step`) staged to `counters`; a tile counts once, with its
    /// first piece.
    fn count(&self, counters: &mut StreamCounters, fetched: &Fetched, step: Step) {
        if step.piece == 0 {
            counters.staged_tiles += fetched.staged_tiles();
        }
        counters.staged_copies += fetched.staged_tiles();
        counters.staged_slots += fetched.slots;
        counters.allocated = self.occupancy.allocations();
        counters.item_done = step.piece + 1 == step.count;
    }

    fn consume(
        &self,
        steps: &[Step],
        ready: &Receiver<Result<Fetched>>,
        back: &Sender<Carrier>,
        counters: &mut StreamCounters,
        mut compute: impl FnMut(usize, &[Tensor], StreamCounters) -> Result<()>,
    ) -> Result<()> {
        for &step in steps {
            let fetched = ready.recv().map_err(|_| {
                Error::Runtime("the tile staging worker of a tiled operation stopped".into())
            })??;
            self.count(counters, &fetched, step);
            let done = compute(step.item, &fetched.tiles, *counters);
            for carrier in self.finish(fetched) {
                if let Err(returned) = back.send(carrier) {
                    self.release_all(vec![returned.0]);
                }
            }
            done?;
        }
        Ok(())
    }

    /// The worker: stages every step in order, reusing the carriers the consumer hands
    /// back; returns its pool.
    fn stage_ahead(
        &self,
        items: &[Vec<Fetch>],
        steps: &[Step],
        ready: SyncSender<Result<Fetched>>,
        back: Receiver<Carrier>,
        mut pool: Vec<Carrier>,
    ) -> Vec<Carrier> {
        let _grad = no_grad();
        for &step in steps {
            pool.extend(back.try_iter());
            let fetched = self.fetch(&items[step.item], step, &mut pool);
            let failed = fetched.is_err();
            if let Err(unsent) = ready.send(fetched) {
                if let Ok(fetched) = unsent.0 {
                    pool.extend(self.finish(fetched));
                }
                break;
            }
            if failed {
                break;
            }
        }
        drop(ready);
        pool.extend(back.iter());
        pool
    }

    /// Fetches one step's tiles (of `item`); on failure its staged carriers go back to the
    /// pool (released with it at the end).
    fn fetch(&self, item: &[Fetch], step: Step, pool: &mut Vec<Carrier>) -> Result<Fetched> {
        let mut fetched = Fetched {
            tiles: Vec::with_capacity(item.len()),
            staged: Vec::new(),
            transient: Vec::new(),
            slots: 0,
        };
        for &(operand, tile) in item {
            match self.fetch_tile(&self.operands[operand], tile, step, pool, &mut fetched) {
                Ok(tensor) => fetched.tiles.push(tensor),
                Err(error) => {
                    pool.extend(self.finish(fetched));
                    return Err(error);
                }
            }
        }
        Ok(fetched)
    }

    fn fetch_tile(
        &self,
        operand: &TiledOperand,
        tile: usize,
        step: Step,
        pool: &mut Vec<Carrier>,
        fetched: &mut Fetched,
    ) -> Result<Tensor> {
        let primary = operand.tier(Tier::Primary);
        let shape = operand.tile_shape();
        let compact = || flat(shape, &column_major_strides(shape));
        match resolve(operand, tile, step)? {
            TileSource::Resident(view) => Ok(view),
            TileSource::Secondary(view) => {
                let span = view.layout().cosize();
                let destination = match pool.iter().position(|c| reusable(c, primary, span)) {
                    Some(found) => pool.swap_remove(found),
                    None => {
                        let fresh = primary.allocate_like(span, true, None, true)?;
                        self.occupancy.allocated(span);
                        fresh
                    }
                };
                // A pooled staging buffer: its old contents are not kept.
                match copy_to_scratch(&view, &destination) {
                    Ok(staged) => {
                        fetched.staged.push(destination);
                        fetched.slots += span;
                        Ok(staged)
                    }
                    Err(error) => {
                        pool.push(destination);
                        Err(error)
                    }
                }
            }
            TileSource::Zero => {
                let zeros = primary.allocate_like(operand.grid().tile_size(), true, None, false)?;
                self.occupancy.allocated(zeros.size());
                fetched.transient.push(zeros.clone());
                Tensor::new(zeros, 0, compact()?)
            }
            TileSource::Gathered => {
                let values = operand.gather(tile)?;
                let gathered = primary.new_like(&values, true, None)?;
                self.occupancy.allocated(gathered.size());
                fetched.transient.push(gathered.clone());
                fetched.slots += values.len();
                Tensor::new(gathered, 0, compact()?)
            }
        }
    }
}

/// Where step `step` reads tile `tile` of `operand` from: the tile's source, or the piece of
/// it the step fetches.
fn resolve(operand: &TiledOperand, tile: usize, step: Step) -> Result<TileSource> {
    match operand.source(tile)? {
        source if step.count == 1 => Ok(source),
        TileSource::Resident(view) => Ok(TileSource::Resident(piece(&view, step)?)),
        TileSource::Secondary(view) => Ok(TileSource::Secondary(piece(&view, step)?)),
        TileSource::Zero | TileSource::Gathered => Err(Error::Runtime(format!(
            "tile {tile} of a tiled operation cannot be fetched in pieces: it is not a stored \
             tile of a canonical operand"
        ))),
    }
}

/// Columns `[q·w, (q+1)·w)` of mode 1 of the two-mode tile view `view`, for step `q` of `p`
/// (`w` = its mode-1 extent / `p`).
fn piece(view: &Tensor, step: Step) -> Result<Tensor> {
    let leaves: Vec<(usize, usize)> = view.layout().leaf_pairs().collect();
    let [(rows, row_stride), (columns, column_stride)] = leaves[..] else {
        return Err(Error::Runtime(format!(
            "a tile fetched in pieces needs two flat modes, got layout {}",
            view.layout()
        )));
    };
    let width = columns / step.count;
    if width * step.count != columns {
        return Err(Error::Runtime(format!(
            "{} pieces do not divide a tile's {columns} columns",
            step.count
        )));
    }
    Tensor::new(
        view.carrier().clone(),
        view.offset() + step.piece * width * column_stride,
        flat(&[rows, width], &[row_stride, column_stride])?,
    )
}

/// The pieces a tile of `shape` (two modes) with mode-1 stride `stride` is fetched in by a
/// sum over mode 1: the fewest that divide its columns and keep each piece's span within
/// [`PIECE_SLOTS`] (one column a piece when even a column is larger).
pub(crate) fn pieces_for(shape: &[usize], stride: usize) -> usize {
    let [rows, columns] = shape[..] else {
        return 1;
    };
    (1..=columns)
        .filter(|count| columns % count == 0)
        .find(|count| (columns / count - 1) * stride + rows <= PIECE_SLOTS)
        .unwrap_or(columns)
}

/// Whether the pooled `carrier` can receive a staged copy of `span` slots for `primary`.
/// Only an exact size is reused: the tiles of one operand all have one span, so the pool
/// never grows beyond the carriers in flight.
pub(crate) fn reusable(carrier: &Carrier, primary: &Carrier, span: usize) -> bool {
    carrier.class() == primary.class()
        && carrier.dtype() == primary.dtype()
        && !carrier.is_released()
        && carrier.size() == span
}

impl TileStream<'_> {
    /// Drops an item's tile views, releases its transient carriers and returns the reusable
    /// ones.
    fn finish(&self, fetched: Fetched) -> Vec<Carrier> {
        let transient = fetched.transient_slots();
        let reusable = fetched.finish();
        self.occupancy.released(transient);
        reusable
    }

    /// The staging carriers the operands' carriers kept from earlier calls (see
    /// [`keep_or_release`](Self::keep_or_release)), at most `needed` slots of them (the most
    /// this stream stages at once); the others are released, so that idle buffers do not
    /// take the capacity the computation needs beside the stream. The pool of a stream that
    /// stages inline; one with a worker starts with [`pool_for`](Self::pool_for).
    fn take_pooled(&self, needed: usize) -> Vec<Carrier> {
        let mut kept = Vec::new();
        let mut slots = 0;
        for carrier in self.take_kept() {
            if slots + carrier.size() <= needed {
                slots += carrier.size();
                self.occupancy.made(carrier.size());
                kept.push(carrier);
            } else {
                let _ = carrier.release();
            }
        }
        kept
    }

    /// Every staging carrier the operands' carriers kept from earlier calls (a whole-tensor
    /// staging buffer kept by one of them is released: streamed work keeps only tile
    /// buffers beside its tiles).
    fn take_kept(&self) -> Vec<Carrier> {
        let mut pooled = Vec::new();
        for (k, operand) in self.operands.iter().enumerate() {
            let table = operand.table();
            if self.operands[..k]
                .iter()
                .any(|o| std::sync::Arc::ptr_eq(o.table(), table))
            {
                continue;
            }
            pooled.extend(table.take_staging());
            if let Some(whole) = table.take_whole_staging() {
                let _ = whole.release();
            }
        }
        pooled
    }

    /// The staging carriers of every copy the first `steps` stage, made before the worker
    /// starts: the kept carriers of the operands' carriers that fit one of those copies
    /// exactly (the others are released, so that idle buffers do not take the capacity the
    /// computation needs beside the stream), and fresh ones for the rest. With every tile of
    /// one span — the stream's steps stage copies of the sizes its first steps do — the
    /// worker then never allocates, and the stream has all its staged carriers alive from its
    /// start to its end, however far the worker gets ahead of the computation: its occupancy,
    /// and its peak, do not depend on timing.
    fn pool_for(&self, items: &[Vec<Fetch>], steps: &[Step]) -> Result<Vec<Carrier>> {
        let mut sizes = Vec::new();
        for &step in steps {
            for &(operand, tile) in &items[step.item] {
                let operand = &self.operands[operand];
                if let TileSource::Secondary(view) = resolve(operand, tile, step)? {
                    sizes.push((operand.tier(Tier::Primary), view.layout().cosize()));
                }
            }
        }
        let mut kept = self.take_kept();
        let mut pool = Vec::with_capacity(sizes.len());
        let mut made = Ok(());
        for (primary, span) in sizes {
            match kept.iter().position(|c| reusable(c, primary, span)) {
                Some(found) => {
                    let carrier = kept.swap_remove(found);
                    self.occupancy.made(carrier.size());
                    pool.push(carrier);
                }
                None => match primary.allocate_like(span, true, None, true) {
                    Ok(fresh) => {
                        self.occupancy.allocated(span);
                        pool.push(fresh);
                    }
                    Err(error) => {
                        made = Err(error);
                        break;
                    }
                },
            }
        }
        release_all(kept);
        match made {
            Ok(()) => Ok(pool),
            Err(error) => {
                self.release_all(pool);
                Err(error)
            }
        }
    }

    /// Keeps the staging carriers of this call for the next one — in the first operand
    /// carrier whose policy bounds the primary tier, as many as fit in the slots its
    /// [`Budget`] leaves beside everything else held under it (and what this stream's
    /// computation still holds); in the first operand's, all of them, when no policy bounds
    /// it — and releases the rest; buffers reused across calls page-fault once.
    fn keep_or_release(&self, pool: Vec<Carrier>) {
        let tables = operand_tables(self.operands);
        let bounded = self.operands.iter().find_map(|operand| {
            Budget::of(operand.table(), &tables).map(|budget| (operand, budget))
        });
        let first = match (bounded, self.operands.first()) {
            (Some((operand, _)), _) | (None, Some(operand)) => operand,
            (None, None) => return self.release_all(pool),
        };
        let pooled: usize = pool.iter().map(Carrier::size).sum();
        let room = bounded.map_or(usize::MAX, |(_, budget)| {
            budget.free(self.occupancy.live().saturating_sub(pooled))
        });
        let (mut kept, mut rest, mut slots) = (Vec::new(), Vec::new(), 0);
        for carrier in pool {
            if slots + carrier.size() <= room {
                slots += carrier.size();
                kept.push(carrier);
            } else {
                rest.push(carrier);
            }
        }
        self.occupancy.released(slots);
        first.table().keep_staging(kept);
        self.release_all(rest);
    }

    /// Releases staged carriers for good.
    fn release_all(&self, pool: Vec<Carrier>) {
        self.occupancy
            .released(pool.iter().map(Carrier::size).sum());
        release_all(pool);
    }
}

fn release_all(pool: Vec<Carrier>) {
    for carrier in pool {
        let _ = carrier.release();
    }
}

/// The capacity a stream's reports compare its peak with: that of the first operand whose
/// policy bounds the primary tier (its unit and what was already held under it when the
/// stream was made), or, with none, the largest operand tile and the operands' primary tiles.
#[derive(Debug, Clone, Copy)]
struct Accounting {
    unit: usize,
    resident: usize,
    capacity: Option<usize>,
}

impl Accounting {
    fn of(operands: &[TiledOperand]) -> Accounting {
        let tables = operand_tables(operands);
        if let Some(budget) = operands
            .iter()
            .find_map(|operand| Budget::of(operand.table(), &tables))
        {
            return Accounting {
                unit: budget.unit,
                resident: budget.resident,
                capacity: Some(budget.capacity),
            };
        }
        Accounting {
            unit: tables
                .iter()
                .map(|t| t.grid().tile_size())
                .max()
                .unwrap_or(1)
                .max(1),
            resident: tables.iter().map(|t| t.primary_slots()).sum(),
            capacity: None,
        }
    }

    fn peak(&self, slots: usize) -> Peak {
        Peak {
            slots,
            unit: self.unit,
            resident: self.resident,
            capacity: self.capacity,
        }
    }
}
