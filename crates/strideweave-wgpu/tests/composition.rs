//! Tier carriers over a Gpu primary (docs/tiers.md, "Operations on raw tiled operands";
//! carrier-extension spec, "Compose a definition-free compute carrier"): the tiled operations
//! run tile by tile through the Gpu class's own dispatch, and tiles stream onto the device from
//! a GpuHost secondary along the routes GpuHost → Gpu and Gpu → GpuHost.

mod common;

use std::sync::Arc;

use common::{numbers, own_gpu, shared_gpu};
use strideweave::carriers::{
    CapacityPolicy, Cpu, Evictable, ResidencyPolicy, TileLocation, TileSet, TiledEvictable,
};
use strideweave::{ops, Carrier, DType, ErrorKind, Result, Shape, Tensor};
use strideweave_wgpu::{Fault, FaultPoint, Gpu, GpuHost};

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
/// NotImplemented, naming the pair, and change nothing. A GpuHost secondary (the tests below)
/// is how a Gpu primary gets tiles back.
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

/// 64 distinct Float32 values with fractional parts, a negative zero and a tiny subnormal,
/// so exact round trips are checked bit for bit.
fn tile_values() -> Vec<f32> {
    let mut values: Vec<f32> = (0..64).map(|i| (i as f32 - 23.0) * 0.375 + 0.1).collect();
    values[5] = -0.0;
    values[40] = f32::from_bits(1);
    values
}

/// The values of `t` as Float32 bit patterns.
fn bits(t: &Tensor) -> Result<Vec<u32>> {
    Ok(numbers(t)?
        .into_iter()
        .map(|x| (x as f32).to_bits())
        .collect())
}

/// A TiledEvictable 8×8 in 2×2 tiles of 4×4 over an empty Gpu primary bounded at
/// `capacity` tiles and a full GpuHost secondary holding `values`.
fn streamed(gpu: &Gpu, values: &[f32], capacity: usize) -> Result<Carrier> {
    let primary = gpu.carrier(0, DType::FLOAT32)?;
    let secondary = gpu.host_from_f32(values)?;
    let policy: Arc<dyn ResidencyPolicy> = Arc::new(CapacityPolicy::new(capacity));
    TiledEvictable::carrier(&primary, &secondary, &[2, 2], &[4, 4], Some(policy))
}

/// Every tile on the GpuHost secondary and a Gpu primary bounded at two of the four tiles:
/// `add`, `relu`, `reduce_sum` and `matmul` stream the tiles onto the device along the route
/// GpuHost → Gpu, compute on the Gpu class and give the dense CPU results; the streamed tiles
/// stay where they were and the carrier's version does not move.
#[test]
fn tiled_operations_stream_gpuhost_tiles_through_a_smaller_gpu_primary() -> Result<()> {
    let Some(gpu) = shared_gpu("tiled_operations_stream_gpuhost_tiles") else {
        return Ok(());
    };
    let values = tile_values();
    let tiled = streamed(&gpu, &values, 2)?;
    assert_eq!(
        TiledEvictable::secondary(&tiled)?.class(),
        gpu.host().class()
    );
    let x = Tensor::compact(tiled.clone(), Shape::new((8, 8))?)?;
    let dense = Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new((8, 8))?)?;

    let sum = ops::add(&x, &x)?;
    assert_eq!(sum.carrier().class(), gpu.class());
    assert_eq!(bits(&sum)?, bits(&ops::add(&dense, &dense)?)?);
    let relu = ops::relu(&x)?;
    assert_eq!(relu.carrier().class(), gpu.class());
    assert_eq!(bits(&relu)?, bits(&ops::relu(&dense)?)?);
    let rows = ops::reduce_sum(&x)?;
    assert_eq!(rows.carrier().class(), gpu.class());
    let expected = numbers(&ops::reduce_sum(&dense)?)?;
    let got = numbers(&rows)?;
    assert_eq!(got.len(), expected.len());
    for (g, c) in got.iter().zip(&expected) {
        assert!((g - c).abs() <= 1e-4 * (1.0 + c.abs()), "{g} vs {c}");
    }
    let product = ops::matmul(&x, &x)?;
    assert_eq!(product.carrier().class(), gpu.class());
    let expected = numbers(&ops::matmul(&dense, &dense)?)?;
    let got = numbers(&product)?;
    assert_eq!(got.len(), expected.len());
    for (g, c) in got.iter().zip(&expected) {
        assert!((g - c).abs() <= 1e-4 * (1.0 + c.abs()), "{g} vs {c}");
    }

    assert_eq!(TiledEvictable::secondary_tiles(&tiled)?.len(), 4);
    assert!(TiledEvictable::primary_tiles(&tiled)?.is_empty());
    assert_eq!(x.version(), 0);
    assert_eq!(
        bits(&x)?,
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    Ok(())
}

/// A tile promoted onto the Gpu (blocking, and through the asynchronous handle), evicted
/// Gpu → GpuHost and promoted again GpuHost → Gpu keeps every bit; an operation then uses the
/// resident tiles in place.
#[test]
fn a_tile_promotes_onto_the_gpu_and_evicts_back_to_gpuhost_exactly() -> Result<()> {
    let Some(gpu) = shared_gpu("a_tile_promotes_onto_the_gpu_and_evicts_back") else {
        return Ok(());
    };
    let values = tile_values();
    let want: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
    let tiled = streamed(&gpu, &values, 4)?;
    let x = Tensor::compact(tiled.clone(), Shape::new((8, 8))?)?;
    let first = TileSet::new([vec![1, 0]])?;
    let second = TileSet::new([vec![0, 1]])?;

    TiledEvictable::promote(&tiled, &first)?;
    let handle = TiledEvictable::promote_async(&tiled, &second)?;
    handle.wait()?;
    assert!(handle.done());
    for coord in [[1, 0], [0, 1]] {
        assert_eq!(
            TiledEvictable::tile_state(&tiled, &coord)?.location(),
            TileLocation::Primary
        );
    }
    assert_eq!(TiledEvictable::primary(&tiled)?.class(), gpu.class());
    assert_eq!(bits(&x)?, want);
    let doubled = ops::add(&x, &x)?;
    let dense = Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new((8, 8))?)?;
    assert_eq!(bits(&doubled)?, bits(&ops::add(&dense, &dense)?)?);

    let both = first.union(&second)?;
    TiledEvictable::evict(&tiled, &both)?;
    assert!(TiledEvictable::primary_tiles(&tiled)?.is_empty());
    assert_eq!(TiledEvictable::secondary_tiles(&tiled)?.len(), 4);
    assert_eq!(bits(&x)?, want);
    TiledEvictable::promote_async(&tiled, &both)?.wait()?;
    assert_eq!(TiledEvictable::primary_tiles(&tiled)?.len(), 2);
    assert_eq!(bits(&x)?, want);
    TiledEvictable::evict(&tiled, &both)?;
    assert_eq!(bits(&x)?, want);
    assert_eq!(x.version(), 0);
    Ok(())
}

/// An Evictable over a Gpu primary and a GpuHost secondary evicts along Gpu → GpuHost and
/// promotes along GpuHost → Gpu, Float32 and Int32, with every value intact; an operation on
/// the promoted Evictable runs on the Gpu.
#[test]
fn an_evictable_over_gpu_and_gpuhost_promotes_and_evicts_with_values_intact() -> Result<()> {
    let Some(gpu) = shared_gpu("an_evictable_over_gpu_and_gpuhost") else {
        return Ok(());
    };
    let values = tile_values();
    let primary = gpu.from_f32(&values, Shape::new(64)?)?.carrier().clone();
    let secondary = gpu.host().carrier(0, DType::FLOAT32)?;
    let evictable = Evictable::carrier(&primary, &secondary)?;
    let x = Tensor::compact(evictable.clone(), Shape::new(64)?)?;

    Evictable::evict(&evictable)?;
    assert!(Evictable::is_evicted(&evictable)?);
    let host = Evictable::secondary(&evictable)?;
    assert_eq!(host.class(), gpu.host().class());
    assert_eq!(
        GpuHost::f32s(&host)?
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>(),
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    Evictable::promote(&evictable)?;
    assert!(!Evictable::is_evicted(&evictable)?);
    assert_eq!(Evictable::primary(&evictable)?.class(), gpu.class());
    assert_eq!(
        bits(&x)?,
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let relu = ops::relu(&x)?;
    let dense = Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new(64)?)?;
    assert_eq!(bits(&relu)?, bits(&ops::relu(&dense)?)?);
    assert_eq!(x.version(), 0);

    let ints = [i32::MIN, -7, 0, 5, i32::MAX, 123_456];
    let primary = gpu.from_i32(&ints, Shape::new(6)?)?.carrier().clone();
    let evictable = Evictable::carrier(&primary, &gpu.host().carrier(0, DType::INT32)?)?;
    Evictable::evict(&evictable)?;
    assert_eq!(GpuHost::i32s(&Evictable::secondary(&evictable)?)?, ints);
    Evictable::promote(&evictable)?;
    let back = numbers(&Tensor::compact(evictable, Shape::new(6)?)?)?;
    assert_eq!(back, ints.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    Ok(())
}

/// A failing upload (an injected validation error at the submission of GpuHost → Gpu) and a
/// failing download (out of memory when mapping Gpu → GpuHost) publish nothing: the tile keeps
/// its location and values, the version does not move, and the same call succeeds on retry.
#[test]
fn failing_tile_routes_leave_the_tile_where_it_was() -> Result<()> {
    let Some(gpu) = own_gpu("failing_tile_routes_leave_the_tile_where_it_was") else {
        return Ok(());
    };
    let values = tile_values();
    let want: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
    let tiled = streamed(&gpu, &values, 4)?;
    let x = Tensor::compact(tiled.clone(), Shape::new((8, 8))?)?;
    let tile = TileSet::new([vec![1, 1]])?;

    // The first promotion copies the seed tile slot by slot; the eviction gives the tile a
    // GpuHost carrier of its own, which later promotions move along GpuHost → Gpu.
    TiledEvictable::promote(&tiled, &tile)?;
    gpu.device()
        .inject_fault(FaultPoint::Map, Fault::OutOfMemory);
    let error = TiledEvictable::evict(&tiled, &tile).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
    assert!(error.to_string().contains("map a Gpu download"), "{error}");
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[1, 1])?.location(),
        TileLocation::Primary
    );
    assert_eq!(bits(&x)?, want);
    TiledEvictable::evict(&tiled, &tile)?;
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[1, 1])?.location(),
        TileLocation::Secondary
    );

    gpu.device()
        .inject_fault(FaultPoint::Submit, Fault::Validation);
    let error = TiledEvictable::promote(&tiled, &tile).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(
        error.to_string().contains("upload 16 GpuHost slots")
            && error.to_string().contains("injected validation failure"),
        "{error}"
    );
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[1, 1])?.location(),
        TileLocation::Secondary
    );
    assert_eq!(bits(&x)?, want);
    TiledEvictable::promote(&tiled, &tile)?;
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[1, 1])?.location(),
        TileLocation::Primary
    );
    assert_eq!(bits(&x)?, want);
    assert_eq!(x.version(), 0);

    let primary = gpu.from_f32(&values, Shape::new(64)?)?.carrier().clone();
    let evictable = Evictable::carrier(&primary, &gpu.host().carrier(0, DType::FLOAT32)?)?;
    Evictable::evict(&evictable)?;
    gpu.device()
        .inject_fault(FaultPoint::Submit, Fault::DeviceLost);
    let error = Evictable::promote(&evictable).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(
        error.to_string().contains("the device was lost (injected)"),
        "{error}"
    );
    assert!(Evictable::is_evicted(&evictable)?);
    assert_eq!(
        GpuHost::f32s(&Evictable::secondary(&evictable)?)?
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>(),
        want
    );
    Evictable::promote(&evictable)?;
    assert_eq!(bits(&Tensor::compact(evictable, Shape::new(64)?)?)?, want);
    Ok(())
}

/// GpuHost carriers are built from values (a move CPU → GpuHost has no route, the CPU being
/// definition-free), read back in bulk, and refuse what they cannot hold, naming it.
#[test]
fn gpuhost_carriers_hold_their_values_and_refuse_other_dtypes() -> Result<()> {
    let Some(gpu) = shared_gpu("gpuhost_carriers_hold_their_values") else {
        return Ok(());
    };
    let host = gpu.host();
    assert_eq!(host.gpu_class(), gpu.class());
    let carrier = gpu.host_from_f32(&[1.5, -2.25])?;
    assert_eq!(GpuHost::f32s(&carrier)?, vec![1.5, -2.25]);
    let error = GpuHost::i32s(&carrier).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type, "{error}");
    assert!(
        error.to_string().contains("a bulk Int32 read of a GpuHost"),
        "{error}"
    );
    let zeros = host.carrier(3, DType::INT32)?;
    assert_eq!(GpuHost::i32s(&zeros)?, vec![0, 0, 0]);

    let error = host.carrier(2, DType::FLOAT64).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    let cpu = Tensor::compact(Cpu::from_f32(&[1.0, 2.0], true)?, Shape::new(2)?)?;
    let error =
        strideweave::movement::move_to(&cpu, &host.carrier(2, DType::FLOAT32)?).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    assert!(
        error
            .to_string()
            .contains("no move route from CPU to GpuHost"),
        "{error}"
    );
    let t = host.tensor_f32(&[1.0, 2.0, 3.0], Shape::new(3)?)?;
    assert_eq!(numbers(&t)?, vec![1.0, 2.0, 3.0]);
    let error = host.tensor_f32(&[1.0], Shape::new(3)?).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    Ok(())
}
