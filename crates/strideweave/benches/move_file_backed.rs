//! `move` CPU → FileBacked of 256 MiB against `std::fs::write` of the same bytes, in one
//! run (target ≥ 0.7× the baseline's throughput, i.e. ≤ 1.43× its time).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use strideweave::carriers::{Cpu, FileBacked};
use strideweave::movement::move_to;
use strideweave::{DType, Shape, Tensor};

const SLOTS: usize = 64 << 20; // 64 Mi Float32 slots = 256 MiB

/// A resident 256 MiB source (written, so its pages are mapped like the baseline's bytes).
fn source(data: &[f32]) -> Tensor {
    let carrier = Cpu::from_f32(data, true).expect("CPU carrier");
    Tensor::compact(carrier, Shape::new(SLOTS).expect("shape")).expect("tensor")
}

fn move_256_mib(c: &mut Criterion) {
    let mut group = c.benchmark_group("move_cpu_to_file_backed_256MiB");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes((SLOTS * 4) as u64));

    let data: Vec<f32> = (0..SLOTS).map(|i| i as f32).collect();
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    let path = std::env::temp_dir().join(format!("strideweave-bench-{}.bin", std::process::id()));
    group.bench_function("std_fs_write", |b| {
        b.iter(|| {
            std::fs::write(&path, &bytes).expect("write");
            std::fs::remove_file(&path).expect("remove");
        })
    });
    group.bench_function("move_to_file_backed", |b| {
        b.iter_batched(
            || {
                let destination = FileBacked::carrier(None, DType::FLOAT32, true).expect("file");
                (source(&data), destination)
            },
            |(tensor, destination)| {
                let moved = move_to(&tensor, &destination).expect("move");
                destination.release().expect("release");
                moved
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

mod group {
    use super::*;
    criterion_group!(benches, move_256_mib);
}
criterion_main!(group::benches);
