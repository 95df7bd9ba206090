//! Operation speed against baselines measured in the same run (docs/performance-targets.md):
//!
//! - `tiny_add`: a 4-element f32 `add` through the public API on CPU against a bare `Vec`
//!   allocation plus a 4-element add (target ≤ 6×);
//! - `matmul_1024`: f32 1024² through `call("matmul")` against a direct `faer` call on the
//!   same data, on a one-thread and a two-thread pool (target ≥ 0.9×), and with a permuted
//!   (transposed) operand (target ≥ 0.8× the contiguous figure);
//! - `add_16Mi`: elementwise `add` against copying the same bytes (bandwidth, target ≥ 0.8×);
//! - `reduce_sum_16Mi`: against reading the same bytes (bandwidth, target ≥ 0.8×).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use strideweave::carriers::Cpu;
use strideweave::operation::call;
use strideweave::{Shape, Tensor};

fn tensor(values: &[f32], shape: Shape) -> Tensor {
    Tensor::compact(Cpu::from_f32(values, true).expect("CPU"), shape).expect("tensor")
}

fn tiny_add(c: &mut Criterion) {
    let a = tensor(&[1.0, 2.0, 3.0, 4.0], Shape::new(4).expect("shape"));
    let b = tensor(&[5.0, 6.0, 7.0, 8.0], Shape::new(4).expect("shape"));
    let (x, y) = ([1.0f32, 2.0, 3.0, 4.0], [5.0f32, 6.0, 7.0, 8.0]);
    let mut group = c.benchmark_group("tiny_add_4xf32");
    group.bench_function("vec_alloc_and_add", |bench| {
        bench.iter(|| {
            let (x, y) = black_box((&x, &y));
            x.iter().zip(y).map(|(p, q)| p + q).collect::<Vec<f32>>()
        })
    });
    group.bench_function("strideweave_ops_add", |bench| {
        bench.iter(|| strideweave::ops::add(black_box(&a), black_box(&b)).expect("add"))
    });
    group.finish();
}

fn matmul_1024(c: &mut Criterion) {
    const N: usize = 1024;
    let data: Vec<f32> = (0..N * N)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let lhs = tensor(&data, Shape::new((N, N)).expect("shape"));
    let rhs = tensor(&data, Shape::new((N, N)).expect("shape"));
    let rhs_permuted = rhs.permute(&[1, 0]).expect("transposed view");
    let a = Mat::<f32>::from_fn(N, N, |i, j| data[i + N * j]);
    let b = Mat::<f32>::from_fn(N, N, |i, j| data[i + N * j]);
    let mut out = Mat::<f32>::zeros(N, N);
    for threads in [1usize, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("thread pool");
        let par = if threads == 1 {
            Par::Seq
        } else {
            Par::rayon(threads)
        };
        let mut group = c.benchmark_group(format!("matmul_1024_f32_{threads}_thread"));
        group.sample_size(10);
        group.throughput(Throughput::Elements((2 * N * N * N) as u64));
        group.bench_function("faer_direct", |bench| {
            bench.iter(|| {
                pool.install(|| {
                    matmul(
                        out.as_mut(),
                        Accum::Replace,
                        a.as_ref(),
                        b.as_ref().transpose(),
                        1.0f32,
                        par,
                    )
                })
            })
        });
        group.bench_function("strideweave_contiguous", |bench| {
            bench.iter(|| {
                pool.install(|| {
                    call("matmul", [(&lhs).into(), (&rhs).into()], &[]).expect("matmul")
                })
            })
        });
        group.bench_function("strideweave_permuted_rhs", |bench| {
            bench.iter(|| {
                pool.install(|| {
                    call("matmul", [(&lhs).into(), (&rhs_permuted).into()], &[]).expect("matmul")
                })
            })
        });
        group.finish();
    }
}

fn bandwidth(c: &mut Criterion) {
    const LEN: usize = 16 << 20;
    let data: Vec<f32> = (0..LEN).map(|i| (i % 977) as f32).collect();
    let a = tensor(&data, Shape::new(LEN).expect("shape"));
    let b = tensor(&data, Shape::new(LEN).expect("shape"));
    let bytes = (LEN * 4) as u64;

    let mut group = c.benchmark_group("add_16Mi_f32");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(2 * bytes));
    // The copy reuses a resident destination: the best case a plain copy reaches. The add
    // writes a fresh result each call (the API's contract), so it pays its page mapping too.
    let mut destination = vec![0.0f32; LEN];
    group.bench_function("slice_copy_resident", |bench| {
        bench.iter(|| destination.copy_from_slice(black_box(&data)))
    });
    group.throughput(Throughput::Bytes(3 * bytes));
    group.bench_function("strideweave_add", |bench| {
        bench.iter(|| call("add", [(&a).into(), (&b).into()], &[]).expect("add"))
    });
    group.finish();

    let reduced = tensor(&data, Shape::new((1, LEN)).expect("shape"));
    let mut group = c.benchmark_group("reduce_sum_16Mi_f32");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("read_bytes", |bench| {
        bench.iter(|| {
            let lanes = black_box(&data)
                .chunks_exact(16)
                .fold([0.0f32; 16], |mut acc, chunk| {
                    for (a, x) in acc.iter_mut().zip(chunk) {
                        *a += x;
                    }
                    acc
                });
            lanes.iter().sum::<f32>()
        })
    });
    group.bench_function("strideweave_reduce_sum", |bench| {
        bench.iter(|| call("reduce_sum", [(&reduced).into()], &[]).expect("reduce_sum"))
    });
    group.finish();
}

mod group {
    use super::*;
    criterion_group!(benches, tiny_add, matmul_1024, bandwidth);
}
criterion_main!(group::benches);
