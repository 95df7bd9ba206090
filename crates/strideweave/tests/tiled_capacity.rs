//! The primary capacity counted by size (docs/tiers.md, TiledEvictable, The policy decides;
//! docs/tiled-design.md, What the capacity counts): every carrier a tiled operation, its
//! streamed backward or an accumulation holds on the primary tier's class counts by its
//! slots — staged tiles (as their span in a full tier), partial output blocks, per-tile
//! outputs, cotangent blocks, gradient tiles — and the resident tiles and kept staging
//! buffers of every carrier steered by the same policy object count too, operands of the
//! call or not.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use strideweave::carrier::Carrier;
use strideweave::carriers::{
    Cpu, FileBacked, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileProgress, TileSet,
    TiledEvictable,
};
use strideweave::movement::move_to;
use strideweave::{ops, DType, Layout, Result, Shape, Tensor};

/// Deterministic, varied values for `n` slots.
fn wavy(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + seed * 13) % 23) as f32 - 11.0) / 4.0)
        .collect()
}

fn cpu(values: &[f32]) -> Carrier {
    Cpu::from_f32(values, true).unwrap()
}

fn numbers(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn assert_close(actual: &[f64], expected: &[f64], what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= 1e-4 * (1.0 + e.abs()),
            "{what}: slot {i}: {a} vs {e}"
        );
    }
}

fn set(coords: &[&[usize]]) -> TileSet {
    TileSet::new(coords.iter().map(|c| c.to_vec())).unwrap()
}

/// A policy whose capacity can change between calls, recording every progress report.
#[derive(Debug)]
struct Adjustable {
    capacity: AtomicUsize,
    reports: Mutex<Vec<TileProgress>>,
}

impl Adjustable {
    fn new(capacity: usize) -> Arc<Adjustable> {
        Arc::new(Adjustable {
            capacity: AtomicUsize::new(capacity),
            reports: Mutex::new(Vec::new()),
        })
    }

    fn set(&self, capacity: usize) {
        self.capacity.store(capacity, Ordering::SeqCst);
    }

    /// The reports recorded since the last call, for operation `name`.
    fn take(&self, name: &str) -> Vec<TileProgress> {
        let mut reports = self.reports.lock().unwrap();
        let taken = reports
            .iter()
            .filter(|r| r.operation() == name)
            .cloned()
            .collect();
        reports.clear();
        taken
    }
}

impl ResidencyPolicy for Adjustable {
    fn plan(&self, _: &TileSet, _: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }
    fn primary_capacity(&self) -> Option<usize> {
        Some(self.capacity.load(Ordering::SeqCst))
    }
    fn on_progress(&self, progress: &TileProgress) {
        self.reports.lock().unwrap().push(progress.clone());
    }
}

/// A TiledEvictable of `values` (logical `shape`, canonical) in tiles of `tile` over a full
/// FileBacked secondary and an empty CPU primary, steered by `policy`.
fn on_disk(
    values: &[f32],
    shape: &[usize],
    tile: &[usize],
    policy: &Arc<Adjustable>,
) -> (Carrier, Tensor) {
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let layout = Layout::from_flat(&[values.len()], &[1]).unwrap();
    move_to(&Tensor::new(cpu(values), 0, layout).unwrap(), &file).unwrap();
    let grid: Vec<usize> = shape.iter().zip(tile).map(|(e, t)| e / t).collect();
    let policy: Arc<dyn ResidencyPolicy> = policy.clone();
    let carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).unwrap(),
        &file,
        &grid,
        tile,
        Some(policy),
    )
    .unwrap();
    let tensor = Tensor::compact(carrier.clone(), Shape::new(shape.to_vec()).unwrap()).unwrap();
    (carrier, tensor)
}

fn dense(values: &[f32], shape: &[usize]) -> Tensor {
    Tensor::compact(cpu(values), Shape::new(shape.to_vec()).unwrap()).unwrap()
}

fn peak(reports: &[TileProgress]) -> usize {
    reports.iter().map(TileProgress::peak_slots).max().unwrap()
}

#[test]
fn output_blocks_larger_than_a_tile_count_by_their_size_forward_and_backward() {
    // (4, 4) · (8, 4): left tiles of 4 × 1 (4 slots), right tiles of 8 × 1 (8 slots, one tile
    // of the capacity), one output block of 4 × 8 = 32 slots — four tiles. Each item stages
    // one tile of each (12 slots); combining a partial product holds the old sum, the
    // partial and the new sum: 96 slots. Tile 0 of each operand is moved out of its seed
    // tier so that neither runs as one whole-tensor call.
    let policy = Adjustable::new(14);
    let (l, r) = (wavy(16, 1), wavy(32, 2));
    let (lhs_carrier, lhs) = on_disk(&l, &[4, 4], &[4, 1], &policy);
    let (rhs_carrier, rhs) = on_disk(&r, &[8, 4], &[8, 1], &policy);
    for carrier in [&lhs_carrier, &rhs_carrier] {
        TiledEvictable::promote(carrier, &set(&[&[0, 0]])).unwrap();
        TiledEvictable::evict(carrier, &set(&[&[0, 0]])).unwrap();
    }
    lhs.set_requires_grad(true).unwrap();
    rhs.set_requires_grad(true).unwrap();
    let (dl, dr) = (dense(&l, &[4, 4]), dense(&r, &[8, 4]));
    dl.set_requires_grad(true).unwrap();
    dr.set_requires_grad(true).unwrap();

    // Forward, 14 tiles = 112 slots: 112 − 96 leaves room for one item of 12 slots.
    let out = ops::matmul(&lhs, &rhs).unwrap();
    let reference = ops::matmul(&dl, &dr).unwrap();
    assert_close(&numbers(&out), &numbers(&reference), "forward");
    let forward = policy.take("matmul");
    assert_eq!(forward.len(), 4);
    let last = forward.last().unwrap();
    assert_eq!(
        (
            last.prefetch_depth(),
            last.tile_slots(),
            last.capacity_slots()
        ),
        (1, 8, Some(112))
    );
    // Staged 12 and the three blocks of a combination, 96: a block counts as four tiles.
    assert_eq!(peak(&forward), 108);
    assert_eq!(last.staged_peak(), 14);
    // 15 tiles = 120 slots: room for two items in flight.
    policy.set(15);
    let again = ops::matmul(&lhs, &rhs).unwrap();
    assert_close(&numbers(&again), &numbers(&reference), "forward again");
    let forward = policy.take("matmul");
    assert_eq!(forward.last().unwrap().prefetch_depth(), 2);
    assert!(peak(&forward) <= 120, "{}", peak(&forward));

    // Backward, 11 tiles = 88 slots. Each item holds its per-tile output and cotangent
    // block (32 slots each) and its two gradient tiles (4 + 8) beside its staged 12: 88.
    policy.set(11);
    let cotangent = dense(&wavy(32, 3), &[4, 8]);
    out.backward(Some(&cotangent), false).unwrap();
    reference.backward(Some(&cotangent), false).unwrap();
    assert_close(
        &numbers(&lhs.grad().unwrap()),
        &numbers(&dl.grad().unwrap()),
        "left gradient",
    );
    assert_close(
        &numbers(&rhs.grad().unwrap()),
        &numbers(&dr.grad().unwrap()),
        "right gradient",
    );
    let backward = policy.take("matmul.backward");
    assert_eq!(backward.len(), 4);
    assert_eq!(backward[0].prefetch_depth(), 1);
    assert_eq!(peak(&backward), 88);
    assert_eq!(backward[0].capacity_slots(), Some(88));
}

#[test]
fn carriers_sharing_a_policy_count_each_others_resident_tiles_and_kept_buffers() {
    // Two 8 × 8 tensors in tiles of 8 × 1 (8 slots), under one policy of 7 tiles. Summing
    // one holds three blocks of 8 slots while a partial combines; alone it streams 3 items
    // at once (7 − 3 = 4 tiles free, at most 3 in flight).
    let policy = Adjustable::new(7);
    let (a_values, b_values) = (wavy(64, 4), wavy(64, 5));
    let (_a, a) = on_disk(&a_values, &[8, 8], &[8, 1], &policy);
    let (b_carrier, b) = on_disk(&b_values, &[8, 8], &[8, 1], &policy);
    let expected_a = numbers(&ops::reduce_sum(&dense(&a_values, &[8, 8])).unwrap());
    let sum_a = |depth: usize, resident: usize, what: &str| {
        let result = ops::reduce_sum(&a).unwrap();
        assert_close(&numbers(&result), &expected_a, what);
        let reports = policy.take("reduce_sum");
        assert_eq!(reports.len(), 8, "{what}: streamed tile by tile");
        let last = reports.last().unwrap();
        assert_eq!(
            (last.prefetch_depth(), last.resident_slots()),
            (depth, resident),
            "{what}"
        );
        assert!(
            resident + peak(&reports) <= 56 || depth == 1,
            "{what}: {} + {} within 56",
            resident,
            peak(&reports)
        );
    };
    sum_a(3, 0, "alone");
    // The staging buffers `a` kept are its own to reuse: not resident for its next call.
    sum_a(3, 0, "again, reusing its buffers");

    // Two tiles of `b` on the primary tier leave `a` room for two items in flight, four
    // for one; the call on `a` sees them although `b` is no operand of it.
    TiledEvictable::promote(&b_carrier, &set(&[&[0, 0], &[0, 1]])).unwrap();
    sum_a(2, 16, "b holds 2 tiles");
    TiledEvictable::promote(&b_carrier, &set(&[&[0, 2], &[0, 3]])).unwrap();
    sum_a(1, 32, "b holds 4 tiles");
    TiledEvictable::evict(&b_carrier, &set(&[&[0, 0], &[0, 1], &[0, 2], &[0, 3]])).unwrap();
    sum_a(3, 0, "b holds none");

    // The staging buffers a call on `b` keeps count against `a`'s next call.
    ops::reduce_sum(&b).unwrap();
    let kept = policy
        .take("reduce_sum")
        .last()
        .unwrap()
        .allocated_buffers();
    assert!((1..=3).contains(&kept), "{kept}");
    sum_a((4 - kept).clamp(1, 3), 8 * kept, "b keeps its buffers");
}

#[test]
fn a_streamed_plan_promotes_within_what_the_other_carriers_leave() {
    // A policy of 4 tiles whose plan for streamed work promotes every tile: the correction
    // cuts the promotions of `a` to what the primary tiles of `b` (same policy) leave.
    #[derive(Debug)]
    struct PromoteAll;
    impl ResidencyPolicy for PromoteAll {
        fn plan(&self, required: &TileSet, purpose: ResidencyPurpose) -> Result<ResidencyPlan> {
            let promote = if purpose.is_streamed() {
                required.clone()
            } else {
                TileSet::empty()
            };
            ResidencyPlan::new(promote, TileSet::empty(), TileSet::empty())
        }
        fn primary_capacity(&self) -> Option<usize> {
            Some(4)
        }
    }
    let policy: Arc<dyn ResidencyPolicy> = Arc::new(PromoteAll);
    let make = |seed: usize| {
        let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
        let layout = Layout::from_flat(&[64], &[1]).unwrap();
        move_to(
            &Tensor::new(cpu(&wavy(64, seed)), 0, layout).unwrap(),
            &file,
        )
        .unwrap();
        TiledEvictable::carrier(
            &Cpu::from_f32(&[], true).unwrap(),
            &file,
            &[1, 8],
            &[8, 1],
            Some(policy.clone()),
        )
        .unwrap()
    };
    let (a, b) = (make(6), make(7));
    TiledEvictable::promote(&b, &set(&[&[0, 0], &[0, 1], &[0, 2]])).unwrap();
    let every = set(&[
        &[0, 0],
        &[0, 1],
        &[0, 2],
        &[0, 3],
        &[0, 4],
        &[0, 5],
        &[0, 6],
        &[0, 7],
    ]);
    let plan = TiledEvictable::plan_residency(&a, &every, ResidencyPurpose::Operation).unwrap();
    assert_eq!(plan.promote().coordinates(), &[vec![0, 0]], "4 − 3 of b's");
    TiledEvictable::evict(&b, &set(&[&[0, 0], &[0, 1], &[0, 2]])).unwrap();
    let plan = TiledEvictable::plan_residency(&a, &every, ResidencyPurpose::Operation).unwrap();
    assert_eq!(plan.promote().len(), 4, "the whole capacity");
}
