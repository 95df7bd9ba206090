//! Tensors beyond the device's storage binding limit (128 MiB on llvmpipe) and dispatches
//! beyond 65535 workgroups: buffers larger than one binding are bound as consecutive windows
//! and read and written through the window of each slot (docs/gpu-carrier.md, JIT kernels).
//! The tensors are kept just over the limit: a few hundred MiB of host memory in all.

mod common;

use common::{download, numbers, shared_gpu};
use strideweave::carriers::Cpu;
use strideweave::{ops, Result, Shape, Tensor};

/// Values whose sums are exact in binary32 (multiples of 1/4 below 256).
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed) % 1021) as f32 * 0.25)
        .collect()
}

#[test]
fn kernels_run_on_tensors_beyond_the_storage_binding_limit() -> Result<()> {
    let Some(gpu) = shared_gpu("kernels_run_on_tensors_beyond_the_storage_binding_limit") else {
        return Ok(());
    };
    let limits = gpu.device().limits();
    let limit = limits.max_storage_buffer_binding_size;
    // 4096 × (limit / 4 / 4096 + 1) slots: one column of 4096 slots over the limit.
    let columns = (limit / 4 / 4096 + 1) as usize;
    let (rows, n) = (4096, 4096 * columns);
    if n as u64 * 4 > limits.max_buffer_size {
        println!(
            "SKIPPED: kernels_run_on_tensors_beyond_the_storage_binding_limit: {} holds no \
             buffer of {} bytes",
            gpu.device().adapter(),
            n * 4
        );
        return Ok(());
    }
    let a = values(n, 1);
    let b = values(n, 5);
    let shape = Shape::new(n)?;
    let (x, y) = (gpu.from_f32(&a, shape.clone())?, gpu.from_f32(&b, shape)?);

    // 2 windows for each operand and for the result; the grid's second dimension is used
    // (n / 256 workgroups are more than 65535).
    let sum = ops::add(&x, &y)?;
    assert_eq!(sum.carrier().class(), gpu.class());
    let got = numbers(&download(&sum)?)?;
    assert_eq!(got.len(), n);
    for i in (0..n).step_by(997).chain(n - 4096..n) {
        assert_eq!(got[i], f64::from(a[i] + b[i]), "slot {i}");
    }
    let windowed = format!("|w2,2:2x{}", limit / 4);
    assert!(
        gpu.device()
            .pipeline_keys()
            .iter()
            .any(|key| key.starts_with("ew|add|") && key.ends_with(&windowed)),
        "{:?}",
        gpu.device().pipeline_keys()
    );
    drop(sum);

    // Sums over the long mode of a (4096, columns) view: a tree per row, reading both
    // windows.
    let matrix = Tensor::compact(x.carrier().clone(), Shape::new((rows, columns))?)?;
    let cpu = Tensor::compact(Cpu::from_f32(&a, true)?, Shape::new((rows, columns))?)?;
    let rows_sum = numbers(&download(&ops::reduce_sum(&matrix)?)?)?;
    let expected = numbers(&ops::reduce_sum(&cpu)?)?;
    for (i, (g, c)) in rows_sum.iter().zip(&expected).enumerate() {
        assert!(
            (g - c).abs() <= 1e-5 * columns as f64 * 256.0,
            "row {i}: {g} vs {c}"
        );
    }
    drop(cpu);

    // One row over the whole buffer: a tree reduction in three passes whose first reads
    // both windows.
    let row = Tensor::compact(x.carrier().clone(), Shape::new((1, n))?)?;
    let total: f64 = a.iter().map(|v| f64::from(*v)).sum();
    let largest = a.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let got = numbers(&download(&ops::reduce_sum(&row)?)?)?;
    assert!(
        (got[0] - total).abs() <= 1e-5 * total + 1e-6,
        "{got:?} vs {total}"
    );
    assert_eq!(
        numbers(&download(&ops::reduce_max(&row)?)?)?,
        [f64::from(largest)]
    );
    assert!(
        gpu.device()
            .pipeline_keys()
            .iter()
            .any(|key| key.starts_with("tree|false|f32|native|x|")
                && key.ends_with(&format!("|w2:1x{}", limit / 4))),
        "{:?}",
        gpu.device().pipeline_keys()
    );

    // A product whose lhs (16, n / 16) lies beyond the limit and whose rhs (1, n / 16) does
    // not; the rhs is 1 at every 1024th position and 0 elsewhere, so every sum is exact in
    // binary32 and both carriers give the same bits.
    let k = n / 16;
    let lhs = Tensor::compact(x.carrier().clone(), Shape::new((16, k))?)?;
    let sparse: Vec<f32> = (0..k)
        .map(|i| if i % 1024 == 0 { 1.0 } else { 0.0 })
        .collect();
    let rhs = gpu.from_f32(&sparse, Shape::new((1, k))?)?;
    let product = numbers(&download(&ops::matmul(&lhs, &rhs)?)?)?;
    let cpu_lhs = Tensor::compact(Cpu::from_f32(&a, true)?, Shape::new((16, k))?)?;
    let cpu_rhs = Tensor::compact(Cpu::from_f32(&sparse, true)?, Shape::new((1, k))?)?;
    assert_eq!(product, numbers(&ops::matmul(&cpu_lhs, &cpu_rhs)?)?);
    Ok(())
}
