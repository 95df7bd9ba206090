//! The two forms of the Gpu reductions and products on one device, side by side in one run
//! (docs/gpu-carrier.md, "Reductions" and "Products"):
//!
//! - `reduce_sum_<n>x<m>`: `reduce_sum` of a compact Float32 tensor of `n` results over a
//!   mode of `m` elements, once with the rule forced to a tree and once forced to one
//!   invocation per result (`GpuDevice::set_reduction_rule`), for the shapes around the
//!   rule's switch;
//! - `matmul_<n>x<k>x<m>`: a compact Float32 `(n, k) · (m, k)` product with workgroup tiles
//!   and without (`GpuDevice::set_workgroup_tiles`).
//!
//! Each timed call covers the finished device work (the framework waits on the kernel's
//! completion before it publishes the result). Prints `SKIPPED: <reason>` where no adapter
//! exists.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use strideweave::{ops, Shape};
use strideweave_wgpu::{Gpu, ReductionRule};

/// The `(n, m)` shapes measured: around 1024 × 1024 in both directions, and few results
/// over long modes.
const CASES: [(usize, usize); 9] = [
    (1024, 1024),
    (256, 1024),
    (512, 1024),
    (4096, 1024),
    (1024, 256),
    (1024, 4096),
    (1024, 16384),
    (64, 4096),
    (16, 16384),
];

fn benches(c: &mut Criterion) {
    let gpu = match Gpu::shared() {
        Ok(gpu) => gpu,
        Err(error) => {
            println!("SKIPPED: the reduction benchmarks: {error}");
            return;
        }
    };
    println!("adapter: {}", gpu.device().adapter());
    let chosen = gpu.device().reduction_rule();
    // Forced to a tree: no count of results runs serially. Forced serial: every count does,
    // for every measured mode.
    let tree = ReductionRule::new(usize::MAX, 0).expect("tree rule");
    let serial = ReductionRule::new(0, 32769).expect("serial rule");
    for (n, m) in CASES {
        let x = gpu
            .from_f32(&values(n * m), Shape::new((n, m)).expect("shape"))
            .expect("upload");
        let mut group = c.benchmark_group(format!("reduce_sum_{n}x{m}"));
        for (name, rule) in [("tree", tree), ("serial", serial)] {
            gpu.device().set_reduction_rule(rule);
            black_box(ops::reduce_sum(&x).expect("reduce_sum"));
            group.bench_function(name, |b| {
                b.iter(|| {
                    gpu.device().set_reduction_rule(rule);
                    black_box(ops::reduce_sum(&x).expect("reduce_sum"))
                })
            });
        }
        group.finish();
        println!(
            "{n} x {m}: the device's rule picks {}",
            if chosen.reduces_in_tree(n, m) {
                "tree"
            } else {
                "serial"
            }
        );
    }
    gpu.device().set_reduction_rule(chosen);
    for (n, k, m) in [(128, 128, 128), (256, 256, 256), (255, 257, 129)] {
        let a = values(n * k);
        let b = values(m * k);
        let lhs = gpu
            .from_f32(&a, Shape::new((n, k)).expect("shape"))
            .expect("upload");
        let rhs = gpu
            .from_f32(&b, Shape::new((m, k)).expect("shape"))
            .expect("upload");
        let mut group = c.benchmark_group(format!("matmul_{n}x{k}x{m}"));
        for (name, tiles) in [("tiled", true), ("untiled", false)] {
            gpu.device().set_workgroup_tiles(tiles);
            black_box(ops::matmul(&lhs, &rhs).expect("matmul"));
            group.bench_function(name, |bench| {
                bench.iter(|| {
                    gpu.device().set_workgroup_tiles(tiles);
                    black_box(ops::matmul(&lhs, &rhs).expect("matmul"))
                })
            });
        }
        group.finish();
    }
    gpu.device().set_workgroup_tiles(true);
}

fn values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 2048) as f32 / 512.0 - 2.0)
        .collect()
}

mod group {
    use super::*;
    criterion_group! {
        name = kernel_forms;
        config = Criterion::default().sample_size(10);
        targets = benches
    }
}
criterion_main!(group::kernel_forms);
