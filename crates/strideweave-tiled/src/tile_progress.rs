//! [`TileProgress`]: what a tiled operation reports to its carrier's policy as it streams
//! tiles.

/// One progress report of a tiled operation (an operation on raw TiledEvictable operands).
///
/// A tiled operation splits its work into *items* — one output tile for the elementwise
/// operations, one input tile for `reduce_sum`, one left-hand tile (with the right-hand tiles
/// of its contraction block) for `matmul` — and processes them in the deterministic tile
/// order, staging each item's non-resident tiles onto the primary tier's class ahead of the
/// computation. After every item it calls
/// [`ResidencyPolicy::on_progress`](crate::ResidencyPolicy::on_progress) on the
/// policy of the carrier the operation dispatched on (its first tensor operand), on the
/// calling thread, with one of these records. The hook observes only: it cannot change the
/// computation, and it runs while the operation holds no lock of the carrier.
///
/// An immutable record; read it through its getters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileProgress {
    operation: String,
    completed: usize,
    total: usize,
    staged_tiles: usize,
    staged_slots: usize,
    prefetch_depth: usize,
    peak: Peak,
    allocated_buffers: usize,
    staged_copies: usize,
}

impl TileProgress {
    pub(crate) fn new(
        operation: &str,
        (completed, total): (usize, usize),
        (staged_tiles, staged_slots): (usize, usize),
        prefetch_depth: usize,
        peak: Peak,
    ) -> TileProgress {
        TileProgress {
            operation: operation.to_string(),
            completed,
            total,
            staged_tiles,
            staged_slots,
            prefetch_depth,
            peak,
            allocated_buffers: 0,
            staged_copies: staged_tiles,
        }
    }

    /// The record, saying that the staged tiles took `copies` copies so far.
    pub(crate) fn with_copies(mut self, copies: usize) -> TileProgress {
        self.staged_copies = copies;
        self
    }

    /// How many copies onto the primary tier's class staged those tiles so far: one per
    /// staged tile, except that a Float32 `reduce_sum` stages a large tile of the secondary
    /// tier in pieces of its columns (each at most 65 536 slots, so a piece is still in the
    /// cache when it is summed), one copy per piece.
    pub fn staged_copies(&self) -> usize {
        self.staged_copies
    }

    /// The record, saying that `allocated` staging buffers were allocated so far.
    pub(crate) fn with_allocated(mut self, allocated: usize) -> TileProgress {
        self.allocated_buffers = allocated;
        self
    }

    /// How many staging buffers (carriers of the primary tier's class receiving staged tiles,
    /// or the whole tensor) the operation allocated so far; the others were reused from the
    /// carrier's staging pool, kept from earlier operations within the policy's capacity. A
    /// repeated operation over the same out-of-core tensor allocates none.
    pub fn allocated_buffers(&self) -> usize {
        self.allocated_buffers
    }

    /// The most the operation held at once so far on the primary tier's class beside the
    /// resident tiles, in tiles of the capacity ([`tile_slots`](Self::tile_slots) each,
    /// rounded up): [`peak_slots`](Self::peak_slots) ÷ `tile_slots`.
    pub fn staged_peak(&self) -> usize {
        self.peak.slots.div_ceil(self.peak.unit.max(1))
    }

    /// The most slots of carriers on the primary tier's class the operation held at once so
    /// far beside the resident tiles, each carrier counted by its size: its staged tiles
    /// (a tile in a full secondary tier as its span, a piece as the piece), and what the
    /// computation holds beside them — the partial output blocks of `reduce_sum` and
    /// `matmul` (and an elementwise block until it is placed in the result), an
    /// accumulation's sum tiles, an update's new tiles, and in a backward's reports
    /// (`"<op>.backward"`) the per-tile outputs, cotangent blocks, gradient tiles, partial
    /// gradients and gradient tiles placed on the primary tier. Not counted: the dense
    /// result being assembled (the caller's), a backward's dense cotangent, and
    /// temporaries inside one per-tile call. With
    /// [`resident_slots`](Self::resident_slots) it is what the primary tier held for the
    /// work: the number to compare with [`capacity_slots`](Self::capacity_slots).
    pub fn peak_slots(&self) -> usize {
        self.peak.slots
    }

    /// The slots on the primary tier under the capacity before the work began: the primary
    /// tiles of every live carrier steered by the same policy object (the operands and any
    /// other), and the staging buffers kept by those that are not operands.
    pub fn resident_slots(&self) -> usize {
        self.peak.resident
    }

    /// The policy's
    /// [`primary_capacity`](crate::ResidencyPolicy::primary_capacity) in slots
    /// (`capacity × tile_slots`), `None` when it does not bound the primary tier. The work
    /// plans its prefetch so that `resident_slots + peak_slots` stays within it (except
    /// that one item is always staged, however full the primary tier).
    pub fn capacity_slots(&self) -> Option<usize> {
        self.peak.capacity
    }

    /// The slots one tile of the capacity stands for: the largest tile among the live
    /// carriers steered by the policy (the largest operand tile without a capacity).
    pub fn tile_slots(&self) -> usize {
        self.peak.unit
    }

    /// The operation's name (`"reduce_sum"`, `"matmul"`, ...).
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The number of work items finished so far (1 at the first report).
    pub fn completed(&self) -> usize {
        self.completed
    }

    /// The number of work items of the whole operation (`completed == total` at the last
    /// report).
    pub fn total(&self) -> usize {
        self.total
    }

    /// How many tiles were staged onto the primary tier's class so far (copied from the
    /// secondary tier, zero-filled for implicit tiles, or gathered).
    pub fn staged_tiles(&self) -> usize {
        self.staged_tiles
    }

    /// How many slots those staged copies read (a tile still in a full secondary tier is read
    /// as its span there, which can exceed the tile's size when the tile does not span the
    /// leading axes).
    pub fn staged_slots(&self) -> usize {
        self.staged_slots
    }

    /// How many work items may be in flight at once (1: no prefetch; 2: the next item stages
    /// while the current one computes; more: a deeper queue), as bounded by the operands'
    /// [`primary_capacity`](crate::ResidencyPolicy::primary_capacity).
    pub fn prefetch_depth(&self) -> usize {
        self.prefetch_depth
    }

    /// The completed fraction, in `[0, 1]`.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            self.completed as f64 / self.total as f64
        }
    }
}

/// A stream's peak occupancy with the capacity it is compared with, all in slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Peak {
    /// The most slots held at once beside the resident tiles.
    pub(crate) slots: usize,
    /// The slots of one tile of the capacity.
    pub(crate) unit: usize,
    /// What was on the primary tier under the capacity before the work.
    pub(crate) resident: usize,
    /// The capacity in slots.
    pub(crate) capacity: Option<usize>,
}
