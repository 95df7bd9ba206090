//! Failures of the Gpu kernels publish nothing (carrier-extension spec: "Kernel patterns are
//! authoritative and deterministically selected" — a preparation error is terminal;
//! "Provider completion and prepared work have one public contract"): a shader that fails
//! validation, out-of-memory and lost-device faults injected through wgpu's error path, a
//! device destroyed for real, and a pack kernel whose submission returns a pending
//! completion.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{numbers, own_gpu};
use strideweave::carriers::extension::{
    InterfaceHandle, KernelPack, KernelPattern, Preparation, PreparedKernel, ProviderCompletion,
    ProviderResult, Submitted,
};
use strideweave::operation::{
    call, operation_definition, resolve_operation_plan, OperationCapability, PlanOperand,
};
use strideweave::{register_kernel_pack, DType, ErrorKind, Result, Shape, Tensor};
use strideweave_wgpu::{Fault, FaultPoint, Gpu, GpuCompletion, GpuInterface};

fn neg_plan() -> Result<OperationCapability> {
    Ok(OperationCapability::from_plan(resolve_operation_plan(
        "neg",
        &[PlanOperand::Tensor(DType::FLOAT32)],
        None,
    )?))
}

/// Attaches a pack with one preferred `neg` pattern preparing through `prepare`.
fn attach(
    gpu: &Gpu,
    prepare: impl Fn(&GpuInterface, &InterfaceHandle, &Tensor) -> Result<Preparation>
        + Send
        + Sync
        + 'static,
) -> Result<()> {
    let pattern = KernelPattern::new(
        &operation_definition("neg")?,
        [neg_plan()?],
        "test.neg",
        move |invocation, handle| {
            let interface = handle
                .downcast_ref::<GpuInterface>()
                .expect("the Gpu interface");
            prepare(interface, handle, invocation.call().tensor(0)?)
        },
        100,
    )?;
    register_kernel_pack(KernelPack::new(
        "test",
        "1",
        gpu.class(),
        gpu.interface().clone(),
        [pattern],
    )?)
}

fn neg(x: &Tensor) -> Result<Tensor> {
    Ok(call("neg", [x.clone().into()], &[])?.remove(0))
}

#[test]
fn a_shader_failing_validation_is_a_terminal_runtime_error_and_caches_nothing() -> Result<()> {
    let Some(gpu) = own_gpu("a_shader_failing_validation") else {
        return Ok(());
    };
    attach(&gpu, |interface, _, _| {
        interface
            .device()
            .pipeline("test.bad", "@compute @workgroup_size(1) fn main( {")?;
        unreachable!("the shader does not compile")
    })?;
    let x = gpu.from_f32(&[1.0, 2.0], Shape::new(2)?)?;
    for _ in 0..2 {
        let error = neg(&x).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        assert!(
            error
                .to_string()
                .contains("wgpu rejected the call to compile the compute kernel 'test.bad'"),
            "{error}"
        );
    }
    assert!(!gpu
        .device()
        .pipeline_keys()
        .contains(&"test.bad".to_string()));
    assert_eq!(x.version(), 0);
    assert_eq!(numbers(&x)?, [1.0, 2.0]);
    Ok(())
}

/// Runs `add` with `fault` injected at `point`: the error, then a retry that succeeds.
fn faulted_add(point: FaultPoint, fault: Fault, kind: ErrorKind, message: &str) -> Result<()> {
    let Some(gpu) = own_gpu("faulted_add") else {
        return Ok(());
    };
    let x = gpu.from_f32(&[1.0, -2.0, 3.0], Shape::new(3)?)?;
    let y = gpu.from_f32(&[0.5, 0.5, 0.5], Shape::new(3)?)?;
    let submissions = gpu.device().submission_count();
    gpu.device().inject_fault(point, fault);
    let error = call("add", [x.clone().into(), y.clone().into()], &[]).unwrap_err();
    assert_eq!(error.kind(), kind, "{point:?}: {error}");
    assert!(error.to_string().contains(message), "{point:?}: {error}");
    if point != FaultPoint::Submit {
        assert_eq!(
            gpu.device().submission_count(),
            submissions,
            "nothing submitted"
        );
    }
    assert_eq!((x.version(), y.version()), (0, 0));
    assert_eq!(numbers(&x)?, [1.0, -2.0, 3.0]);
    let sum = call("add", [x.into(), y.into()], &[])?.remove(0);
    assert_eq!(numbers(&sum)?, [1.5, -1.5, 3.5]);
    Ok(())
}

#[test]
fn a_result_out_of_device_memory_is_a_memory_error_with_nothing_published() -> Result<()> {
    faulted_add(
        FaultPoint::Allocate,
        Fault::OutOfMemory,
        ErrorKind::Memory,
        "out of device memory to allocate 12 bytes for result of 'add'",
    )
}

#[test]
fn a_device_lost_at_submission_is_a_runtime_error_with_nothing_published() -> Result<()> {
    faulted_add(
        FaultPoint::Submit,
        Fault::DeviceLost,
        ErrorKind::Runtime,
        "cannot run the Gpu 'add' kernel: the device was lost",
    )
}

#[test]
fn a_compilation_rejected_by_wgpu_is_a_runtime_error_and_the_retry_compiles() -> Result<()> {
    faulted_add(
        FaultPoint::Compile,
        Fault::Validation,
        ErrorKind::Runtime,
        "wgpu rejected the call to compile the compute kernel 'ew|add|f32|x1u|x1u|rx1u'",
    )
}

#[test]
fn kernels_on_a_destroyed_device_fail_with_a_runtime_error() -> Result<()> {
    let Some(gpu) = own_gpu("kernels_on_a_destroyed_device") else {
        return Ok(());
    };
    let x = gpu.from_f32(&[1.0, 2.0], Shape::new(2)?)?;
    assert_eq!(numbers(&neg(&x)?)?, [-1.0, -2.0]);
    gpu.device().destroy();
    let error = neg(&x).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(error.to_string().contains("the device was lost"), "{error}");
    assert_eq!(x.version(), 0);
    Ok(())
}

const NEG_WGSL: &str = "
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y)) { y[id.x] = -x[id.x]; }
}
";

/// Slot shared between the test and its pack kernel: the completion the kernel returned.
type Shared = Arc<Mutex<Option<Arc<GpuCompletion<ProviderResult>>>>>;

#[test]
fn a_pack_kernel_submits_device_work_and_returns_a_pending_completion() -> Result<()> {
    let Some(gpu) = own_gpu("a_pack_kernel_submits_device_work") else {
        return Ok(());
    };
    let shared: Shared = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&shared);
    attach(&gpu, move |interface, handle, x| {
        let device = Arc::clone(interface.device());
        let pipeline = device.pipeline("test.neg", NEG_WGSL)?;
        let input = interface.buffer_of(x)?;
        let slots = x.layout().size();
        let handle = handle.clone();
        let slot = Arc::clone(&slot);
        let x = x.clone();
        Ok(Preparation::Kernel(PreparedKernel::new(
            handle.clone(),
            move || {
                assert_eq!((x.offset(), x.layout().cosize()), (0, slots), "compact");
                let output = device.create_buffer(
                    "test result",
                    slots as u64 * 4,
                    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                )?;
                let commands =
                    device.scoped(FaultPoint::Submit, "encode the test kernel", |d| {
                        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                            label: None,
                            layout: &pipeline.get_bind_group_layout(0),
                            entries: &[
                                wgpu::BindGroupEntry {
                                    binding: 0,
                                    resource: input.as_entire_binding(),
                                },
                                wgpu::BindGroupEntry {
                                    binding: 1,
                                    resource: output.as_entire_binding(),
                                },
                            ],
                        });
                        let mut encoder = d.create_command_encoder(&Default::default());
                        {
                            let mut pass = encoder.begin_compute_pass(&Default::default());
                            pass.set_pipeline(&pipeline);
                            pass.set_bind_group(0, &group, &[]);
                            pass.dispatch_workgroups((slots as u32).div_ceil(64), 1, 1);
                        }
                        encoder.finish()
                    })?;
                let index = device.submit("run the test kernel", commands)?;
                let finished = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&finished);
                device
                    .wgpu_queue()
                    .on_submitted_work_done(move || flag.store(true, Ordering::Release));
                let result_handle = handle.clone();
                let completion = Arc::new(GpuCompletion::new(
                    Arc::clone(&device),
                    index,
                    "run the test kernel".to_string(),
                    finished,
                    move || {
                        let interface = result_handle
                            .downcast_ref::<GpuInterface>()
                            .expect("the Gpu interface");
                        let carrier = interface.result_carrier(output, slots, DType::FLOAT32)?;
                        ProviderResult::new([Tensor::compact(carrier, Shape::new(slots)?)?])
                    },
                ));
                // `done` polls the device without blocking: spinning on it alone reaches the
                // terminal outcome, no `wait` needed.
                let start = std::time::Instant::now();
                while !completion.done() {
                    assert!(start.elapsed().as_secs() < 30, "done() never turned true");
                    std::thread::yield_now();
                }
                *slot.lock().unwrap() = Some(Arc::clone(&completion));
                Ok(Submitted::Pending(completion))
            },
        )))
    })?;
    let values: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let x = gpu.from_f32(&values, Shape::new(1000)?)?;
    let y = neg(&x)?;
    let completion = shared.lock().unwrap().clone().expect("the kernel ran");
    assert!(
        completion.done(),
        "the framework waited for the terminal outcome"
    );
    let again = completion.wait()?.outputs()[0].clone();
    assert!(again.same_as(&y), "every wait sees the same result");
    assert_eq!(y.carrier().class(), gpu.class());
    let expected: Vec<f64> = values.iter().map(|v| -f64::from(*v)).collect();
    assert_eq!(numbers(&y)?, expected);
    assert!(gpu
        .device()
        .pipeline_keys()
        .contains(&"test.neg".to_string()));
    Ok(())
}
