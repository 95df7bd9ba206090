//! TiledEvictable over a Gpu primary tier and a CPU secondary (docs/tiers.md, "Operations on
//! raw tiled operands"; carrier-extension spec, "Compose a definition-free compute carrier"):
//! the tiled operations run tile by tile through the Gpu class's own dispatch.

mod common;

use common::{numbers, shared_gpu};
use strideweave::carriers::{Cpu, TileSet, TiledEvictable};
use strideweave::{ops, DType, ErrorKind, Result, Shape, Tensor};

/// Tiles resident on the Gpu primary: `add`, `relu`, `reduce_sum` and `matmul` run tile by
/// tile on the Gpu class and give the dense CPU results.
#[test]
fn tiled_operations_run_on_a_gpu_primary_tier() -> Result<()> {
    let Some(gpu) = shared_gpu("tiled_operations_run_on_a_gpu_primary_tier") else {
        return Ok(());
    };
    let values: Vec<f32> = (0..64).map(|i| (i as f32 - 20.0) * 0.25).collect();
    let primary = gpu.from_f32(&values, Shape::new(64)?)?.carrier().clone();
    let secondary = Cpu::carrier(0, DType::FLOAT32, true, false)?;
    let tiled = TiledEvictable::carrier(&primary, &secondary, &[2, 2], &[4, 4], None)?;
    let x = Tensor::compact(tiled, Shape::new((8, 8))?)?;
    let dense = Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new((8, 8))?)?;

    let sum = ops::add(&x, &x)?;
    assert_eq!(sum.carrier().class(), gpu.class());
    assert_eq!(numbers(&sum)?, numbers(&ops::add(&dense, &dense)?)?);
    let relu = ops::relu(&x)?;
    assert_eq!(numbers(&relu)?, numbers(&ops::relu(&dense)?)?);
    let rows = ops::reduce_sum(&x)?;
    assert_eq!(rows.carrier().class(), gpu.class());
    for (g, c) in numbers(&rows)?
        .iter()
        .zip(numbers(&ops::reduce_sum(&dense)?)?)
    {
        assert!((g - c).abs() <= 1e-4, "{g} vs {c}");
    }
    let product = ops::matmul(&x, &x)?;
    for (g, c) in numbers(&product)?
        .iter()
        .zip(numbers(&ops::matmul(&dense, &dense)?)?)
    {
        assert!((g - c).abs() <= 1e-3 * (1.0 + c.abs()), "{g} vs {c}");
    }
    assert_eq!(x.version(), 0);
    Ok(())
}

/// Eviction moves a tile Gpu → CPU through the Gpu's route; bringing it back needs a move
/// CPU → Gpu, which has no route (routes start at the defining class, and the CPU is
/// definition-free), so promotion and the operations that would stage it fail with
/// NotImplemented, naming the pair, and change nothing.
#[test]
fn an_evicted_tile_cannot_come_back_to_the_gpu_and_operations_on_it_change_nothing() -> Result<()> {
    let Some(gpu) = shared_gpu("an_evicted_tile_cannot_come_back_to_the_gpu") else {
        return Ok(());
    };
    let values: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let primary = gpu.from_f32(&values, Shape::new(64)?)?.carrier().clone();
    let secondary = Cpu::carrier(0, DType::FLOAT32, true, false)?;
    let tiled = TiledEvictable::carrier(&primary, &secondary, &[2, 2], &[4, 4], None)?;
    let first = TileSet::new([vec![0, 0]])?;
    TiledEvictable::evict(&tiled, &first)?;
    let x = Tensor::compact(tiled.clone(), Shape::new((8, 8))?)?;
    assert_eq!(
        numbers(&x)?,
        values.iter().map(|v| f64::from(*v)).collect::<Vec<_>>()
    );
    let refusals = [
        ops::add(&x, &x).map(|_| ()).unwrap_err(),
        TiledEvictable::promote(&tiled, &first).unwrap_err(),
    ];
    for error in refusals {
        assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
        assert!(
            error.to_string().contains("no move route from CPU to Gpu"),
            "{error}"
        );
    }
    assert_eq!(x.version(), 0);
    assert_eq!(numbers(&x)?[9], 9.0);
    Ok(())
}
