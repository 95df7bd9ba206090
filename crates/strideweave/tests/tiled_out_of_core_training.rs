//! Out-of-core training (docs/tiers.md, Out-of-core training): a two-layer perceptron whose
//! first weight matrix is a TiledEvictable four times larger than its CPU primary tier, on a
//! FileBacked secondary; forward, streamed backward and an SGD update written back tile by
//! tile (`TiledEvictable::add_scaled`), with the loss falling and the primary tier never
//! holding more than its capacity; and the update's own rules.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::tiled::{expect_err, Faults, Faulty};
use strideweave::carriers::{
    Cpu, FileBacked, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation, TileProgress,
    TileSet, TiledEvictable,
};
use strideweave::movement::move_to;
use strideweave::{ops, DType, ErrorKind, Result, Shape, Tensor};

/// A policy bounding the primary tier (or not) and keeping the most staged tiles any report
/// saw, overall and in backward passes.
#[derive(Debug, Default)]
struct Meter {
    capacity: Option<usize>,
    peak: AtomicUsize,
    backward_peak: AtomicUsize,
    operations: Mutex<Vec<String>>,
}

impl ResidencyPolicy for Meter {
    fn plan(&self, _: &TileSet, _: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }
    fn primary_capacity(&self) -> Option<usize> {
        self.capacity
    }
    fn on_progress(&self, progress: &TileProgress) {
        self.peak
            .fetch_max(progress.staged_peak(), Ordering::SeqCst);
        if progress.operation().ends_with(".backward") {
            self.backward_peak
                .fetch_max(progress.staged_peak(), Ordering::SeqCst);
        }
        let mut seen = self.operations.lock().unwrap();
        if !seen.iter().any(|name| name == progress.operation()) {
            seen.push(progress.operation().to_string());
        }
    }
}

fn noise(state: &mut u64) -> f32 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

fn cpu(values: &[f32], shape: Shape) -> Tensor {
    Tensor::compact(Cpu::from_f32(values, true).unwrap(), shape).unwrap()
}

fn total(t: &Tensor) -> f64 {
    t.to_values()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .sum()
}

#[test]
fn a_perceptron_trains_with_its_first_layer_out_of_core() {
    const B: usize = 8; // batch
    const D: usize = 128; // inputs
    const H: usize = 32; // hidden units
    const C: usize = 2; // outputs
    const TD: usize = 8; // tile width: 16 tiles of H × TD
    const CAPACITY: usize = 4; // the first layer is 4× its primary tier
    let mut state = 3u64;
    let inputs: Vec<f32> = (0..B * D).map(|_| noise(&mut state)).collect();
    let teacher: Vec<f32> = (0..H * D).map(|_| noise(&mut state) * 0.2).collect();
    let student: Vec<f32> = teacher
        .iter()
        .map(|&w| w + noise(&mut state) * 0.1)
        .collect();
    let readout: Vec<f32> = (0..C * H).map(|_| noise(&mut state) * 0.5).collect();

    // The input batch: a small TiledEvictable resident on its CPU primary tier.
    let observer = Arc::new(Meter::default());
    let x_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&inputs, true).unwrap(),
        &Cpu::from_f32(&[], true).unwrap(),
        &[1, D / TD],
        &[B, TD],
        Some(observer.clone()),
    )
    .unwrap();
    let x = Tensor::compact(x_carrier, Shape::new((B, D)).unwrap()).unwrap();
    // The targets, from the teacher's first layer.
    let targets = {
        let w = cpu(&teacher, Shape::new((H, D)).unwrap());
        let dense_x = cpu(&inputs, Shape::new((B, D)).unwrap());
        let hidden = ops::relu(&ops::matmul(&dense_x, &w).unwrap()).unwrap();
        ops::matmul(&hidden, &cpu(&readout, Shape::new((C, H)).unwrap())).unwrap()
    };
    // The first layer: in a FileBacked file, streamed through a CPU tier of 4 tiles.
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    move_to(&cpu(&student, Shape::new(H * D).unwrap()), &file).unwrap();
    let bound = Arc::new(Meter {
        capacity: Some(CAPACITY),
        ..Meter::default()
    });
    let w1_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).unwrap(),
        &file,
        &[1, D / TD],
        &[H, TD],
        Some(bound.clone()),
    )
    .unwrap();
    let w1 = Tensor::compact(w1_carrier.clone(), Shape::new((H, D)).unwrap()).unwrap();
    w1.set_requires_grad(true).unwrap();
    let w2 = cpu(&readout, Shape::new((C, H)).unwrap());
    let ones = cpu(&[1.0; B], Shape::new(B).unwrap());
    let rate = 0.005;
    let mut losses = Vec::new();
    for epoch in 0..6 {
        let hidden = ops::relu(&ops::matmul(&x, &w1).unwrap()).unwrap();
        let y = ops::matmul(&hidden, &w2).unwrap();
        let diff = ops::sub(&y, &targets).unwrap();
        let per_row = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff).unwrap()).unwrap();
        losses.push(total(&per_row));
        per_row.backward(Some(&ones), false).unwrap();
        let g = w1.grad().expect("the first layer gets a gradient");
        assert_eq!(g.carrier().class(), w1_carrier.class(), "epoch {epoch}");
        assert!(TiledEvictable::primary_tiles(g.carrier())
            .unwrap()
            .is_empty());
        TiledEvictable::add_scaled(&w1, &g, -rate).unwrap();
        w1.set_grad(None).unwrap();
        // The first layer never holds a tile on its primary tier; every tile is valid.
        assert!(TiledEvictable::primary_tiles(&w1_carrier)
            .unwrap()
            .is_empty());
        assert!(TiledEvictable::invalid_tiles(&w1_carrier)
            .unwrap()
            .is_empty());
    }
    assert!(
        losses.windows(2).all(|w| w[1] < w[0]),
        "the loss falls every epoch: {losses:?}"
    );
    // The same training on dense CPU tensors gives the same losses.
    let mut dense_w1 = cpu(&student, Shape::new((H, D)).unwrap());
    let dense_x = cpu(&inputs, Shape::new((B, D)).unwrap());
    for (epoch, &expected) in losses.iter().enumerate() {
        dense_w1.set_requires_grad(true).unwrap();
        let hidden = ops::relu(&ops::matmul(&dense_x, &dense_w1).unwrap()).unwrap();
        let diff = ops::sub(&ops::matmul(&hidden, &w2).unwrap(), &targets).unwrap();
        let per_row = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff).unwrap()).unwrap();
        let loss = total(&per_row);
        assert!(
            (loss - expected).abs() <= 1e-3 * expected.max(1e-3),
            "epoch {epoch}: dense loss {loss}, out of core {expected}"
        );
        per_row.backward(Some(&ones), false).unwrap();
        let _off = strideweave::autograd::no_grad();
        let g = dense_w1.grad().unwrap();
        dense_w1 = ops::sub(&dense_w1, &ops::mul(&g, rate).unwrap()).unwrap();
    }
    assert!(losses[5] < 0.5 * losses[0], "{losses:?}");
    // What the first layer ever held on the primary tier: no resident tile plus the staged
    // tiles in flight, within the capacity, in the forward, the backward and the update. The
    // backward counts what its item holds beside its staged tile of W1 too — the per-tile
    // output (8 × 32, one tile's size), its cotangent block and W1's gradient tile: 4.
    assert!(observer.peak.load(Ordering::SeqCst) <= CAPACITY);
    assert_eq!(observer.backward_peak.load(Ordering::SeqCst), CAPACITY);
    assert!(bound.peak.load(Ordering::SeqCst) <= CAPACITY);
    assert!(bound.peak.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        *observer.operations.lock().unwrap(),
        vec!["matmul".to_string(), "matmul.backward".to_string()]
    );
    assert_eq!(
        *bound.operations.lock().unwrap(),
        vec!["add_scaled".to_string()]
    );
    assert_eq!(w1_carrier.version(), 6, "one version per update");
    assert_eq!(
        TiledEvictable::dirty_tiles(&w1_carrier).unwrap().len(),
        D / TD
    );
}

#[test]
fn add_scaled_updates_tile_by_tile_and_fails_whole() {
    let faults = Faults::new();
    let values: Vec<f64> = (0..24).map(f64::from).collect();
    let target_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).unwrap(),
        &Faulty::carrier(&faults, &values),
        &[3, 2],
        &[2, 2],
        None,
    )
    .unwrap();
    TiledEvictable::promote(&target_carrier, &TileSet::new([vec![1, 1]]).unwrap()).unwrap();
    let target = Tensor::compact(target_carrier.clone(), Shape::new((6, 4)).unwrap()).unwrap();
    let step: Vec<f32> = (0..24).map(|i| (i % 5) as f32).collect();
    let source_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&step, true).unwrap(),
        &Cpu::from_f32(&[], true).unwrap(),
        &[3, 2],
        &[2, 2],
        None,
    )
    .unwrap();
    let source = Tensor::compact(source_carrier, Shape::new((6, 4)).unwrap()).unwrap();
    // A tier write failing half way (moving an updated tile back onto the Faulty
    // secondary) changes nothing and leaves nothing made alive.
    let live = faults.live();
    Faults::arm(&faults.writes, 6);
    expect_err(
        TiledEvictable::add_scaled(&target, &source, -0.5),
        ErrorKind::Runtime,
        "injected write failure",
    );
    assert_eq!(faults.live(), live);
    assert_eq!(target_carrier.version(), 0);
    let read: Vec<f64> = (0..24)
        .map(|i| target_carrier.get(i).unwrap().as_f64().unwrap())
        .collect();
    assert_eq!(read, values);
    assert!(TiledEvictable::dirty_tiles(&target_carrier)
        .unwrap()
        .is_empty());
    // The retry updates every tile where it lives, once.
    TiledEvictable::add_scaled(&target, &source, -0.5).unwrap();
    let read: Vec<f64> = (0..24)
        .map(|i| target_carrier.get(i).unwrap().as_f64().unwrap())
        .collect();
    let expected: Vec<f64> = values
        .iter()
        .zip(&step)
        .map(|(v, s)| v - 0.5 * f64::from(*s))
        .collect();
    assert_eq!(read, expected);
    assert_eq!(target_carrier.version(), 1);
    let tile_11 = TiledEvictable::tile_state(&target_carrier, &[1, 1]).unwrap();
    assert_eq!(tile_11.location(), TileLocation::Primary);
    assert_eq!(
        TiledEvictable::secondary_tiles(&target_carrier)
            .unwrap()
            .len(),
        5
    );
    assert_eq!(
        TiledEvictable::dirty_tiles(&target_carrier).unwrap().len(),
        6
    );
    // Refused before anything changes: another tiling, a dense tensor.
    let other = TiledEvictable::carrier(
        &Cpu::from_f32(&step, true).unwrap(),
        &Cpu::from_f32(&[], true).unwrap(),
        &[6, 1],
        &[1, 4],
        None,
    )
    .unwrap();
    let other = Tensor::compact(other, Shape::new((6, 4)).unwrap()).unwrap();
    expect_err(
        TiledEvictable::add_scaled(&target, &other, 1.0),
        ErrorKind::Value,
        "needs one tiling",
    );
    expect_err(
        TiledEvictable::add_scaled(&target, &cpu(&step, Shape::new((6, 4)).unwrap()), 1.0),
        ErrorKind::Type,
        "TiledEvictable",
    );
    assert_eq!(target_carrier.version(), 1);
}

#[test]
fn repeated_updates_write_into_the_secondary_carriers_the_previous_update_replaced() {
    // Six tiles of 2 × 2 on a Faulty secondary: the first update turns the seed slots into
    // six new tile carriers, the second makes six more and keeps the six it replaced as
    // spares, and every later update writes into the spares without a factory call.
    let faults = Faults::sticky();
    let values: Vec<f64> = (0..24).map(f64::from).collect();
    let target_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).unwrap(),
        &Faulty::carrier(&faults, &values),
        &[3, 2],
        &[2, 2],
        None,
    )
    .unwrap();
    let target = Tensor::compact(target_carrier.clone(), Shape::new((6, 4)).unwrap()).unwrap();
    let step: Vec<f32> = (0..24).map(|i| (i % 3) as f32).collect();
    let source = Tensor::compact(
        TiledEvictable::carrier(
            &Cpu::from_f32(&step, true).unwrap(),
            &Cpu::from_f32(&[], true).unwrap(),
            &[3, 2],
            &[2, 2],
            None,
        )
        .unwrap(),
        Shape::new((6, 4)).unwrap(),
    )
    .unwrap();
    let read = || -> Vec<f64> {
        (0..24)
            .map(|i| target_carrier.get(i).unwrap().as_f64().unwrap())
            .collect()
    };
    let after = |updates: usize| -> Vec<f64> {
        values
            .iter()
            .zip(&step)
            .map(|(v, s)| v + updates as f64 * f64::from(*s))
            .collect()
    };
    assert_eq!(faults.live(), 1, "the seed tier");
    TiledEvictable::add_scaled(&target, &source, 1.0).unwrap();
    assert_eq!(
        faults.live(),
        1 + 6,
        "the seed tier and six new tile carriers"
    );
    TiledEvictable::add_scaled(&target, &source, 1.0).unwrap();
    assert_eq!(faults.live(), 1 + 6 + 6, "six tile carriers and six spares");
    assert_eq!(read(), after(2));
    // No factory call is needed any more: with every allocation failing, the updates go on.
    Faults::arm(&faults.allocations, 0);
    for updates in 3..5 {
        TiledEvictable::add_scaled(&target, &source, 1.0).unwrap();
        assert_eq!(read(), after(updates));
        assert_eq!(faults.live(), 1 + 6 + 6);
        assert_eq!(target_carrier.version(), updates as u64);
        assert_eq!(
            TiledEvictable::secondary_tiles(&target_carrier)
                .unwrap()
                .len(),
            6
        );
    }
    Faults::arm(&faults.allocations, -1);
    // A write failing half way through the update: nothing changes, the spares it took
    // are kept, and nothing it made is left alive.
    Faults::arm(&faults.writes, 10);
    expect_err(
        TiledEvictable::add_scaled(&target, &source, 1.0),
        ErrorKind::Runtime,
        "injected write failure",
    );
    Faults::arm(&faults.writes, -1);
    assert_eq!(read(), after(4));
    assert_eq!(target_carrier.version(), 4);
    assert_eq!(faults.live(), 1 + 6 + 6);
    Faults::arm(&faults.allocations, 0);
    TiledEvictable::add_scaled(&target, &source, 1.0).unwrap();
    Faults::arm(&faults.allocations, -1);
    assert_eq!(read(), after(5));
    // Releasing the carrier releases its tiles, its spares and its seed tier.
    target_carrier.release().unwrap();
    assert_eq!(faults.live(), 0);
}

#[test]
fn training_steps_reuse_the_secondary_carriers_of_the_dropped_gradient_and_the_replaced_tiles() {
    // A layer of six 2 × 2 tiles on a Faulty secondary, bounded to 2 tiles. Once two steps
    // have run, a step — streamed backward, update, dropping the gradient — makes one
    // carrier of the family (the gradient's secondary tier): the gradient's tiles are written
    // into the spares the dropped gradient gave back and the update's into the tiles it
    // replaced.
    let faults = Faults::sticky();
    let values: Vec<f64> = (0..24).map(|i| f64::from(i) * 0.25).collect();
    let bound = Arc::new(Meter {
        capacity: Some(2),
        ..Meter::default()
    });
    let w_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).unwrap(),
        &Faulty::carrier(&faults, &values),
        &[3, 2],
        &[2, 2],
        Some(bound),
    )
    .unwrap();
    let w = Tensor::compact(w_carrier.clone(), Shape::new((6, 4)).unwrap()).unwrap();
    w.set_requires_grad(true).unwrap();
    let ones = cpu(&[1.0; 6], Shape::new(6).unwrap());
    let mut dense: Vec<f64> = values.clone();
    let step = |w: &Tensor| {
        let rows = ops::reduce_sum(&ops::mul(w, 2.0).unwrap()).unwrap();
        rows.backward(Some(&ones), false).unwrap();
        let g = w.grad().unwrap();
        TiledEvictable::add_scaled(w, &g, -0.125).unwrap();
        w.set_grad(None).unwrap();
    };
    for _ in 0..2 {
        step(&w);
        // The gradient of 2w is 2: w ← w − 0.125 · 2.
        dense.iter_mut().for_each(|v| *v -= 0.25);
    }
    let live = faults.live();
    for epoch in 0..3 {
        // One factory call is left: the gradient's secondary tier.
        Faults::arm(&faults.allocations, 1);
        step(&w);
        Faults::arm(&faults.allocations, -1);
        dense.iter_mut().for_each(|v| *v -= 0.25);
        let read: Vec<f64> = (0..24)
            .map(|i| w_carrier.get(i).unwrap().as_f64().unwrap())
            .collect();
        for (got, want) in read.iter().zip(&dense) {
            assert!((got - want).abs() <= 1e-5, "epoch {epoch}: {got} vs {want}");
        }
        // The family counts the carriers it made and did not see released: each dropped
        // gradient's own (empty) secondary tier, which a drop does not release — and
        // nothing else: the dropped gradient's tiles went back as spares.
        assert_eq!(faults.live(), live + epoch as i64 + 1, "epoch {epoch}");
        assert!(TiledEvictable::primary_tiles(&w_carrier)
            .unwrap()
            .is_empty());
    }
    let dropped_tiers = 5;
    w_carrier.release().unwrap();
    assert_eq!(
        faults.live(),
        dropped_tiers,
        "the tiles, the spares and the seed tier are released"
    );
}
