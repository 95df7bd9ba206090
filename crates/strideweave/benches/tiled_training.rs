//! One out-of-core training step against the same step on dense CPU tensors, in one run
//! (docs/performance-targets.md, out-of-core training: ≥ 0.5× the dense step, so the
//! out-of-core cost is overlap-bound, not serialization-bound).
//!
//! The perceptron `relu(x · W1ᵀ) · W2ᵀ` with a 64 × 4096 batch, `W1` 256 × 4096 (4 MiB) and
//! `W2` 8 × 256. Out of core, `W1` is a TiledEvictable of 16 tiles of 256 × 256 on a FileBacked
//! secondary (in the page cache) with a CPU primary bounded to 4 tiles (`W1` is 4× its
//! primary tier); the step is the forward, the streamed backward and
//! `TiledEvictable::add_scaled`. Dense, `W1` is a CPU tensor and the step is the forward, the
//! backward and `W1 - lr·grad`. The ratio is dense time over out-of-core time; the primary
//! tier's peak occupancy (resident tiles plus the most staged tiles alive) is printed after
//! the run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use strideweave::autograd::no_grad;
use strideweave::carriers::{
    Cpu, FileBacked, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileProgress, TileSet,
    TiledEvictable,
};
use strideweave::movement::move_to;
use strideweave::{ops, DType, Result, Shape, Tensor};

const B: usize = 64;
const D: usize = 4096;
const H: usize = 256;
const C: usize = 8;
const TD: usize = 256;
const CAPACITY: usize = 4;
const RATE: f64 = 1e-4;

/// Bounds a primary tier (or only observes) and keeps the most staged tiles reported.
#[derive(Debug, Default)]
struct Meter {
    capacity: Option<usize>,
    peak: AtomicUsize,
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
    }
}

fn values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = (((i as u32).wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0;
            v * scale
        })
        .collect()
}

fn dense(values: &[f32], shape: Shape) -> Tensor {
    Tensor::compact(Cpu::from_f32(values, true).expect("CPU"), shape).expect("tensor")
}

/// The loss rows of the perceptron and their backward.
fn forward_backward(x: &Tensor, w1: &Tensor, w2: &Tensor, targets: &Tensor, ones: &Tensor) {
    let hidden = ops::relu(&ops::matmul(x, w1).expect("matmul")).expect("relu");
    let y = ops::matmul(&hidden, w2).expect("matmul");
    let diff = ops::sub(&y, targets).expect("sub");
    let rows = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff).expect("mul")).expect("sum");
    rows.backward(Some(ones), false).expect("backward");
}

fn training_step(c: &mut Criterion) {
    let inputs = values(B * D, 1, 1.0);
    let weights = values(H * D, 3, 1.0 / 64.0);
    let w2 = dense(
        &values(C * H, 5, 1.0 / 16.0),
        Shape::new((C, H)).expect("shape"),
    );
    let targets = dense(&values(B * C, 7, 1.0), Shape::new((B, C)).expect("shape"));
    let ones = dense(&[1.0; B], Shape::new(B).expect("shape"));

    // Out of core.
    let observer = Arc::new(Meter::default());
    let x_tiled = Tensor::compact(
        TiledEvictable::carrier(
            &Cpu::from_f32(&inputs, true).expect("CPU"),
            &Cpu::from_f32(&[], true).expect("CPU"),
            &[1, D / TD],
            &[B, TD],
            Some(observer.clone()),
        )
        .expect("tiled batch"),
        Shape::new((B, D)).expect("shape"),
    )
    .expect("tensor");
    let file = FileBacked::carrier(None, DType::FLOAT32, true).expect("file");
    move_to(&dense(&weights, Shape::new(H * D).expect("shape")), &file).expect("fill");
    let bound = Arc::new(Meter {
        capacity: Some(CAPACITY),
        ..Meter::default()
    });
    let w1_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).expect("CPU"),
        &file,
        &[1, D / TD],
        &[H, TD],
        Some(bound.clone()),
    )
    .expect("tiled W1");
    let w1_tiled =
        Tensor::compact(w1_carrier.clone(), Shape::new((H, D)).expect("shape")).expect("tensor");
    w1_tiled.set_requires_grad(true).expect("leaf");

    // Dense.
    let x_dense = dense(&inputs, Shape::new((B, D)).expect("shape"));
    let mut w1_dense = dense(&weights, Shape::new((H, D)).expect("shape"));

    let mut group = c.benchmark_group("training_step_w1_4MiB");
    group.sample_size(15);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("dense_cpu", |b| {
        b.iter(|| {
            w1_dense.set_requires_grad(true).expect("leaf");
            forward_backward(&x_dense, &w1_dense, &w2, &targets, &ones);
            let _off = no_grad();
            let g = w1_dense.grad().expect("gradient");
            w1_dense = ops::sub(&w1_dense, &ops::mul(&g, RATE).expect("mul")).expect("sub");
        })
    });
    group.bench_function("out_of_core", |b| {
        b.iter(|| {
            forward_backward(&x_tiled, &w1_tiled, &w2, &targets, &ones);
            let g = w1_tiled.grad().expect("gradient");
            TiledEvictable::add_scaled(&w1_tiled, &g, -RATE).expect("update");
            w1_tiled.set_grad(None).expect("zero");
        })
    });
    group.finish();
    let resident = TiledEvictable::primary_tiles(&w1_carrier)
        .expect("tiles")
        .len();
    let peak = resident
        + observer
            .peak
            .load(Ordering::SeqCst)
            .max(bound.peak.load(Ordering::SeqCst));
    eprintln!(
        "out-of-core W1: peak primary occupancy {peak} of {CAPACITY} tiles \
         ({resident} resident)"
    );
}

mod group {
    use super::*;
    criterion_group!(benches, training_step);
}
criterion_main!(group::benches);
