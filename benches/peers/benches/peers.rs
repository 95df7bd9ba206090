//! StrideWeave beside candle-core, measured in one criterion run on the same sizes.
//!
//! Every group holds one case; its benchmark ids name the library (`tiny_add/strideweave`,
//! `tiny_add/candle`, `tiny_add/bare_vec`), so the ratios between them are read within the run
//! that measured them. See README.md beside this package's Cargo.toml.
//!
//! - `tiny_add`: 4-element Float32 `add` (`ops::add`, `operation::call("add")`, candle
//!   `Tensor::add`, a bare `Vec` allocation plus the add);
//! - `tiny_add_i32`, `tiny_eq_bool`: the same on Int32, and `eq` on Bool (candle has no Bool
//!   dtype: its `eq` on U8 operands, giving U8, stands in);
//! - `tiny_reduce_sum`: the sum of 4 Float32 elements, StrideWeave `reduce_sum` over mode 1
//!   of a (1,4) tensor against candle `sum_keepdim(1)` on (1,4);
//! - `tiny_matmul_4x4`: StrideWeave `ops::matmul(a, b)`, which computes (N,K)·(M,K) → (N,M),
//!   against candle `a.matmul(&b.t())` on the same logical matrices;
//! - `matmul_1024_1_thread`: the same product at 1024², single-threaded on both.

use std::hint::black_box;

use candle_core::{Device, Tensor as CandleTensor};
use criterion::{criterion_group, Criterion, Throughput};
use strideweave::carriers::Cpu;
use strideweave::operation::call;
use strideweave::{ops, DType, Shape, Tensor, Value};

/// A compact (column-major: first mode fastest) Float32 CPU tensor.
fn tensor(values: &[f32], shape: Shape) -> Tensor {
    Tensor::compact(Cpu::from_f32(values, true).expect("CPU"), shape).expect("tensor")
}

/// A compact Int32 CPU tensor.
fn tensor_i32(values: &[i32], shape: Shape) -> Tensor {
    Tensor::compact(Cpu::from_i32(values, true).expect("CPU"), shape).expect("tensor")
}

/// A compact Bool CPU tensor.
fn tensor_bool(values: &[bool], shape: Shape) -> Tensor {
    let values: Vec<Value> = values.iter().map(|&b| Value::Bool(b)).collect();
    Tensor::compact(
        Cpu::from_values(&values, DType::BOOL, true).expect("CPU"),
        shape,
    )
    .expect("tensor")
}

/// A candle tensor on the CPU device.
fn candle<T: candle_core::WithDType, S: Into<candle_core::Shape>>(
    values: &[T],
    shape: S,
) -> CandleTensor {
    CandleTensor::from_slice(values, shape, &Device::Cpu).expect("candle tensor")
}

/// The Float32 values of a StrideWeave tensor, in colexicographic order.
fn floats(t: &Tensor) -> Vec<f32> {
    t.to_values()
        .expect("values")
        .into_iter()
        .map(|v| match v {
            Value::Float(x) => x as f32,
            other => panic!("expected a float, got {other:?}"),
        })
        .collect()
}

fn tiny_add(c: &mut Criterion) {
    let (x, y) = ([1.0f32, 2.0, 3.0, 4.0], [5.0f32, 6.0, 7.0, 8.0]);
    let a = tensor(&x, Shape::new(4).expect("shape"));
    let b = tensor(&y, Shape::new(4).expect("shape"));
    let (ca, cb) = (candle(&x, 4), candle(&y, 4));
    let expected: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
    assert_eq!(floats(&ops::add(&a, &b).expect("add")), expected);
    assert_eq!(
        floats(&call("add", [(&a).into(), (&b).into()], &[]).expect("add")[0]),
        expected
    );
    assert_eq!(
        ca.add(&cb).expect("add").to_vec1::<f32>().expect("values"),
        expected
    );

    let mut group = c.benchmark_group("tiny_add");
    group.bench_function("bare_vec", |bench| {
        bench.iter(|| {
            let (x, y) = black_box((&x, &y));
            x.iter().zip(y).map(|(p, q)| p + q).collect::<Vec<f32>>()
        })
    });
    // The floor under every result, with no dispatch at all: the raw sum stored in a fresh
    // CPU carrier record (class, version, release state, sequence-locked inline slots) and
    // wrapped in a fresh tensor record (identity, gradient state) found by its shape — the
    // two shared records each StrideWeave result is.
    let shape = a.shape().clone();
    let records = |x: &[f32; 4], y: &[f32; 4], shape: &Shape| {
        let sum: [f32; 4] = std::array::from_fn(|i| x[i] + y[i]);
        let carrier = Cpu::from_f32(&sum, true).expect("carrier");
        Tensor::compact(carrier, shape.clone()).expect("tensor")
    };
    assert_eq!(floats(&records(&x, &y, &shape)), expected);
    group.bench_function("result_records", |bench| {
        bench.iter(|| {
            let (x, y, shape) = black_box((&x, &y, &shape));
            records(x, y, shape)
        })
    });
    group.bench_function("strideweave", |bench| {
        bench.iter(|| ops::add(black_box(&a), black_box(&b)).expect("add"))
    });
    group.bench_function("strideweave_call", |bench| {
        bench.iter(|| call("add", [black_box(&a).into(), black_box(&b).into()], &[]).expect("add"))
    });
    group.bench_function("candle", |bench| {
        bench.iter(|| black_box(&ca).add(black_box(&cb)).expect("add"))
    });
    group.finish();
}

fn tiny_add_i32(c: &mut Criterion) {
    let (x, y) = ([1i32, 2, 3, 4], [5i32, 6, 7, 8]);
    let a = tensor_i32(&x, Shape::new(4).expect("shape"));
    let b = tensor_i32(&y, Shape::new(4).expect("shape"));
    let (ca, cb) = (candle(&x, 4), candle(&y, 4));
    let expected: Vec<i32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
    let values = ops::add(&a, &b).expect("add").to_values().expect("values");
    let expected_values: Vec<Value> = expected.iter().map(|&v| Value::Int(v.into())).collect();
    assert_eq!(values, expected_values);
    assert_eq!(
        ca.add(&cb).expect("add").to_vec1::<i32>().expect("values"),
        expected
    );

    let mut group = c.benchmark_group("tiny_add_i32");
    group.bench_function("bare_vec", |bench| {
        bench.iter(|| {
            let (x, y) = black_box((&x, &y));
            x.iter().zip(y).map(|(p, q)| p + q).collect::<Vec<i32>>()
        })
    });
    group.bench_function("strideweave", |bench| {
        bench.iter(|| ops::add(black_box(&a), black_box(&b)).expect("add"))
    });
    group.bench_function("candle", |bench| {
        bench.iter(|| black_box(&ca).add(black_box(&cb)).expect("add"))
    });
    group.finish();
}

fn tiny_eq_bool(c: &mut Criterion) {
    let (x, y) = ([true, false, true, false], [true, true, false, false]);
    let a = tensor_bool(&x, Shape::new(4).expect("shape"));
    let b = tensor_bool(&y, Shape::new(4).expect("shape"));
    let (xu, yu) = (x.map(u8::from), y.map(u8::from));
    let (ca, cb) = (candle(&xu, 4), candle(&yu, 4));
    let expected: Vec<bool> = x.iter().zip(&y).map(|(p, q)| p == q).collect();
    let values = ops::eq(&a, &b).expect("eq").to_values().expect("values");
    let expected_values: Vec<Value> = expected.iter().map(|&v| Value::Bool(v)).collect();
    assert_eq!(values, expected_values);
    let expected_u8: Vec<u8> = expected.iter().map(|&v| u8::from(v)).collect();
    assert_eq!(
        ca.eq(&cb).expect("eq").to_vec1::<u8>().expect("values"),
        expected_u8
    );

    let mut group = c.benchmark_group("tiny_eq_bool");
    group.bench_function("bare_vec", |bench| {
        bench.iter(|| {
            let (x, y) = black_box((&x, &y));
            x.iter().zip(y).map(|(p, q)| p == q).collect::<Vec<bool>>()
        })
    });
    group.bench_function("strideweave", |bench| {
        bench.iter(|| ops::eq(black_box(&a), black_box(&b)).expect("eq"))
    });
    group.bench_function("candle_u8", |bench| {
        bench.iter(|| black_box(&ca).eq(black_box(&cb)).expect("eq"))
    });
    group.finish();
}

fn tiny_reduce_sum(c: &mut Criterion) {
    let x = [1.0f32, 2.0, 3.0, 4.0];
    let a = tensor(&x, Shape::new((1, 4)).expect("shape"));
    let ca = candle(&x, (1, 4));
    assert_eq!(floats(&ops::reduce_sum(&a).expect("reduce_sum")), [10.0]);
    assert_eq!(
        ca.sum_keepdim(1)
            .expect("sum")
            .to_vec2::<f32>()
            .expect("values"),
        [[10.0]]
    );

    let mut group = c.benchmark_group("tiny_reduce_sum");
    group.bench_function("bare_vec", |bench| {
        bench.iter(|| vec![black_box(&x).iter().sum::<f32>()])
    });
    group.bench_function("strideweave", |bench| {
        bench.iter(|| ops::reduce_sum(black_box(&a)).expect("reduce_sum"))
    });
    group.bench_function("candle", |bench| {
        bench.iter(|| black_box(&ca).sum_keepdim(1).expect("sum"))
    });
    group.finish();
}

/// The same logical square matrices `A` and `B` for both libraries: StrideWeave's compact
/// tensors are column-major (first mode fastest), candle's row-major. `rows` holds `A` and
/// `B` row-major, for the reference product and the bare baseline.
struct MatmulCase {
    sw: (Tensor, Tensor),
    candle: (CandleTensor, CandleTensor),
    rows: (Vec<f32>, Vec<f32>),
}

fn matmul_case(n: usize, value: impl Fn(usize, usize, usize) -> f32) -> MatmulCase {
    // `value(which, i, j)` is element (i, j) of operand `which` (0 for A, 1 for B).
    let row_major = |which| -> Vec<f32> {
        (0..n * n)
            .map(|idx| value(which, idx / n, idx % n))
            .collect()
    };
    let col_major = |which| -> Vec<f32> {
        (0..n * n)
            .map(|idx| value(which, idx % n, idx / n))
            .collect()
    };
    let shape = || Shape::new((n, n)).expect("shape");
    MatmulCase {
        sw: (
            tensor(&col_major(0), shape()),
            tensor(&col_major(1), shape()),
        ),
        candle: (candle(&row_major(0), (n, n)), candle(&row_major(1), (n, n))),
        rows: (row_major(0), row_major(1)),
    }
}

/// Checks that both libraries compute `C = A·Bᵀ` and agree with a plain triple loop on
/// every element, within `tolerance` relative to the row's magnitude.
fn check_matmul(case: &MatmulCase, n: usize, tolerance: f32) {
    let sw = ops::matmul(&case.sw.0, &case.sw.1).expect("matmul");
    assert_eq!(sw.shape(), &Shape::new((n, n)).expect("shape"));
    let sw = floats(&sw); // column-major: element (i, j) at i + n·j
    let cd = case
        .candle
        .0
        .matmul(&case.candle.1.t().expect("transpose"))
        .expect("matmul")
        .flatten_all()
        .expect("flatten")
        .to_vec1::<f32>()
        .expect("values"); // row-major: element (i, j) at i·n + j
    let (a, b) = &case.rows;
    for i in 0..n {
        for j in 0..n {
            let reference: f64 = (0..n)
                .map(|k| f64::from(a[i * n + k]) * f64::from(b[j * n + k]))
                .sum();
            let scale: f64 = (0..n)
                .map(|k| (f64::from(a[i * n + k]) * f64::from(b[j * n + k])).abs())
                .sum::<f64>()
                .max(1.0);
            let limit = f64::from(tolerance) * scale;
            let (s, q) = (f64::from(sw[i + n * j]), f64::from(cd[i * n + j]));
            assert!(
                (s - reference).abs() <= limit && (q - reference).abs() <= limit,
                "C({i},{j}): strideweave {s}, candle {q}, reference {reference}"
            );
        }
    }
}

fn tiny_matmul(c: &mut Criterion) {
    const N: usize = 4;
    let case = matmul_case(N, |which, i, j| (1 + i + N * j + 16 * which) as f32);
    // Small integers: every product and sum is exact in f32.
    check_matmul(&case, N, 0.0);
    let (a, b) = &case.sw;
    let (ca, cb) = &case.candle;
    let (ra, rb) = &case.rows;

    let mut group = c.benchmark_group("tiny_matmul_4x4");
    group.bench_function("bare_vec", |bench| {
        bench.iter(|| {
            let (ra, rb) = black_box((ra, rb));
            let mut out = vec![0.0f32; N * N];
            for i in 0..N {
                for j in 0..N {
                    out[i * N + j] = (0..N).map(|k| ra[i * N + k] * rb[j * N + k]).sum();
                }
            }
            out
        })
    });
    group.bench_function("strideweave", |bench| {
        bench.iter(|| ops::matmul(black_box(a), black_box(b)).expect("matmul"))
    });
    group.bench_function("candle", |bench| {
        bench.iter(|| {
            black_box(ca)
                .matmul(&black_box(cb).t().expect("transpose"))
                .expect("matmul")
        })
    });
    group.finish();
}

fn matmul_1024(c: &mut Criterion) {
    const N: usize = 1024;
    // The data of crates/strideweave/benches/operations.rs, one operand offset so A ≠ B.
    let case = matmul_case(N, |which, i, j| {
        (((i * N + j) * 7919 + which * 13) % 1000) as f32 / 1000.0
    });
    // One thread on both: StrideWeave's kernel runs faer on the current rayon pool (so a
    // one-thread pool, as in operations.rs); candle's gemm call reads RAYON_NUM_THREADS,
    // which `main` sets to 1 before anything runs.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("thread pool");
    pool.install(|| check_matmul(&case, N, 1e-4));
    let (a, b) = &case.sw;
    let (ca, cb) = &case.candle;

    let mut group = c.benchmark_group("matmul_1024_1_thread");
    group.sample_size(10);
    group.throughput(Throughput::Elements((2 * N * N * N) as u64));
    group.bench_function("strideweave", |bench| {
        bench.iter(|| pool.install(|| ops::matmul(black_box(a), black_box(b)).expect("matmul")))
    });
    group.bench_function("candle", |bench| {
        bench.iter(|| {
            pool.install(|| {
                black_box(ca)
                    .matmul(&black_box(cb).t().expect("transpose"))
                    .expect("matmul")
            })
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    tiny_add,
    tiny_add_i32,
    tiny_eq_bool,
    tiny_reduce_sum,
    tiny_matmul,
    matmul_1024
);

fn main() {
    // candle-core's CPU matmul takes its thread count from RAYON_NUM_THREADS on every call
    // (candle_core::utils::get_num_threads); this also sizes rayon's global pool, which is
    // built lazily, so it is set before any benchmark runs.
    std::env::set_var("RAYON_NUM_THREADS", "1");
    benches();
    Criterion::default().configure_from_args().final_summary();
}
