//! The streamed backward of the tiled operations (docs/tiers.md, Streamed backward): it asks
//! the policy for a `Backward` plan, streams the saved tiled operands through the primary
//! tier within the capacity, matches the dense backward for every tiled operation, gives a
//! TiledEvictable leaf a TiledEvictable gradient on the same tier classes, and a failing tier
//! move during it assigns no gradient, keeps every tile valid and can be retried.

mod common;

use std::sync::{Arc, Mutex};

use common::tiled::{Faults, Faulty};
use strideweave::autograd::grad;
use strideweave::carrier::{Carrier, CarrierClass};
use strideweave::carriers::{
    Cpu, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation, TileProgress, TileSet,
    TiledEvictable,
};
use strideweave::{ops, ErrorKind, Result, Shape, Tensor};

fn wavy(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| (((i * 7 + seed * 13) % 23) as f64 - 11.0) / 4.0)
        .collect()
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
            (a - e).abs() <= 1e-4 * e.abs().max(1.0),
            "{what}: element {i} is {a}, expected {e}"
        );
    }
}

fn set(coordinates: &[&[usize]]) -> TileSet {
    TileSet::new(coordinates.iter().map(|c| c.to_vec())).unwrap()
}

/// A policy bounding the primary tier, recording the purposes it is asked to plan for and
/// the progress reports; for `Backward` it may suggest promoting some tiles.
#[derive(Debug)]
struct Bounded {
    capacity: usize,
    backward_promote: TileSet,
    asked: Mutex<Vec<ResidencyPurpose>>,
    reports: Mutex<Vec<TileProgress>>,
}

impl Bounded {
    fn new(capacity: usize, backward_promote: TileSet) -> Arc<Bounded> {
        Arc::new(Bounded {
            capacity,
            backward_promote,
            asked: Mutex::new(Vec::new()),
            reports: Mutex::new(Vec::new()),
        })
    }
}

impl ResidencyPolicy for Bounded {
    fn plan(&self, _: &TileSet, purpose: ResidencyPurpose) -> Result<ResidencyPlan> {
        self.asked.lock().unwrap().push(purpose);
        let promote = match purpose {
            ResidencyPurpose::Backward => self.backward_promote.clone(),
            _ => TileSet::empty(),
        };
        ResidencyPlan::new(promote, TileSet::empty(), TileSet::empty())
    }
    fn primary_capacity(&self) -> Option<usize> {
        Some(self.capacity)
    }
    fn on_progress(&self, progress: &TileProgress) {
        self.reports.lock().unwrap().push(progress.clone());
    }
}

/// A TiledEvictable carrier of storage `values` over an empty CPU primary and a full Faulty
/// secondary (another class than the CPU primary, so every tile is staged), with `policy`.
fn faulty_tiled(
    faults: &Arc<Faults>,
    values: &[f64],
    (grid, tile): (&[usize], &[usize]),
    policy: Arc<dyn ResidencyPolicy>,
) -> Carrier {
    TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).unwrap(),
        &Faulty::carrier(faults, values),
        grid,
        tile,
        Some(policy),
    )
    .unwrap()
}

/// A TiledEvictable of `values` (canonical) seeded on a full Faulty secondary, with `policy`.
fn out_of_core(
    faults: &Arc<Faults>,
    values: &[f64],
    grid: &[usize],
    tile: &[usize],
    policy: Arc<Bounded>,
) -> Tensor {
    let carrier = faulty_tiled(faults, values, (grid, tile), policy);
    let shape = TiledEvictable::logical_shape(&carrier).unwrap();
    Tensor::compact(carrier, Shape::new(shape).unwrap()).unwrap()
}

fn dense(values: &[f64], shape: &[usize]) -> Tensor {
    let values: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    Tensor::compact(
        Cpu::from_f32(&values, true).unwrap(),
        Shape::new(shape.to_vec()).unwrap(),
    )
    .unwrap()
}

fn ones(n: usize) -> Tensor {
    dense(&vec![1.0; n], &[n])
}

/// A dense CPU tensor of `out`'s shape holding the wavy values of `seed` (a cotangent).
fn noise_like(out: &Tensor, seed: usize) -> Tensor {
    let noise: Vec<f32> = wavy(out.size(), seed).iter().map(|&v| v as f32).collect();
    Tensor::compact(Cpu::from_f32(&noise, true).unwrap(), out.shape().clone()).unwrap()
}

/// The progress reports of backward passes `policy` received.
fn backward_reports(policy: &Bounded) -> Vec<TileProgress> {
    policy
        .reports
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.operation().ends_with(".backward"))
        .cloned()
        .collect()
}

fn locations(carrier: &Carrier) -> Vec<TileLocation> {
    let grid = TiledEvictable::grid_shape(carrier).unwrap();
    let count: usize = grid.iter().product();
    (0..count)
        .map(|mut index| {
            let coord: Vec<usize> = grid
                .iter()
                .map(|&g| {
                    let c = index % g;
                    index /= g;
                    c
                })
                .collect();
            TiledEvictable::tile_state(carrier, &coord)
                .unwrap()
                .location()
        })
        .collect()
}

type Op = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

/// The geometries (grid, tile) of an operation's tensor operands.
type Geometry = Vec<(Vec<usize>, Vec<usize>)>;

/// Every tiled operation, with the geometries of its tensor operands.
fn every_tiled_operation() -> Vec<(&'static str, Op, Geometry)> {
    vec![
        (
            "add",
            Box::new(|t| ops::add(&t[0], &t[1])),
            vec![(vec![3, 2], vec![2, 2]); 2],
        ),
        (
            "add broadcasting",
            Box::new(|t| ops::add(&t[0], &t[1])),
            vec![(vec![3, 2], vec![2, 2]), (vec![3, 1], vec![2, 1])],
        ),
        (
            "elementwise_mul",
            Box::new(|t| ops::elementwise_mul(&t[0], &t[1])),
            vec![(vec![3, 2], vec![2, 2]); 2],
        ),
        (
            "mul",
            Box::new(|t| ops::mul(&t[0], &t[1])),
            vec![(vec![2, 2], vec![2, 3]); 2],
        ),
        (
            "mul by a scalar",
            Box::new(|t| ops::mul(&t[0], -1.5)),
            vec![(vec![3, 2], vec![2, 2])],
        ),
        (
            "relu",
            Box::new(|t| ops::relu(&t[0])),
            vec![(vec![3, 2], vec![2, 2])],
        ),
        (
            "reduce_sum",
            Box::new(|t| ops::reduce_sum(&t[0])),
            vec![(vec![3, 2], vec![2, 2])],
        ),
        (
            "matmul",
            Box::new(|t| ops::matmul(&t[0], &t[1])),
            vec![(vec![2, 3], vec![2, 2]), (vec![3, 3], vec![1, 2])],
        ),
    ]
}

/// The operands of one case: out-of-core tiled tensors with `policy`, the same values as
/// dense CPU tensors, and the values; every tensor requires gradients.
struct Operands {
    tiled: Vec<Tensor>,
    plain: Vec<Tensor>,
    stored: Vec<Vec<f64>>,
}

fn operands(faults: &Arc<Faults>, geometry: &Geometry, policy: &Arc<Bounded>) -> Operands {
    let mut made = Operands {
        tiled: Vec::new(),
        plain: Vec::new(),
        stored: Vec::new(),
    };
    for (k, (grid, tile)) in geometry.iter().enumerate() {
        let shape: Vec<usize> = grid.iter().zip(tile).map(|(g, t)| g * t).collect();
        let values = wavy(shape.iter().product(), 3 + k);
        made.tiled
            .push(out_of_core(faults, &values, grid, tile, policy.clone()));
        made.plain.push(dense(&values, &shape));
        made.stored.push(values);
    }
    for t in made.tiled.iter().chain(&made.plain) {
        t.set_requires_grad(true).unwrap();
    }
    made
}

#[test]
fn the_streamed_backward_of_every_tiled_operation_matches_the_dense_backward() {
    for (name, op, geometry) in every_tiled_operation() {
        let faults = Faults::new();
        let policy = Bounded::new(2, TileSet::empty());
        let Operands { tiled, plain, .. } = operands(&faults, &geometry, &policy);
        let before: Vec<Vec<TileLocation>> = tiled.iter().map(|t| locations(t.carrier())).collect();
        let out = op(&tiled).unwrap();
        let reference = op(&plain).unwrap();
        let cotangent = noise_like(&out, 11);
        policy.asked.lock().unwrap().clear();
        let streamed = grad(&[out], &tiled, &[Some(cotangent.clone())], false).unwrap();
        let expected = grad(&[reference], &plain, &[Some(cotangent)], false).unwrap();
        let asked = policy.asked.lock().unwrap().clone();
        assert!(
            !asked.is_empty() && asked.iter().all(|p| *p == ResidencyPurpose::Backward),
            "{name}: the backward asks for Backward plans, got {asked:?}"
        );
        let backward = backward_reports(&policy);
        assert!(
            !backward.is_empty(),
            "{name}: the backward streams and reports"
        );
        assert!(
            backward.iter().all(|r| r.prefetch_depth() <= 2),
            "{name}: in-flight items bounded by the capacity of 2 tiles"
        );
        for (k, (g, e)) in streamed.iter().zip(&expected).enumerate() {
            let (g, e) = (g.as_ref().unwrap(), e.as_ref().unwrap());
            assert_close(&numbers(g), &numbers(e), &format!("{name}: gradient {k}"));
            // A TiledEvictable leaf's gradient is a TiledEvictable on the same tier classes,
            // its tiles on the secondary tier (the policy bounds the primary).
            assert_eq!(g.carrier().class(), tiled[k].carrier().class(), "{name}");
            let (primary, secondary) = (
                TiledEvictable::primary(g.carrier()).unwrap(),
                TiledEvictable::secondary(g.carrier()).unwrap(),
            );
            assert_eq!(primary.class(), CarrierClass::of::<Cpu>(), "{name}");
            assert_eq!(
                secondary.class(),
                TiledEvictable::secondary(tiled[k].carrier())
                    .unwrap()
                    .class(),
                "{name}"
            );
            assert!(
                TiledEvictable::primary_tiles(g.carrier())
                    .unwrap()
                    .is_empty(),
                "{name}: no gradient tile on the bounded primary tier"
            );
            assert!(TiledEvictable::invalid_tiles(g.carrier())
                .unwrap()
                .is_empty());
        }
        // The saved operands were streamed, not moved.
        let after: Vec<Vec<TileLocation>> = tiled.iter().map(|t| locations(t.carrier())).collect();
        assert_eq!(after, before, "{name}");
    }
}

#[test]
fn a_leaf_gradient_from_backward_is_a_tiled_evictable_kept_without_a_copy() {
    let faults = Faults::new();
    let policy = Bounded::new(2, TileSet::empty());
    let values = wavy(24, 5);
    let x = out_of_core(&faults, &values, &[3, 2], &[2, 2], policy);
    x.set_requires_grad(true).unwrap();
    let sums = ops::reduce_sum(&ops::mul(&x, 3.0).unwrap()).unwrap();
    sums.backward(Some(&ones(6)), false).unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.carrier().class(), x.carrier().class());
    assert_eq!(numbers(&g), vec![3.0; 24]);
    // Kept as the backward built it: a copy by the engine would have rebuilt it slot by
    // slot, materializing every tile on the primary tier.
    assert_eq!(
        TiledEvictable::secondary_tiles(g.carrier()).unwrap().len(),
        6
    );
    assert_eq!(
        TiledEvictable::dirty_tiles(g.carrier()).unwrap().len(),
        6,
        "gradient tiles are written"
    );
}

#[test]
fn a_failing_tier_move_during_backward_assigns_no_gradient_and_retry_succeeds() {
    let values = wavy(24, 7);
    let expected = vec![2.0; 24];
    // 1. The Backward plan promotes tile (0, 0): its seed copy's read fails half way.
    // 2. A staged tile's copy fails during the stream.
    // 3. Moving a finished gradient tile onto the secondary tier fails.
    for (point, arm) in [
        ("plan move", 0usize),
        ("staging copy", 1),
        ("gradient move", 2),
    ] {
        let faults = Faults::new();
        let policy = Bounded::new(2, set(&[&[0, 0]]));
        let x = out_of_core(&faults, &values, &[3, 2], &[2, 2], policy);
        x.set_requires_grad(true).unwrap();
        let loss = ops::reduce_sum(&ops::mul(&x, 2.0).unwrap()).unwrap();
        let before = locations(x.carrier());
        let live = faults.live();
        match arm {
            0 => Faults::arm(&faults.reads, 2),
            1 => Faults::arm(&faults.reads, 4 + 4 + 1),
            _ => Faults::arm(&faults.writes, 5),
        }
        let error = loss.backward(Some(&ones(6)), true).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{point}: {error}");
        assert!(error.to_string().contains("injected"), "{point}: {error}");
        assert!(x.grad().is_none(), "{point}: no gradient assigned");
        // Only the plan's own request may have moved a tile, and it commits whole: it failed
        // at the first point and had landed before the other two.
        let mut moved = before.clone();
        if arm > 0 {
            moved[0] = TileLocation::Primary;
        }
        assert_eq!(
            locations(x.carrier()),
            moved,
            "{point}: no other tile moved"
        );
        assert!(TiledEvictable::invalid_tiles(x.carrier())
            .unwrap()
            .is_empty());
        assert_eq!(faults.live(), live, "{point}: nothing made is left alive");
        assert_eq!(numbers(&x), values, "{point}: every tile reads its values");
        assert_eq!(x.carrier().version(), 0);
        // The retry succeeds, and its plan now promotes tile (0, 0).
        loss.backward(Some(&ones(6)), false).unwrap();
        assert_eq!(numbers(&x.grad().unwrap()), expected, "{point}");
        assert_eq!(
            TiledEvictable::tile_state(x.carrier(), &[0, 0])
                .unwrap()
                .location(),
            TileLocation::Primary,
            "{point}"
        );
    }
}

/// A TiledEvictable of storage `values` on a full Faulty secondary, seen through `layout`
/// (a permutation inside its tiles), with `policy`.
fn permuted_out_of_core(
    faults: &Arc<Faults>,
    values: &[f64],
    geometry: (&[usize], &[usize]),
    layout: &str,
    policy: Arc<Bounded>,
) -> Tensor {
    let carrier = faulty_tiled(faults, values, geometry, policy);
    Tensor::new(carrier, 0, layout.parse().unwrap()).unwrap()
}

/// The same storage on a dense CPU carrier, seen through the same layout.
fn permuted_dense(values: &[f64], layout: &str) -> Tensor {
    let values: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    Tensor::new(
        Cpu::from_f32(&values, true).unwrap(),
        0,
        layout.parse().unwrap(),
    )
    .unwrap()
}

/// Logical (4, 4) in 2 × 2 tiles, every tile transposed by the layout.
const TRANSPOSED_TILES: &str = "((2,2),(2,2)):((4,2),(1,8))";

#[test]
fn the_backward_of_a_within_tile_permuted_operand_streams_and_matches_the_dense_backward() {
    let cases: Vec<(&str, Op)> = vec![
        ("relu", Box::new(|t| ops::relu(&t[0]))),
        ("mul by a scalar", Box::new(|t| ops::mul(&t[0], 2.5))),
        ("reduce_sum", Box::new(|t| ops::reduce_sum(&t[0]))),
        (
            "elementwise_mul by itself",
            Box::new(|t| ops::elementwise_mul(&t[0], &t[0])),
        ),
        ("matmul by itself", Box::new(|t| ops::matmul(&t[0], &t[0]))),
    ];
    for (name, op) in cases {
        let faults = Faults::new();
        // `matmul` by itself holds the most on the primary tier at once: three staged tiles
        // (a left tile and both right tiles), two per-tile outputs and their two cotangent
        // blocks, three gradient tiles and two partial gradients of right tiles.
        let policy = Bounded::new(12, TileSet::empty());
        let values = wavy(16, 4);
        let x = permuted_out_of_core(
            &faults,
            &values,
            (&[2, 2], &[2, 2]),
            TRANSPOSED_TILES,
            policy.clone(),
        );
        let reference = permuted_dense(&values, TRANSPOSED_TILES);
        for t in [&x, &reference] {
            t.set_requires_grad(true).unwrap();
        }
        let out = op(std::slice::from_ref(&x)).unwrap();
        let expected_out = op(std::slice::from_ref(&reference)).unwrap();
        assert_close(&numbers(&out), &numbers(&expected_out), name);
        let cotangent = noise_like(&out, 12);
        policy.reports.lock().unwrap().clear();
        out.backward(Some(&cotangent), false).unwrap();
        expected_out.backward(Some(&cotangent), false).unwrap();
        let (g, e) = (x.grad().unwrap(), reference.grad().unwrap());
        assert_close(&numbers(&g), &numbers(&e), name);
        // Streamed: the backward reported its items within the capacity, and the gradient
        // is the TiledEvictable it built, laid out like the operand, its tiles on the
        // secondary tier (a dense rebuild would have put them on the primary tier).
        let backward = backward_reports(&policy);
        assert!(!backward.is_empty(), "{name}: the backward streams");
        assert!(
            backward.iter().all(|r| r.staged_peak() <= 12),
            "{name}: {backward:?}"
        );
        assert_eq!(g.carrier().class(), x.carrier().class(), "{name}");
        assert_eq!(g.layout(), x.layout(), "{name}");
        assert_eq!(
            TiledEvictable::secondary_tiles(g.carrier()).unwrap().len(),
            4,
            "{name}: no gradient tile on the bounded primary tier"
        );
        assert_eq!(
            locations(x.carrier()),
            vec![TileLocation::Secondary; 4],
            "{name}: the saved operand was streamed, not moved"
        );
    }
}

#[test]
fn a_second_backward_accumulates_into_a_tiled_gradient_streamed_within_the_capacity() {
    let faults = Faults::new();
    let capacity = 4;
    let policy = Bounded::new(capacity, TileSet::empty());
    let values = wavy(24, 8);
    let x = out_of_core(&faults, &values, &[3, 2], &[2, 2], policy.clone());
    x.set_requires_grad(true).unwrap();
    let loss = ops::reduce_sum(&ops::mul(&x, 2.0).unwrap()).unwrap();
    loss.backward(Some(&ones(6)), true).unwrap();
    let first = x.grad().unwrap();
    assert_eq!(numbers(&first), vec![2.0; 24]);
    policy.reports.lock().unwrap().clear();
    loss.backward(Some(&ones(6)), true).unwrap();
    let total = x.grad().unwrap();
    assert_eq!(numbers(&total), vec![4.0; 24]);
    // The sum was streamed tile by tile, never holding more than the capacity on the
    // primary tier: each item's two staged tiles and its sum.
    let reports = policy.reports.lock().unwrap().clone();
    let sums: Vec<&TileProgress> = reports
        .iter()
        .filter(|r| r.operation() == "add_gradients")
        .collect();
    assert_eq!(sums.len(), 6, "one item per tile: {reports:?}");
    assert_eq!(sums.last().unwrap().completed(), 6);
    let resident: usize = [&x, &first, &total]
        .iter()
        .map(|t| TiledEvictable::primary_tiles(t.carrier()).unwrap().len())
        .sum();
    let peak = sums.iter().map(|r| r.staged_peak()).max().unwrap();
    assert!(
        peak + resident <= capacity,
        "peak {peak} + resident {resident} within {capacity}"
    );
    assert_eq!(peak, 3, "two staged tiles and the sum of one item");
    // The accumulated gradient is the TiledEvictable the sum built, kept without a copy:
    // its tiles are on the secondary tier and written.
    assert_eq!(total.carrier().class(), x.carrier().class());
    assert_eq!(
        TiledEvictable::secondary_tiles(total.carrier())
            .unwrap()
            .len(),
        6
    );
    assert_eq!(
        TiledEvictable::dirty_tiles(total.carrier()).unwrap().len(),
        6
    );
    // The gradient of the first pass is unchanged.
    assert_eq!(numbers(&first), vec![2.0; 24]);
    // A permuted operand accumulates too, laid out like itself.
    let faults = Faults::new();
    let policy = Bounded::new(capacity, TileSet::empty());
    let values = wavy(16, 9);
    let y = permuted_out_of_core(
        &faults,
        &values,
        (&[2, 2], &[2, 2]),
        TRANSPOSED_TILES,
        policy.clone(),
    );
    y.set_requires_grad(true).unwrap();
    let reference = permuted_dense(&values, TRANSPOSED_TILES);
    reference.set_requires_grad(true).unwrap();
    for t in [&y, &reference] {
        let loss = ops::reduce_sum(&ops::relu(t).unwrap()).unwrap();
        let weights = noise_like(&loss, 2);
        loss.backward(Some(&weights), true).unwrap();
        loss.backward(Some(&weights), true).unwrap();
    }
    let (g, e) = (y.grad().unwrap(), reference.grad().unwrap());
    assert_close(&numbers(&g), &numbers(&e), "permuted accumulation");
    assert_eq!(g.layout(), y.layout());
    assert_eq!(
        TiledEvictable::secondary_tiles(g.carrier()).unwrap().len(),
        4
    );
}

#[test]
fn a_failing_tier_move_during_accumulation_keeps_the_gradient_and_retry_succeeds() {
    for (point, arm) in [
        ("staging read", 0usize),
        ("gradient move", 1),
        ("allocation", 2),
    ] {
        let faults = Faults::new();
        let policy = Bounded::new(4, TileSet::empty());
        let values = wavy(24, 10);
        let x = out_of_core(&faults, &values, &[3, 2], &[2, 2], policy);
        x.set_requires_grad(true).unwrap();
        let loss = ops::reduce_sum(&ops::mul(&x, 2.0).unwrap()).unwrap();
        loss.backward(Some(&ones(6)), true).unwrap();
        let first = x.grad().unwrap();
        let first_locations = locations(first.carrier());
        let live = faults.live();
        // The backward itself stages 6 tiles of 4 slots (24 reads) and moves 6 gradient
        // tiles (24 writes, 6 allocations) before the sum starts.
        match arm {
            0 => Faults::arm(&faults.reads, 24 + 4 + 2),
            1 => Faults::arm(&faults.writes, 24 + 4 + 1),
            _ => Faults::arm(&faults.allocations, 1 + 6 + 1 + 1),
        }
        let error = loss.backward(Some(&ones(6)), true).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{point}: {error}");
        assert!(error.to_string().contains("injected"), "{point}: {error}");
        let kept = x.grad().unwrap();
        assert!(
            kept.carrier().same_as(first.carrier()),
            "{point}: the gradient is the first pass's"
        );
        assert_eq!(numbers(&kept), vec![2.0; 24], "{point}");
        assert_eq!(locations(kept.carrier()), first_locations, "{point}");
        // The pass's own gradient (its secondary tier and six tiles) was complete when the
        // sum failed; it is released, not left to its drop: nothing the pass made is alive.
        assert_eq!(faults.live(), live, "{point}: nothing made is left alive");
        assert_eq!(numbers(&x), values, "{point}");
        loss.backward(Some(&ones(6)), false).unwrap();
        assert_eq!(numbers(&x.grad().unwrap()), vec![4.0; 24], "{point}");
    }
}

#[test]
fn a_failing_sum_of_two_contributions_within_a_pass_releases_what_the_pass_built() {
    // Two tiled operations read `x`: its two gradients are summed (streamed) within the
    // pass, and the sum fails at a staging read, a gradient tile's move or a factory call.
    for (point, arm) in [
        ("staging read", 0usize),
        ("gradient move", 1),
        ("allocation", 2),
    ] {
        let faults = Faults::new();
        let policy = Bounded::new(4, TileSet::empty());
        let values = wavy(24, 12);
        let x = out_of_core(&faults, &values, &[3, 2], &[2, 2], policy);
        x.set_requires_grad(true).unwrap();
        let loss = ops::add(
            &ops::reduce_sum(&ops::mul(&x, 2.0).unwrap()).unwrap(),
            &ops::reduce_sum(&ops::mul(&x, 3.0).unwrap()).unwrap(),
        )
        .unwrap();
        let live = faults.live();
        // Each backward stages 6 tiles of 4 slots (24 reads) and moves 6 gradient tiles
        // (24 writes; 7 allocations with the gradient's secondary tier) before the sum.
        match arm {
            0 => Faults::arm(&faults.reads, 48 + 4 + 2),
            1 => Faults::arm(&faults.writes, 48 + 4 + 1),
            _ => Faults::arm(&faults.allocations, 14 + 1 + 1),
        }
        let error = loss.backward(Some(&ones(6)), true).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{point}: {error}");
        assert!(error.to_string().contains("injected"), "{point}: {error}");
        assert!(x.grad().is_none(), "{point}: no gradient assigned");
        // Both contributions (each a secondary tier and six tiles) are released with the
        // failed sum's own carriers: nothing the pass made is alive.
        assert_eq!(faults.live(), live, "{point}: nothing made is left alive");
        assert!(
            TiledEvictable::pinned_tiles(x.carrier())
                .unwrap()
                .is_empty(),
            "{point}"
        );
        assert!(
            TiledEvictable::invalid_tiles(x.carrier())
                .unwrap()
                .is_empty(),
            "{point}"
        );
        assert_eq!(numbers(&x), values, "{point}");
        loss.backward(Some(&ones(6)), false).unwrap();
        assert_eq!(numbers(&x.grad().unwrap()), vec![5.0; 24], "{point}");
    }
}

/// A policy bounding the primary tier (or not) whose `Backward` plans promote and evict given
/// tiles (of the saved operand and of the gradient alike: both are asked with `Backward`).
#[derive(Debug)]
struct GradientPlan {
    capacity: Option<usize>,
    promote: TileSet,
    evict: TileSet,
    asked: Mutex<Vec<ResidencyPurpose>>,
}

impl ResidencyPolicy for GradientPlan {
    fn plan(&self, _: &TileSet, purpose: ResidencyPurpose) -> Result<ResidencyPlan> {
        self.asked.lock().unwrap().push(purpose);
        match purpose {
            ResidencyPurpose::Backward => {
                ResidencyPlan::new(self.promote.clone(), TileSet::empty(), self.evict.clone())
            }
            _ => ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty()),
        }
    }
    fn primary_capacity(&self) -> Option<usize> {
        self.capacity
    }
}

#[test]
fn gradient_tiles_follow_the_policys_gradient_plan() {
    use TileLocation::{Primary as P, Secondary as S};
    // Tiles of 2 × 2 (4 slots) in a full 6 × 4 secondary tier, where a tile spans 8 slots.
    // The `Backward` plan promotes tiles (0, 0) and (1, 0) of the saved operand first (8
    // slots resident); 3 items of one staged tile (its 8-slot span) stream at once, and the
    // item computing holds its output and cotangent block (4 slots each) and the gradient
    // tile taken against the staged view (laid out like it: 8 slots): 8 + 24 + 16 = 48
    // slots, 12 tiles. (capacity, promote, evict, the gradient's tile locations)
    let cases: Vec<(Option<usize>, TileSet, TileSet, Vec<TileLocation>)> = vec![
        // 14 tiles: room for both gradient promotions.
        (
            Some(14),
            set(&[&[0, 0], &[1, 0]]),
            TileSet::empty(),
            vec![P, P, S, S, S, S],
        ),
        // 13: room for one, the promotions cut in the set's order.
        (
            Some(13),
            set(&[&[0, 0], &[1, 0]]),
            TileSet::empty(),
            vec![P, S, S, S, S, S],
        ),
        // 12: no room; the default places every tile on the secondary tier.
        (
            Some(12),
            set(&[&[0, 0], &[1, 0]]),
            TileSet::empty(),
            vec![S; 6],
        ),
        // No capacity: every tile on the primary tier, but the evicted one.
        (
            None,
            TileSet::empty(),
            set(&[&[2, 1]]),
            vec![P, P, P, P, P, S],
        ),
    ];
    for (capacity, promote, evict, expected) in cases {
        let policy = Arc::new(GradientPlan {
            capacity,
            promote,
            evict,
            asked: Mutex::new(Vec::new()),
        });
        let faults = Faults::new();
        let values = wavy(24, 11);
        let carrier = faulty_tiled(&faults, &values, (&[3, 2], &[2, 2]), policy.clone());
        let x = Tensor::compact(carrier, Shape::new((6, 4)).unwrap()).unwrap();
        x.set_requires_grad(true).unwrap();
        let loss = ops::reduce_sum(&ops::mul(&x, 2.0).unwrap()).unwrap();
        policy.asked.lock().unwrap().clear();
        loss.backward(Some(&ones(6)), true).unwrap();
        let g = x.grad().unwrap();
        assert_eq!(numbers(&g), vec![2.0; 24], "{capacity:?}");
        assert_eq!(locations(g.carrier()), expected, "{capacity:?}");
        assert_eq!(
            policy.asked.lock().unwrap().clone(),
            vec![ResidencyPurpose::Backward; 2],
            "{capacity:?}: one plan for the saved operand, one for its gradient"
        );
        // The accumulation of a second pass follows the plan too, within its own room.
        loss.backward(Some(&ones(6)), true).unwrap();
        let total = x.grad().unwrap();
        assert_eq!(numbers(&total), vec![4.0; 24], "{capacity:?}");
        let placed = locations(total.carrier());
        match capacity {
            None => assert_eq!(placed, expected),
            Some(capacity) => {
                let primary = placed.iter().filter(|l| **l == P).count();
                let resident = TiledEvictable::primary_tiles(g.carrier()).unwrap().len();
                assert!(
                    primary + 2 * resident + 3 <= capacity,
                    "{capacity}: the sum promotes within its room: {placed:?}"
                );
            }
        }
    }
}

#[test]
fn a_failing_tier_move_during_every_tiled_backward_assigns_no_gradient() {
    // The Faulty secondary's reads fail while tiles are staged, its writes while a finished
    // gradient tile moves onto it, its factory while the gradient's tiers or tiles are made.
    for (name, op, geometry) in every_tiled_operation() {
        for point in ["staging read", "gradient move", "allocation"] {
            let faults = Faults::new();
            let policy = Bounded::new(2, TileSet::empty());
            let Operands {
                tiled,
                plain,
                stored,
            } = operands(&faults, &geometry, &policy);
            let out = op(&tiled).unwrap();
            let reference = op(&plain).unwrap();
            let cotangent = noise_like(&out, 13);
            let before: Vec<Vec<TileLocation>> =
                tiled.iter().map(|t| locations(t.carrier())).collect();
            let live = faults.live();
            match point {
                "staging read" => Faults::arm(&faults.reads, 3),
                "gradient move" => Faults::arm(&faults.writes, 1),
                _ => Faults::arm(&faults.allocations, 2),
            }
            let error = out.backward(Some(&cotangent), true).unwrap_err();
            let what = format!("{name}, {point}");
            assert_eq!(error.kind(), ErrorKind::Runtime, "{what}: {error}");
            assert!(error.to_string().contains("injected"), "{what}: {error}");
            for (k, t) in tiled.iter().enumerate() {
                assert!(t.grad().is_none(), "{what}: no gradient assigned to {k}");
                assert!(
                    TiledEvictable::invalid_tiles(t.carrier())
                        .unwrap()
                        .is_empty(),
                    "{what}"
                );
                assert_eq!(
                    numbers(t),
                    stored[k],
                    "{what}: operand {k} reads its values"
                );
                assert_eq!(t.carrier().version(), 0, "{what}");
            }
            let after: Vec<Vec<TileLocation>> =
                tiled.iter().map(|t| locations(t.carrier())).collect();
            assert_eq!(after, before, "{what}: no tile moved");
            assert_eq!(faults.live(), live, "{what}: nothing made is left alive");
            // The retry succeeds and matches the dense backward.
            out.backward(Some(&cotangent), false).unwrap();
            reference.backward(Some(&cotangent), false).unwrap();
            for (k, (t, p)) in tiled.iter().zip(&plain).enumerate() {
                assert_close(
                    &numbers(&t.grad().unwrap()),
                    &numbers(&p.grad().unwrap()),
                    &format!("{what}: gradient {k} after the retry"),
                );
            }
        }
    }
}

#[test]
fn the_backward_counts_its_transients_and_partial_gradients_against_the_capacity() {
    // (6, 6) · (3, 6) in full secondary tiers: left tiles (2, 2), right tiles (1, 2), each
    // staged as its span (8 and 4 slots); one tile of the capacity is the largest tile, 4
    // slots. Each item stages a left tile and three right tiles (20 slots); while the second
    // item of a contraction column computes, the primary tier also holds its three per-tile
    // outputs and their three cotangent blocks (2 slots each), the four gradient tiles taken
    // against the staged views (laid out like them: 8 + 3 · 4) and the three partial
    // gradients of the right tiles the first item began (3 · 4): 20 + 12 + 20 + 12 = 64
    // slots, 16 tiles. Two more items in flight take 40 slots more: 104, 26 tiles.
    let geometry: Geometry = vec![(vec![3, 3], vec![2, 2]), (vec![3, 3], vec![1, 2])];
    for capacity in [16, 26] {
        let faults = Faults::new();
        let policy = Bounded::new(capacity, TileSet::empty());
        let Operands { tiled, plain, .. } = operands(&faults, &geometry, &policy);
        let out = ops::matmul(&tiled[0], &tiled[1]).unwrap();
        let reference = ops::matmul(&plain[0], &plain[1]).unwrap();
        let cotangent = noise_like(&out, 14);
        policy.reports.lock().unwrap().clear();
        out.backward(Some(&cotangent), false).unwrap();
        reference.backward(Some(&cotangent), false).unwrap();
        for (t, p) in tiled.iter().zip(&plain) {
            assert_close(
                &numbers(&t.grad().unwrap()),
                &numbers(&p.grad().unwrap()),
                "matmul",
            );
        }
        let backward = backward_reports(&policy);
        assert_eq!(backward.len(), 9, "one report per left tile");
        let peak = backward
            .iter()
            .map(TileProgress::staged_peak)
            .max()
            .unwrap();
        let depth = backward[0].prefetch_depth();
        // The first capacity leaves room for one item in flight, which then holds exactly
        // the planned 64 slots; the second for three, whose staged tiles (60 slots) the
        // stream makes before its worker starts, so it holds exactly the 104 slots planned
        // however far the worker gets ahead.
        let slots = backward.iter().map(TileProgress::peak_slots).max().unwrap();
        if capacity == 16 {
            assert_eq!((depth, peak, slots), (1, 16, 64));
        } else {
            assert_eq!((depth, peak, slots), (3, 26, 104));
        }
        assert_eq!(backward[0].tile_slots(), 4);
        assert_eq!(backward[0].capacity_slots(), Some(4 * capacity));
        assert!(peak <= capacity, "peak {peak} within {capacity}");
    }
}
