//! The Gpu carrier end to end: open the device, upload, run JIT kernels (compact and
//! strided), wait on an asynchronous move back to the CPU.
//!
//! `cargo run --release -p strideweave-wgpu --example gpu` (prints SKIPPED without an adapter;
//! `apt-get install mesa-vulkan-drivers libvulkan1` gives a software one).

use strideweave::carriers::Cpu;
use strideweave::movement::move_async;
use strideweave::{ops, DType, ErrorKind, Result, Shape, Value};
use strideweave_wgpu::Gpu;

fn main() -> Result<()> {
    let gpu = match Gpu::shared() {
        Ok(gpu) => gpu,
        Err(error) if error.kind() == ErrorKind::NotImplemented => {
            println!("SKIPPED: {error}");
            return Ok(());
        }
        Err(error) => return Err(error),
    };
    println!("adapter: {}", gpu.device().adapter());
    let limits = gpu.device().limits();
    println!(
        "limits: storage binding {} MiB, {} workgroups per dimension",
        limits.max_storage_buffer_binding_size >> 20,
        limits.max_compute_workgroups_per_dimension
    );

    // Upload a 2×3 matrix and a row (the upload facet: routes start at the Gpu class).
    let x = gpu.from_f32(&[1.0, -2.0, 3.0, -4.0, 5.0, -6.0], Shape::new((2, 3))?)?;
    let w = gpu.from_f32(&[0.5, 1.0, -1.0, 2.0, 0.0, 1.0], Shape::new((2, 3))?)?;
    let h = ops::relu(&ops::matmul(&x, &w)?)?;
    println!("relu(x·wᵀ) on {}: {:?}", h.carrier().class(), floats(&h)?);

    // A strided view runs the strided kernel; the compact pattern declined it.
    let t = x.permute(&[1, 0])?;
    let doubled = ops::add(&t, &t)?;
    println!("xᵀ + xᵀ: {:?}", floats(&doubled)?);
    println!("sum over mode 1: {:?}", floats(&ops::reduce_sum(&x)?)?);

    // Back to the CPU asynchronously: the move is pending until the device finishes.
    let cpu = Cpu::carrier(doubled.carrier().size(), DType::FLOAT32, true, false)?;
    let handle = move_async(&doubled, &cpu)?;
    let moved = handle.wait()?;
    println!(
        "moved to {}: {:?}",
        moved.carrier().class(),
        floats(&moved)?
    );

    let (compiled, reused) = gpu.device().pipeline_counts();
    println!("pipelines compiled: {compiled}, reused from the cache: {reused}");
    Ok(())
}

fn floats(t: &strideweave::Tensor) -> Result<Vec<f64>> {
    Ok(t.to_values()?
        .into_iter()
        .filter_map(|v| match v {
            Value::Float(x) => Some(x),
            _ => None,
        })
        .collect())
}
