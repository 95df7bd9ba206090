//! Out-of-core training with the other ranks' memory as the tier: the tour's part 10 (a first
//! layer four times larger than its primary tier, trained through a TiledEvictable) with the
//! FileBacked file replaced by cluster memory. Rank 0 trains; every other rank holds a share
//! of the layer and serves it. At the end rank 0 compares the weights with the same training
//! on the CPU.
//!
//! ```sh
//! cargo build --release -p strideweave-mpi --example cluster_tier
//! mpirun -n 4 target/release/examples/cluster_tier    # add --oversubscribe on < 4 cores
//! ```

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use strideweave::carriers::{
    Cpu, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileProgress, TileSet, TiledEvictable,
};
use strideweave::movement::move_to;
use strideweave::{ops, DType, Error, Result, Shape, Tensor};
use strideweave_mpi::{Cluster, ClusterLocal, ClusterMemory, Mpi};

/// Samples in the batch.
const B: usize = 64;
/// Input features.
const D: usize = 4096;
/// Hidden units.
const H: usize = 256;
/// Outputs.
const C: usize = 8;
/// Input features per tile of the first layer.
const TD: usize = 256;
/// Tiles of the first layer the primary tier may hold (of 16).
const CAPACITY: usize = 4;
/// Training steps.
const EPOCHS: usize = 6;
/// The learning rate.
const RATE: f64 = 0.002;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cluster_tier failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let mpi = Mpi::init()?;
    let cluster = Cluster::join(mpi.world(), 0)?;
    if !cluster.is_client() {
        let summary = cluster.serve()?;
        println!(
            "rank {}: served {} requests, sent {} and received {} slots, held at most {} slots ({:.1} MiB)",
            cluster.rank(),
            summary.requests,
            summary.slots_sent,
            summary.slots_received,
            summary.peak_slots,
            summary.peak_slots as f64 * 4.0 / f64::from(1 << 20)
        );
        return Ok(());
    }
    let outcome = train(&cluster);
    let stopped = cluster.stop();
    outcome.and(stopped)
}

/// Bounds the primary tier and keeps the most slots it held for any operation.
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
        self.peak.fetch_max(
            progress.resident_slots() + progress.peak_slots(),
            Ordering::SeqCst,
        );
    }
}

/// A deterministic value in [-1, 1).
fn noise(state: &mut u64) -> f32 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((*state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

fn train(cluster: &Cluster) -> Result<()> {
    let mut state = 11u64;
    let scale = 1.0 / (D as f32).sqrt();
    let inputs: Vec<f32> = (0..B * D).map(|_| noise(&mut state)).collect();
    let teacher: Vec<f32> = (0..H * D)
        .map(|_| noise(&mut state) * 2.0 * scale)
        .collect();
    let student: Vec<f32> = teacher
        .iter()
        .map(|&w| w + noise(&mut state) * scale)
        .collect();
    let readout: Vec<f32> = (0..C * H)
        .map(|_| noise(&mut state) / (H as f32).sqrt())
        .collect();
    let dense = |values: &[f32], shape: Shape| -> Result<Tensor> {
        Tensor::compact(Cpu::from_f32(values, true)?, shape)
    };
    let targets = {
        let teacher = dense(&teacher, Shape::new((H, D))?)?;
        let x = dense(&inputs, Shape::new((B, D))?)?;
        let w2 = dense(&readout, Shape::new((C, H))?)?;
        ops::matmul(&ops::relu(&ops::matmul(&x, &teacher)?)?, &w2)?.to_f32_vec()?
    };

    // The first layer lives in the other ranks' memory.
    let far = cluster.memory_from_f32(&student)?;
    let placement: Vec<String> = ClusterMemory::placement(&far)?
        .iter()
        .map(|(rank, _, len)| {
            format!(
                "{:.1} MiB on rank {rank}",
                *len as f64 * 4.0 / f64::from(1 << 20)
            )
        })
        .collect();
    println!(
        "W1 is {H}x{D} Float32 ({} MiB) in {} tiles of {H}x{TD}, held by the other ranks: {}",
        (H * D * 4) >> 20,
        D / TD,
        placement.join(", ")
    );
    let bound = Arc::new(Meter {
        capacity: Some(CAPACITY),
        ..Meter::default()
    });
    let w1_carrier = TiledEvictable::carrier(
        &ClusterLocal::carrier(0, DType::FLOAT32)?,
        &far,
        &[1, D / TD],
        &[H, TD],
        Some(bound.clone()),
    )?;
    let w1 = Tensor::compact(w1_carrier.clone(), Shape::new((H, D))?)?;
    w1.set_requires_grad(true)?;
    // Everything else lives on ClusterLocal, this rank's memory.
    let x = Tensor::compact(
        TiledEvictable::carrier(
            &ClusterLocal::from_f32(&inputs)?,
            &ClusterLocal::carrier(0, DType::FLOAT32)?,
            &[1, D / TD],
            &[B, TD],
            None,
        )?,
        Shape::new((B, D))?,
    )?;
    let w2 = ClusterLocal::tensor(&readout, Shape::new((C, H))?)?;
    let goal = ClusterLocal::tensor(&targets, Shape::new((B, C))?)?;
    let ones = ClusterLocal::tensor(&[1.0; B], Shape::new(B)?)?;
    println!("rank 0 holds at most {CAPACITY} tiles of W1 on its primary tier (ClusterLocal)");
    for epoch in 0..EPOCHS {
        let hidden = ops::relu(&ops::matmul(&x, &w1)?)?;
        let diff = ops::sub(&ops::matmul(&hidden, &w2)?, &goal)?;
        let per_row = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff)?)?;
        let loss: f32 = ClusterLocal::f32s(per_row.carrier())?.iter().sum();
        per_row.backward(Some(&ones), false)?;
        let g = w1
            .grad()
            .ok_or_else(|| Error::Runtime("W1 has no gradient".into()))?;
        TiledEvictable::add_scaled(&w1, &g, -RATE)?;
        w1.set_grad(None)?;
        println!(
            "epoch {epoch}: loss {loss:>9.4}, W1 tiles resident {}, peak on the primary tier {}/{CAPACITY} tiles",
            TiledEvictable::primary_tiles(&w1_carrier)?.len(),
            bound.peak.load(Ordering::SeqCst).div_ceil(H * TD)
        );
    }

    // The same training on the CPU, for comparison.
    let (cx, cw2, cgoal, cones) = (
        dense(&inputs, Shape::new((B, D))?)?,
        dense(&readout, Shape::new((C, H))?)?,
        dense(&targets, Shape::new((B, C))?)?,
        dense(&[1.0; B], Shape::new(B)?)?,
    );
    let mut cw1 = dense(&student, Shape::new((H, D))?)?;
    for _ in 0..EPOCHS {
        cw1.set_requires_grad(true)?;
        let hidden = ops::relu(&ops::matmul(&cx, &cw1)?)?;
        let diff = ops::sub(&ops::matmul(&hidden, &cw2)?, &cgoal)?;
        ops::reduce_sum(&ops::elementwise_mul(&diff, &diff)?)?.backward(Some(&cones), false)?;
        let g = cw1
            .grad()
            .ok_or_else(|| Error::Runtime("the CPU W1 has no gradient".into()))?;
        let stepped = ops::add(&cw1, &ops::mul(&g, -RATE)?)?.to_f32_vec()?;
        cw1 = dense(&stepped, Shape::new((H, D))?)?;
    }
    let trained = {
        let _recording = strideweave::autograd::no_grad();
        let copy = ops::mul(&w1, 1.0)?;
        move_to(&copy, &Cpu::carrier(H * D, DType::FLOAT32, true, false)?)?.to_f32_vec()?
    };
    let largest = trained
        .iter()
        .zip(cw1.to_f32_vec()?)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("largest difference from the same training on the CPU: {largest:.2e}");
    Ok(())
}
