//! Element read and write through a tensor against raw slice access, in one run.
//!
//! Each benchmark touches all 4096 elements of a 64×64 Float32 tensor on a CPU carrier; the
//! baselines do the same on a `Vec<f32>`. The ratio is the cost of the checked, versioned,
//! layout-mapped element path (which kernels do not use: they walk coalesced runs).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use strideweave::carriers::Cpu;
use strideweave::{DType, Shape, Tensor, Value};

fn element_access(c: &mut Criterion) {
    let carrier = Cpu::carrier(64 * 64, DType::FLOAT32, true, false).expect("CPU carrier");
    let tensor = Tensor::compact(carrier, Shape::new((64, 64)).expect("shape")).expect("tensor");
    let mut raw = vec![0.0f32; 64 * 64];

    let mut group = c.benchmark_group("element_access/read_64x64");
    group.bench_function("raw_slice", |b| {
        b.iter(|| {
            let mut total = 0.0f32;
            for j in 0..64 {
                for i in 0..64 {
                    total += black_box(raw[i + 64 * j]);
                }
            }
            total
        })
    });
    group.bench_function("tensor_get_leaves", |b| {
        b.iter(|| {
            let mut total = 0.0f64;
            for j in 0..64 {
                for i in 0..64 {
                    if let Ok(Value::Float(x)) = tensor.get_leaves(&[i, j]) {
                        total += black_box(x);
                    }
                }
            }
            total
        })
    });
    group.finish();

    let mut group = c.benchmark_group("element_access/write_64x64");
    group.bench_function("raw_slice", |b| {
        b.iter(|| {
            for j in 0..64 {
                for i in 0..64 {
                    raw[black_box(i + 64 * j)] = 1.5;
                }
            }
        })
    });
    group.bench_function("tensor_set_leaves", |b| {
        b.iter(|| {
            for j in 0..64 {
                for i in 0..64 {
                    let _ = black_box(tensor.set_leaves(&[i, j], Value::Float(1.5)));
                }
            }
        })
    });
    group.finish();
}

mod group {
    use super::*;
    criterion_group!(benches, element_access);
}
criterion_main!(group::benches);
