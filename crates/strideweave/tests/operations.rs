//! The built-in operations on the Generic reference carrier (docs/kernel-semantics.md,
//! docs/operations.md, Worked examples items 2, 3, 5, 6 and 7), through the public API only.
//!
//! Every call goes through [`run`], which also checks that the result is fresh: one result,
//! version 0, offset 0, the canonical layout of its shape, a carrier of its own with exactly
//! `cosize` slots, and every tensor operand unchanged (values and version).

use strideweave::carriers::Generic;
use strideweave::operation::{call, Operand, OptionValue};
use strideweave::{DType, ErrorKind, Layout, Result, Shape, Tensor, Value};

/// A Generic tensor of `dtype` holding `values`, viewed through `layout` from slot 0.
fn tensor(values: &[Value], dtype: DType, layout: &str) -> Result<Tensor> {
    let carrier = Generic::carrier(values, dtype, true)?;
    Tensor::new(carrier, 0, layout.parse()?)
}

/// A Float32 Generic tensor.
fn f32_tensor(values: &[f32], layout: &str) -> Result<Tensor> {
    tensor(&floats(values), DType::FLOAT32, layout)
}

/// An Int32 Generic tensor.
fn i32_tensor(values: &[i32], layout: &str) -> Result<Tensor> {
    tensor(&ints(values), DType::INT32, layout)
}

/// Float32 values as the carrier stores them.
fn floats(values: &[f32]) -> Vec<Value> {
    values.iter().map(|&x| Value::from(x)).collect()
}

/// Int32 values as the carrier stores them.
fn ints(values: &[i32]) -> Vec<Value> {
    values.iter().map(|&x| Value::from(x)).collect()
}

/// Bool values.
fn bools(values: &[bool]) -> Vec<Value> {
    values.iter().map(|&x| Value::from(x)).collect()
}

/// Calls `name` and checks that its single result is fresh and the operands untouched.
fn run(name: &str, operands: Vec<Operand>, options: &[(&str, OptionValue)]) -> Result<Tensor> {
    let tensors: Vec<Tensor> = operands
        .iter()
        .filter_map(|o| o.as_tensor().cloned())
        .collect();
    let before: Vec<(Vec<Value>, u64)> = tensors
        .iter()
        .map(|t| Ok((t.to_values()?, t.version())))
        .collect::<Result<_>>()?;
    let results = call(name, operands, options)?;
    assert_eq!(results.len(), 1, "'{name}' returns one result");
    let result = results.into_iter().next().expect("one result");
    assert_eq!(
        result.version(),
        0,
        "'{name}': a fresh result has version 0"
    );
    assert_eq!(result.offset(), 0, "'{name}'");
    assert_eq!(
        result.layout(),
        &Layout::column_major(result.shape().clone()),
        "'{name}': the result layout is canonical"
    );
    assert_eq!(
        result.carrier().size(),
        result.layout().cosize(),
        "'{name}'"
    );
    for (t, (values, version)) in tensors.iter().zip(&before) {
        assert!(
            !t.carrier().same_as(result.carrier()),
            "'{name}': the result has a carrier of its own"
        );
        assert_eq!(t.version(), *version, "'{name}' must not touch an operand");
        assert_same(&t.to_values()?, values, &format!("'{name}' operand"));
    }
    Ok(result)
}

/// Exact equality of value lists where NaN equals NaN and the sign of zero counts.
fn assert_same(actual: &[Value], expected: &[Value], what: &str) {
    let same = actual.len() == expected.len()
        && actual.iter().zip(expected).all(|(a, e)| match (a, e) {
            (Value::Float(a), Value::Float(e)) => {
                (a.is_nan() && e.is_nan())
                    || (a == e && a.is_sign_negative() == e.is_sign_negative())
            }
            _ => a == e,
        });
    assert!(same, "{what}: got {actual:?}, expected {expected:?}");
}

/// Checks a result's dtype, shape and values exactly.
fn assert_result(result: &Tensor, dtype: DType, shape: Shape, expected: &[Value]) -> Result<()> {
    assert_eq!(result.dtype(), dtype);
    assert_eq!(result.shape(), &shape);
    assert_same(&result.to_values()?, expected, "result");
    Ok(())
}

/// Float32 results within `tolerance` of `expected` (NaN matches NaN).
fn assert_close(result: &Tensor, expected: &[f32], tolerance: f64) -> Result<()> {
    assert_eq!(result.dtype(), DType::FLOAT32);
    let values = result.to_values()?;
    assert_eq!(values.len(), expected.len());
    for (value, &e) in values.iter().zip(expected) {
        let v = value.as_f64().expect("a Float32 value");
        let e = f64::from(e);
        let ok = (v.is_nan() && e.is_nan()) || v == e || (v - e).abs() <= tolerance;
        assert!(ok, "got {values:?}, expected {expected:?}");
    }
    Ok(())
}

/// The kind and message of a failing call.
fn failure(name: &str, operands: Vec<Operand>) -> (ErrorKind, String) {
    match call(name, operands, &[]) {
        Ok(results) => panic!("'{name}' should fail, got {results:?}"),
        Err(error) => (error.kind(), error.to_string()),
    }
}

#[test]
fn scenario_02_int32_add_overflows_and_reduce_sum_narrows_once() -> Result<()> {
    let a = i32_tensor(&[2147483647], "1:1")?;
    let b = i32_tensor(&[1], "1:1")?;
    let (kind, message) = failure("add", vec![a.clone().into(), b.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(
        message.contains("'add' overflows Int32: 2147483647 + 1"),
        "{message}"
    );
    assert_eq!(a.to_values()?, ints(&[2147483647]));

    let x = i32_tensor(&[2147483647, 1, -1], "(1,3):(1,1)")?;
    let sum = run("reduce_sum", vec![x.into()], &[])?;
    assert_result(&sum, DType::INT32, Shape::new(1)?, &ints(&[2147483647]))?;

    let y = i32_tensor(&[2147483647, 1], "(1,2):(1,1)")?;
    let (kind, message) = failure("reduce_sum", vec![y.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(
        message.contains("'reduce_sum' overflows Int32"),
        "{message}"
    );
    assert!(message.contains("2147483648"), "{message}");
    Ok(())
}

#[test]
fn scenario_03_mixed_scalar_plans() -> Result<()> {
    let x = i32_tensor(&[1, -2, 3], "3:1")?;
    let product = run("mul", vec![x.clone().into(), true.into()], &[])?;
    assert_result(
        &product,
        DType::FLOAT32,
        Shape::new(3)?,
        &floats(&[1.0, -2.0, 3.0]),
    )?;
    let product = run("mul", vec![false.into(), x.clone().into()], &[])?;
    assert_result(
        &product,
        DType::FLOAT32,
        Shape::new(3)?,
        &floats(&[0.0, -0.0, 0.0]),
    )?;
    let doubled = run("mul", vec![x.clone().into(), 2i64.into()], &[])?;
    assert_result(&doubled, DType::INT32, Shape::new(3)?, &ints(&[2, -4, 6]))?;

    let (kind, _) = failure("mul", vec![x.clone().into(), (1i64 << 31).into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    let big = i32_tensor(&[1 << 30, 3], "2:1")?;
    let (kind, message) = failure("mul", vec![big.into(), 2i64.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(
        message.contains("'mul' overflows Int32: 1073741824 * 2"),
        "{message}"
    );

    let f = f32_tensor(&[1.5, -2.0], "2:1")?;
    let scaled = run("mul", vec![f.into(), (1i64 << 31).into()], &[])?;
    assert_result(
        &scaled,
        DType::FLOAT32,
        Shape::new(2)?,
        &floats(&[3221225472.0, -4294967296.0]),
    )?;

    let n = i32_tensor(&[1, 7, -3, 0], "4:1")?;
    let d = i32_tensor(&[2, 2, 0, 0], "4:1")?;
    let quotient = run("div", vec![n.into(), d.into()], &[])?;
    assert_result(
        &quotient,
        DType::FLOAT32,
        Shape::new(4)?,
        &floats(&[0.5, 3.5, f32::NEG_INFINITY, f32::NAN]),
    )?;
    Ok(())
}

#[test]
fn scenario_05_reduce_sum() -> Result<()> {
    let x = f32_tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "(2,3):(1,2)")?;
    let sum = run("reduce_sum", vec![x.into()], &[])?;
    assert_result(&sum, DType::FLOAT32, Shape::new(2)?, &floats(&[9.0, 12.0]))?;

    let x = i32_tensor(&[1, 2, 3, 4, 5, 6], "(2,3):(1,2)")?;
    let sum = run("reduce_sum", vec![x.clone().into()], &[])?;
    assert_result(&sum, DType::INT32, Shape::new(2)?, &ints(&[9, 12]))?;
    // The permuted view (3,2):(2,1) sums the other mode: [1+2, 3+4, 5+6].
    let sum = run("reduce_sum", vec![x.permute(&[1, 0])?.into()], &[])?;
    assert_result(&sum, DType::INT32, Shape::new(3)?, &ints(&[3, 7, 11]))?;
    // Hierarchical mode 0 keeps its shape.
    let x = i32_tensor(&[1, 2, 3, 4, 5, 6, 7, 8], "((2,2),2):((1,2),4)")?;
    let sum = run("reduce_sum", vec![x.into()], &[])?;
    assert_result(
        &sum,
        DType::INT32,
        Shape::new((2, 2))?,
        &ints(&[6, 8, 10, 12]),
    )?;

    let flat = f32_tensor(&[1.0, 2.0], "2:1")?;
    assert_eq!(failure("reduce_sum", vec![flat.into()]).0, ErrorKind::Value);
    Ok(())
}

#[test]
fn reduce_sum_accumulator_option() -> Result<()> {
    // In binary32, 2^24 + 1 rounds back to 2^24 at each step; in binary64 the total is
    // 2^24 + 2, which Float32 represents.
    let x = f32_tensor(&[16777216.0, 1.0, 1.0], "(1,3):(1,1)")?;
    let default = run("reduce_sum", vec![x.clone().into()], &[])?;
    assert_result(
        &default,
        DType::FLOAT32,
        Shape::new(1)?,
        &floats(&[16777216.0]),
    )?;
    let f32_acc = [("accumulator_dtype", OptionValue::DType(DType::FLOAT32))];
    let narrow = run("reduce_sum", vec![x.clone().into()], &f32_acc)?;
    assert_result(
        &narrow,
        DType::FLOAT32,
        Shape::new(1)?,
        &floats(&[16777216.0]),
    )?;
    let f64_acc = [("accumulator_dtype", OptionValue::DType(DType::FLOAT64))];
    let wide = run("reduce_sum", vec![x.into()], &f64_acc)?;
    assert_result(
        &wide,
        DType::FLOAT32,
        Shape::new(1)?,
        &floats(&[16777218.0]),
    )?;

    let i = i32_tensor(&[1, 2], "(1,2):(1,1)")?;
    let error = call("reduce_sum", [i.into()], &f64_acc).expect_err("no accumulator on Int32");
    assert_eq!(error.kind(), ErrorKind::Type);
    Ok(())
}

#[test]
fn scenario_06_matmul_shapes() -> Result<()> {
    // lhs(i, k) = [[1,3,5],[2,4,6]]; rhs(j, k) = rows [1,5,9], [2,6,10], [3,7,11], [4,8,12].
    let lhs_values: Vec<f32> = (1..=6).map(|v| v as f32).collect();
    let rhs_values: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    let lhs = f32_tensor(&lhs_values, "(2,3):(1,2)")?;
    let rhs = f32_tensor(&rhs_values, "(4,3):(1,4)")?;
    // out(i, j) at ordinal i + 2j: out(0,0) = 1+15+45, out(1,0) = 2+20+54, ...
    let expected = [61.0, 76.0, 70.0, 88.0, 79.0, 100.0, 88.0, 112.0];
    let out = run("matmul", vec![lhs.clone().into(), rhs.clone().into()], &[])?;
    assert_result(
        &out,
        DType::FLOAT32,
        Shape::new((2, 4))?,
        &floats(&expected),
    )?;
    let f64_acc = [("accumulator_dtype", OptionValue::DType(DType::FLOAT64))];
    let out = run("matmul", vec![lhs.clone().into(), rhs.into()], &f64_acc)?;
    assert_result(
        &out,
        DType::FLOAT32,
        Shape::new((2, 4))?,
        &floats(&expected),
    )?;

    // A conventional A·B is matmul(A, permute(B)): B (3,4):(4,1) permutes to (4,3):(1,4).
    let b = f32_tensor(&rhs_values, "(3,4):(4,1)")?;
    let out = run(
        "matmul",
        vec![lhs.clone().into(), b.permute(&[1, 0])?.into()],
        &[],
    )?;
    assert_result(
        &out,
        DType::FLOAT32,
        Shape::new((2, 4))?,
        &floats(&expected),
    )?;

    // Int32 × Int32 stays Int32; Int32 × Float32 computes in Float32.
    let ilhs = i32_tensor(&[1, 2, 3, 4, 5, 6], "(2,3):(1,2)")?;
    let irhs = i32_tensor(&(1..=12).collect::<Vec<i32>>(), "(4,3):(1,4)")?;
    let out = run("matmul", vec![ilhs.clone().into(), irhs.into()], &[])?;
    let int_expected = [61, 76, 70, 88, 79, 100, 88, 112];
    assert_result(
        &out,
        DType::INT32,
        Shape::new((2, 4))?,
        &ints(&int_expected),
    )?;
    let out = run("matmul", vec![ilhs.into(), b.permute(&[1, 0])?.into()], &[])?;
    assert_result(
        &out,
        DType::FLOAT32,
        Shape::new((2, 4))?,
        &floats(&expected),
    )?;

    let wrong_k = f32_tensor(&rhs_values, "(3,4):(1,3)")?;
    let (kind, _) = failure("matmul", vec![lhs.clone().into(), wrong_k.into()]);
    assert_eq!(kind, ErrorKind::Value);
    let three_modes = f32_tensor(&lhs_values, "(2,3,1):(1,2,6)")?;
    let (kind, _) = failure(
        "matmul",
        vec![three_modes.clone().into(), lhs.clone().into()],
    );
    assert_eq!(kind, ErrorKind::Value);
    let (kind, _) = failure("matmul", vec![lhs.into(), three_modes.into()]);
    assert_eq!(kind, ErrorKind::Value);

    // Exact Int32 products and sum, only the final narrowing checked.
    let big = i32_tensor(&[65536, 65536, -65536], "(1,3):(1,1)")?;
    let ones = i32_tensor(&[65536, 1, 1], "(1,3):(1,1)")?;
    let (kind, message) = failure("matmul", vec![big.clone().into(), ones.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(message.contains("'matmul' overflows Int32"), "{message}");
    let back = i32_tensor(&[65536, 1, 65536], "(1,3):(1,1)")?;
    let out = run("matmul", vec![big.into(), back.into()], &[])?;
    // 2^32 + 2^16 − 2^32 = 65536: the intermediate leaves Int32, the total does not.
    assert_result(&out, DType::INT32, Shape::new((1, 1))?, &ints(&[65536]))?;
    Ok(())
}

#[test]
fn scenario_07_broadcasting() -> Result<()> {
    let a = f32_tensor(&[1.0, 2.0, 3.0, 4.0], "(4,1):(1,4)")?;
    let b = f32_tensor(
        &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0],
        "(4,2):(1,4)",
    )?;
    let sum = run("add", vec![a.clone().into(), b.clone().into()], &[])?;
    assert_eq!(sum.layout(), &"(4,2):(1,4)".parse::<Layout>()?);
    let expected = [11.0, 22.0, 33.0, 44.0, 51.0, 62.0, 73.0, 84.0];
    assert_result(
        &sum,
        DType::FLOAT32,
        Shape::new((4, 2))?,
        &floats(&expected),
    )?;
    let sum = run("add", vec![b.clone().into(), a.into()], &[])?;
    assert_result(
        &sum,
        DType::FLOAT32,
        Shape::new((4, 2))?,
        &floats(&expected),
    )?;

    let c = f32_tensor(&[0.0; 8], "(2,4):(1,2)")?;
    assert_eq!(
        failure("add", vec![b.clone().into(), c.into()]).0,
        ErrorKind::Value
    );
    let flat = f32_tensor(&[1.0; 4], "4:1")?;
    let column = f32_tensor(&[1.0; 4], "(4,1):(1,4)")?;
    assert_eq!(
        failure("add", vec![flat.into(), column.into()]).0,
        ErrorKind::Value
    );
    Ok(())
}

#[test]
fn sub_of_tensors_with_broadcasting() -> Result<()> {
    let a = f32_tensor(&[5.0, 1.5, -3.0, 0.0], "(2,2):(1,2)")?;
    let b = f32_tensor(&[1.0, 2.5, -3.0, 0.25], "(2,2):(1,2)")?;
    let diff = run("sub", vec![a.clone().into(), b.into()], &[])?;
    assert_result(
        &diff,
        DType::FLOAT32,
        Shape::new((2, 2))?,
        &floats(&[4.0, -1.0, 0.0, -0.25]),
    )?;
    // A (1,2) operand broadcasts over mode 0 with stride 0.
    let row = f32_tensor(&[0.5, -1.0], "(1,2):(1,1)")?;
    let diff = run("sub", vec![a.into(), row.into()], &[])?;
    assert_result(
        &diff,
        DType::FLOAT32,
        Shape::new((2, 2))?,
        &floats(&[4.5, 1.0, -2.0, 1.0]),
    )?;

    let x = i32_tensor(&[7, -2147483648], "2:1")?;
    let y = i32_tensor(&[9, 0], "2:1")?;
    let diff = run("sub", vec![x.clone().into(), y.into()], &[])?;
    assert_result(
        &diff,
        DType::INT32,
        Shape::new(2)?,
        &ints(&[-2, -2147483648]),
    )?;
    let one = i32_tensor(&[1], "1:1")?;
    let low = i32_tensor(&[-2147483648], "1:1")?;
    let (kind, message) = failure("sub", vec![low.into(), one.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(
        message.contains("'sub' overflows Int32: -2147483648 - 1"),
        "{message}"
    );
    Ok(())
}

#[test]
fn neg_flips_signs_and_checks_int32() -> Result<()> {
    let x = f32_tensor(&[1.5, -2.0, 0.0, f32::INFINITY], "4:1")?;
    let y = run("neg", vec![x.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(4)?,
        &floats(&[-1.5, 2.0, -0.0, f32::NEG_INFINITY]),
    )?;
    let x = i32_tensor(&[5, -7, 2147483647], "3:1")?;
    let y = run("neg", vec![x.into()], &[])?;
    assert_result(
        &y,
        DType::INT32,
        Shape::new(3)?,
        &ints(&[-5, 7, -2147483647]),
    )?;
    let min = i32_tensor(&[3, i32::MIN], "2:1")?;
    let (kind, message) = failure("neg", vec![min.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(
        message.contains("'neg' overflows Int32: -(-2147483648)"),
        "{message}"
    );
    Ok(())
}

#[test]
fn abs_of_floats_and_ints() -> Result<()> {
    let x = f32_tensor(&[-1.5, 2.0, -0.0, f32::NEG_INFINITY], "4:1")?;
    let y = run("abs", vec![x.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(4)?,
        &floats(&[1.5, 2.0, 0.0, f32::INFINITY]),
    )?;
    let x = i32_tensor(&[-3, 4, -2147483647], "3:1")?;
    let y = run("abs", vec![x.into()], &[])?;
    assert_result(&y, DType::INT32, Shape::new(3)?, &ints(&[3, 4, 2147483647]))?;
    let min = i32_tensor(&[i32::MIN], "1:1")?;
    let (kind, message) = failure("abs", vec![min.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(
        message.contains("'abs' overflows Int32: |-2147483648|"),
        "{message}"
    );
    Ok(())
}

#[test]
fn exp_in_float32() -> Result<()> {
    let x = f32_tensor(&[0.0, 1.0, f32::NEG_INFINITY, f32::NAN], "4:1")?;
    let y = run("exp", vec![x.into()], &[])?;
    assert_close(&y, &[1.0, std::f32::consts::E, 0.0, f32::NAN], 1e-6)?;
    // Int32 converts to Float32 first.
    let i = i32_tensor(&[0], "1:1")?;
    let y = run("exp", vec![i.into()], &[])?;
    assert_result(&y, DType::FLOAT32, Shape::new(1)?, &floats(&[1.0]))?;
    Ok(())
}

#[test]
fn log_of_positive_zero_and_negative() -> Result<()> {
    let x = f32_tensor(&[1.0, 0.0, -1.0, std::f32::consts::E], "(2,2):(1,2)")?;
    let y = run("log", vec![x.into()], &[])?;
    assert_eq!(y.shape(), &Shape::new((2, 2))?);
    assert_close(&y, &[0.0, f32::NEG_INFINITY, f32::NAN, 1.0], 1e-6)?;
    Ok(())
}

#[test]
fn sqrt_is_exact_on_squares_and_nan_below_zero() -> Result<()> {
    let x = f32_tensor(&[4.0, 2.25, 0.0, -1.0], "4:1")?;
    let y = run("sqrt", vec![x.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(4)?,
        &floats(&[2.0, 1.5, 0.0, f32::NAN]),
    )?;
    let i = i32_tensor(&[9, 16], "2:1")?;
    let y = run("sqrt", vec![i.into()], &[])?;
    assert_result(&y, DType::FLOAT32, Shape::new(2)?, &floats(&[3.0, 4.0]))?;
    Ok(())
}

#[test]
fn tanh_saturates() -> Result<()> {
    let x = f32_tensor(&[0.0, f32::INFINITY, f32::NEG_INFINITY, 0.5], "4:1")?;
    let y = run("tanh", vec![x.into()], &[])?;
    assert_close(&y, &[0.0, 1.0, -1.0, 0.46211716], 1e-6)?;
    Ok(())
}

#[test]
fn sigmoid_is_one_over_one_plus_exp() -> Result<()> {
    let x = f32_tensor(&[0.0, f32::INFINITY, f32::NEG_INFINITY, 2.0], "4:1")?;
    let y = run("sigmoid", vec![x.into()], &[])?;
    assert_close(&y, &[0.5, 1.0, 0.0, 0.880797], 1e-6)?;
    Ok(())
}

#[test]
fn relu_through_a_permuted_view() -> Result<()> {
    // (2,2):(2,1) reads the slots [−1, 0, 2.5, NaN] in the order −1, 2.5, 0, NaN.
    let x = f32_tensor(&[-1.0, -0.0, 2.5, f32::NAN], "(2,2):(2,1)")?;
    let y = run("relu", vec![x.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new((2, 2))?,
        &floats(&[0.0, 2.5, 0.0, f32::NAN]),
    )?;
    let base = i32_tensor(&[-3, 0, 7, -1, 5, 2], "(2,3):(1,2)")?;
    let y = run("relu", vec![base.permute(&[1, 0])?.into()], &[])?;
    // permute → (3,2):(2,1): ordinals read slots 0,2,4,1,3,5.
    assert_result(
        &y,
        DType::INT32,
        Shape::new((3, 2))?,
        &ints(&[0, 7, 5, 0, 0, 2]),
    )?;
    Ok(())
}

#[test]
fn maximum_with_a_stride_zero_operand() -> Result<()> {
    let a = f32_tensor(
        &[1.0, 5.0, f32::NAN, -2.0, 0.0, 3.0, 4.0, -0.0],
        "(4,2):(1,4)",
    )?;
    // A stride-0 view repeats its four slots across mode 1.
    let b = f32_tensor(&[2.0, 2.0, 2.0, 0.0], "(4,2):(1,0)")?;
    let y = run("maximum", vec![a.clone().into(), b.clone().into()], &[])?;
    let expected = [2.0, 5.0, f32::NAN, 0.0, 2.0, 3.0, 4.0, 0.0];
    assert_result(&y, DType::FLOAT32, Shape::new((4, 2))?, &floats(&expected))?;
    let y = run("maximum", vec![b.into(), a.into()], &[])?;
    assert_result(&y, DType::FLOAT32, Shape::new((4, 2))?, &floats(&expected))?;

    let i = i32_tensor(&[-4, 0, 9], "3:1")?;
    let y = run("maximum", vec![i.into(), 1i64.into()], &[])?;
    assert_result(&y, DType::INT32, Shape::new(3)?, &ints(&[1, 1, 9]))?;
    Ok(())
}

#[test]
fn minimum_of_tensors_and_a_scalar() -> Result<()> {
    let a = f32_tensor(&[1.0, 5.0, f32::NAN, 0.0], "4:1")?;
    let b = f32_tensor(&[2.0, -5.0, 0.0, -0.0], "4:1")?;
    let y = run("minimum", vec![a.clone().into(), b.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(4)?,
        &floats(&[1.0, -5.0, f32::NAN, -0.0]),
    )?;
    let y = run("minimum", vec![a.into(), 2.0.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(4)?,
        &floats(&[1.0, 2.0, f32::NAN, 0.0]),
    )?;
    let i = i32_tensor(&[-4, 0, 9], "3:1")?;
    let j = i32_tensor(&[3], "1:1")?;
    // Shape (1) broadcasts against Shape (3).
    let y = run("minimum", vec![i.into(), j.into()], &[])?;
    assert_result(&y, DType::INT32, Shape::new(3)?, &ints(&[-4, 0, 3]))?;
    Ok(())
}

#[test]
fn eq_of_floats_ints_and_bools() -> Result<()> {
    let a = f32_tensor(&[1.0, f32::NAN, 0.0, 2.0], "4:1")?;
    let b = f32_tensor(&[1.0, f32::NAN, -0.0, 3.0], "4:1")?;
    let y = run("eq", vec![a.into(), b.into()], &[])?;
    assert_result(
        &y,
        DType::BOOL,
        Shape::new(4)?,
        &bools(&[true, false, true, false]),
    )?;
    let i = i32_tensor(&[2, 3], "2:1")?;
    let y = run("eq", vec![i.clone().into(), 3i64.into()], &[])?;
    assert_result(&y, DType::BOOL, Shape::new(2)?, &bools(&[false, true]))?;
    // Int32 against a float scalar compares in Float32.
    let y = run("eq", vec![i.into(), 2.0.into()], &[])?;
    assert_result(&y, DType::BOOL, Shape::new(2)?, &bools(&[true, false]))?;
    let p = tensor(&bools(&[true, false, true]), DType::BOOL, "3:1")?;
    let q = tensor(&bools(&[true, true, false]), DType::BOOL, "3:1")?;
    let y = run("eq", vec![p.clone().into(), q.into()], &[])?;
    assert_result(
        &y,
        DType::BOOL,
        Shape::new(3)?,
        &bools(&[true, false, false]),
    )?;
    let y = run("eq", vec![p.into(), false.into()], &[])?;
    assert_result(
        &y,
        DType::BOOL,
        Shape::new(3)?,
        &bools(&[false, true, false]),
    )?;
    Ok(())
}

#[test]
fn lt_with_broadcasting_and_nan() -> Result<()> {
    let a = f32_tensor(&[1.0, 2.0, f32::NAN], "(3,1):(1,3)")?;
    let b = f32_tensor(&[2.0, 2.0, 2.0, 0.5, 3.0, 0.0], "(3,2):(1,3)")?;
    let y = run("lt", vec![a.into(), b.into()], &[])?;
    let expected = [true, false, false, false, true, false];
    assert_result(&y, DType::BOOL, Shape::new((3, 2))?, &bools(&expected))?;
    let i = i32_tensor(&[-1, 0, 1], "3:1")?;
    let y = run("lt", vec![i.into(), 0i64.into()], &[])?;
    assert_result(
        &y,
        DType::BOOL,
        Shape::new(3)?,
        &bools(&[true, false, false]),
    )?;
    Ok(())
}

#[test]
fn le_of_mixed_dtypes() -> Result<()> {
    let i = i32_tensor(&[1, 2, 3], "3:1")?;
    let f = f32_tensor(&[1.5, 2.0, f32::NAN], "3:1")?;
    let y = run("le", vec![i.clone().into(), f.into()], &[])?;
    assert_result(
        &y,
        DType::BOOL,
        Shape::new(3)?,
        &bools(&[true, true, false]),
    )?;
    let y = run("le", vec![i.into(), 2i64.into()], &[])?;
    assert_result(
        &y,
        DType::BOOL,
        Shape::new(3)?,
        &bools(&[true, true, false]),
    )?;
    Ok(())
}

#[test]
fn reduce_max_over_mode_1() -> Result<()> {
    // x(i, j) at slot i + 3j: rows [1, -4, 2], [-5, -6, -0.5], [0, NaN, 7].
    let x = f32_tensor(
        &[1.0, -5.0, 0.0, -4.0, -6.0, f32::NAN, 2.0, -0.5, 7.0],
        "(3,3):(1,3)",
    )?;
    let y = run("reduce_max", vec![x.clone().into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(3)?,
        &floats(&[2.0, -0.5, f32::NAN]),
    )?;
    // Through the permutation (3,3):(3,1), x'(i, j) is slot 3i + j: rows [1, -5, 0],
    // [-4, -6, NaN], [2, -0.5, 7].
    let y = run("reduce_max", vec![x.permute(&[1, 0])?.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(3)?,
        &floats(&[1.0, f32::NAN, 7.0]),
    )?;
    let i = i32_tensor(&[3, -1, 8, -9], "(2,2):(1,2)")?;
    let y = run("reduce_max", vec![i.into()], &[])?;
    assert_result(&y, DType::INT32, Shape::new(2)?, &ints(&[8, -1]))?;
    Ok(())
}

#[test]
fn elementwise_mul_broadcasts_and_checks_int32() -> Result<()> {
    let a = f32_tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "(2,3):(1,2)")?;
    let row = f32_tensor(&[10.0, -1.0, 0.5], "(1,3):(1,1)")?;
    let y = run("elementwise_mul", vec![a.into(), row.into()], &[])?;
    let expected = [10.0, 20.0, -3.0, -4.0, 2.5, 3.0];
    assert_result(&y, DType::FLOAT32, Shape::new((2, 3))?, &floats(&expected))?;
    let i = i32_tensor(&[-3, 4], "2:1")?;
    let j = i32_tensor(&[5, 6], "2:1")?;
    let y = run("elementwise_mul", vec![i.into(), j.into()], &[])?;
    assert_result(&y, DType::INT32, Shape::new(2)?, &ints(&[-15, 24]))?;
    let big = i32_tensor(&[65536], "1:1")?;
    let half = i32_tensor(&[32768], "1:1")?;
    let (kind, message) = failure("elementwise_mul", vec![big.into(), half.into()]);
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(
        message.contains("'elementwise_mul' overflows Int32: 65536 * 32768"),
        "{message}"
    );
    Ok(())
}

#[test]
fn add_of_int32_and_float32_computes_in_float32() -> Result<()> {
    let i = i32_tensor(&[16777217, 2], "2:1")?;
    let f = f32_tensor(&[0.0, 0.5], "2:1")?;
    let y = run("add", vec![i.into(), f.into()], &[])?;
    // 2^24 + 1 rounds to 2^24 on conversion.
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(2)?,
        &floats(&[16777216.0, 2.5]),
    )?;
    Ok(())
}

#[test]
fn results_are_fresh_and_operands_survive_in_place_ops_on_views() -> Result<()> {
    let carrier = Generic::carrier(&floats(&[1.0, 2.0, 3.0, 4.0]), DType::FLOAT32, true)?;
    let x = Tensor::new(carrier.clone(), 0, "(2,2):(1,2)".parse()?)?;
    let view = x.permute(&[1, 0])?;
    let y = run("add", vec![x.clone().into(), view.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new((2, 2))?,
        &floats(&[2.0, 5.0, 5.0, 8.0]),
    )?;
    assert!(!y.carrier().same_as(&carrier));
    // Writing the result leaves the operand alone.
    y.set(&(0, 0).into(), Value::Float(-1.0))?;
    assert_eq!(carrier.version(), 0);
    assert_eq!(carrier.get(0)?, Value::Float(1.0));
    assert!(y.is_mutable());
    Ok(())
}

#[test]
fn an_offset_operand_is_read_from_its_offset() -> Result<()> {
    let carrier = Generic::carrier(&ints(&[100, 1, 2, 3]), DType::INT32, true)?;
    let x = Tensor::new(carrier, 1, "3:1".parse()?)?;
    let y = run("neg", vec![x.into()], &[])?;
    assert_result(&y, DType::INT32, Shape::new(3)?, &ints(&[-1, -2, -3]))?;
    Ok(())
}

/// A Bool Generic tensor.
fn bool_tensor(values: &[bool], layout: &str) -> Result<Tensor> {
    tensor(&bools(values), DType::BOOL, layout)
}

#[test]
fn select_chooses_per_element_and_broadcasts_all_three() -> Result<()> {
    // A (2,1) condition picks whole rows of a (2,3) tensor against a scalar.
    let rows = bool_tensor(&[true, false], "(2,1):(1,1)")?;
    let a = f32_tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "(2,3):(1,2)")?;
    let y = run(
        "select",
        vec![rows.into(), a.clone().into(), (-1.0).into()],
        &[],
    )?;
    let expected = [1.0, -1.0, 3.0, -1.0, 5.0, -1.0];
    assert_result(&y, DType::FLOAT32, Shape::new((2, 3))?, &floats(&expected))?;

    // Full condition, a row (1,3) and a column (2,1): out(i, j) = c(i, j) ? row(j) : col(i).
    let cond = bool_tensor(&[true, false, false, true, true, false], "(2,3):(1,2)")?;
    let row = i32_tensor(&[10, 20, 30], "(1,3):(1,1)")?;
    let col = i32_tensor(&[-1, -2], "(2,1):(1,1)")?;
    let y = run(
        "select",
        vec![cond.clone().into(), row.into(), col.into()],
        &[],
    )?;
    let expected = [10, -2, -1, 20, 30, -2];
    assert_result(&y, DType::INT32, Shape::new((2, 3))?, &ints(&expected))?;

    // A (1,3) condition broadcast over (2,3) branches; Int32 with Float32 selects in
    // Float32 (2^24 + 1 rounds to 2^24 on conversion).
    let cols = bool_tensor(&[true, false, true], "(1,3):(1,1)")?;
    let i = i32_tensor(&[16_777_217, 2, 3, 4, 5, 6], "(2,3):(1,2)")?;
    let f = f32_tensor(&[0.5, 1.5, 2.5, 3.5, 4.5, 5.5], "(2,3):(1,2)")?;
    let y = run("select", vec![cols.into(), i.into(), f.into()], &[])?;
    let expected = [16_777_216.0, 2.0, 2.5, 3.5, 5.0, 6.0];
    assert_result(&y, DType::FLOAT32, Shape::new((2, 3))?, &floats(&expected))?;

    // Two scalars: the condition alone gives the shape.
    let mask = bool_tensor(&[false, true, true], "3:1")?;
    let y = run(
        "select",
        vec![mask.clone().into(), 1.0.into(), 0.0.into()],
        &[],
    )?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(3)?,
        &floats(&[0.0, 1.0, 1.0]),
    )?;
    let y = run(
        "select",
        vec![mask.clone().into(), 7i64.into(), (-7i64).into()],
        &[],
    )?;
    assert_result(&y, DType::INT32, Shape::new(3)?, &ints(&[-7, 7, 7]))?;
    // Bool scalars are of floating kind: 1.0 and 0.0.
    let y = run(
        "select",
        vec![mask.clone().into(), true.into(), false.into()],
        &[],
    )?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(3)?,
        &floats(&[0.0, 1.0, 1.0]),
    )?;

    // Bool with Bool (a bool scalar included) stays Bool.
    let p = bool_tensor(&[true, true, false], "3:1")?;
    let y = run(
        "select",
        vec![mask.clone().into(), p.into(), false.into()],
        &[],
    )?;
    assert_result(
        &y,
        DType::BOOL,
        Shape::new(3)?,
        &bools(&[false, true, false]),
    )?;

    // NaN and -0.0 are selected exactly; a permuted condition view is read through its layout.
    let special = f32_tensor(&[f32::NAN, -0.0, 2.0], "3:1")?;
    let y = run("select", vec![mask.into(), special.into(), 9.0.into()], &[])?;
    assert_result(
        &y,
        DType::FLOAT32,
        Shape::new(3)?,
        &floats(&[9.0, -0.0, 2.0]),
    )?;
    let y = run(
        "select",
        vec![cond.permute(&[1, 0])?.into(), 1i64.into(), 0i64.into()],
        &[],
    )?;
    // permute → (3,2):(2,1): ordinals read slots 0,2,4,1,3,5.
    assert_result(
        &y,
        DType::INT32,
        Shape::new((3, 2))?,
        &ints(&[1, 0, 1, 0, 1, 0]),
    )?;
    Ok(())
}

#[test]
fn select_refuses_non_bool_conditions_and_mixed_bool_branches() -> Result<()> {
    let x = f32_tensor(&[1.0, 2.0], "2:1")?;
    let i = i32_tensor(&[1, 0], "2:1")?;
    let c = bool_tensor(&[true, false], "2:1")?;
    for (cond, dtype) in [(&x, "Float32"), (&i, "Int32")] {
        let (kind, message) = failure(
            "select",
            vec![cond.clone().into(), x.clone().into(), 0.0.into()],
        );
        assert_eq!(kind, ErrorKind::Type, "{message}");
        assert!(
            message.contains("'select'") && message.contains(dtype),
            "{message}"
        );
    }
    // A scalar condition binds as no tensor.
    let (kind, _) = failure("select", vec![true.into(), x.clone().into(), 0.0.into()]);
    assert_eq!(kind, ErrorKind::Type);
    // Bool never promotes.
    let (kind, message) = failure(
        "select",
        vec![c.clone().into(), c.clone().into(), x.clone().into()],
    );
    assert_eq!(kind, ErrorKind::Type);
    assert!(message.contains("never promotes"), "{message}");
    // An integer scalar outside Int32 meets an Int32 selection.
    let (kind, message) = failure(
        "select",
        vec![c.clone().into(), i.into(), (1i64 << 40).into()],
    );
    assert_eq!(kind, ErrorKind::Overflow);
    assert!(message.contains("'select'"), "{message}");
    // Shapes must broadcast, and three operands are needed.
    let three = f32_tensor(&[1.0, 2.0, 3.0], "3:1")?;
    let (kind, _) = failure("select", vec![c.clone().into(), three.into(), 0.0.into()]);
    assert_eq!(kind, ErrorKind::Value);
    let (kind, _) = failure("select", vec![c.into(), x.into()]);
    assert_eq!(kind, ErrorKind::Type);
    Ok(())
}
