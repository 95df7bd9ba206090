//! The route GpuHost → CPU (carrier-extension spec: "every route's source class SHALL be
//! exactly carrier_class", so the GpuHost definition declares it; "Transfer routes are
//! directional and exact"): values arrive bit for bit, the source is released, strided views
//! keep their layout, and an injected failure publishes nothing.

mod common;

use common::{numbers, own_gpu, shared_gpu};
use strideweave::carriers::extension::{read_f32s, read_i32s};
use strideweave::carriers::Cpu;
use strideweave::movement::{move_async, move_to};
use strideweave::{ops, CarrierClass, DType, ErrorKind, Layout, Result, Shape, Stride, Tensor};
use strideweave_wgpu::{Fault, FaultPoint, GpuHost};

/// Float32 values whose bits a lossy path would change: −0.0, a subnormal, a NaN payload,
/// infinities and fractions.
fn awkward_f32() -> Vec<f32> {
    vec![
        -0.0,
        f32::from_bits(1),
        f32::from_bits(0x7fc0_1234),
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.1,
        -3.75,
        1.0e30,
    ]
}

fn bits_of(t: &Tensor) -> Result<Vec<u32>> {
    assert_eq!(t.carrier().class(), CarrierClass::of::<Cpu>());
    let slots = read_f32s(t.carrier(), 0, t.carrier().size())?;
    Ok(slots.iter().map(|x| x.to_bits()).collect())
}

#[test]
fn a_gpuhost_tensor_moves_to_the_cpu_bit_for_bit() -> Result<()> {
    let Some(gpu) = shared_gpu("a_gpuhost_tensor_moves_to_the_cpu_bit_for_bit") else {
        return Ok(());
    };
    let values = awkward_f32();
    let source = gpu.host_from_f32(&values)?;
    let tensor = Tensor::compact(source.clone(), Shape::new((2, 4))?)?;
    let destination = Cpu::carrier(values.len(), DType::FLOAT32, true, false)?;
    let moved = move_to(&tensor, &destination)?;
    assert_eq!(moved.carrier().class(), destination.class());
    assert_eq!(moved.shape(), tensor.shape());
    assert_eq!(
        bits_of(&moved)?,
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert!(source.is_released(), "a move releases its source");

    let ints = [i32::MIN, -1, 0, 1, i32::MAX, 77];
    let source = gpu.host_from_i32(&ints)?;
    let tensor = Tensor::compact(source, Shape::new(6)?)?;
    let moved = move_to(&tensor, &Cpu::carrier(6, DType::INT32, true, false)?)?;
    assert_eq!(read_i32s(moved.carrier(), 0, 6)?, ints);
    Ok(())
}

/// A strided view at an offset moves its physical span (`cosize` slots from the offset) and
/// keeps its layout at offset 0; the asynchronous move gives the same values.
#[test]
fn a_strided_gpuhost_view_moves_its_span_and_keeps_its_layout() -> Result<()> {
    let Some(gpu) = shared_gpu("a_strided_gpuhost_view_moves_its_span") else {
        return Ok(());
    };
    let values: Vec<f32> = (0..20).map(|i| i as f32 * 0.5 - 3.0).collect();
    // A (3, 2) view with strides (2, 7) at offset 3: slots 3 + 2i + 7j.
    let layout = Layout::new(Shape::new((3, 2))?, Stride::new((2, 7))?)?;
    let view = Tensor::new(gpu.host_from_f32(&values)?, 3, layout.clone())?;
    let expected = numbers(&view)?;
    let span = layout.cosize();
    let moved = move_to(&view, &Cpu::carrier(span, DType::FLOAT32, true, false)?)?;
    assert_eq!(moved.offset(), 0);
    assert_eq!(moved.layout(), &layout);
    assert_eq!(numbers(&moved)?, expected);
    assert_eq!(
        bits_of(&moved)?,
        values[3..3 + span]
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    );

    let view = Tensor::new(gpu.host_from_f32(&values)?, 3, layout)?;
    let handle = move_async(&view, &Cpu::carrier(span, DType::FLOAT32, true, false)?)?;
    assert_eq!(numbers(&handle.wait()?)?, expected);
    assert!(handle.done());
    Ok(())
}

/// An injected failure of the host copy fails the move with the injected error, naming the
/// copy; the source stays live with its values and version, the destination keeps its zeros,
/// and the retry succeeds.
#[test]
fn a_failing_gpuhost_to_cpu_copy_publishes_nothing() -> Result<()> {
    let Some(gpu) = own_gpu("a_failing_gpuhost_to_cpu_copy_publishes_nothing") else {
        return Ok(());
    };
    let values = awkward_f32();
    let source = gpu.host_from_f32(&values)?;
    let tensor = Tensor::compact(source.clone(), Shape::new(8)?)?;
    let destination = Cpu::carrier(8, DType::FLOAT32, true, false)?;
    for fault in [Fault::Validation, Fault::OutOfMemory] {
        gpu.device().inject_fault(FaultPoint::HostCopy, fault);
        let error = move_to(&tensor, &destination).unwrap_err();
        let kind = if fault == Fault::Validation {
            ErrorKind::Runtime
        } else {
            ErrorKind::Memory
        };
        assert_eq!(error.kind(), kind, "{error}");
        assert!(
            error
                .to_string()
                .contains("copy 8 GpuHost slots to the CPU"),
            "{error}"
        );
        assert!(!source.is_released());
        assert_eq!(
            GpuHost::f32s(&source)?
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!((tensor.version(), destination.version()), (0, 0));
        let untouched = Tensor::compact(destination.clone(), Shape::new(8)?)?;
        assert_eq!(numbers(&untouched)?, vec![0.0; 8]);
    }
    let moved = move_to(&tensor, &destination)?;
    assert_eq!(
        bits_of(&moved)?,
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    Ok(())
}

/// The copy is host to host: once the device is lost nothing can be placed on the Gpu, but
/// a move GpuHost → CPU still succeeds.
#[test]
fn a_lost_device_does_not_stop_a_gpuhost_to_cpu_move() -> Result<()> {
    let Some(gpu) = own_gpu("a_lost_device_does_not_stop_a_gpuhost_to_cpu_move") else {
        return Ok(());
    };
    let tensor = Tensor::compact(gpu.host_from_i32(&[4, -5, 6])?, Shape::new(3)?)?;
    gpu.device().destroy();
    let error = gpu.carrier(3, DType::INT32).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(error.to_string().contains("the device was lost"), "{error}");
    let moved = move_to(&tensor, &Cpu::carrier(3, DType::INT32, true, false)?)?;
    assert_eq!(numbers(&moved)?, [4.0, -5.0, 6.0]);
    Ok(())
}

/// The route GpuHost → Gpu writes only through the copy in its own submission: an upload
/// failing at the staging allocation (out of memory) or at the submission (a lost device,
/// injected) leaves the destination's words as they were, also after later work was
/// submitted on the queue, and the retry lands the words.
#[test]
fn a_failing_upload_leaves_the_destination_untouched_by_later_submissions() -> Result<()> {
    let Some(gpu) = own_gpu("a_failing_upload_leaves_the_destination_untouched") else {
        return Ok(());
    };
    let values: Vec<f32> = (0..8).map(|i| i as f32 * 0.75 - 2.0).collect();
    let before = [9.0f32; 8];
    for (point, fault, kind, message) in [
        (
            FaultPoint::Allocate,
            Fault::OutOfMemory,
            ErrorKind::Memory,
            "GpuHost upload staging",
        ),
        (
            FaultPoint::Submit,
            Fault::DeviceLost,
            ErrorKind::Runtime,
            "upload 8 GpuHost slots: the device was lost (injected)",
        ),
    ] {
        let source = Tensor::compact(gpu.host_from_f32(&values)?, Shape::new(8)?)?;
        let destination = gpu.from_f32(&before, Shape::new(8)?)?;
        gpu.device().inject_fault(point, fault);
        let error = move_to(&source, destination.carrier()).unwrap_err();
        assert_eq!(error.kind(), kind, "{error}");
        assert!(error.to_string().contains(message), "{error}");
        assert!(!source.carrier().is_released());
        // Later submissions (a kernel, then the download) do not land the upload's words.
        let doubled = ops::add(&destination, &destination)?;
        assert_eq!(numbers(&doubled)?, vec![18.0; 8]);
        assert_eq!(numbers(&destination)?, vec![9.0; 8]);
        assert_eq!(destination.version(), 0);
        let moved = move_to(&source, destination.carrier())?;
        assert_eq!(
            numbers(&moved)?,
            values.iter().map(|v| f64::from(*v)).collect::<Vec<_>>()
        );
    }
    Ok(())
}
