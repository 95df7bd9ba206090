//! The fast CPU kernels of the 22 built-in operations against hand-computed values
//! (docs/kernel-semantics.md), through the public API only: contiguous operands, permuted
//! views, stride-0 broadcasts, nested shapes, Int32 overflow, and sizes above the threading
//! threshold.
//!
//! Every call goes through [`run`], which checks that the result is a fresh CPU tensor:
//! version 0, offset 0, the canonical layout, exactly `cosize` slots, operands unchanged.

use strideweave::carriers::Cpu;
use strideweave::operation::{call, Operand, OptionValue};
use strideweave::{CarrierClass, DType, ErrorKind, Layout, Result, Shape, Tensor, Value};

/// A Float32 CPU tensor holding `values` viewed through `layout` (e.g. `"(2,3):(3,1)"`).
fn f32_view(values: &[f32], layout: &str) -> Result<Tensor> {
    Tensor::new(Cpu::from_f32(values, true)?, 0, layout.parse()?)
}

/// An Int32 CPU tensor holding `values` viewed through `layout`.
fn i32_view(values: &[i32], layout: &str) -> Result<Tensor> {
    Tensor::new(Cpu::from_i32(values, true)?, 0, layout.parse()?)
}

/// A compact Float32 CPU tensor of `shape` (e.g. `"(2,3)"`).
fn f32s(values: &[f32], shape: &str) -> Result<Tensor> {
    Tensor::compact(Cpu::from_f32(values, true)?, shape.parse()?)
}

/// A compact Int32 CPU tensor of `shape`.
fn i32s(values: &[i32], shape: &str) -> Result<Tensor> {
    Tensor::compact(Cpu::from_i32(values, true)?, shape.parse()?)
}

/// A compact Bool CPU tensor of `shape`.
fn bools(values: &[bool], shape: &str) -> Result<Tensor> {
    let values: Vec<Value> = values.iter().map(|&b| Value::Bool(b)).collect();
    Tensor::compact(
        Cpu::from_values(&values, DType::BOOL, true)?,
        shape.parse()?,
    )
}

/// The shape written as `"((2,2),3)"`.
fn shape(written: &str) -> Result<Shape> {
    Ok(written.parse()?)
}

/// Calls `name` and checks that its single result is a fresh CPU tensor and the operands
/// are untouched.
fn run(name: &str, operands: Vec<Operand>, options: &[(&str, OptionValue)]) -> Result<Tensor> {
    let tensors: Vec<Tensor> = operands
        .iter()
        .filter_map(|o| o.as_tensor().cloned())
        .collect();
    // Debug strings, so that NaN compares equal to itself.
    let before: Vec<(String, u64)> = tensors
        .iter()
        .map(|t| Ok((format!("{:?}", t.to_values()?), t.version())))
        .collect::<Result<_>>()?;
    let mut results = call(name, operands, options)?;
    assert_eq!(results.len(), 1, "'{name}' returns one result");
    let result = results.remove(0);
    assert_eq!(
        result.carrier().class(),
        CarrierClass::of::<Cpu>(),
        "'{name}'"
    );
    assert_eq!(result.version(), 0, "'{name}'");
    assert_eq!(result.offset(), 0, "'{name}'");
    assert_eq!(
        result.layout(),
        &Layout::column_major(result.shape().clone()),
        "'{name}'"
    );
    assert_eq!(
        result.carrier().size(),
        result.layout().cosize(),
        "'{name}'"
    );
    for (t, (values, version)) in tensors.iter().zip(before) {
        assert!(!t.carrier().same_as(result.carrier()), "'{name}'");
        assert_eq!(t.version(), version, "'{name}' moved an operand's version");
        let now = format!("{:?}", t.to_values()?);
        assert_eq!(now, values, "'{name}' wrote an operand");
    }
    Ok(result)
}

/// `run` without options.
fn op(name: &str, operands: Vec<Operand>) -> Result<Tensor> {
    run(name, operands, &[])
}

/// The result's Float32 values in ordinal order.
fn floats(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.to_values()?
        .into_iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN) as f32)
        .collect())
}

/// The result's Int32 values in ordinal order.
fn ints(t: &Tensor) -> Result<Vec<i64>> {
    Ok(t.to_values()?
        .into_iter()
        .map(|v| match v {
            Value::Int(i) => i,
            other => panic!("not an Int32 value: {other:?}"),
        })
        .collect())
}

/// The result's Bool values in ordinal order.
fn flags(t: &Tensor) -> Result<Vec<bool>> {
    Ok(t.to_values()?
        .into_iter()
        .map(|v| {
            v.as_bool()
                .unwrap_or_else(|| panic!("not a Bool value: {v:?}"))
        })
        .collect())
}

/// Asserts bitwise equality of Float32 results (NaN equal to NaN).
#[track_caller]
fn assert_bits(actual: &[f32], expected: &[f32]) {
    let bits = |v: &[f32]| -> Vec<u32> {
        v.iter()
            .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
            .collect()
    };
    assert_eq!(bits(actual), bits(expected), "{actual:?} != {expected:?}");
}

/// Asserts `|actual - expected| ≤ 1e-6 + 1e-6·|expected|` (NaN matching NaN).
#[track_caller]
fn assert_close(actual: &[f32], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len());
    for (a, e) in actual.iter().zip(expected) {
        if e.is_nan() {
            assert!(a.is_nan(), "{a} != NaN in {actual:?}");
        } else if e.is_infinite() {
            assert_eq!(f64::from(*a), *e, "in {actual:?}");
        } else {
            assert!(
                (f64::from(*a) - e).abs() <= 1e-6 + 1e-6 * e.abs(),
                "{a} != {e} in {actual:?}"
            );
        }
    }
}

/// Asserts an Overflow error naming the operation and `detail`.
#[track_caller]
fn assert_overflow(result: Result<Tensor>, name: &str, detail: &str) {
    match result {
        Ok(t) => panic!("'{name}' did not overflow: {t:?}"),
        Err(error) => {
            assert_eq!(error.kind(), ErrorKind::Overflow, "{error}");
            let message = error.to_string();
            assert!(message.contains(&format!("'{name}'")), "{message}");
            assert!(message.contains(detail), "{detail:?} not in {message:?}");
        }
    }
}

#[test]
fn add_contiguous_permuted_broadcast_and_nested() -> Result<()> {
    let a = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "(2,3)")?;
    let b = f32s(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], "(2,3)")?;
    assert_bits(
        &floats(&op("add", vec![a.clone().into(), b.into()])?)?,
        &[11.0, 22.0, 33.0, 44.0, 55.0, 66.0],
    );
    // A (3,2) row-major buffer read transposed: t(i, j) = values[3i + j].
    let t = f32_view(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], "(2,3):(3,1)")?;
    assert_bits(
        &floats(&op("add", vec![a.clone().into(), t.into()])?)?,
        &[11.0, 42.0, 23.0, 54.0, 35.0, 66.0],
    );
    let permuted = f32s(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], "(3,2)")?.permute(&[1, 0])?;
    assert_bits(
        &floats(&op("add", vec![a.clone().into(), permuted.into()])?)?,
        &[11.0, 42.0, 23.0, 54.0, 35.0, 66.0],
    );
    // Stride-0 operands: an explicit broadcast view and an implicit (2,1) broadcast.
    let column = f32s(&[100.0, 200.0], "(2,1)")?;
    let explicit = column.broadcast_to(&shape("(2,3)")?)?;
    assert_eq!(explicit.layout().stride().leaves(), [1, 0]);
    let expected = [101.0, 202.0, 103.0, 204.0, 105.0, 206.0];
    assert_bits(
        &floats(&op("add", vec![a.clone().into(), explicit.into()])?)?,
        &expected,
    );
    assert_bits(
        &floats(&op("add", vec![column.into(), a.clone().into()])?)?,
        &expected,
    );
    let row = f32s(&[1.0, 2.0, 3.0], "(3)")?.broadcast_in_dim(&shape("(2,3)")?, &[1])?;
    assert_bits(
        &floats(&op("add", vec![a.into(), row.into()])?)?,
        &[2.0, 3.0, 5.0, 6.0, 8.0, 9.0],
    );
    // A nested shape ((2,2),3) against a nested view with gaps in its slots.
    let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let nested = f32s(&values, "((2,2),3)")?;
    let spaced: Vec<f32> = (0..36).map(|i| 1000.0 * i as f32).collect();
    let gappy = f32_view(&spaced, "((2,2),3):((1,5),12)")?;
    let expected: Vec<f32> = (0..12)
        .map(|o: usize| {
            let (i0, i1, j) = (o % 2, (o / 2) % 2, o / 4);
            o as f32 + 1000.0 * (i0 + 5 * i1 + 12 * j) as f32
        })
        .collect();
    let sum = op("add", vec![nested.into(), gappy.into()])?;
    assert_eq!(sum.shape(), &shape("((2,2),3)")?);
    assert_bits(&floats(&sum)?, &expected);
    Ok(())
}

#[test]
fn add_promotes_and_checks_int32() -> Result<()> {
    let i = i32s(&[1, 2, 16_777_217], "(3)")?;
    let f = f32s(&[0.5, 0.25, 0.0], "(3)")?;
    assert_bits(
        &floats(&op("add", vec![i.into(), f.into()])?)?,
        &[1.5, 2.25, 16_777_216.0],
    );
    let a = i32s(&[1, i32::MAX, 3, 4], "(4)")?;
    let b = i32s(&[1, 0, -3, 4], "(4)")?;
    assert_eq!(
        ints(&op("add", vec![a.clone().into(), b.into()])?)?,
        [2, i64::from(i32::MAX), 0, 8]
    );
    // A transposed Int32 view: t(i, j) = values[3i + j].
    let t = i32_view(&[1, 2, 3, 4, 5, 6], "(2,3):(3,1)")?;
    let u = i32s(&[10, 20, 30, 40, 50, 60], "(2,3)")?;
    assert_eq!(
        ints(&op("add", vec![t.into(), u.into()])?)?,
        [11, 24, 32, 45, 53, 66]
    );
    let one = i32s(&[1], "(1)")?;
    assert_overflow(
        op("add", vec![a.into(), one.into()]),
        "add",
        "2147483647 + 1",
    );
    Ok(())
}

#[test]
fn large_adds_split_over_threads_and_match_element_by_element() -> Result<()> {
    let n = 300_000;
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let sum = op(
        "add",
        vec![f32s(&a, "(300000)")?.into(), f32s(&b, "(300000)")?.into()],
    )?;
    assert_bits(&floats(&sum)?, &expected);
    // The same through strided walks: a (600,500) permuted view plus a broadcast row.
    let t = f32_view(&a, "(600,500):(500,1)")?;
    let row: Vec<f32> = (0..500).map(|j| j as f32).collect();
    let row = f32_view(&row, "(1,500):(0,1)")?;
    let sum = op("add", vec![t.into(), row.into()])?;
    let expected: Vec<f32> = (0..n)
        .map(|o| {
            let (i, j) = (o % 600, o / 600);
            a[500 * i + j] + j as f32
        })
        .collect();
    assert_bits(&floats(&sum)?, &expected);
    // Int32 overflow far into the second thread's half is still reported.
    let mut ints_a = vec![1i32; n];
    ints_a[n - 3] = i32::MAX;
    let ints_a = i32s(&ints_a, "(300000)")?;
    let ones = i32s(&vec![1; n], "(300000)")?;
    assert_overflow(
        op("add", vec![ints_a.into(), ones.into()]),
        "add",
        "2147483647 + 1",
    );
    Ok(())
}

#[test]
fn sub_mul_and_elementwise_mul() -> Result<()> {
    let a = f32s(&[1.5, -2.0, 4.0], "(3)")?;
    let b = f32s(&[0.5, 3.0, -1.0], "(3)")?;
    assert_bits(
        &floats(&op("sub", vec![a.clone().into(), b.clone().into()])?)?,
        &[1.0, -5.0, 5.0],
    );
    assert_bits(
        &floats(&op(
            "sub",
            vec![a.clone().into(), f32s(&[1.0], "(1)")?.into()],
        )?)?,
        &[0.5, -3.0, 3.0],
    );
    assert_bits(
        &floats(&op(
            "elementwise_mul",
            vec![a.clone().into(), b.clone().into()],
        )?)?,
        &[0.75, -6.0, -4.0],
    );
    assert_bits(
        &floats(&op("mul", vec![a.clone().into(), b.into()])?)?,
        &[0.75, -6.0, -4.0],
    );
    assert_bits(
        &floats(&op("mul", vec![a.clone().into(), 2.0.into()])?)?,
        &[3.0, -4.0, 8.0],
    );
    assert_bits(
        &floats(&op("mul", vec![(-1.0).into(), a.into()])?)?,
        &[-1.5, 2.0, -4.0],
    );
    let i = i32s(&[3, -4, 65_536], "(3)")?;
    assert_eq!(
        ints(&op("mul", vec![i.clone().into(), Operand::from(3_i64)])?)?,
        [9, -12, 196_608]
    );
    assert_bits(
        &floats(&op("mul", vec![i.clone().into(), 0.5.into()])?)?,
        &[1.5, -2.0, 32_768.0],
    );
    assert_overflow(
        op("mul", vec![i.clone().into(), i.clone().into()]),
        "mul",
        "65536 * 65536",
    );
    assert_overflow(
        op("elementwise_mul", vec![i.clone().into(), i.clone().into()]),
        "elementwise_mul",
        "65536 * 65536",
    );
    let low = i32s(&[0, i32::MIN], "(2)")?;
    assert_overflow(
        op("sub", vec![low.into(), i32s(&[0, 1], "(2)")?.into()]),
        "sub",
        "-2147483648 - 1",
    );
    assert_eq!(
        ints(&op("sub", vec![i.clone().into(), i.into()])?)?,
        [0, 0, 0]
    );
    Ok(())
}

#[test]
fn div_is_float32_with_ieee_edge_cases() -> Result<()> {
    let a = i32s(&[1, -1, 0, 7], "(4)")?;
    let b = i32s(&[0, 0, 0, 2], "(4)")?;
    assert_bits(
        &floats(&op("div", vec![a.into(), b.into()])?)?,
        &[f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 3.5],
    );
    let x = f32s(&[1.0, 3.0], "(2)")?;
    assert_bits(
        &floats(&op("div", vec![x.into(), 3.0.into()])?)?,
        &[1.0 / 3.0, 1.0],
    );
    Ok(())
}

#[test]
fn neg_and_abs() -> Result<()> {
    let x = f32s(&[1.5, -0.0, f32::NAN, -3.0], "(4)")?;
    assert_bits(
        &floats(&op("neg", vec![x.clone().into()])?)?,
        &[-1.5, 0.0, f32::NAN, 3.0],
    );
    assert_bits(
        &floats(&op("abs", vec![x.into()])?)?,
        &[1.5, 0.0, f32::NAN, 3.0],
    );
    let i = i32s(&[5, -7, i32::MAX], "(3)")?;
    assert_eq!(
        ints(&op("neg", vec![i.clone().into()])?)?,
        [-5, 7, -i64::from(i32::MAX)]
    );
    assert_eq!(
        ints(&op("abs", vec![i.into()])?)?,
        [5, 7, i64::from(i32::MAX)]
    );
    let min = i32s(&[3, i32::MIN], "(2)")?;
    assert_overflow(op("neg", vec![min.clone().into()]), "neg", "-(-2147483648)");
    assert_overflow(op("abs", vec![min.into()]), "abs", "|-2147483648|");
    Ok(())
}

/// A binary64 reference function.
type Reference = fn(f64) -> f64;

#[test]
fn transcendentals_within_tolerance() -> Result<()> {
    let xs = [0.0f32, 1.0, -2.5, 0.5];
    let x = f32s(&xs, "(2,2)")?;
    let wide: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
    let cases: [(&str, Reference); 5] = [
        ("exp", f64::exp),
        ("log", f64::ln),
        ("sqrt", f64::sqrt),
        ("tanh", f64::tanh),
        ("sigmoid", |v| 1.0 / (1.0 + (-v).exp())),
    ];
    for (name, f) in cases {
        let expected: Vec<f64> = wide.iter().map(|&v| f(v)).collect();
        let result = op(name, vec![x.clone().into()])?;
        assert_close(&floats(&result)?, &expected);
        // Permuted operand: the same values in transposed order.
        let transposed = op(name, vec![x.permute(&[1, 0])?.into()])?;
        let reordered = [expected[0], expected[2], expected[1], expected[3]];
        assert_close(&floats(&transposed)?, &reordered);
    }
    let negative = f32s(&[-1.0], "(1)")?;
    assert!(floats(&op("log", vec![negative.clone().into()])?)?[0].is_nan());
    assert!(floats(&op("sqrt", vec![negative.into()])?)?[0].is_nan());
    let i = i32s(&[4, 9], "(2)")?;
    assert_bits(&floats(&op("sqrt", vec![i.into()])?)?, &[2.0, 3.0]);
    Ok(())
}

#[test]
fn relu_maximum_minimum() -> Result<()> {
    let x = f32s(&[-1.0, 2.0, f32::NAN, -0.0], "(4)")?;
    let relu = floats(&op("relu", vec![x.clone().into()])?)?;
    assert_bits(&relu, &[0.0, 2.0, f32::NAN, 0.0]);
    assert_eq!(
        ints(&op("relu", vec![i32s(&[-3, 4], "(2)")?.into()])?)?,
        [0, 4]
    );
    let y = f32s(&[0.0, f32::NAN, 1.0, 0.0], "(4)")?;
    assert_bits(
        &floats(&op("maximum", vec![x.clone().into(), y.clone().into()])?)?,
        &[0.0, f32::NAN, f32::NAN, 0.0],
    );
    assert_bits(
        &floats(&op("minimum", vec![x.clone().into(), y.into()])?)?,
        &[-1.0, f32::NAN, f32::NAN, -0.0],
    );
    assert_bits(
        &floats(&op("maximum", vec![x.clone().into(), 1.0.into()])?)?,
        &[1.0, 2.0, f32::NAN, 1.0],
    );
    let i = i32s(&[-5, 5, 0], "(3)")?;
    assert_eq!(
        ints(&op(
            "minimum",
            vec![i.clone().into(), Operand::from(1_i64)]
        )?)?,
        [-5, 1, 0]
    );
    let j = i32s(&[9], "(1)")?.broadcast_to(&shape("(3)")?)?;
    assert_eq!(ints(&op("maximum", vec![i.into(), j.into()])?)?, [9, 9, 9]);
    Ok(())
}

#[test]
fn comparisons_give_bool() -> Result<()> {
    let x = f32s(&[1.0, f32::NAN, 3.0, -1.0], "(2,2)")?;
    let y = f32s(&[1.0, f32::NAN, 2.0, 5.0], "(2,2)")?;
    assert_eq!(
        flags(&op("eq", vec![x.clone().into(), y.clone().into()])?)?,
        [true, false, false, false]
    );
    assert_eq!(
        flags(&op("lt", vec![x.clone().into(), y.clone().into()])?)?,
        [false, false, false, true]
    );
    assert_eq!(
        flags(&op("le", vec![x.clone().into(), y.clone().into()])?)?,
        [true, false, false, true]
    );
    // Transposed lhs: (1, 3, NaN, -1) against y.
    assert_eq!(
        flags(&op("le", vec![x.permute(&[1, 0])?.into(), y.into()])?)?,
        [true, false, false, true]
    );
    let i = i32s(&[1, 2, 3], "(3)")?;
    assert_eq!(
        flags(&op("lt", vec![i.clone().into(), Operand::from(2_i64)])?)?,
        [true, false, false]
    );
    assert_eq!(
        flags(&op("eq", vec![i.clone().into(), 2.0.into()])?)?,
        [false, true, false]
    );
    let f = f32s(&[1.0, 2.5, 3.0], "(3)")?;
    assert_eq!(
        flags(&op("le", vec![i.into(), f.into()])?)?,
        [true, true, true]
    );
    let b = bools(&[true, false, true], "(3)")?;
    let c = bools(&[true, true, false], "(3)")?;
    let eq = op("eq", vec![b.clone().into(), c.into()])?;
    assert_eq!(eq.dtype(), DType::BOOL);
    assert_eq!(flags(&eq)?, [true, false, false]);
    assert_eq!(
        flags(&op("eq", vec![b.into(), true.into()])?)?,
        [true, false, true]
    );
    Ok(())
}

#[test]
fn reduce_sum_over_mode_one() -> Result<()> {
    // x(i, j) column-major (2,3): rows [1,3,5] and [2,4,6].
    let x = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "(2,3)")?;
    assert_bits(
        &floats(&op("reduce_sum", vec![x.clone().into()])?)?,
        &[9.0, 12.0],
    );
    // Transposed: rows become [1,2], [3,4], [5,6].
    assert_bits(
        &floats(&op("reduce_sum", vec![x.permute(&[1, 0])?.into()])?)?,
        &[3.0, 7.0, 11.0],
    );
    let wide = [("accumulator_dtype", OptionValue::DType(DType::FLOAT64))];
    let exact = run(
        "reduce_sum",
        vec![f32s(&[1e8, 1.0, -1e8], "(1,3)")?.into()],
        &wide,
    )?;
    assert_bits(&floats(&exact)?, &[1.0]);
    // Nested modes: ((2,2),(3,1)) with a gap.
    let values: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let nested = f32_view(&values, "((2,2),(3,2)):((1,2),(4,12))")?;
    let sums = op("reduce_sum", vec![nested.clone().into()])?;
    assert_eq!(sums.shape(), &nested.shape().mode(0)?);
    let expected: Vec<f32> = (0..4)
        .map(|i| {
            (0..6)
                .map(|j| ((i % 2) + 2 * (i / 2) + 4 * (j % 3) + 12 * (j / 3)) as f32)
                .sum()
        })
        .collect();
    assert_bits(&floats(&sums)?, &expected);
    // A stride-0 broadcast mode 1.
    let column = f32s(&[1.5, -2.0], "(2,1)")?.broadcast_to(&shape("(2,4)")?)?;
    assert_bits(
        &floats(&op("reduce_sum", vec![column.into()])?)?,
        &[6.0, -8.0],
    );
    // Int32: exact, only the final narrowing checked.
    let i = i32s(&[i32::MAX, 1, -1], "(1,3)")?;
    assert_eq!(
        ints(&op("reduce_sum", vec![i.into()])?)?,
        [i64::from(i32::MAX)]
    );
    let over = i32s(&[5, i32::MAX, 0, 1], "(2,2)")?;
    assert_overflow(
        op("reduce_sum", vec![over.into()]),
        "reduce_sum",
        "result ordinal 1 is 2147483648",
    );
    Ok(())
}

#[test]
fn small_and_boundary_reductions_sum_in_ascending_order() -> Result<()> {
    // Around the sizes where a reduction stops fitting the stack (16 results, 256 elements),
    // on views with a gap between columns, and with magnitudes that make the order visible:
    // every result is the Float32 fold over ascending j, starting at -0.0.
    for (n, k) in [
        (1, 1),
        (5, 3),
        (8, 8),
        (16, 16),
        (16, 17),
        (17, 3),
        (20, 12),
    ] {
        let column = n + 1;
        let values: Vec<f32> = (0..column * k)
            .map(|i| {
                let magnitude = [1e-3f32, 1.0, 1e7][i % 3];
                magnitude * ((i * 7919) % 31) as f32 - 15.0
            })
            .collect();
        let x = f32_view(&values, &format!("({n},{k}):(1,{column})"))?;
        let sums = floats(&op("reduce_sum", vec![x.clone().into()])?)?;
        let expected: Vec<f32> = (0..n)
            .map(|i| (0..k).fold(-0.0f32, |acc, j| acc + values[i + j * column]))
            .collect();
        assert_bits(&sums, &expected);
        let maxima = floats(&op("reduce_max", vec![x.into()])?)?;
        let expected: Vec<f32> = (0..n)
            .map(|i| {
                (0..k)
                    .map(|j| values[i + j * column])
                    .fold(f32::NEG_INFINITY, f32::max)
            })
            .collect();
        assert_bits(&maxima, &expected);
    }
    // A NaN anywhere in a small row makes its maximum NaN; the other rows are unaffected.
    let x = f32s(&[1.0, 2.0, f32::NAN, 4.0, 5.0, -6.0], "(2,3)")?;
    assert_bits(
        &floats(&op("reduce_max", vec![x.into()])?)?,
        &[f32::NAN, 4.0],
    );
    // Int32 sums of a small tensor stay exact until the final narrowing.
    let i = i32s(&[i32::MAX, -5, 1, 5, -1, 0], "(2,3)")?;
    assert_eq!(
        ints(&op("reduce_sum", vec![i.into()])?)?,
        [i64::from(i32::MAX), 0]
    );
    Ok(())
}

#[test]
fn small_horizontal_reductions_fold_as_the_general_loop_does() -> Result<()> {
    // A row-major view makes each result's run contiguous (the horizontal order, folded in
    // lanes). The first 16 rows of a 17-row reduction (past the small-reduction bound) are
    // computed by the general loop; the same 16 rows alone, and a 1-row (1, k) tensor, by the
    // small arm: every sum and maximum must match bit for bit, for runs shorter and longer
    // than the lane count and on both sides of the 256-element bound.
    for k in [1, 3, 4, 15, 16] {
        let values: Vec<f32> = (0..17 * k)
            .map(|i| {
                let magnitude = [1e-3f32, 1.0, 1e7, -0.0][i % 4];
                magnitude * ((i * 7919) % 31) as f32 - 15.0
            })
            .collect();
        let general = f32_view(&values, &format!("(17,{k}):({k},1)"))?;
        let small = f32_view(&values[..16 * k], &format!("(16,{k}):({k},1)"))?;
        for name in ["reduce_sum", "reduce_max"] {
            let all = floats(&op(name, vec![general.clone().into()])?)?;
            let first = floats(&op(name, vec![small.clone().into()])?)?;
            assert_bits(&first, &all[..16]);
            for row in [0, 5, 16] {
                let one = f32s(&values[row * k..(row + 1) * k], &format!("(1,{k})"))?;
                assert_bits(&floats(&op(name, vec![one.into()])?)?, &all[row..=row]);
            }
        }
    }
    // Int32: exact in the small arm too, only the final narrowing checked.
    let i = i32_view(&[i32::MAX, 1, -1, 7, 8, 9], "(2,3):(3,1)")?;
    assert_eq!(
        ints(&op("reduce_sum", vec![i.into()])?)?,
        [i64::from(i32::MAX), 24]
    );
    let over = i32_view(&[1, 2, i32::MAX, 1], "(2,2):(2,1)")?;
    assert_overflow(
        op("reduce_sum", vec![over.into()]),
        "reduce_sum",
        "result ordinal 1 is 2147483648",
    );
    Ok(())
}

#[test]
fn large_reductions_split_over_threads() -> Result<()> {
    let values: Vec<f32> = (0..300_000).map(|i| (i % 10) as f32).collect();
    let exact_sum =
        |indices: &mut dyn Iterator<Item = usize>| -> f32 { indices.map(|i| values[i]).sum() };
    // Many results, vertical order: (1000, 300) column-major.
    let sums = floats(&op(
        "reduce_sum",
        vec![f32s(&values, "(1000,300)")?.into()],
    )?)?;
    let expected: Vec<f32> = (0..1000)
        .map(|i| exact_sum(&mut (0..300).map(|j| i + 1000 * j)))
        .collect();
    assert_bits(&sums, &expected);
    // Many results, horizontal order: the transposed view.
    let t = f32_view(&values, "(1000,300):(300,1)")?;
    let sums = floats(&op("reduce_sum", vec![t.into()])?)?;
    let expected: Vec<f32> = (0..1000)
        .map(|i| exact_sum(&mut (300 * i..300 * i + 300)))
        .collect();
    assert_bits(&sums, &expected);
    // Few results over a long mode: the threads split mode 1.
    let sums = floats(&op(
        "reduce_sum",
        vec![f32s(&values, "(1,300000)")?.into()],
    )?)?;
    assert_bits(&sums, &[values.iter().sum()]);
    let sums = floats(&op(
        "reduce_sum",
        vec![f32s(&values, "(3,100000)")?.into()],
    )?)?;
    let expected: Vec<f32> = (0..3)
        .map(|i| exact_sum(&mut (0..100_000).map(|j| i + 3 * j)))
        .collect();
    assert_bits(&sums, &expected);
    let ints: Vec<i32> = (0..300_000)
        .map(|i| if i == 250_000 { i32::MAX } else { 1 })
        .collect();
    let total = op("reduce_sum", vec![i32s(&ints, "(1,300000)")?.into()]);
    assert_overflow(total, "reduce_sum", "result ordinal 0");
    let maxima = floats(&op(
        "reduce_max",
        vec![f32s(&values, "(2,150000)")?.into()],
    )?)?;
    assert_bits(&maxima, &[8.0, 9.0]);
    Ok(())
}

#[test]
fn reduce_max_over_mode_one() -> Result<()> {
    let x = f32s(&[1.0, -2.0, 7.0, -0.0, 3.0, -5.0], "(2,3)")?;
    assert_bits(
        &floats(&op("reduce_max", vec![x.clone().into()])?)?,
        &[7.0, -0.0],
    );
    assert_bits(
        &floats(&op("reduce_max", vec![x.permute(&[1, 0])?.into()])?)?,
        &[1.0, 7.0, 3.0],
    );
    let nan = f32s(&[1.0, f32::NAN, 3.0, 0.0], "(2,2)")?;
    assert_bits(
        &floats(&op("reduce_max", vec![nan.into()])?)?,
        &[3.0, f32::NAN],
    );
    let i = i32s(&[i32::MIN, -3, i32::MIN, -9], "(2,2)")?;
    assert_eq!(
        ints(&op("reduce_max", vec![i.into()])?)?,
        [i64::from(i32::MIN), -3]
    );
    Ok(())
}

/// `out(i, j) = Σ_k lhs(i, k) · rhs(j, k)` of column-major `(n,k)` and `(m,k)` buffers, in f64.
fn naive(lhs: &[f32], rhs: &[f32], n: usize, m: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * m];
    for j in 0..m {
        for i in 0..n {
            out[i + n * j] = (0..k)
                .map(|kk| f64::from(lhs[i + n * kk]) * f64::from(rhs[j + m * kk]))
                .sum();
        }
    }
    out
}

#[test]
fn matmul_contracts_mode_one_of_both() -> Result<()> {
    // lhs (2,3) = [[1,2,3],[4,5,6]], rhs (2,3) = [[1,0,1],[0,1,0]] (column-major buffers).
    let lhs = f32s(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0], "(2,3)")?;
    let rhs = f32s(&[1.0, 0.0, 0.0, 1.0, 1.0, 0.0], "(2,3)")?;
    let expected = [4.0, 10.0, 2.0, 5.0];
    assert_bits(
        &floats(&op("matmul", vec![lhs.clone().into(), rhs.clone().into()])?)?,
        &expected,
    );
    // rhs as a transposed view of a (3,2) buffer: no copy, same values.
    let transposed = f32s(&[1.0, 0.0, 1.0, 0.0, 1.0, 0.0], "(3,2)")?.permute(&[1, 0])?;
    assert_bits(
        &floats(&op("matmul", vec![lhs.clone().into(), transposed.into()])?)?,
        &expected,
    );
    // A stride-0 rhs: every row equal to (1, 1, 1).
    let ones = f32s(&[1.0, 1.0, 1.0], "(1,3)")?.broadcast_to(&shape("(2,3)")?)?;
    assert_bits(
        &floats(&op("matmul", vec![lhs.clone().into(), ones.into()])?)?,
        &[6.0, 15.0, 6.0, 15.0],
    );
    let wide = [("accumulator_dtype", OptionValue::DType(DType::FLOAT64))];
    let w = run("matmul", vec![lhs.clone().into(), rhs.into()], &wide)?;
    assert_bits(&floats(&w)?, &expected);
    // Nested mode 0 of lhs: ((2,2),3) with a gap, against a mixed Int32 rhs.
    let values: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let nested = f32_view(&values, "((2,2),3):((1,4),8)")?;
    let int_rhs = i32s(&[1, -1, 2, 0, 1, 3], "(2,3)")?;
    let product = op("matmul", vec![nested.into(), int_rhs.into()])?;
    assert_eq!(product.shape(), &shape("((2,2),2)")?);
    let lhs_at = |i: usize, kk: usize| ((i % 2) + 4 * (i / 2) + 8 * kk) as f32;
    let rhs_at = [[1.0, 2.0, 1.0], [-1.0, 0.0, 3.0]];
    let expected: Vec<f32> = (0..8)
        .map(|o| {
            let (i, j) = (o % 4, o / 4);
            (0..3).map(|kk| lhs_at(i, kk) * rhs_at[j][kk]).sum()
        })
        .collect();
    assert_bits(&floats(&product)?, &expected);
    Ok(())
}

#[test]
fn matmul_int32_is_exact_and_checked() -> Result<()> {
    let lhs = i32s(&[1, 4, 2, 5, 3, 6], "(2,3)")?;
    let rhs = i32s(&[7, 8, 9, 10, 11, 12], "(2,3)")?;
    // rhs rows: (7, 9, 11) and (8, 10, 12).
    assert_eq!(
        ints(&op("matmul", vec![lhs.into(), rhs.into()])?)?,
        [58, 139, 64, 154]
    );
    // Partial sums and products beyond Int32 are exact; only the results are narrowed.
    let wide = i32s(&[i32::MAX, i32::MAX, -i32::MAX, 65_536, 65_536, 0], "(1,6)")?;
    let mixed = i32s(&[1, 1, 1, 65_536, -65_536, 7], "(1,6)")?;
    assert_eq!(
        ints(&op("matmul", vec![wide.into(), mixed.into()])?)?,
        [i64::from(i32::MAX)]
    );
    let big = i32s(&[i32::MAX, i32::MAX, 1, -1], "(2,2)")?;
    let ones = i32s(&[1, 1], "(1,2)")?;
    assert_overflow(
        op("matmul", vec![big.into(), ones.into()]),
        "matmul",
        "out(0, 0) is 2147483648",
    );
    Ok(())
}

#[test]
fn larger_matmuls_run_on_faer_with_strided_operands() -> Result<()> {
    let (n, m, k) = (100, 90, 80);
    let lhs: Vec<f32> = (0..n * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
    let rhs: Vec<f32> = (0..m * k).map(|i| ((i * 5) % 11) as f32 * 0.5).collect();
    let expected = naive(&lhs, &rhs, n, m, k);
    let a = f32s(&lhs, &format!("({n},{k})"))?;
    let b = f32s(&rhs, &format!("({m},{k})"))?;
    let check = |result: &Tensor| -> Result<()> {
        let actual = floats(result)?;
        for (x, e) in actual.iter().zip(&expected) {
            assert!(
                (f64::from(*x) - e).abs() <= 1e-5 * 6.0 * 5.0 * k as f64 + 1e-6,
                "{x} != {e}"
            );
        }
        Ok(())
    };
    check(&op("matmul", vec![a.clone().into(), b.clone().into()])?)?;
    // The same rhs stored row-major (k fastest) and read through a permuted view.
    let mut rows = vec![0.0; m * k];
    for j in 0..m {
        for kk in 0..k {
            rows[kk + k * j] = rhs[j + m * kk];
        }
    }
    let b_t = f32s(&rows, &format!("({k},{m})"))?.permute(&[1, 0])?;
    check(&op("matmul", vec![a.into(), b_t.into()])?)?;
    Ok(())
}

#[test]
fn degenerate_shapes() -> Result<()> {
    // Rank 0: one element.
    let a = f32s(&[1.5], "()")?;
    let b = f32s(&[2.0], "()")?;
    let sum = op("add", vec![a.clone().into(), b.into()])?;
    assert_eq!(sum.shape(), &shape("()")?);
    assert_bits(&floats(&sum)?, &[3.5]);
    assert_bits(&floats(&op("neg", vec![a.into()])?)?, &[-1.5]);
    // (1,1) products and reductions over a single element.
    let one = f32s(&[3.0], "(1,1)")?;
    assert_bits(
        &floats(&op("matmul", vec![one.clone().into(), one.clone().into()])?)?,
        &[9.0],
    );
    assert_bits(
        &floats(&op("reduce_sum", vec![one.clone().into()])?)?,
        &[3.0],
    );
    assert_bits(&floats(&op("reduce_max", vec![one.into()])?)?, &[3.0]);
    // A fully broadcast (stride-0) matrix times a vector.
    let fill = f32s(&[2.0], "(1,1)")?.broadcast_to(&shape("(3,4)")?)?;
    let v = f32s(&[1.0, 2.0, 3.0, 4.0], "(1,4)")?;
    assert_bits(
        &floats(&op("matmul", vec![fill.into(), v.into()])?)?,
        &[20.0, 20.0, 20.0],
    );
    Ok(())
}

#[test]
fn released_operands_are_errors_not_panics() -> Result<()> {
    let a = f32s(&[1.0, 2.0], "(2)")?;
    let b = f32s(&[1.0, 2.0], "(2)")?;
    b.carrier().release()?;
    let error = call("add", [a.into(), b.into()], &[]).expect_err("a released operand");
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    Ok(())
}

#[test]
fn transposed_int32_overflow_reports_the_first_ordinal() -> Result<()> {
    // a(i, j) = values[40i + j] is read in tiles; overflows at ordinal 150 (i=150, j=0) and
    // at ordinal 200 (i=0, j=1), which a tile visits first.
    let mut values = vec![0; 8000];
    values[40 * 150] = i32::MAX;
    values[1] = i32::MAX;
    let a = i32_view(&values, "(200,40):(40,1)")?;
    let mut ones = vec![1; 8000];
    ones[200] = 2;
    let b = i32s(&ones, "(200,40)")?;
    assert_overflow(
        op("add", vec![a.clone().into(), b.into()]),
        "add",
        "2147483647 + 1",
    );
    let sums = ints(&op(
        "add",
        vec![a.into(), i32s(&vec![-1; 8000], "(200,40)")?.into()],
    )?)?;
    assert_eq!(sums[150], i64::from(i32::MAX) - 1);
    assert_eq!(sums[200], i64::from(i32::MAX) - 1);
    assert_eq!(sums.iter().filter(|&&x| x == -1).count(), 7998);
    Ok(())
}

#[test]
fn select_broadcasts_the_condition_and_scalar_branches() -> Result<()> {
    // A (2,1) condition picks whole rows of a (2,3) tensor against a scalar.
    let rows = bools(&[true, false], "(2,1)")?;
    let a = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "(2,3)")?;
    assert_bits(
        &floats(&op(
            "select",
            vec![rows.clone().into(), a.clone().into(), (-1.0).into()],
        )?)?,
        &[1.0, -1.0, 3.0, -1.0, 5.0, -1.0],
    );
    // Scalar first, tensor second: the rows swap.
    assert_bits(
        &floats(&op(
            "select",
            vec![rows.into(), (-1.0).into(), a.clone().into()],
        )?)?,
        &[-1.0, 2.0, -1.0, 4.0, -1.0, 6.0],
    );
    // Full condition, a row (1,3) and a column (2,1): out(i, j) = c(i, j) ? row(j) : col(i).
    let cond = bools(&[true, false, false, true, true, false], "(2,3)")?;
    let row = i32s(&[10, 20, 30], "(1,3)")?;
    let col = i32s(&[-1, -2], "(2,1)")?;
    let y = op("select", vec![cond.clone().into(), row.into(), col.into()])?;
    assert_eq!(y.dtype(), DType::INT32);
    assert_eq!(ints(&y)?, [10, -2, -1, 20, 30, -2]);
    // A (1,3) condition over a transposed Int32 view and a Float32 tensor: Float32, with
    // the Int32 branch converted (2^24 + 1 rounds to 2^24).
    let cols = bools(&[true, false, true], "(1,3)")?;
    let t = i32_view(&[16_777_217, 2, 3, 4, 5, 6], "(2,3):(3,1)")?;
    let y = op("select", vec![cols.into(), t.into(), a.into()])?;
    assert_eq!(y.dtype(), DType::FLOAT32);
    // t(i, j) = values[3i + j].
    assert_bits(&floats(&y)?, &[16_777_216.0, 4.0, 3.0, 4.0, 3.0, 6.0]);
    // Two scalars: the condition alone gives the shape; bool scalars are 1.0 and 0.0.
    let mask = bools(&[false, true, true], "(3)")?;
    assert_bits(
        &floats(&op(
            "select",
            vec![mask.clone().into(), true.into(), false.into()],
        )?)?,
        &[0.0, 1.0, 1.0],
    );
    assert_eq!(
        ints(&op(
            "select",
            vec![mask.clone().into(), 7i64.into(), (-7i64).into()]
        )?)?,
        [-7, 7, 7]
    );
    // Bool with Bool stays Bool; NaN and -0.0 are selected exactly.
    let p = bools(&[true, true, false], "(3)")?;
    let y = op("select", vec![mask.clone().into(), p.into(), false.into()])?;
    assert_eq!(flags(&y)?, [false, true, false]);
    let special = f32s(&[f32::NAN, -0.0, 2.0], "(3)")?;
    assert_bits(
        &floats(&op(
            "select",
            vec![mask.into(), special.into(), 9.0.into()],
        )?)?,
        &[9.0, -0.0, 2.0],
    );
    // A permuted condition: (3,2):(2,1) reads slots 0,2,4,1,3,5.
    let y = op(
        "select",
        vec![cond.permute(&[1, 0])?.into(), 1i64.into(), 0i64.into()],
    )?;
    assert_eq!(ints(&y)?, [1, 0, 1, 0, 1, 0]);
    Ok(())
}

#[test]
fn select_refuses_a_non_bool_condition() -> Result<()> {
    let x = f32s(&[1.0, -2.0], "(2)")?;
    let i = i32s(&[1, 0], "(2)")?;
    for (cond, dtype) in [(&x, "Float32"), (&i, "Int32")] {
        let error = call(
            "select",
            [cond.clone().into(), x.clone().into(), 0.0.into()],
            &[],
        )
        .expect_err("a non-Bool condition");
        assert_eq!(error.kind(), ErrorKind::Type, "{error}");
        let message = error.to_string();
        assert!(
            message.contains("'select'") && message.contains(dtype),
            "{message}"
        );
    }
    Ok(())
}

#[test]
fn large_selects_split_over_threads_and_match_element_by_element() -> Result<()> {
    let n = 300_000;
    let cond: Vec<bool> = (0..n).map(|i| (i * 7) % 5 < 2).collect();
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
    let b: Vec<i32> = (0..n).map(|i| (i % 7) as i32 - 3).collect();
    // Dense Float32 against an Int32 branch (gathered with conversion).
    let expected: Vec<f32> = (0..n)
        .map(|i| if cond[i] { a[i] } else { b[i] as f32 })
        .collect();
    let y = op(
        "select",
        vec![
            bools(&cond, "(300000)")?.into(),
            f32s(&a, "(300000)")?.into(),
            i32s(&b, "(300000)")?.into(),
        ],
    )?;
    assert_bits(&floats(&y)?, &expected);
    // A (600,500) result whose condition is read transposed and whose `b` is a column.
    let c = bools(&cond, "(500,600)")?.permute(&[1, 0])?;
    let column = f32s(&a[..600], "(600,1)")?;
    let y = op(
        "select",
        vec![c.into(), f32s(&a, "(600,500)")?.into(), column.into()],
    )?;
    let expected: Vec<f32> = (0..n)
        .map(|o| {
            let (i, j) = (o % 600, o / 600);
            if cond[j + 500 * i] {
                a[o]
            } else {
                a[i]
            }
        })
        .collect();
    assert_bits(&floats(&y)?, &expected);
    Ok(())
}
