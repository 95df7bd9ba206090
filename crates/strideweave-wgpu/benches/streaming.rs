//! Streaming through a GpuHost secondary, and the Gpu kernels against the CPU carrier, each
//! pair measured side by side in one run (docs/gpu-carrier.md, Speed):
//!
//! - `stream_reduce_sum`, `stream_add`: a 1024 × 1024 Float32 tensor as a `TiledEvictable`
//!   over an empty Gpu primary bounded at 4 of its 16 tiles and a GpuHost secondary holding
//!   every tile (each operation streams all 16 tiles onto the device, one upload each),
//!   against the same operation on the dense Gpu tensor;
//! - `kernel_add`, `kernel_reduce_sum` (1024 results over 1024 elements),
//!   `kernel_reduce_sum_row` (one result over 4 Mi elements: the tree reduction's two passes),
//!   `kernel_matmul`: the Gpu kernels against the CPU carrier's on the same values (the
//!   framework waits on a kernel's completion before it publishes the result, so each timed
//!   call covers the finished device work).
//!
//! On a machine without a GPU the device is Mesa's llvmpipe, a software rasterizer on the
//! same cores as the CPU carrier, so the Gpu-against-CPU figures say how the Gpu carrier runs
//! there, not how a GPU would. Prints `SKIPPED: <reason>` where no adapter exists.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use strideweave::carriers::{CapacityPolicy, Cpu, ResidencyPolicy, TiledEvictable};
use strideweave::{ops, DType, Shape, Tensor};
use strideweave_wgpu::Gpu;

const SIDE: usize = 1024;
const TILE: usize = 256;

fn values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 2048) as f32 / 512.0 - 2.0)
        .collect()
}

fn streaming(c: &mut Criterion, gpu: &Gpu) {
    let data = values(SIDE * SIDE);
    let shape = Shape::new((SIDE, SIDE)).expect("shape");
    let dense = gpu.from_f32(&data, shape.clone()).expect("upload");
    let primary = gpu.carrier(0, DType::FLOAT32).expect("primary");
    let secondary = gpu.host_from_f32(&data).expect("secondary");
    let policy: Arc<dyn ResidencyPolicy> = Arc::new(CapacityPolicy::new(4));
    let tiles = SIDE / TILE;
    let tiled = TiledEvictable::carrier(
        &primary,
        &secondary,
        &[tiles, tiles],
        &[TILE, TILE],
        Some(policy),
    )
    .expect("tiled");
    let tiled = Tensor::compact(tiled, shape).expect("tiled tensor");

    let mut group = c.benchmark_group("stream_reduce_sum");
    group.bench_function("dense_gpu", |b| {
        b.iter(|| black_box(ops::reduce_sum(&dense).expect("reduce_sum")))
    });
    group.bench_function("tiled_gpu_gpuhost", |b| {
        b.iter(|| black_box(ops::reduce_sum(&tiled).expect("reduce_sum")))
    });
    group.finish();

    let mut group = c.benchmark_group("stream_add");
    group.bench_function("dense_gpu", |b| {
        b.iter(|| black_box(ops::add(&dense, &dense).expect("add")))
    });
    group.bench_function("tiled_gpu_gpuhost", |b| {
        b.iter(|| black_box(ops::add(&tiled, &tiled).expect("add")))
    });
    group.finish();
}

fn kernels(c: &mut Criterion, gpu: &Gpu) {
    let cases: [(&str, (usize, usize)); 4] = [
        ("kernel_add", (SIDE, SIDE)),
        ("kernel_reduce_sum", (SIDE, SIDE)),
        ("kernel_reduce_sum_row", (1, 1 << 22)),
        ("kernel_matmul", (256, 256)),
    ];
    for (name, (rows, columns)) in cases {
        let data = values(rows * columns);
        let shape = Shape::new((rows, columns)).expect("shape");
        let cpu = Tensor::compact(Cpu::from_f32(&data, true).expect("cpu"), shape.clone())
            .expect("cpu tensor");
        let on_gpu = gpu.from_f32(&data, shape).expect("upload");
        let run = |x: &Tensor| -> Tensor {
            match name {
                "kernel_add" => ops::add(x, x),
                "kernel_reduce_sum" | "kernel_reduce_sum_row" => ops::reduce_sum(x),
                _ => ops::matmul(x, x),
            }
            .expect(name)
        };
        run(&on_gpu);
        let mut group = c.benchmark_group(name);
        group.bench_function("cpu", |b| b.iter(|| black_box(run(&cpu))));
        group.bench_function("gpu", |b| b.iter(|| black_box(run(&on_gpu))));
        group.finish();
    }
}

fn benches(c: &mut Criterion) {
    let gpu = match Gpu::shared() {
        Ok(gpu) => gpu,
        Err(error) => {
            println!("SKIPPED: the streaming benchmarks: {error}");
            return;
        }
    };
    println!("adapter: {}", gpu.device().adapter());
    streaming(c, &gpu);
    kernels(c, &gpu);
}

mod group {
    use super::*;
    criterion_group! {
        name = streaming;
        config = Criterion::default().sample_size(10);
        targets = benches
    }
}
criterion_main!(group::streaming);
