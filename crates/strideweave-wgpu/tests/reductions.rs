//! Parallel reductions on the Gpu against the CPU carrier (docs/gpu-carrier.md, "Reductions";
//! carrier-extension spec: "Kernel execution interfaces cover JIT and precompiled
//! execution"): `reduce_sum` and `reduce_max` at the edges of the tree's workgroup, chunk and
//! pass sizes, on column-major, permuted and gapped layouts at offsets, with Float32 sums in
//! binary32 and binary64, exact Int32 sums whose partials leave Int32, and the choice between
//! a tree and one invocation per result.

mod common;

use common::{
    assert_within_an_ulp, compact_pair, download, f64_gpu, float_pair, int_pair, numbers, own_gpu,
    same_f32, same_outcome, ulps, Rng,
};
use strideweave::{ops, DType, ErrorKind, Result, Shape, Tensor};
use strideweave_wgpu::{Fault, FaultPoint, Gpu, ReductionRule};

/// The Gpu sums and maxima of `cpu`'s upload agree with the CPU's: sums within
/// docs/kernel-semantics.md's `1e-5·Σ|terms| + 1e-6` (binary32) or one Float32 ulp
/// (binary64), maxima exactly.
fn check_floats(gpu: &Gpu, what: &str, cpu: &Tensor, uploaded: &Tensor) -> Result<()> {
    let terms = numbers(&ops::reduce_sum(&ops::abs(cpu)?)?)?;
    let expected = numbers(&ops::reduce_sum(cpu)?)?;
    let got = numbers(&download(&ops::reduce_sum(uploaded)?)?)?;
    assert_eq!(got.len(), expected.len(), "{what}");
    for (i, (g, c)) in got.iter().zip(&expected).enumerate() {
        assert!(
            (g - c).abs() <= 1e-5 * terms[i] + 1e-6,
            "{what}: sum {i}: gpu {g} vs cpu {c}"
        );
    }
    let expected = numbers(&ops::reduce_max(cpu)?)?;
    let got = numbers(&download(&ops::reduce_max(uploaded)?)?)?;
    for (i, (g, c)) in got.iter().zip(&expected).enumerate() {
        assert!(same_f32(*g, *c), "{what}: max {i}: gpu {g} vs cpu {c}");
    }
    if gpu.device().computes_f64() {
        let expected = numbers(&ops::reduce_sum_with(cpu, DType::FLOAT64)?)?;
        let got = numbers(&download(&ops::reduce_sum_with(uploaded, DType::FLOAT64)?)?)?;
        assert_within_an_ulp(&format!("{what}: binary64 sums"), &got, &expected);
    }
    Ok(())
}

/// Modes at the tree's edges: below and at the tree's threshold (63, 64), around one
/// workgroup (255–257), one chunk (4096 ± 1: one pass or two), llvmpipe's loop bound
/// (65535, 65536), in each layout kind, with one and several results — as trees (the GPU
/// rule), and again with one invocation per result where the CPU-device rule loops.
#[test]
fn sums_and_maxima_match_the_cpu_at_the_tree_edges() -> Result<()> {
    let Some(gpu) = own_gpu("sums_and_maxima_match_the_cpu_at_the_tree_edges") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_2001);
    for rule in [ReductionRule::for_gpu(), ReductionRule::for_cpu_device()] {
        gpu.device().set_reduction_rule(rule);
        for (round, m) in [1, 63, 64, 65, 255, 256, 257, 4095, 4096, 4097, 65535, 65536]
            .into_iter()
            .enumerate()
        {
            for n in [1, 3] {
                if rule != ReductionRule::for_gpu() && rule.reduces_in_tree(n, m) {
                    continue;
                }
                let kind = (round + n) % 3;
                let (cpu, uploaded) = float_pair(&gpu, &mut rng, kind, (n, m), (-4.0, 4.0))?;
                let what = format!("{rule:?}: ({n}, {m}) layout {kind}");
                check_floats(&gpu, &what, &cpu, &uploaded)?;
            }
        }
    }
    Ok(())
}

/// Int32 sums in the tree are exact, also when a workgroup's or a pass's partial sums leave
/// Int32 and even 64 bits of one invocation (`MAX` everywhere, then `MIN` everywhere), and
/// only the total's narrowing is checked: sums that come back into range are the CPU's
/// values, sums that do not are the CPU's Overflow error, naming the first overflowing row.
#[test]
fn int32_tree_sums_are_exact_and_only_the_total_is_checked() -> Result<()> {
    let Some(gpu) = own_gpu("int32_tree_sums_are_exact_and_only_the_total_is_checked") else {
        return Ok(());
    };
    gpu.device().set_reduction_rule(ReductionRule::for_gpu());
    let mut rng = Rng(0x5eed_2002);
    for (round, m) in [64, 257, 4097, 65536].into_iter().enumerate() {
        let kind = round % 3;
        // Row 0: MAX in its first half and MIN in its second, plus a few 7s (back in range);
        // row 1: small values.
        let half = m / 2;
        let (cpu, uploaded) = int_pair(&gpu, &mut rng, kind, (2, m), |ordinal| {
            let (row, j) = (ordinal % 2, ordinal / 2);
            match row {
                0 if j < half => i32::MAX,
                0 if j < 2 * half => i32::MIN + 1,
                0 => 7,
                _ => (j % 2001) as i32 - 1000,
            }
        })?;
        let what = format!("({m}) layout {kind}");
        let sum = (ops::reduce_sum(&cpu), ops::reduce_sum(&uploaded));
        assert!(!same_outcome(&what, sum.0, sum.1)?, "{what}: back in range");
        let max = (ops::reduce_max(&cpu), ops::reduce_max(&uploaded));
        assert!(!same_outcome(&format!("max {what}"), max.0, max.1)?);
    }
    // Rows 0 and 2 fit; rows 1 and 3 leave the range only in total: row 1 is named.
    let m = 4097 * 3;
    let (cpu, uploaded) = int_pair(&gpu, &mut rng, 1, (4, m), |ordinal| {
        let (row, j) = (ordinal % 4, ordinal / 4);
        match row {
            1 | 3 => i32::MAX / m as i32 + 1,
            _ => (j % 7) as i32 - 3,
        }
    })?;
    let cpu_error = ops::reduce_sum(&cpu).unwrap_err();
    let error = ops::reduce_sum(&uploaded).unwrap_err();
    assert_eq!(cpu_error.kind(), ErrorKind::Overflow, "{cpu_error}");
    assert_eq!(error.kind(), ErrorKind::Overflow, "{error}");
    assert!(
        error.to_string().ends_with(
            "'reduce_sum' overflows Int32: the sum over mode 1 at result ordinal 1 leaves the \
             Int32 range"
        ),
        "{error}"
    );
    assert_eq!(uploaded.version(), 0);
    Ok(())
}

/// A long mode with few results is the case a tree is for: the mode of 4 190 145 elements
/// that one invocation could not reduce (the old bound), and one of 2^24 + 5 elements that
/// takes three passes, both against the CPU; Int32 sums of both exact.
#[test]
fn long_modes_reduce_in_several_passes() -> Result<()> {
    let Some(gpu) = own_gpu("long_modes_reduce_in_several_passes") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_2003);
    for (m, passes) in [(4_190_145, 2), ((1 << 24) + 5, 3)] {
        let (cpu, uploaded) = float_pair(&gpu, &mut rng, 0, (1, m), (-1.0, 1.0))?;
        check_floats(&gpu, &format!("(1, {m})"), &cpu, &uploaded)?;
        let ints: Vec<i32> = (0..m).map(|j| (j % 201) as i32 - 100).collect();
        let x = gpu.from_i32(&ints, Shape::new((1, m))?)?;
        let total: i64 = ints.iter().map(|v| i64::from(*v)).sum();
        assert_eq!(numbers(&ops::reduce_sum(&x)?)?, [total as f64], "{m}");
        let keys = gpu.device().pipeline_keys();
        for key in [
            "tree|false|f32|native|x|x1u|xn|partials",
            "tree|false|f32|native|partials|rx1u",
            "tree|false|i32|i96|x|x1u|xn|partials",
        ] {
            assert!(keys.iter().any(|k| k == key), "{m}: {key} in {keys:?}");
        }
        // Only three passes have one that reads and writes partials.
        assert_eq!(
            keys.iter()
                .any(|k| k == "tree|false|f32|native|partials|partials"),
            passes == 3,
            "{m}: {keys:?}"
        );
    }
    Ok(())
}

/// The one pipeline `reduce_sum` of `uploaded` added to `gpu`'s cache, after checking the
/// sums against the CPU's.
fn added_pipeline(gpu: &Gpu, cpu: &Tensor, uploaded: &Tensor, what: &str) -> Result<String> {
    let before = gpu.device().pipeline_keys();
    let expected = numbers(&ops::reduce_sum(cpu)?)?;
    let got = numbers(&download(&ops::reduce_sum(uploaded)?)?)?;
    let bound: f64 = 1e-5 * 2.0 * cpu.shape().leaves()[1] as f64 + 1e-6;
    for (i, (g, c)) in got.iter().zip(&expected).enumerate() {
        assert!((g - c).abs() <= bound, "{what}: {i}: {g} vs {c}");
    }
    let added: Vec<String> = gpu
        .device()
        .pipeline_keys()
        .into_iter()
        .filter(|k| !before.contains(k))
        .collect();
    assert_eq!(added.len(), 1, "{what}: {added:?}");
    Ok(added[0].clone())
}

/// The device's reduction rule decides, on both sides of each of its bounds: `serial_rows`
/// results over a short mode run one invocation per result, one result fewer runs as a
/// tree, and so does a mode of `serial_longest` elements; a mode shorter than 64 elements is
/// always serial. Both forms agree with the CPU. On llvmpipe (an adapter of type `Cpu`) the
/// device starts with `ReductionRule::for_cpu_device`, elsewhere with `for_gpu`.
#[test]
fn the_reduction_rule_picks_a_tree_or_one_invocation_per_result() -> Result<()> {
    let Some(gpu) = own_gpu("the_reduction_rule_picks_a_tree_or_one_invocation_per_result") else {
        return Ok(());
    };
    let cpu_device = gpu.device().adapter().device_type == "Cpu";
    let expected = if cpu_device {
        ReductionRule::for_cpu_device()
    } else {
        ReductionRule::for_gpu()
    };
    assert_eq!(gpu.device().reduction_rule(), expected);
    let mut rng = Rng(0x5eed_2004);
    // The GPU rule at its row bound (the results alone fill a device), compact: the serial
    // and the tree pipeline are one new key each. Then a small rule at every bound, gapped,
    // so each shape compiles its own pipeline and its key shows which form ran.
    let gpu_rule = ReductionRule::for_gpu();
    let small = ReductionRule::new(300, 200)?;
    let cases = [
        (gpu_rule, 0, (65536, 70), true),
        (gpu_rule, 0, (65535, 70), false),
        (small, 2, (300, 70), true),
        (small, 2, (299, 70), false),
        (small, 2, (300, 199), true),
        (small, 2, (300, 200), false),
        (small, 2, (299, 63), true),
    ];
    for (rule, kind, (n, m), serial) in cases {
        gpu.device().set_reduction_rule(rule);
        let what = format!("{rule:?}: ({n}, {m})");
        let (cpu, uploaded) = float_pair(&gpu, &mut rng, kind, (n, m), (-2.0, 2.0))?;
        let key = added_pipeline(&gpu, &cpu, &uploaded, &what)?;
        let prefix = if serial {
            "reduce|false|"
        } else {
            "tree|false|"
        };
        assert!(key.starts_with(prefix), "{what}: {key}");
        assert_eq!(rule.reduces_in_tree(n, m), !serial, "{what}");
    }
    let error = ReductionRule::new(1, 65536).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(
        error.to_string().contains("65536") && error.to_string().contains("65535"),
        "{error}"
    );
    Ok(())
}

/// Float32 sums in binary64 are exact where binary32 loses everything in any order: pairs
/// `v, −v` of 24-bit mantissas up to 2^30 (every partial sum a multiple of 2^-10 below 2^41,
/// exact in binary64) around small terms, so the Float64 sum is the CPU's to the bit while a
/// binary32 tree, whose partial sums round to multiples of 2^6, is far off.
#[test]
fn binary64_tree_sums_are_exact_where_binary32_is_not() -> Result<()> {
    let Some(gpu) = f64_gpu("binary64_tree_sums_are_exact_where_binary32_is_not") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_2005);
    let (n, m) = (2, 20_000);
    let mut values = vec![0f32; n * m];
    for row in 0..n {
        let mut entries = Vec::with_capacity(m);
        while entries.len() + 2 <= m - 10 {
            let mantissa = (rng.next() % (1 << 24)) as f32;
            let v = mantissa * 2f32.powi(rng.below(17) as i32 - 10);
            entries.extend([v, -v]);
        }
        while entries.len() < m {
            entries.push((1 + rng.below(1000)) as f32 / 1024.0);
        }
        for k in (1..m).rev() {
            entries.swap(k, rng.below(k + 1));
        }
        for (j, v) in entries.into_iter().enumerate() {
            values[row + n * j] = v;
        }
    }
    let (cpu, uploaded) = compact_pair(&gpu, &values, (n, m))?;
    let expected = numbers(&ops::reduce_sum_with(&cpu, DType::FLOAT64)?)?;
    let wide = numbers(&download(&ops::reduce_sum_with(
        &uploaded,
        DType::FLOAT64,
    )?)?)?;
    let narrow = numbers(&download(&ops::reduce_sum(&uploaded)?)?)?;
    for row in 0..n {
        assert!(expected[row] > 0.0 && expected[row] < 10.0, "{expected:?}");
        assert!(
            same_f32(wide[row], expected[row]),
            "row {row}: {wide:?} vs {expected:?}"
        );
        assert!(
            ulps(narrow[row], expected[row]) > 1000.0,
            "row {row}: the binary32 sum {} is close to {}",
            narrow[row],
            expected[row]
        );
    }
    Ok(())
}

/// A fault at the submission or the result's allocation of a multi-pass reduction publishes
/// nothing and leaves the operand as it was; the retry gives the CPU's answer.
#[test]
fn a_failed_tree_reduction_publishes_nothing() -> Result<()> {
    let Some(gpu) = own_gpu("a_failed_tree_reduction_publishes_nothing") else {
        return Ok(());
    };
    gpu.device().set_reduction_rule(ReductionRule::for_gpu());
    let values: Vec<f32> = (0..2 * 10_000).map(|i| (i % 9) as f32).collect();
    let x = gpu.from_f32(&values, Shape::new((2, 10_000))?)?;
    for (point, fault, kind) in [
        (FaultPoint::Submit, Fault::DeviceLost, ErrorKind::Runtime),
        (FaultPoint::Allocate, Fault::OutOfMemory, ErrorKind::Memory),
        (FaultPoint::Submit, Fault::Validation, ErrorKind::Runtime),
    ] {
        let submissions = gpu.device().submission_count();
        gpu.device().inject_fault(point, fault);
        let error = ops::reduce_sum(&x).unwrap_err();
        assert_eq!(error.kind(), kind, "{point:?}: {error}");
        assert!(error.to_string().contains("GPU"), "{error}");
        assert_eq!(gpu.device().submission_count(), submissions, "{point:?}");
        assert_eq!(x.version(), 0);
        assert!(!gpu.device().clear_fault(point), "the fault fired");
    }
    let (cpu, _) = compact_pair(&gpu, &values, (2, 10_000))?;
    assert_eq!(
        numbers(&ops::reduce_sum(&x)?)?,
        numbers(&ops::reduce_sum(&cpu)?)?
    );
    Ok(())
}
