//! The Gpu storage provider's bulk slot reads and slot copies (docs/gpu-carrier.md, "Bulk
//! slot reads and slot copies"): a tensor's values, a scatter between Gpu carriers and the
//! journal of provider work go through one download or one submission of buffer copies, not
//! a device round trip per slot — and a tiled operation streaming through a Gpu primary
//! places its result tiles that way. Each test counts the single-slot reads and writes
//! (`GpuDevice::slot_counts`) and the submissions of a device of its own.

mod common;

use std::sync::Arc;

use common::own_gpu;
use strideweave::carriers::{CapacityPolicy, ResidencyPolicy, TiledEvictable};
use strideweave::{ops, DType, ErrorKind, Layout, Result, Shape, Tensor};
use strideweave_wgpu::{Fault, FaultPoint, Gpu};

/// The slot reads, slot writes and submissions `gpu`'s device made so far.
fn counts(gpu: &Gpu) -> (u64, u64, u64) {
    let (reads, writes) = gpu.device().slot_counts();
    (reads, writes, gpu.device().submission_count())
}

/// What `gpu`'s device did while `run` ran: slot reads, slot writes, submissions.
fn counted<T>(gpu: &Gpu, run: impl FnOnce() -> Result<T>) -> Result<(T, (u64, u64, u64))> {
    let before = counts(gpu);
    let out = run()?;
    let after = counts(gpu);
    Ok((
        out,
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
    ))
}

fn floats(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.to_values()?
        .into_iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN) as f32)
        .collect())
}

/// A 64 × 64 Float32 `TiledEvictable` over an empty Gpu primary bounded at 4 of its 16
/// tiles of 16 × 16 and a GpuHost secondary holding `values`: every operation streams all 16
/// tiles onto the device.
fn streamed(gpu: &Gpu, values: &[f32]) -> Result<Tensor> {
    let policy: Arc<dyn ResidencyPolicy> = Arc::new(CapacityPolicy::new(4));
    let tiled = TiledEvictable::carrier(
        &gpu.carrier(0, DType::FLOAT32)?,
        &gpu.host_from_f32(values)?,
        &[4, 4],
        &[16, 16],
        Some(policy),
    )?;
    Tensor::compact(tiled, Shape::new((64, 64))?)
}

/// The streamed operations place every result tile with one slot copy and journal its
/// previous values with one download: no single-slot read or write at all, and a bounded
/// number of submissions per tile. Before the bulk paths, the streamed `add` of these 4096
/// elements read 12 288 single slots and wrote 4096 (each read a device round trip), which
/// made the 1024 × 1024 streamed add take minutes.
#[test]
fn streamed_operations_place_their_result_tiles_without_single_slot_access() -> Result<()> {
    let Some(gpu) = own_gpu("streamed_operations_place_their_result_tiles") else {
        return Ok(());
    };
    let values: Vec<f32> = (0..64 * 64)
        .map(|i| ((i * 37) % 101) as f32 - 50.0)
        .collect();
    let x = streamed(&gpu, &values)?;
    let dense = gpu.from_f32(&values, Shape::new((64, 64))?)?;

    let (sum, (reads, writes, submissions)) = counted(&gpu, || ops::add(&x, &x))?;
    assert_eq!(
        (reads, writes),
        (0, 0),
        "single-slot reads and writes of add"
    );
    // Per tile at most: two uploads (one per operand), the kernel, the journal's download
    // and the slot copy.
    assert!(submissions <= 16 * 5, "add made {submissions} submissions");
    assert_eq!(floats(&sum)?, floats(&ops::add(&dense, &dense)?)?);

    let (rows, (reads, writes, _)) = counted(&gpu, || ops::reduce_sum(&x))?;
    assert_eq!(
        (reads, writes),
        (0, 0),
        "single-slot reads and writes of reduce_sum"
    );
    for (g, c) in floats(&rows)?
        .iter()
        .zip(floats(&ops::reduce_sum(&dense)?)?)
    {
        assert!((g - c).abs() <= 1e-3, "{g} vs {c}");
    }

    let (product, (reads, writes, _)) = counted(&gpu, || ops::matmul(&x, &x))?;
    assert_eq!(
        (reads, writes),
        (0, 0),
        "single-slot reads and writes of matmul"
    );
    for (g, c) in floats(&product)?
        .iter()
        .zip(floats(&ops::matmul(&dense, &dense)?)?)
    {
        assert!((g - c).abs() <= 1e-3 * (1.0 + c.abs()), "{g} vs {c}");
    }
    Ok(())
}

/// A gapped view's values arrive in one download, pieces far apart included.
#[test]
fn a_tensor_reads_its_values_in_one_download() -> Result<()> {
    let Some(gpu) = own_gpu("a_tensor_reads_its_values_in_one_download") else {
        return Ok(());
    };
    let slots: Vec<f32> = (0..200_000).map(|i| i as f32).collect();
    // Three elements 5 slots apart, then three more 99 990 slots on: two pieces.
    let t = gpu.strided_f32(&slots, Layout::from_flat(&[3, 2], &[5, 99_990])?)?;
    let (values, (reads, writes, submissions)) = counted(&gpu, || floats(&t))?;
    assert_eq!(values, [0.0, 5.0, 10.0, 99_990.0, 99_995.0, 100_000.0]);
    assert_eq!((reads, writes, submissions), (0, 0, 1));
    Ok(())
}

/// A scatter from one Gpu carrier into another, and from a carrier into itself, is one
/// submission of buffer copies; an Int32 source into a Float32 carrier is converted slot by
/// slot, as the framework does for any class.
#[test]
fn a_scatter_between_gpu_carriers_is_one_submission_of_copies() -> Result<()> {
    let Some(gpu) = own_gpu("a_scatter_between_gpu_carriers_is_one_submission") else {
        return Ok(());
    };
    let source = gpu.from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Shape::new((3, 2))?)?;
    let target = gpu.from_f32(&[0.0; 16], Shape::new(16)?)?;
    let version = target.carrier().version();
    let (_, (reads, writes, submissions)) = counted(&gpu, || {
        // Source elements 0..6 to slots 1, 2, 3 and 9, 10, 11.
        target
            .carrier()
            .scatter(&source, &target, &Layout::from_flat(&[3, 2], &[1, 8])?, 1)
    })?;
    assert_eq!((reads, writes, submissions), (0, 0, 1));
    assert_eq!(target.carrier().version(), version + 1);
    let mut expected = [0.0; 16];
    for (slot, x) in [1, 2, 3, 9, 10, 11].into_iter().zip(1..) {
        expected[slot] = x as f32;
    }
    assert_eq!(floats(&target)?, expected);

    // Into itself: slots 1..4 to slots 2..5, overlapping (gathered first).
    let view = Tensor::new(target.carrier().clone(), 1, Layout::from_flat(&[3], &[1])?)?;
    let (_, (reads, writes, _)) = counted(&gpu, || {
        target
            .carrier()
            .scatter(&view, &target, &Layout::from_flat(&[3], &[1])?, 2)
    })?;
    assert_eq!((reads, writes), (0, 0));
    expected[2..5].copy_from_slice(&[1.0, 2.0, 3.0]);
    assert_eq!(floats(&target)?, expected);

    let ints = gpu.from_i32(&[7, -8], Shape::new(2)?)?;
    let (_, (_, writes, _)) = counted(&gpu, || {
        target
            .carrier()
            .scatter(&ints, &target, &Layout::from_flat(&[2], &[1])?, 14)
    })?;
    assert_eq!(writes, 2, "a conversion is written slot by slot");
    expected[14..].copy_from_slice(&[7.0, -8.0]);
    assert_eq!(floats(&target)?, expected);
    Ok(())
}

/// A slot copy that fails at its encoding or submission (an injected validation error, a
/// lost device) fails the scatter with the device's error: the target keeps its values and
/// its version.
#[test]
fn a_failing_slot_copy_writes_nothing() -> Result<()> {
    let Some(gpu) = own_gpu("a_failing_slot_copy_writes_nothing") else {
        return Ok(());
    };
    let source = gpu.from_f32(&[1.0, 2.0], Shape::new(2)?)?;
    let target = gpu.from_f32(&[9.0; 4], Shape::new(4)?)?;
    let version = target.carrier().version();
    gpu.device()
        .inject_fault(FaultPoint::Submit, Fault::Validation);
    let error = target
        .carrier()
        .scatter(&source, &target, &Layout::from_flat(&[2], &[2])?, 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(
        error.to_string().contains("encode a Gpu slot copy")
            && error.to_string().contains("injected validation failure"),
        "{error}"
    );
    assert_eq!(target.carrier().version(), version);
    assert_eq!(floats(&target)?, [9.0; 4]);

    gpu.device().destroy();
    let error = target
        .carrier()
        .scatter(&source, &target, &Layout::from_flat(&[2], &[2])?, 0)
        .unwrap_err();
    assert!(error.to_string().contains("the device was lost"), "{error}");
    assert_eq!(target.carrier().version(), version);
    assert_eq!(
        target.carrier().get(0).unwrap_err().kind(),
        ErrorKind::Runtime,
        "a lost device reads nothing"
    );
    Ok(())
}
