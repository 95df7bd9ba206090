//! Cost of evaluating a layout against hand-written index arithmetic, in one run.
//!
//! Each group walks 4096 coordinates and sums their indices. The baseline named by issue
//! "Foundation" is the hand-written rank-2 `i + j*ld` over a 64×64 domain; the nested group
//! also carries the same walk with its own four strides written into the loop (which the
//! compiler strength-reduces, so it is the harder baseline). The ratio of the medians is the
//! overhead of `Layout` on the element-access path (target ≤ 3× against `i + j*ld`).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use strideweave_layout::Layout;

/// The baseline: hand-written `i + j*ld` over 64×64 coordinates.
fn hand_written_rank2() -> usize {
    let ld = black_box(67usize);
    let mut total = 0usize;
    for j in 0..64 {
        for i in 0..64 {
            total = total.wrapping_add(black_box(i + j * ld));
        }
    }
    total
}

fn rank2(c: &mut Criterion) {
    let layout: Layout = "(64,64):(1,67)".parse().expect("layout");
    let mut group = c.benchmark_group("layout_index/rank2_64x64");
    group.bench_function("hand_written_i_plus_j_ld", |b| b.iter(hand_written_rank2));
    group.bench_function("layout_leaf_coordinates", |b| {
        let layout = black_box(&layout);
        b.iter(|| {
            let mut total = 0usize;
            for j in 0..64 {
                for i in 0..64 {
                    let index = layout.index_of_leaves(&[i, j]).unwrap_or(0);
                    total = total.wrapping_add(black_box(index));
                }
            }
            total
        })
    });
    group.bench_function("layout_ordinal", |b| {
        let layout = black_box(&layout);
        b.iter(|| {
            let mut total = 0usize;
            for ordinal in 0..64 * 64 {
                total = total.wrapping_add(black_box(layout.index_of(ordinal).unwrap_or(0)));
            }
            total
        })
    });
    group.finish();
}

fn nested_rank3(c: &mut Criterion) {
    let layout: Layout = "(16,(4,4),16):(1,(16,64),300)".parse().expect("layout");
    let mut group = c.benchmark_group("layout_index/nested_rank3_16x(4x4)x16");
    group.bench_function("hand_written_i_plus_j_ld", |b| b.iter(hand_written_rank2));
    group.bench_function("hand_written_same_strides", |b| {
        b.iter(|| {
            let (s1, s2, s3) = black_box((16usize, 64usize, 300usize));
            let mut total = 0usize;
            for k in 0..16 {
                for j1 in 0..4 {
                    for j0 in 0..4 {
                        for i in 0..16 {
                            total = total.wrapping_add(black_box(i + j0 * s1 + j1 * s2 + k * s3));
                        }
                    }
                }
            }
            total
        })
    });
    group.bench_function("layout_leaf_coordinates", |b| {
        let layout = black_box(&layout);
        b.iter(|| {
            let mut total = 0usize;
            for k in 0..16 {
                for j1 in 0..4 {
                    for j0 in 0..4 {
                        for i in 0..16 {
                            let index = layout.index_of_leaves(&[i, j0, j1, k]).unwrap_or(0);
                            total = total.wrapping_add(black_box(index));
                        }
                    }
                }
            }
            total
        })
    });
    group.finish();
}

mod group {
    use super::*;
    criterion_group!(benches, rank2, nested_rank3);
}
criterion_main!(group::benches);
