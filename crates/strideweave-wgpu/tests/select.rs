//! `select` on the Gpu gives the CPU's values (docs/kernel-semantics.md: `cond ? a : b` per
//! element, all three broadcast, the chosen value copied after conversion): Float32, Int32 and
//! Bool branches, tensors and weak scalars in either place and both, on random layouts with
//! NaN and signed zeros; and operand dtypes the shaders do not convert are refused at the
//! capability gate, before anything is allocated or submitted.

mod common;

use common::{download, numbers, own_gpu, shared_gpu, upload_operands, Rng};
use strideweave::carrier::constructed_on_this_thread;
use strideweave::carriers::Cpu;
use strideweave::operation::{call, Operand};
use strideweave::{DType, ErrorKind, Layout, Result, Shape, Tensor, Value};
use strideweave_wgpu::Gpu;

/// A random (r, c) layout (column-major, row-major, padded or, with `broadcast`, a stride-0
/// mode) at a random offset over a CPU carrier of `dtype` whose slots `value` draws.
fn random_tensor(
    rng: &mut Rng,
    (r, c): (usize, usize),
    dtype: DType,
    value: &Draw,
) -> Result<Tensor> {
    let strides = match rng.below(4) {
        0 => [1, r],
        1 => [c, 1],
        2 => [2, 2 * r + 1],
        _ => [1, 0],
    };
    let layout = Layout::from_flat(&[r, c], &strides)?;
    let offset = rng.below(4);
    let slots: Vec<Value> = (0..offset + layout.cosize()).map(|_| value(rng)).collect();
    Tensor::new(Cpu::from_values(&slots, dtype, true)?, offset, layout)
}

/// `select` on the CPU operands and on their uploads: the same dtype, layout and values
/// (Float32 bit for bit, NaN equal to NaN).
fn same_selection(gpu: &Gpu, operands: &[Operand]) -> Result<()> {
    let expected = call("select", operands.to_vec(), &[])?.remove(0);
    let uploaded = upload_operands(gpu, operands)?;
    let result = call("select", uploaded, &[])?.remove(0);
    assert_eq!(result.carrier().class(), gpu.class());
    assert_eq!(result.dtype(), expected.dtype());
    assert_eq!(result.layout(), expected.layout());
    let back = download(&result)?;
    if expected.dtype() == DType::BOOL {
        assert_eq!(back.to_values()?, expected.to_values()?);
    } else {
        let (got, want) = (numbers(&back)?, numbers(&expected)?);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let same = (*g as f32).to_bits() == (*w as f32).to_bits() || (g.is_nan() && w.is_nan());
            assert!(same, "element {i}: gpu {g} vs cpu {w}");
        }
    }
    Ok(())
}

/// Draws a slot's value.
type Draw = dyn Fn(&mut Rng) -> Value;

fn flag(rng: &mut Rng) -> Value {
    Value::Bool(rng.below(2) == 1)
}

fn awkward(rng: &mut Rng) -> Value {
    let choices = [0.0, -0.0, 1.5, -2.25, f64::INFINITY, f64::NAN];
    Value::Float(choices[rng.below(choices.len())])
}

fn int(rng: &mut Rng) -> Value {
    let choices = [i32::MIN, -1, 0, 7, i32::MAX];
    Value::Int(i64::from(choices[rng.below(choices.len())]))
}

#[test]
fn select_matches_the_cpu_on_every_branch_dtype_and_form() -> Result<()> {
    let Some(gpu) = shared_gpu("select_matches_the_cpu_on_every_branch_dtype_and_form") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_3001);
    let branches: [(DType, &Draw, Value); 3] = [
        (DType::FLOAT32, &awkward, Value::Float(-0.0)),
        (DType::INT32, &int, Value::Int(-5)),
        (DType::BOOL, &flag, Value::Bool(true)),
    ];
    for shape in [(1, 1), (3, 5), (257, 1), (16, 17)] {
        for (dtype, value, scalar) in &branches {
            let cond = random_tensor(&mut rng, shape, DType::BOOL, &flag)?;
            let a = random_tensor(&mut rng, shape, *dtype, *value)?;
            let b = random_tensor(&mut rng, shape, *dtype, *value)?;
            let row = random_tensor(&mut rng, (1, shape.1), *dtype, *value)?;
            same_selection(&gpu, &[cond.clone().into(), a.clone().into(), b.into()])?;
            same_selection(&gpu, &[cond.clone().into(), row.into(), a.clone().into()])?;
            same_selection(
                &gpu,
                &[cond.clone().into(), a.clone().into(), (*scalar).into()],
            )?;
            same_selection(&gpu, &[cond.clone().into(), (*scalar).into(), a.into()])?;
        }
        let cond = random_tensor(&mut rng, shape, DType::BOOL, &flag)?;
        same_selection(
            &gpu,
            &[
                cond.clone().into(),
                Value::Float(2.5).into(),
                Value::Float(f64::NAN).into(),
            ],
        )?;
        same_selection(
            &gpu,
            &[cond.into(), Value::Int(3).into(), Value::Int(-4).into()],
        )?;
    }
    Ok(())
}

/// Plans whose operands the shaders would have to convert (an Int32 branch against a
/// Float32 one, an Int32 tensor with a float scalar, Int32 against Float32 in arithmetic and
/// comparisons) are not declared, so the call fails with `UnsupportedOperationPlan`
/// (NotImplemented) naming the operation, before a carrier is constructed, a pipeline
/// compiled or work submitted.
#[test]
fn mixed_operand_dtypes_are_refused_before_anything_is_allocated() -> Result<()> {
    let Some(gpu) = own_gpu("mixed_operand_dtypes_are_refused_before_anything_is_allocated") else {
        return Ok(());
    };
    let shape = Shape::new(4)?;
    let cond = Tensor::compact(
        Cpu::from_values(&[Value::Bool(true); 4], DType::BOOL, true)?,
        shape.clone(),
    )?;
    let ints = Tensor::compact(Cpu::from_i32(&[1, 2, 3, 4], true)?, shape.clone())?;
    let floats = Tensor::compact(Cpu::from_f32(&[0.5, 1.5, 2.5, 3.5], true)?, shape)?;
    let cases: Vec<(&str, Vec<Operand>)> = vec![
        (
            "select",
            vec![
                cond.clone().into(),
                ints.clone().into(),
                floats.clone().into(),
            ],
        ),
        (
            "select",
            vec![cond.into(), ints.clone().into(), Value::Float(0.5).into()],
        ),
        ("add", vec![ints.clone().into(), floats.clone().into()]),
        ("maximum", vec![floats.clone().into(), ints.clone().into()]),
        ("lt", vec![ints.clone().into(), floats.into()]),
        ("mul", vec![ints.clone().into(), Value::Float(1.5).into()]),
        ("div", vec![ints.clone().into(), ints.clone().into()]),
        ("exp", vec![ints.into()]),
    ];
    for (name, cpu_operands) in cases {
        // The CPU computes every one of them.
        call(name, cpu_operands.clone(), &[])?;
        let operands = upload_operands(&gpu, &cpu_operands)?;
        let constructed = constructed_on_this_thread();
        let (compiled, reused) = gpu.device().pipeline_counts();
        let submissions = gpu.device().submission_count();
        let error = call(name, operands, &[]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotImplemented, "{name}: {error}");
        assert!(error.to_string().contains(name), "{error}");
        assert_eq!(constructed_on_this_thread(), constructed, "{name}");
        assert_eq!(gpu.device().pipeline_counts(), (compiled, reused), "{name}");
        assert_eq!(gpu.device().submission_count(), submissions, "{name}");
    }
    Ok(())
}
