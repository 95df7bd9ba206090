//! The parallelism setting (`strideweave::parallelism`): it round-trips, it is race-free, and
//! the CPU kernels compute bitwise the same results under every setting — `Sequential`,
//! `Threads(1)`, `Threads(2)`, `Threads(4)`, `Machine`, and inside installed rayon pools
//! wider than this machine — for elementwise operations, reductions (whose few-result
//! pieces are set by the work's size alone) and `matmul`; matrix–vector products, whose
//! contraction faer cuts once per thread, agree within the documented tolerance. That small
//! work stays on the calling thread is tested on the chunk-count functions themselves (unit
//! tests of `carriers/cpu/kernels/parallel.rs`).
//!
//! Only [`the_process_wide_setting_round_trips_and_is_race_free`] changes the process-wide
//! setting (and restores it); every other test chooses its setting with the thread-local
//! [`with_parallelism`], which takes precedence, so the tests of this binary can run in
//! parallel without disturbing one another.

use std::fmt::Debug;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use strideweave::carriers::Cpu;
use strideweave::operation::{call, Operand};
use strideweave::parallelism::{self, with_parallelism, Parallelism};
use strideweave::{ops, DType, ErrorKind, Result, Tensor, Value};

/// `Threads(n)`.
fn threads(n: usize) -> Parallelism {
    Parallelism::Threads(NonZeroUsize::new(n).expect("a non-zero count"))
}

/// A compact Float32 CPU tensor of `shape`.
fn f32s(values: &[f32], shape: &str) -> Result<Tensor> {
    Tensor::compact(Cpu::from_f32(values, true)?, shape.parse()?)
}

/// A Float32 CPU tensor holding `values` viewed through `layout`.
fn f32_view(values: &[f32], layout: &str) -> Result<Tensor> {
    Tensor::new(Cpu::from_f32(values, true)?, 0, layout.parse()?)
}

/// A compact Int32 CPU tensor of `shape`.
fn i32s(values: &[i32], shape: &str) -> Result<Tensor> {
    Tensor::compact(Cpu::from_i32(values, true)?, shape.parse()?)
}

/// The single result of the built-in `name`, through the public `call`.
fn op(name: &str, operands: Vec<Operand>) -> Result<Tensor> {
    let mut results = call(name, operands, &[])?;
    assert_eq!(results.len(), 1, "'{name}' makes one result");
    Ok(results.remove(0))
}

/// Values whose sums depend on the summation order: not integers, of mixed magnitudes.
fn awkward(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| {
            let x = (i.wrapping_mul(7919).wrapping_add(seed * 104_729) % 10_007) as f32;
            let scale = [1.0e-3, 1.0, 37.0, 1.0e3][(i / 3 + seed) % 4];
            (x / 997.0 - 5.0) * scale
        })
        .collect()
}

/// A result's elements as comparable bit patterns (Float32 bits, NaN folded to one pattern;
/// Int32 and Bool values as integers).
fn bits(t: &Tensor) -> Result<Vec<u64>> {
    Ok(t.to_values()?
        .into_iter()
        .map(|v| match v {
            Value::Float(x) if x.is_nan() => u64::MAX,
            Value::Float(x) => u64::from((x as f32).to_bits()),
            Value::Int(i) => i as u64,
            Value::Bool(b) => u64::from(b),
        })
        .collect())
}

/// The result's Float32 values in ordinal order.
fn floats(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_values()?
        .into_iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect())
}

/// Runs a computation under one setting and returns its answer.
type Runner<T> = Box<dyn Fn(&(dyn Fn() -> T + Sync)) -> T>;

/// The settings compared, named.
fn settings<T: Send>() -> Vec<(String, Runner<T>)> {
    let scoped = |p: Parallelism| -> (String, Runner<T>) {
        (format!("{p}"), Box::new(move |f| with_parallelism(p, f)))
    };
    let pooled = |size: usize, p: Parallelism| -> (String, Runner<T>) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(size)
            .build()
            .expect("a rayon pool");
        (
            format!("{p} in a {size}-thread pool"),
            // The override is set inside `install`: the closure runs on a pool thread.
            Box::new(move |f| pool.install(|| with_parallelism(p, f))),
        )
    };
    vec![
        scoped(Parallelism::Sequential),
        scoped(threads(1)),
        scoped(threads(2)),
        scoped(threads(4)),
        scoped(Parallelism::Machine),
        pooled(4, threads(4)),
        pooled(3, Parallelism::Machine),
        pooled(1, Parallelism::Machine),
    ]
}

/// What `f` answers under each setting, named.
fn every_setting<T: Send>(f: impl Fn() -> T + Sync) -> Vec<(String, T)> {
    settings::<T>()
        .into_iter()
        .map(|(name, run)| (name, run(&f)))
        .collect()
}

/// Asserts that `f` answers the same under every setting, and returns that answer.
#[track_caller]
fn same_everywhere<T: PartialEq + Debug + Send>(what: &str, f: impl Fn() -> T + Sync) -> T {
    let mut all = every_setting(f).into_iter();
    let (first_name, expected) = all.next().expect("settings");
    for (name, actual) in all {
        assert!(
            actual == expected,
            "{what}: {name} differs from {first_name}"
        );
    }
    expected
}

/// Asserts `|actual - expected| ≤ 1e-5·Σ|terms| + 1e-6` for each result
/// (docs/kernel-semantics.md, Tolerances).
#[track_caller]
fn assert_close(what: &str, actual: &[f64], expected: &[f64], magnitudes: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{what}");
    for (i, ((a, e), m)) in actual.iter().zip(expected).zip(magnitudes).enumerate() {
        assert!(
            (a - e).abs() <= 1e-5 * m + 1e-6,
            "{what}: result {i} is {a}, expected {e}"
        );
    }
}

#[test]
fn the_process_wide_setting_round_trips_and_is_race_free() -> Result<()> {
    let before = parallelism::get();
    let all = [
        Parallelism::Sequential,
        threads(1),
        threads(2),
        threads(4),
        threads(usize::MAX - 1),
        Parallelism::Machine,
    ];
    for p in all {
        parallelism::set(p);
        assert_eq!(parallelism::get(), p);
        // With no override on this thread, the kernels follow the process-wide setting.
        assert_eq!(parallelism::current(), p);
        // An override hides it on this thread only, and does not change it.
        with_parallelism(threads(3), || {
            assert_eq!(parallelism::current(), threads(3));
            assert_eq!(parallelism::get(), p);
            let elsewhere = thread::spawn(parallelism::current)
                .join()
                .expect("a thread");
            assert_eq!(elsewhere, p);
        });
    }
    assert_eq!(
        Parallelism::threads(0).unwrap_err().kind(),
        ErrorKind::Value
    );
    assert!(Parallelism::threads(0)
        .unwrap_err()
        .to_string()
        .contains("got 0"));
    assert_eq!(Parallelism::threads(4)?, threads(4));
    assert_eq!(Parallelism::default(), Parallelism::Machine);

    // Setters on several threads while readers read and kernels run: every value read is
    // one some thread set, and the kernels' results do not move.
    let values = awkward(400_000, 1);
    let (a, b) = (f32s(&values, "400000")?, f32s(&values, "(8,50000)")?);
    let expected_sum = with_parallelism(Parallelism::Sequential, || ops::add(&a, &a))?;
    let expected_reduce = with_parallelism(Parallelism::Sequential, || ops::reduce_sum(&b))?;
    let (expected_sum, expected_reduce) = (bits(&expected_sum)?, bits(&expected_reduce)?);
    let done = AtomicBool::new(false);
    thread::scope(|scope| -> Result<()> {
        for (t, p) in all.iter().enumerate() {
            let done = &done;
            scope.spawn(move || {
                let mut rounds = 0usize;
                while !done.load(Ordering::Relaxed) || rounds < 1000 {
                    parallelism::set(if rounds.is_multiple_of(2) {
                        *p
                    } else {
                        all[(t + 1) % all.len()]
                    });
                    assert!(all.contains(&parallelism::get()));
                    rounds += 1;
                }
            });
        }
        for _ in 0..4 {
            assert_eq!(bits(&ops::add(&a, &a)?)?, expected_sum);
            assert_eq!(bits(&ops::reduce_sum(&b)?)?, expected_reduce);
        }
        done.store(true, Ordering::Relaxed);
        Ok(())
    })?;
    assert!(all.contains(&parallelism::get()));

    // The process-wide setting itself, not only overrides, reaches the kernels.
    for p in [Parallelism::Sequential, threads(4), Parallelism::Machine] {
        parallelism::set(p);
        assert_eq!(bits(&ops::add(&a, &a)?)?, expected_sum, "{p}");
        assert_eq!(bits(&ops::reduce_sum(&b)?)?, expected_reduce, "{p}");
    }
    parallelism::set(before);
    assert_eq!(parallelism::get(), before);
    Ok(())
}

#[test]
fn large_elementwise_results_are_bitwise_the_same_under_every_setting() -> Result<()> {
    const N: usize = 1 << 20;
    let x = awkward(N, 2);
    let y = awkward(N, 3);
    let a = f32s(&x, "(1024,1024)")?;
    let b = f32s(&y, "(1024,1024)")?;
    let b_t = b.permute(&[1, 0])?;
    let row = f32s(&y[..1024], "(1,1024)")?;
    let sums = same_everywhere("add", || {
        bits(&ops::add(&a, &b).expect("add")).expect("bits")
    });
    // Element by element, as the Generic reference computes it.
    let expected: Vec<u64> = x
        .iter()
        .zip(&y)
        .map(|(p, q)| u64::from((p + q).to_bits()))
        .collect();
    assert!(
        sums == expected,
        "add differs from element-by-element addition"
    );
    same_everywhere("add, transposed rhs", || {
        bits(&ops::add(&a, &b_t).expect("add")).expect("bits")
    });
    same_everywhere("add, broadcast rhs", || {
        bits(&ops::add(&a, &row).expect("add")).expect("bits")
    });
    same_everywhere("mul by a scalar", || {
        bits(&ops::mul(&a, Value::Float(0.3)).expect("mul")).expect("bits")
    });
    same_everywhere("exp", || bits(&ops::exp(&a).expect("exp")).expect("bits"));
    same_everywhere("lt", || {
        bits(&op("lt", vec![(&a).into(), (&b_t).into()]).expect("lt")).expect("bits")
    });
    let cond = op("lt", vec![(&a).into(), (&b).into()])?;
    same_everywhere("select", || {
        bits(&ops::select(&cond, &a, &b_t).expect("select")).expect("bits")
    });
    // Int32: exact, and the overflow reported is the first in ordinal order everywhere.
    let ints: Vec<i32> = (0..N as i32)
        .map(|i| if i % 300_001 == 300_000 { i32::MAX } else { i })
        .collect();
    let p = i32s(&ints, "1048576")?;
    let ones = i32s(&vec![1; N], "1048576")?;
    same_everywhere("int32 add overflow", || {
        ops::add(&p, &ones).expect_err("overflows").to_string()
    });
    let q = i32s(&(0..N as i32).collect::<Vec<_>>(), "1048576")?;
    same_everywhere("int32 add", || {
        bits(&ops::add(&q, &ones).expect("add")).expect("bits")
    });
    Ok(())
}

/// `reduce_sum` over mode 1 in f64, and the sums of magnitudes, from `values` read at
/// `index(i, j)`.
fn reference_sums(
    values: &[f32],
    (n, k): (usize, usize),
    index: impl Fn(usize, usize) -> usize,
) -> (Vec<f64>, Vec<f64>) {
    (0..n)
        .map(|i| {
            (0..k).fold((0.0, 0.0), |(s, m), j| {
                let x = f64::from(values[index(i, j)]);
                (s + x, m + x.abs())
            })
        })
        .unzip()
}

#[test]
fn large_reductions_are_bitwise_the_same_under_every_setting() -> Result<()> {
    const N: usize = 1 << 20;
    let values = awkward(N, 4);
    // (shape or layout, (n, k), slot of (i, j)): one long row (horizontal pieces), few rows
    // read vertically and horizontally (pieces), many results (split results), transposed.
    type Index = fn(usize, usize) -> usize;
    let cases: [(&str, (usize, usize), Index); 6] = [
        ("(1,1048576):(1,1)", (1, N), |_, j| j),
        ("(3,349525):(1,3)", (3, 349_525), |i, j| i + 3 * j),
        ("(3,349525):(349525,1)", (3, 349_525), |i, j| {
            349_525 * i + j
        }),
        ("(40,26214):(1,40)", (40, 26_214), |i, j| i + 40 * j),
        ("(1024,1024):(1,1024)", (1024, 1024), |i, j| i + 1024 * j),
        ("(1024,1024):(1024,1)", (1024, 1024), |i, j| 1024 * i + j),
    ];
    for (layout, dims, index) in cases {
        let x = f32_view(&values, layout)?;
        let (expected, magnitudes) = reference_sums(&values, dims, index);
        for accumulator in [DType::FLOAT32, DType::FLOAT64] {
            let what = format!("reduce_sum of {layout} in {accumulator}");
            same_everywhere(&what, || {
                bits(&ops::reduce_sum_with(&x, accumulator).expect("reduce_sum")).expect("bits")
            });
            let sums = with_parallelism(threads(4), || ops::reduce_sum_with(&x, accumulator))?;
            assert_close(&what, &floats(&sums)?, &expected, &magnitudes);
        }
        same_everywhere(&format!("reduce_max of {layout}"), || {
            bits(&op("reduce_max", vec![(&x).into()]).expect("reduce_max")).expect("bits")
        });
    }
    // NaN propagates under every setting.
    let mut with_nan = values.clone();
    with_nan[N - 5] = f32::NAN;
    let x = f32s(&with_nan, "(1,1048576)")?;
    let sums = same_everywhere("reduce_sum with a NaN", || {
        bits(&ops::reduce_sum(&x).expect("reduce_sum")).expect("bits")
    });
    assert_eq!(sums, [u64::MAX]);
    // Int32: exact, and an overflow names the same result ordinal everywhere.
    let ints: Vec<i32> = (0..N as i32).map(|i| (i % 2001) - 1000).collect();
    let x = i32s(&ints, "(2,524288)")?;
    same_everywhere("int32 reduce_sum", || {
        bits(&ops::reduce_sum(&x).expect("reduce_sum")).expect("bits")
    });
    // Column-major (2, 524288): even slots are result 0, which overflows; result 1 does not.
    let big: Vec<i32> = (0..N)
        .map(|i| if i.is_multiple_of(2) { i32::MAX } else { 1 })
        .collect();
    let x = i32s(&big, "(2,524288)")?;
    let message = same_everywhere("int32 reduce_sum overflow", || {
        ops::reduce_sum(&x).expect_err("overflows").to_string()
    });
    assert!(message.contains("result ordinal 0"), "{message}");
    Ok(())
}

/// `lhs·rhsᵀ` in f64 and the sums of magnitudes, both operands column-major.
fn reference_product(
    lhs: &[f32],
    rhs: &[f32],
    (n, m, k): (usize, usize, usize),
) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; n * m];
    let mut magnitudes = vec![0.0; n * m];
    for j in 0..m {
        for kk in 0..k {
            let r = f64::from(rhs[j + m * kk]);
            for i in 0..n {
                let term = f64::from(lhs[i + n * kk]) * r;
                out[i + n * j] += term;
                magnitudes[i + n * j] += term.abs();
            }
        }
    }
    (out, magnitudes)
}

#[test]
fn large_matmuls_are_the_same_under_every_setting() -> Result<()> {
    // Square and a long contraction (bitwise everywhere), and a matrix-vector product each
    // way round (faer cuts their contraction once per thread: within the tolerance).
    for (n, m, k) in [
        (256, 256, 256),
        (64, 48, 8192),
        (1, 512, 4096),
        (2048, 1, 1024),
    ] {
        let vector = n == 1 || m == 1;
        let lhs = awkward(n * k, 5);
        let rhs = awkward(m * k, 6);
        let a = f32s(&lhs, &format!("({n},{k})"))?;
        let b = f32s(&rhs, &format!("({m},{k})"))?;
        // The same rhs stored k-fastest and read through a permuted view.
        let mut rows = vec![0.0; m * k];
        for j in 0..m {
            for kk in 0..k {
                rows[kk + k * j] = rhs[j + m * kk];
            }
        }
        let b_t = f32s(&rows, &format!("({k},{m})"))?.permute(&[1, 0])?;
        let (expected, magnitudes) = reference_product(&lhs, &rhs, (n, m, k));
        for accumulator in [DType::FLOAT32, DType::FLOAT64] {
            for (read, rhs) in [("", &b), (", permuted rhs", &b_t)] {
                let what = format!("matmul ({n},{k})·({m},{k}) in {accumulator}{read}");
                let results = every_setting(|| {
                    bits(&ops::matmul_with(&a, rhs, accumulator).expect("matmul")).expect("bits")
                });
                let (first_name, first) = &results[0];
                for (name, product) in &results {
                    if !vector {
                        assert!(product == first, "{what}: {name} differs from {first_name}");
                    }
                    let actual: Vec<f64> = product
                        .iter()
                        .map(|&b| f64::from(f32::from_bits(b as u32)))
                        .collect();
                    assert_close(&format!("{what}, {name}"), &actual, &expected, &magnitudes);
                }
            }
        }
    }
    Ok(())
}
