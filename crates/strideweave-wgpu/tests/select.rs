//! `select` on the Gpu gives the CPU's values (docs/kernel-semantics.md: `cond ? a : b` per
//! element, all three broadcast, the chosen value copied after conversion): Float32, Int32 and
//! Bool branches, tensors and weak scalars in either place and both, on random layouts with
//! NaN and signed zeros; Int32 operands of Float32 computations converted exactly as the CPU
//! converts them, in elementwise operations and in products of an Int32 and a Float32
//! matrix.

mod common;

use common::{download, numbers, shared_gpu, upload_operands, Rng};
use strideweave::carriers::Cpu;
use strideweave::operation::{call, Operand, OptionValue};
use strideweave::{DType, Layout, Result, Shape, Tensor, Value};
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

/// `select` on the CPU operands and on their uploads: the same values, bit for bit.
fn same_selection(gpu: &Gpu, operands: &[Operand]) -> Result<()> {
    same_values(gpu, "select", operands, 0.0)
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

/// Int32 values at the edges of binary32's exact range: ties at 2^24 and 2^25 rounding to
/// even, one rounding up past a tie, the Int32 extremes (−2^31 is exact, 2^31 − 1 rounds up
/// to 2^31), and small values.
const AWKWARD_INTS: [i32; 12] = [
    16_777_217,
    16_777_219,
    33_554_435,
    33_554_437,
    -16_777_217,
    i32::MAX,
    i32::MIN,
    123_456_789,
    -987_654_321,
    0,
    -1,
    7,
];

/// Int32 tensors meeting Float32 tensors or float scalars compute in Float32 with each Int32
/// element converted as the CPU converts it (`as f32`: nearest, ties to even), also where
/// WGSL's own conversion may round either way: `add sub mul maximum minimum eq lt le select`
/// bit for bit, in both operand orders and with scalars, on random layouts; `div` of two Int32
/// tensors and `sqrt` of one within the tolerance the Gpu's division and square root have.
#[test]
fn int32_operands_convert_to_float32_exactly_like_the_cpu() -> Result<()> {
    let Some(gpu) = shared_gpu("int32_operands_convert_to_float32_exactly_like_the_cpu") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_3002);
    let int = |rng: &mut Rng| Value::Int(i64::from(AWKWARD_INTS[rng.below(AWKWARD_INTS.len())]));
    let float = |rng: &mut Rng| {
        let choices = [0.0, -0.0, 16_777_216.0, 2_147_483_648.0, -1.5, 33_554_436.0];
        Value::Float(choices[rng.below(choices.len())])
    };
    for shape in [(1, 1), (4, 3), (257, 1), (16, 17)] {
        let i = random_tensor(&mut rng, shape, DType::INT32, &int)?;
        let f = random_tensor(&mut rng, shape, DType::FLOAT32, &float)?;
        let cond = random_tensor(&mut rng, shape, DType::BOOL, &flag)?;
        for name in ["add", "sub", "mul", "maximum", "minimum", "eq", "lt", "le"] {
            same_values(&gpu, name, &[i.clone().into(), f.clone().into()], 0.0)?;
            same_values(&gpu, name, &[f.clone().into(), i.clone().into()], 0.0)?;
            if !matches!(name, "add" | "sub") {
                same_values(
                    &gpu,
                    name,
                    &[i.clone().into(), Value::Float(1.0).into()],
                    0.0,
                )?;
            }
        }
        same_values(
            &gpu,
            "mul",
            &[Value::Float(1.0).into(), i.clone().into()],
            0.0,
        )?;
        same_values(
            &gpu,
            "select",
            &[cond.clone().into(), i.clone().into(), f.clone().into()],
            0.0,
        )?;
        same_values(
            &gpu,
            "select",
            &[cond.into(), Value::Float(0.5).into(), i.clone().into()],
            0.0,
        )?;
        let j = random_tensor(&mut rng, shape, DType::INT32, &int)?;
        same_values(&gpu, "div", &[i.clone().into(), j.into()], 2.5e-7)?;
        same_values(&gpu, "sqrt", &[i.into()], 1e-6)?;
    }
    Ok(())
}

/// `name` on the CPU operands and on their uploads: the same dtype, layout and values, to the
/// bit (NaN equal to NaN) when `relative` is 0, within `relative·|cpu|` otherwise.
fn same_values(gpu: &Gpu, name: &str, operands: &[Operand], relative: f64) -> Result<()> {
    let expected = call(name, operands.to_vec(), &[])?.remove(0);
    let result = call(name, upload_operands(gpu, operands)?, &[])?.remove(0);
    assert_eq!(result.carrier().class(), gpu.class(), "{name}");
    assert_eq!(result.dtype(), expected.dtype(), "{name}");
    assert_eq!(result.layout(), expected.layout(), "{name}");
    let back = download(&result)?;
    if expected.dtype() == DType::BOOL {
        assert_eq!(back.to_values()?, expected.to_values()?, "{name}");
        return Ok(());
    }
    for (k, (g, w)) in numbers(&back)?.iter().zip(&numbers(&expected)?).enumerate() {
        let same = (*g as f32).to_bits() == (*w as f32).to_bits()
            || (g.is_nan() && w.is_nan())
            || (g - w).abs() <= relative * w.abs();
        assert!(same, "{name}: element {k}: gpu {g} vs cpu {w}");
    }
    Ok(())
}

/// Products of an Int32 and a Float32 matrix, in either order, convert the Int32 operand
/// exactly like the CPU: with a K = 1 product against ones every result is one converted
/// element, bit for bit (ties at 2^24 and 2^25, ±2^31); random layouts (column-major,
/// row-major, padded, broadcast) of awkward and small values agree within the sum tolerance,
/// accumulating in binary32 and, where the device computes it, in binary64.
#[test]
fn mixed_dtype_products_convert_the_int32_operand_like_the_cpu() -> Result<()> {
    let Some(gpu) = shared_gpu("mixed_dtype_products_convert_the_int32_operand_like_the_cpu")
    else {
        return Ok(());
    };
    let column: Vec<Value> = AWKWARD_INTS
        .iter()
        .map(|&x| Value::Int(i64::from(x)))
        .collect();
    let ints = Tensor::compact(
        Cpu::from_values(&column, DType::INT32, true)?,
        Shape::new((AWKWARD_INTS.len(), 1))?,
    )?;
    let ones = Tensor::compact(Cpu::from_f32(&[1.0, 1.0], true)?, Shape::new((2, 1))?)?;
    same_values(
        &gpu,
        "matmul",
        &[ints.clone().into(), ones.clone().into()],
        0.0,
    )?;
    same_values(&gpu, "matmul", &[ones.into(), ints.into()], 0.0)?;

    let mut rng = Rng(0x5eed_3004);
    let int = |rng: &mut Rng| {
        if rng.below(2) == 0 {
            Value::Int(i64::from(AWKWARD_INTS[rng.below(AWKWARD_INTS.len())]))
        } else {
            Value::Int(rng.below(201) as i64 - 100)
        }
    };
    let float = |rng: &mut Rng| Value::Float(f64::from(rng.float(-2.0, 2.0)));
    let accumulators: &[Option<DType>] = if gpu.device().computes_f64() {
        &[None, Some(DType::FLOAT64)]
    } else {
        &[None]
    };
    for (n, k, m) in [(1, 1, 1), (3, 5, 4), (17, 33, 15), (1, 300, 2)] {
        let i = random_tensor(&mut rng, (n, k), DType::INT32, &int)?;
        let f = random_tensor(&mut rng, (m, k), DType::FLOAT32, &float)?;
        for &accumulator in accumulators {
            for operands in [[i.clone(), f.clone()], [f.clone(), i.clone()]] {
                let options: Vec<(&str, OptionValue)> = accumulator
                    .map(|d| vec![("accumulator_dtype", OptionValue::DType(d))])
                    .unwrap_or_default();
                let cpu: Vec<Operand> = operands.iter().cloned().map(Operand::from).collect();
                let expected = call("matmul", cpu.clone(), &options)?.remove(0);
                let on_gpu = call("matmul", upload_operands(&gpu, &cpu)?, &options)?.remove(0);
                assert_eq!(on_gpu.carrier().class(), gpu.class());
                assert_eq!(on_gpu.dtype(), DType::FLOAT32);
                let (a, b) = (numbers(&operands[0])?, numbers(&operands[1])?);
                let (rows, columns) = (a.len() / k, b.len() / k);
                let terms: Vec<f64> = (0..rows * columns)
                    .map(|o| {
                        let (r, c) = (o % rows, o / rows);
                        (0..k)
                            .map(|p| (a[r + rows * p] * b[c + columns * p]).abs())
                            .sum()
                    })
                    .collect();
                let got = numbers(&download(&on_gpu)?)?;
                for (o, (g, c)) in got.iter().zip(numbers(&expected)?).enumerate() {
                    assert!(
                        (g - c).abs() <= 1e-5 * terms[o] + 1e-6,
                        "({n}, {k}, {m}) {accumulator:?} at {o}: gpu {g} vs cpu {c}"
                    );
                }
            }
        }
    }
    Ok(())
}
