//! Comparisons on the Gpu give Bool results like the CPU's (docs/kernel-semantics.md: `eq lt
//! le` are Bool `a == b`, `a < b`, `a <= b` after conversion, NaN compares false), on random
//! layouts, with weak scalars, on Int32 and (for `eq`) on Bool tensors.

mod common;

use common::{download, shared_gpu, upload_operands, Rng};
use strideweave::carriers::Cpu;
use strideweave::operation::{call, Operand};
use strideweave::{DType, Layout, Result, Tensor, Value};
use strideweave_wgpu::Gpu;

/// A random (r, c) layout (column-major, row-major or padded) at a random offset over a CPU
/// carrier of `dtype` whose slots `value` draws.
fn random_tensor(
    rng: &mut Rng,
    (r, c): (usize, usize),
    dtype: DType,
    value: &mut dyn FnMut(&mut Rng) -> Value,
) -> Result<Tensor> {
    let strides = match rng.below(3) {
        0 => [1, r],
        1 => [c, 1],
        _ => [2, 2 * r + 1],
    };
    let layout = Layout::from_flat(&[r, c], &strides)?;
    let offset = rng.below(4);
    let slots: Vec<Value> = (0..offset + layout.cosize()).map(|_| value(rng)).collect();
    Tensor::new(Cpu::from_values(&slots, dtype, true)?, offset, layout)
}

/// `name` on the CPU operands and on their uploads: the same Bool values, on the Gpu.
fn same_bools(gpu: &Gpu, name: &str, operands: &[Operand]) -> Result<()> {
    let expected = call(name, operands.to_vec(), &[])?.remove(0);
    let uploaded = upload_operands(gpu, operands)?;
    let result = call(name, uploaded, &[])?.remove(0);
    assert_eq!(result.carrier().class(), gpu.class(), "{name}");
    assert_eq!(result.dtype(), DType::BOOL, "{name}");
    assert_eq!(result.layout(), expected.layout(), "{name}");
    assert_eq!(
        download(&result)?.to_values()?,
        expected.to_values()?,
        "{name}"
    );
    Ok(())
}

/// A Float32 from a small set rich in ties, signed zeros, infinities and NaN.
fn awkward(rng: &mut Rng) -> Value {
    let choices = [
        0.0,
        -0.0,
        1.5,
        -1.5,
        2.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    Value::Float(choices[rng.below(choices.len())])
}

#[test]
fn float32_comparisons_match_the_cpu_with_nan_and_signed_zeros() -> Result<()> {
    let Some(gpu) = shared_gpu("float32_comparisons_match_the_cpu") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_2001);
    for shape in [(1, 1), (3, 5), (257, 1), (16, 17)] {
        for name in ["eq", "lt", "le"] {
            let a = random_tensor(&mut rng, shape, DType::FLOAT32, &mut awkward)?;
            let b = random_tensor(&mut rng, shape, DType::FLOAT32, &mut awkward)?;
            same_bools(&gpu, name, &[a.clone().into(), b.into()])?;
            same_bools(&gpu, name, &[a.clone().into(), Value::Float(1.5).into()])?;
            same_bools(&gpu, name, &[a.into(), Value::Float(f64::NAN).into()])?;
        }
    }
    Ok(())
}

#[test]
fn int32_and_bool_comparisons_match_the_cpu() -> Result<()> {
    let Some(gpu) = shared_gpu("int32_and_bool_comparisons_match_the_cpu") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_2002);
    let mut int = |rng: &mut Rng| {
        let choices = [i32::MIN, -1, 0, 1, 7, i32::MAX];
        Value::Int(i64::from(choices[rng.below(choices.len())]))
    };
    let mut flag = |rng: &mut Rng| Value::Bool(rng.below(2) == 1);
    for shape in [(1, 1), (3, 5), (257, 1)] {
        for name in ["eq", "lt", "le"] {
            let a = random_tensor(&mut rng, shape, DType::INT32, &mut int)?;
            let b = random_tensor(&mut rng, shape, DType::INT32, &mut int)?;
            same_bools(&gpu, name, &[a.clone().into(), b.into()])?;
            same_bools(&gpu, name, &[a.into(), Value::Int(1).into()])?;
        }
        let a = random_tensor(&mut rng, shape, DType::BOOL, &mut flag)?;
        let b = random_tensor(&mut rng, shape, DType::BOOL, &mut flag)?;
        same_bools(&gpu, "eq", &[a.clone().into(), b.into()])?;
        same_bools(&gpu, "eq", &[a.into(), Value::Bool(true).into()])?;
    }
    Ok(())
}
