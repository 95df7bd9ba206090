//! The workgroup-tiled `matmul` (docs/gpu-carrier.md, "Products"; carrier-extension spec,
//! "Prefer an optimized kernel with fallback"): compact Float32 products load 16 × 16 tiles
//! of both operands into workgroup memory. Against the CPU on sizes that are not multiples
//! of the tile, 1 × N, N × 1 and K = 1, at offsets, accumulating in binary32 and binary64;
//! against the one-invocation-per-result kernel bit for bit (both add the products in
//! ascending order from −0.0); and the layouts, dtypes and modes it declines, which the
//! general patterns run.

mod common;

use common::{float_pair, numbers, own_gpu, Rng};
use strideweave::carriers::Cpu;
use strideweave::operation::{call, OptionValue};
use strideweave::{ops, DType, Layout, Result, Shape, Tensor};
use strideweave_wgpu::Gpu;

/// The pipeline keys `run` added to `gpu`'s cache.
fn added_keys<T>(gpu: &Gpu, run: impl FnOnce() -> Result<T>) -> Result<(T, Vec<String>)> {
    let before = gpu.device().pipeline_keys();
    let out = run()?;
    let added = gpu
        .device()
        .pipeline_keys()
        .into_iter()
        .filter(|k| !before.contains(k))
        .collect();
    Ok((out, added))
}

/// Float32 bits of every value.
fn bits(t: &Tensor) -> Result<Vec<u32>> {
    Ok(numbers(t)?.iter().map(|v| (*v as f32).to_bits()).collect())
}

/// Tiled products at every edge size agree with the CPU within the sum tolerance of
/// docs/kernel-semantics.md, and with the one-invocation-per-result kernel bit for bit.
#[test]
fn tiled_products_match_the_cpu_and_the_untiled_kernel_at_edge_sizes() -> Result<()> {
    let Some(gpu) = own_gpu("tiled_products_match_the_cpu_and_the_untiled_kernel") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_3001);
    let mut tiled_keys = 0;
    for (n, k, m) in [
        (1, 1, 1),
        (16, 16, 16),
        (17, 33, 15),
        (15, 17, 31),
        (1, 40, 37),
        (45, 40, 1),
        (1, 300, 1),
        (50, 1, 70),
        (64, 1, 1),
        (33, 250, 48),
        (130, 7, 129),
    ] {
        let (a_cpu, a_gpu) = float_pair(&gpu, &mut rng, 0, (n, k), (-2.0, 2.0))?;
        let (b_cpu, b_gpu) = float_pair(&gpu, &mut rng, 0, (m, k), (-2.0, 2.0))?;
        gpu.device().set_workgroup_tiles(true);
        let (tiled, keys) = added_keys(&gpu, || ops::matmul(&a_gpu, &b_gpu))?;
        tiled_keys += keys
            .iter()
            .filter(|k| k.starts_with("matmul_tiled|"))
            .count();
        assert!(
            keys.iter()
                .all(|k| k.starts_with("matmul_tiled|f32|native")),
            "({n}, {k}, {m}): {keys:?}"
        );
        assert_eq!(tiled.shape(), &Shape::new((n, m))?);
        let expected = numbers(&ops::matmul(&a_cpu, &b_cpu)?)?;
        let bound = 1e-5 * 4.0 * k as f64 + 1e-6;
        for (i, (g, c)) in numbers(&tiled)?.iter().zip(&expected).enumerate() {
            assert!((g - c).abs() <= bound, "({n}, {k}, {m}) at {i}: {g} vs {c}");
        }
        gpu.device().set_workgroup_tiles(false);
        let (plain, keys) = added_keys(&gpu, || ops::matmul(&a_gpu, &b_gpu))?;
        assert!(
            keys.iter().all(|k| k.starts_with("matmul|f32|native")),
            "({n}, {k}, {m}): {keys:?}"
        );
        assert_eq!(bits(&tiled)?, bits(&plain)?, "({n}, {k}, {m})");
    }
    assert_eq!(tiled_keys, 1, "one tiled pipeline serves every shape");
    Ok(())
}

/// A device starts with the tiles off on an adapter of type `Cpu` (llvmpipe, where they do
/// not pay) and on elsewhere; off, compact Float32 products run the untiled kernel.
#[test]
fn the_tiles_start_off_on_a_cpu_device_and_on_elsewhere() -> Result<()> {
    let Some(gpu) = own_gpu("the_tiles_start_off_on_a_cpu_device_and_on_elsewhere") else {
        return Ok(());
    };
    let cpu_device = gpu.device().adapter().device_type == "Cpu";
    assert_eq!(gpu.device().workgroup_tiles(), !cpu_device);
    gpu.device().set_workgroup_tiles(false);
    let x = gpu.from_f32(&[1.0, 2.0, 3.0, 4.0], Shape::new((2, 2))?)?;
    let (product, keys) = added_keys(&gpu, || ops::matmul(&x, &x))?;
    assert!(
        keys.iter().all(|k| k.starts_with("matmul|f32|native|")),
        "{keys:?}"
    );
    assert_eq!(numbers(&product)?, [10.0, 14.0, 14.0, 20.0]);
    Ok(())
}

/// A contracted mode that is not a multiple of the tile adds only its real terms: products
/// that are all −0.0 sum to −0.0 (a padding term would make it +0.0).
#[test]
fn a_short_last_tile_keeps_a_negative_zero_sum() -> Result<()> {
    let Some(gpu) = own_gpu("a_short_last_tile_keeps_a_negative_zero_sum") else {
        return Ok(());
    };
    gpu.device().set_workgroup_tiles(true);
    let (n, k, m) = (3, 5, 2);
    let lhs = gpu.from_f32(&[-0.0; 15], Shape::new((n, k))?)?;
    let rhs = gpu.from_f32(&[1.0; 10], Shape::new((m, k))?)?;
    let (product, keys) = added_keys(&gpu, || ops::matmul(&lhs, &rhs))?;
    assert!(
        keys.iter().any(|k| k.starts_with("matmul_tiled|")),
        "{keys:?}"
    );
    assert_eq!(bits(&product)?, vec![(-0.0f32).to_bits(); n * m]);
    Ok(())
}

/// Products accumulating in binary64 run tiled too, within one Float32 ulp of the CPU.
#[test]
fn tiled_products_accumulate_in_binary64_when_asked() -> Result<()> {
    let Some(gpu) = own_gpu("tiled_products_accumulate_in_binary64_when_asked") else {
        return Ok(());
    };
    if !gpu.device().computes_f64() {
        println!("SKIPPED: tiled_products_accumulate_in_binary64_when_asked: no binary64");
        return Ok(());
    }
    gpu.device().set_workgroup_tiles(true);
    let mut rng = Rng(0x5eed_3002);
    let (n, k, m) = (19, 600, 21);
    let (a_cpu, a_gpu) = float_pair(&gpu, &mut rng, 0, (n, k), (-2.0, 2.0))?;
    let (b_cpu, b_gpu) = float_pair(&gpu, &mut rng, 0, (m, k), (-2.0, 2.0))?;
    let options = [("accumulator_dtype", OptionValue::DType(DType::FLOAT64))];
    let (product, keys) = added_keys(&gpu, || {
        call("matmul", [a_gpu.into(), b_gpu.into()], &options).map(|mut r| r.remove(0))
    })?;
    assert!(
        keys.iter().any(|k| k.starts_with("matmul_tiled|f32|f64")),
        "{keys:?}"
    );
    let expected = call("matmul", [a_cpu.into(), b_cpu.into()], &options)?.remove(0);
    common::assert_within_an_ulp("f64 tiles", &numbers(&product)?, &numbers(&expected)?);
    Ok(())
}

/// Permuted operands, Int32 products and a contracted mode beyond 32 768 elements are
/// declined by the tiled pattern and run on the general kernels, still matching the CPU.
#[test]
fn the_tiled_pattern_declines_what_it_does_not_take() -> Result<()> {
    let Some(gpu) = own_gpu("the_tiled_pattern_declines_what_it_does_not_take") else {
        return Ok(());
    };
    gpu.device().set_workgroup_tiles(true);
    let mut rng = Rng(0x5eed_3003);
    // Row-major operands: a permuted layout.
    let values: Vec<f32> = (0..12).map(|_| rng.float(-2.0, 2.0)).collect();
    let permuted = Layout::from_flat(&[3, 4], &[4, 1])?;
    let a_cpu = Tensor::new(Cpu::from_f32(&values, true)?, 0, permuted.clone())?;
    let a_gpu = gpu.strided_f32(&values, permuted)?;
    let (product, keys) = added_keys(&gpu, || ops::matmul(&a_gpu, &a_gpu))?;
    assert!(
        keys.iter().all(|k| k.starts_with("matmul|f32|native|")),
        "{keys:?}"
    );
    let expected = numbers(&ops::matmul(&a_cpu, &a_cpu)?)?;
    for (g, c) in numbers(&product)?.iter().zip(&expected) {
        assert!((g - c).abs() <= 1e-4, "{g} vs {c}");
    }

    let ints = gpu.from_i32(&[1, -2, 3, 4, 5, -6], Shape::new((2, 3))?)?;
    let (product, keys) = added_keys(&gpu, || ops::matmul(&ints, &ints))?;
    assert!(
        keys.iter().all(|k| k.starts_with("matmul|i32|")),
        "{keys:?}"
    );
    assert_eq!(numbers(&product)?, [35.0, -20.0, -20.0, 56.0]);

    let k = 32769;
    let long = gpu.from_f32(&vec![0.5; 2 * k], Shape::new((2, k))?)?;
    let (product, keys) = added_keys(&gpu, || ops::matmul(&long, &long))?;
    assert!(
        keys.iter().all(|key| key.starts_with("matmul|f32|native|")),
        "{keys:?}"
    );
    assert_eq!(numbers(&product)?, vec![0.25 * k as f64; 4]);
    Ok(())
}
