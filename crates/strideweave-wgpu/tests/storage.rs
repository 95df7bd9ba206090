//! The Gpu storage provider, upload facet and Gpu → CPU route (carrier-extension spec:
//! "Storage providers define the complete generic storage surface", "Transfer routes expose
//! exact preparation and submission", "Carrier-specific facets are typed and semantically
//! isolated").

mod common;

use common::{download, numbers, own_gpu, shared_gpu};
use strideweave::carriers::extension::carrier_definition;
use strideweave::carriers::Cpu;
use strideweave::movement::{move_async, move_to};
use strideweave::{CarrierClass, DType, ErrorKind, Layout, Result, Shape, Tensor, Value};
use strideweave_wgpu::{Fault, FaultPoint, GpuUpload};

#[test]
fn single_slots_read_and_write_through_the_device_buffer() -> Result<()> {
    let Some(gpu) = shared_gpu("single_slots_read_and_write_through_the_device_buffer") else {
        return Ok(());
    };
    let carrier = gpu.carrier(5, DType::FLOAT32)?;
    assert_eq!(carrier.class(), gpu.class());
    assert_eq!(carrier.size(), 5);
    assert_eq!(carrier.get(4)?, Value::Float(0.0));
    carrier.set(3, Value::Float(-2.5))?;
    carrier.set(0, Value::Float(0.1))?;
    assert_eq!(carrier.get(3)?, Value::Float(-2.5));
    assert_eq!(carrier.get(0)?, Value::Float(f64::from(0.1f32)));
    assert_eq!(carrier.version(), 2);
    let ints = gpu.carrier(2, DType::INT32)?;
    ints.set(1, Value::Int(i64::from(i32::MIN)))?;
    assert_eq!(ints.get(1)?, Value::Int(i64::from(i32::MIN)));
    let error = ints.set(0, Value::Int(1 << 40)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Overflow, "{error}");
    assert_eq!(ints.get(0)?, Value::Int(0));
    assert_eq!(ints.version(), 1);
    let error = carrier.get(5).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Index, "{error}");
    Ok(())
}

#[test]
fn the_class_stores_float32_int32_and_bool_only() -> Result<()> {
    let Some(gpu) = shared_gpu("the_class_stores_float32_int32_and_bool_only") else {
        return Ok(());
    };
    let carrier = gpu.carrier(1, DType::FLOAT32)?;
    assert!(carrier.supports_storage_dtype(DType::INT32)?);
    assert!(carrier.supports_storage_dtype(DType::BOOL)?);
    assert!(!carrier.supports_storage_dtype(DType::FLOAT64)?);
    let error = gpu.carrier(3, DType::FLOAT64).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(error.to_string().contains("Float64"), "{error}");
    let flags = gpu.carrier(2, DType::BOOL)?;
    flags.set(1, Value::Bool(true))?;
    assert_eq!(flags.get(0)?, Value::Bool(false));
    assert_eq!(flags.get(1)?, Value::Bool(true));
    let definition = carrier_definition(gpu.class()).expect("the Gpu definition");
    assert!(definition.kernels().is_some());
    let routes: Vec<_> = definition
        .transfers()
        .iter()
        .map(|route| {
            (
                route.route_id().to_string(),
                route.source_class(),
                route.destination_class(),
            )
        })
        .collect();
    assert_eq!(
        routes,
        vec![
            (
                "gpu-to-cpu".to_string(),
                gpu.class(),
                CarrierClass::of::<Cpu>()
            ),
            (
                "gpu-to-gpuhost".to_string(),
                gpu.class(),
                gpu.host().class()
            ),
        ]
    );
    let host = carrier_definition(gpu.host().class()).expect("the GpuHost definition");
    assert!(host.kernels().is_none());
    assert!(host.storage().elementwise_fallback());
    let host_routes: Vec<_> = host
        .transfers()
        .iter()
        .map(|route| {
            (
                route.route_id(),
                route.source_class(),
                route.destination_class(),
            )
        })
        .collect();
    assert_eq!(
        host_routes,
        vec![
            ("gpuhost-to-gpu", gpu.host().class(), gpu.class()),
            (
                "gpuhost-to-cpu",
                gpu.host().class(),
                CarrierClass::of::<Cpu>()
            ),
        ]
    );
    Ok(())
}

#[test]
fn an_upload_and_a_download_round_trip_the_values_and_the_exact_layout() -> Result<()> {
    let Some(gpu) = shared_gpu("an_upload_and_a_download_round_trip") else {
        return Ok(());
    };
    let values: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
    let cpu = Tensor::new(
        Cpu::from_f32(&values, true)?,
        2,
        "(3,(2,2)):(2,(7,1))".parse::<Layout>()?,
    )?;
    let on_gpu = gpu.upload(&cpu)?;
    assert_eq!(on_gpu.carrier().class(), gpu.class());
    assert_eq!(on_gpu.layout(), cpu.layout());
    assert_eq!(on_gpu.offset(), 0);
    assert_eq!(on_gpu.carrier().size(), cpu.layout().cosize());
    assert_eq!(numbers(&on_gpu)?, numbers(&cpu)?);
    assert!(!cpu.carrier().is_released(), "an upload copies");
    let back = download(&on_gpu)?;
    assert_eq!(
        back.carrier().class(),
        strideweave::CarrierClass::of::<Cpu>()
    );
    assert_eq!(numbers(&back)?, numbers(&cpu)?);
    assert_eq!(back.version(), 1);
    assert!(on_gpu.carrier().is_released(), "a move releases its source");

    let ints = gpu.from_i32(&[7, -8, i32::MAX], Shape::new(3)?)?;
    assert_eq!(
        numbers(&download(&ints)?)?,
        [7.0, -8.0, f64::from(i32::MAX)]
    );
    Ok(())
}

#[test]
fn a_large_download_goes_through_one_buffer_copy() -> Result<()> {
    let Some(gpu) = own_gpu("a_large_download_goes_through_one_buffer_copy") else {
        return Ok(());
    };
    let values: Vec<f32> = (0..(1 << 20)).map(|i| (i % 977) as f32).collect();
    let t = gpu.from_f32(&values, Shape::new(values.len())?)?;
    let before = gpu.device().submission_count();
    let back = download(&t)?;
    assert_eq!(gpu.device().submission_count() - before, 1);
    let read = strideweave::carriers::extension::read_f32s(back.carrier(), 0, values.len())?;
    assert_eq!(read, values);
    Ok(())
}

#[test]
fn a_pending_move_to_the_cpu_completes_and_publishes_once() -> Result<()> {
    let Some(gpu) = shared_gpu("a_pending_move_to_the_cpu_completes_and_publishes_once") else {
        return Ok(());
    };
    let t = gpu.from_f32(&[1.0, 2.0, 3.0], Shape::new(3)?)?;
    let destination = Cpu::carrier(3, DType::FLOAT32, true, false)?;
    let handle = move_async(&t, &destination)?;
    let moved = handle.wait()?;
    assert!(handle.done());
    assert!(moved.same_as(&handle.wait()?));
    assert_eq!(numbers(&moved)?, [1.0, 2.0, 3.0]);
    assert_eq!(destination.version(), 1);
    assert!(t.carrier().is_released());
    Ok(())
}

#[test]
fn uploads_go_through_the_typed_facet_and_a_cpu_to_gpu_move_has_no_route() -> Result<()> {
    let Some(gpu) = shared_gpu("uploads_go_through_the_typed_facet") else {
        return Ok(());
    };
    let carrier = gpu.carrier(1, DType::FLOAT32)?;
    let facet = carrier.require_facet::<GpuUpload>()?;
    let up = facet.from_f32(&[4.0, 5.0], Shape::new(2)?)?;
    assert_eq!(numbers(&up)?, [4.0, 5.0]);
    assert!(Cpu::from_f32(&[1.0], true)?.facet::<GpuUpload>().is_none());
    let cpu = Tensor::compact(Cpu::from_f32(&[1.0, 2.0], true)?, Shape::new(2)?)?;
    let error = move_to(&cpu, &gpu.carrier(2, DType::FLOAT32)?).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    let error = facet.from_f32(&[1.0], Shape::new(2)?).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        error.to_string(),
        "value error: 1 values for a Gpu tensor of shape 2 (2 elements)"
    );
    let flags = [Value::Bool(true), Value::Bool(false), Value::Bool(true)];
    let bools = Tensor::compact(Cpu::from_values(&flags, DType::BOOL, true)?, Shape::new(3)?)?;
    let uploaded = facet.upload(&bools)?;
    assert_eq!(uploaded.dtype(), DType::BOOL);
    assert_eq!(uploaded.to_values()?, flags);
    let back = move_to(&uploaded, &Cpu::carrier(3, DType::BOOL, true, false)?)?;
    assert_eq!(back.to_values()?, flags);
    Ok(())
}

#[test]
fn an_allocation_out_of_device_memory_is_a_memory_error_with_nothing_constructed() -> Result<()> {
    let Some(gpu) = own_gpu("an_allocation_out_of_device_memory") else {
        return Ok(());
    };
    gpu.device()
        .inject_fault(FaultPoint::Allocate, Fault::OutOfMemory);
    let error = gpu.carrier(8, DType::FLOAT32).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
    assert!(
        error
            .to_string()
            .contains("out of device memory to allocate 32 bytes"),
        "{error}"
    );
    let too_big = gpu.device().limits().max_buffer_size / 4 + 1;
    let error = gpu.carrier(too_big as usize, DType::FLOAT32).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
    assert!(error.to_string().contains("largest buffer"), "{error}");
    assert_eq!(
        gpu.carrier(8, DType::FLOAT32)?.size(),
        8,
        "the fault fired once"
    );
    Ok(())
}

#[test]
fn a_failing_slot_write_changes_neither_the_value_nor_the_version() -> Result<()> {
    let Some(gpu) = own_gpu("a_failing_slot_write") else {
        return Ok(());
    };
    let carrier = gpu.carrier(2, DType::FLOAT32)?;
    carrier.set(1, Value::Float(3.0))?;
    gpu.device()
        .inject_fault(FaultPoint::Submit, Fault::Validation);
    let error = carrier.set(1, Value::Float(9.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(
        error
            .to_string()
            .contains("wgpu rejected the call to write one Gpu slot"),
        "{error}"
    );
    assert_eq!(carrier.version(), 1);
    assert_eq!(carrier.get(1)?, Value::Float(3.0));
    Ok(())
}

#[test]
fn a_failing_download_leaves_the_source_live_and_the_destination_unchanged() -> Result<()> {
    let Some(gpu) = own_gpu("a_failing_download") else {
        return Ok(());
    };
    for point in [FaultPoint::Allocate, FaultPoint::Submit, FaultPoint::Map] {
        let t = gpu.from_f32(&[1.0, 2.0], Shape::new(2)?)?;
        let destination = Cpu::from_f32(&[7.0, 7.0], true)?;
        gpu.device().inject_fault(point, Fault::DeviceLost);
        let error = move_to(&t, &destination).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{point:?}: {error}");
        assert!(error.to_string().contains("the device was lost"), "{error}");
        assert!(!t.carrier().is_released(), "{point:?}");
        assert_eq!(t.version(), 0);
        assert_eq!(destination.version(), 0);
        assert_eq!(destination.get(0)?, Value::Float(7.0));
        assert_eq!(numbers(&t)?, [1.0, 2.0], "{point:?}: the source is intact");
    }
    Ok(())
}

#[test]
fn a_destroyed_device_fails_every_later_call_with_a_runtime_error() -> Result<()> {
    let Some(gpu) = own_gpu("a_destroyed_device") else {
        return Ok(());
    };
    let carrier = gpu.carrier(2, DType::FLOAT32)?;
    carrier.set(0, Value::Float(1.5))?;
    gpu.device().destroy();
    for error in [
        carrier.get(0).unwrap_err(),
        carrier.set(0, Value::Float(2.0)).unwrap_err(),
        gpu.carrier(2, DType::FLOAT32).unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        assert!(error.to_string().contains("the device was lost"), "{error}");
    }
    assert_eq!(carrier.version(), 1);
    Ok(())
}

/// A carrier built around a staged buffer adopts it when it holds the slots and refuses it
/// (a Value error, no carrier) when it does not; a fresh carrier gets a zeroed buffer.
#[test]
fn a_staged_buffer_is_adopted_only_when_it_holds_the_slots() -> Result<()> {
    let Some(gpu) = shared_gpu("a_staged_buffer_is_adopted_only_when_it_holds_the_slots") else {
        return Ok(());
    };
    let interface = gpu
        .interface()
        .downcast_ref::<strideweave_wgpu::GpuInterface>()
        .expect("the Gpu interface");
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let small = gpu.device().create_buffer("test staging", 8, usage)?;
    let error = interface
        .result_carrier(small, 10, DType::FLOAT32)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(
        error
            .to_string()
            .contains("a staged Gpu buffer of 2 slots cannot hold 10 slots"),
        "{error}"
    );
    let words: Vec<f32> = vec![1.5, -2.0, 3.25];
    let staged =
        gpu.device()
            .create_buffer_with("test staging", bytemuck::cast_slice(&words), usage)?;
    let carrier = interface.result_carrier(staged, 3, DType::FLOAT32)?;
    let tensor = Tensor::compact(carrier, Shape::new(3)?)?;
    assert_eq!(numbers(&download(&tensor)?)?, [1.5, -2.0, 3.25]);
    Ok(())
}
