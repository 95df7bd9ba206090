//! [`TileProgress`]: what a tiled operation reports to its carrier's policy as it streams
//! tiles.

/// One progress report of a tiled operation (an operation on raw TiledEvictable operands).
///
/// A tiled operation splits its work into *items* — one output tile for the elementwise
/// operations, one input tile for `reduce_sum`, one left-hand tile (with the right-hand tiles
/// of its contraction block) for `matmul` — and processes them in the deterministic tile
/// order, staging each item's non-resident tiles onto the primary tier's class ahead of the
/// computation. After every item it calls
/// [`ResidencyPolicy::on_progress`](crate::carriers::ResidencyPolicy::on_progress) on the
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
    staged_peak: usize,
    allocated_buffers: usize,
    staged_copies: usize,
}

impl TileProgress {
    pub(crate) fn new(
        operation: &str,
        (completed, total): (usize, usize),
        (staged_tiles, staged_slots): (usize, usize),
        prefetch_depth: usize,
        staged_peak: usize,
    ) -> TileProgress {
        TileProgress {
            operation: operation.to_string(),
            completed,
            total,
            staged_tiles,
            staged_slots,
            prefetch_depth,
            staged_peak,
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

    /// The most staged tile carriers on the primary tier's class alive at once so far
    /// (reused across items, so at most the prefetch depth times the tiles one item stages);
    /// in a backward's reports (`"<op>.backward"`) also the carriers it holds beside them —
    /// per-tile outputs, cotangent blocks, gradient tiles, partial gradients and gradient
    /// tiles placed on the primary tier — each counted as one tile. With the carriers'
    /// resident tiles it is what the operation has held on the primary tier: the number to
    /// compare with
    /// [`primary_capacity`](crate::carriers::ResidencyPolicy::primary_capacity).
    pub fn staged_peak(&self) -> usize {
        self.staged_peak
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
    /// [`primary_capacity`](crate::carriers::ResidencyPolicy::primary_capacity).
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
