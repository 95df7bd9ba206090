//! Sums and products on the Gpu accumulate as the core's CPU kernels do
//! (docs/kernel-semantics.md, `reduce_sum` and `matmul`): Int32 exactly, with only the final
//! narrowing checked (an Overflow error, nothing published), and Float32 in binary64 when the
//! plan's accumulator dtype is Float64.

mod common;

use common::{
    assert_within_an_ulp, compact_pair, download, f64_gpu, float_pair, numbers, random_int,
    random_int_pair, same_outcome, shared_gpu, ulps, Rng,
};
use strideweave::{ops, DType, ErrorKind, Result, Shape, Tensor};

/// Int32 `reduce_sum` against the CPU on random layouts and values: small values at the
/// workgroup edges, and values near the range ends whose partial sums leave Int32 while some
/// totals come back (exact: `[MAX, 1, -1]` sums to MAX) and others do not (Overflow on both).
#[test]
fn int32_sums_are_exact_and_only_the_total_is_checked() -> Result<()> {
    let Some(gpu) = shared_gpu("int32_sums_are_exact_and_only_the_total_is_checked") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_1001);
    for shape in [(1, 1), (255, 3), (257, 2), (16, 16), (3, 300)] {
        let values: Vec<i32> = (0..shape.0 * shape.1)
            .map(|_| rng.below(20001) as i32 - 10000)
            .collect();
        let (cpu, uploaded) = random_int_pair(&gpu, &mut rng, shape, &values)?;
        let overflowed = same_outcome(
            "small sums",
            ops::reduce_sum(&cpu),
            ops::reduce_sum(&uploaded),
        )?;
        assert!(!overflowed);
    }
    let (cpu, uploaded) = random_int_pair(&gpu, &mut rng, (1, 3), &[i32::MAX, 1, -1])?;
    same_outcome(
        "[MAX, 1, -1]",
        ops::reduce_sum(&cpu),
        ops::reduce_sum(&uploaded),
    )?;
    assert_eq!(
        numbers(&ops::reduce_sum(&uploaded)?)?,
        [f64::from(i32::MAX)]
    );
    let mut overflows = 0;
    for round in 0..40 {
        let shape = (1 + rng.below(5), 1 + rng.below(4));
        let values: Vec<i32> = (0..shape.0 * shape.1)
            .map(|_| random_int(&mut rng))
            .collect();
        let (cpu, uploaded) = random_int_pair(&gpu, &mut rng, shape, &values)?;
        let what = format!("round {round}: {shape:?} {values:?}");
        if same_outcome(&what, ops::reduce_sum(&cpu), ops::reduce_sum(&uploaded))? {
            overflows += 1;
            assert_eq!(uploaded.version(), 0);
            assert_eq!(numbers(&uploaded)?, numbers(&cpu)?);
        }
    }
    assert!(
        overflows > 5 && overflows < 35,
        "{overflows} of 40 overflowed"
    );
    Ok(())
}

/// The first overflowing result is named, and nothing is published.
#[test]
fn an_int32_sum_overflow_names_the_result_and_publishes_nothing() -> Result<()> {
    let Some(gpu) = shared_gpu("an_int32_sum_overflow_names_the_result") else {
        return Ok(());
    };
    // Rows 0 and 2 fit; rows 1 and 3 overflow (MAX + 1, MIN − 1): row 1 is named.
    let x = gpu.from_i32(
        &[5, i32::MAX, -3, i32::MIN, 6, 1, 4, -1],
        Shape::new((4, 2))?,
    )?;
    let error = ops::reduce_sum(&x).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Overflow, "{error}");
    assert!(
        error.to_string().ends_with(
            "'reduce_sum' overflows Int32: the sum over mode 1 at result ordinal 1 leaves the \
             Int32 range"
        ),
        "{error}"
    );
    assert_eq!(x.version(), 0);
    let lhs = gpu.from_i32(&[1, 65536, 2, 65536], Shape::new((2, 2))?)?;
    let rhs = gpu.from_i32(&[3, 65536, 1, 1], Shape::new((2, 2))?)?;
    // out(i, j) = lhs(i, 0)·rhs(j, 0) + lhs(i, 1)·rhs(j, 1): only out(1, 1) = 65536·65536 +
    // 65536 leaves the range.
    let error = ops::matmul(&lhs, &rhs).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Overflow, "{error}");
    assert!(
        error
            .to_string()
            .ends_with("'matmul' overflows Int32: out(1, 1) leaves the Int32 range"),
        "{error}"
    );
    assert_eq!((lhs.version(), rhs.version()), (0, 0));
    Ok(())
}

/// Int32 `matmul` against the CPU on random layouts and values: exact 64-bit products whose
/// running sum may pass 2^63 (beyond an i64) and still come back into range, and random
/// values near the ends where some results overflow on both carriers.
#[test]
fn int32_products_are_exact_and_only_the_total_is_checked() -> Result<()> {
    let Some(gpu) = shared_gpu("int32_products_are_exact_and_only_the_total_is_checked") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_1002);
    for (n, m, k) in [(1, 1, 1), (16, 17, 5), (257, 1, 3), (3, 4, 300)] {
        let a: Vec<i32> = (0..n * k).map(|_| rng.below(401) as i32 - 200).collect();
        let b: Vec<i32> = (0..m * k).map(|_| rng.below(401) as i32 - 200).collect();
        let (ca, ga) = random_int_pair(&gpu, &mut rng, (n, k), &a)?;
        let (cb, gb) = random_int_pair(&gpu, &mut rng, (m, k), &b)?;
        let overflowed = same_outcome(
            "small products",
            ops::matmul(&ca, &cb),
            ops::matmul(&ga, &gb),
        )?;
        assert!(!overflowed);
    }
    // MIN·MIN twice is 2^63; two MIN·MAX and −65536·65536 bring the sum back to 7.
    let (min, max) = (i32::MIN, i32::MAX);
    let a = [min, min, min, min, -65536, 1];
    let b = [min, min, max, max, 65536, 7];
    let (ca, ga) = random_int_pair(&gpu, &mut rng, (1, 6), &a)?;
    let (cb, gb) = random_int_pair(&gpu, &mut rng, (1, 6), &b)?;
    same_outcome(
        "past 2^63 and back",
        ops::matmul(&ca, &cb),
        ops::matmul(&ga, &gb),
    )?;
    assert_eq!(numbers(&ops::matmul(&ga, &gb)?)?, [7.0]);
    let mut overflows = 0;
    for round in 0..40 {
        let (n, m, k) = (1 + rng.below(3), 1 + rng.below(3), 1 + rng.below(3));
        let small = |rng: &mut Rng| rng.below(92_683) as i32 - 46341;
        let a: Vec<i32> = (0..n * k)
            .map(|_| {
                if rng.below(4) == 0 {
                    random_int(&mut rng)
                } else {
                    small(&mut rng)
                }
            })
            .collect();
        let b: Vec<i32> = (0..m * k).map(|_| small(&mut rng)).collect();
        let (ca, ga) = random_int_pair(&gpu, &mut rng, (n, k), &a)?;
        let (cb, gb) = random_int_pair(&gpu, &mut rng, (m, k), &b)?;
        let what = format!("round {round}: {a:?} · {b:?}");
        if same_outcome(&what, ops::matmul(&ca, &cb), ops::matmul(&ga, &gb))? {
            overflows += 1;
        }
    }
    assert!(
        overflows > 5 && overflows < 35,
        "{overflows} of 40 overflowed"
    );
    Ok(())
}

/// Float32 sums and products accumulating in Float64 match the CPU's within one Float32 ulp
/// (both round one binary64 total; the CPU may add in another order, which binary64 keeps
/// far below a Float32 ulp here), on a long sum, on a long product where Float32
/// accumulation in ascending order drifts by hundreds of ulps, and on random layouts
/// (tests/reductions.rs shows a sum binary32 gets wrong in any order).
#[test]
fn float32_sums_accumulating_in_float64_match_the_cpu() -> Result<()> {
    let Some(gpu) = f64_gpu("float32_sums_accumulating_in_float64_match_the_cpu") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_1003);
    let (rows, long) = (3, 1 << 21);
    let values: Vec<f32> = (0..rows * long).map(|_| rng.float(0.05, 0.15)).collect();
    let (cpu, uploaded) = compact_pair(&gpu, &values, (rows, long))?;
    let expected = numbers(&ops::reduce_sum_with(&cpu, DType::FLOAT64)?)?;
    let wide = numbers(&download(&ops::reduce_sum_with(
        &uploaded,
        DType::FLOAT64,
    )?)?)?;
    for i in 0..rows {
        assert!(
            ulps(wide[i], expected[i]) <= 1.0,
            "row {i}: {} vs {}",
            wide[i],
            expected[i]
        );
    }

    let (n, m, k) = (2, 3, 1 << 20);
    let a: Vec<f32> = (0..n * k).map(|_| rng.float(0.0, 1.0)).collect();
    let b: Vec<f32> = (0..m * k).map(|_| rng.float(0.0, 1.0)).collect();
    let (ca, ga) = compact_pair(&gpu, &a, (n, k))?;
    let (cb, gb) = compact_pair(&gpu, &b, (m, k))?;
    let expected = numbers(&ops::matmul_with(&ca, &cb, DType::FLOAT64)?)?;
    let wide = numbers(&download(&ops::matmul_with(&ga, &gb, DType::FLOAT64)?)?)?;
    let narrow = numbers(&download(&ops::matmul(&ga, &gb)?)?)?;
    for o in 0..n * m {
        assert!(
            ulps(wide[o], expected[o]) <= 1.0,
            "out {o}: {} vs {}",
            wide[o],
            expected[o]
        );
        assert!(
            ulps(narrow[o], expected[o]) > 100.0,
            "out {o}: {}",
            narrow[o]
        );
    }

    for shape in [(1, 1), (255, 3), (257, 1), (19, 27)] {
        let (cpu, uploaded) = float_pair(&gpu, &mut rng, 1, shape, (-4.0, 4.0))?;
        let expected = numbers(&ops::reduce_sum_with(&cpu, DType::FLOAT64)?)?;
        let got = numbers(&download(&ops::reduce_sum_with(
            &uploaded,
            DType::FLOAT64,
        )?)?)?;
        assert_within_an_ulp(&format!("{shape:?}"), &got, &expected);
    }
    Ok(())
}

/// Reductions and products over more than 65535 elements visit every element: some drivers
/// (llvmpipe) end any shader loop after 65535 iterations, so products write out blocks of
/// their loop and reductions run as trees.
#[test]
fn reductions_and_products_visit_every_element_past_65535() -> Result<()> {
    let Some(gpu) = shared_gpu("reductions_and_products_visit_every_element_past_65535") else {
        return Ok(());
    };
    let long = 3 * 65535 + 7;
    let ones = gpu.from_f32(&vec![1.0; 2 * long], Shape::new((2, long))?)?;
    assert_eq!(numbers(&ops::reduce_sum(&ones)?)?, [long as f64; 2]);
    let mut values = vec![0.5f32; 2 * long];
    values[2 * long - 1] = 9.0;
    values[2 * long - 4] = 7.0;
    let x = gpu.from_f32(&values, Shape::new((2, long))?)?;
    assert_eq!(numbers(&ops::reduce_max(&x)?)?, [7.0, 9.0]);
    let ints = gpu.from_i32(&vec![3; 2 * long], Shape::new((2, long))?)?;
    assert_eq!(numbers(&ops::reduce_sum(&ints)?)?, [3.0 * long as f64; 2]);
    let row = gpu.from_f32(&vec![1.0; long], Shape::new((1, long))?)?;
    assert_eq!(numbers(&ops::matmul(&ones, &row)?)?, [long as f64; 2]);
    let int_row = gpu.from_i32(&vec![2; long], Shape::new((1, long))?)?;
    assert_eq!(
        numbers(&ops::matmul(&ints, &int_row)?)?,
        [6.0 * long as f64; 2]
    );

    // The longest mode one invocation contracts, (65535 − 64) · 64 elements, and one more,
    // which a product declines; a reduction over it runs as a tree.
    let longest = (65535 - 64) * 64;
    let ones = gpu.from_f32(&vec![1.0; longest + 1], Shape::new(longest + 1)?)?;
    let row = Tensor::compact(ones.carrier().clone(), Shape::new((1, longest))?)?;
    assert_eq!(numbers(&ops::matmul(&row, &row)?)?, [longest as f64]);
    let beyond = Tensor::compact(ones.carrier().clone(), Shape::new((1, longest + 1))?)?;
    assert_eq!(numbers(&ops::reduce_sum(&beyond)?)?, [(longest + 1) as f64]);
    let error = ops::matmul(&beyond, &beyond).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    assert!(
        error
            .to_string()
            .contains("'matmul' contracts a mode of 4190145 elements"),
        "{error}"
    );
    Ok(())
}
