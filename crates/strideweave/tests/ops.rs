//! The `ops` functions give the same results as `operation::call` of the same name.

use strideweave::carriers::Cpu;
use strideweave::operation::{call, Operand, OptionValue};
use strideweave::{ops, DType, Result, Shape, Tensor, Value};

type Unary = fn(&Tensor) -> Result<Tensor>;
type Binary = fn(&Tensor, &Tensor) -> Result<Tensor>;
type Mixed = fn(&Tensor, Operand) -> Result<Tensor>;

fn t(values: &[f32], shape: Shape) -> Tensor {
    Tensor::compact(Cpu::from_f32(values, true).unwrap(), shape).unwrap()
}

fn same(
    via_ops: Result<Tensor>,
    name: &str,
    operands: Vec<Operand>,
    options: &[(&str, OptionValue)],
) {
    let expected = call(name, operands, options).unwrap().remove(0);
    let got = via_ops.unwrap();
    assert_eq!(got.layout(), expected.layout(), "{name}");
    assert_eq!(got.dtype(), expected.dtype(), "{name}");
    // Bitwise, so that NaN results compare equal to themselves.
    let bits = |t: &Tensor| format!("{:?}", t.to_values().unwrap());
    assert_eq!(bits(&got), bits(&expected), "{name}");
}

#[test]
fn every_function_matches_its_named_call() {
    let a = t(
        &[1.0, -2.0, 3.0, 4.0, 0.5, -6.0],
        Shape::new((2, 3)).unwrap(),
    );
    let b = t(
        &[0.5, 2.0, -3.0, 1.0, 2.0, 2.0],
        Shape::new((2, 3)).unwrap(),
    );
    let unary: [(Unary, &str); 9] = [
        (ops::neg, "neg"),
        (ops::abs, "abs"),
        (ops::exp, "exp"),
        (ops::log, "log"),
        (ops::sqrt, "sqrt"),
        (ops::tanh, "tanh"),
        (ops::sigmoid, "sigmoid"),
        (ops::relu, "relu"),
        (ops::reduce_max, "reduce_max"),
    ];
    for (f, name) in unary {
        same(f(&a), name, vec![a.clone().into()], &[]);
    }
    let binary: [(Binary, &str); 4] = [
        (ops::add, "add"),
        (ops::sub, "sub"),
        (ops::elementwise_mul, "elementwise_mul"),
        (ops::matmul, "matmul"),
    ];
    for (f, name) in binary {
        same(
            f(&a, &b),
            name,
            vec![a.clone().into(), b.clone().into()],
            &[],
        );
    }
    let mixed: [(Mixed, &str); 6] = [
        (|x, y| ops::div(x, y), "div"),
        (|x, y| ops::maximum(x, y), "maximum"),
        (|x, y| ops::minimum(x, y), "minimum"),
        (|x, y| ops::eq(x, y), "eq"),
        (|x, y| ops::lt(x, y), "lt"),
        (|x, y| ops::le(x, y), "le"),
    ];
    for (f, name) in mixed {
        same(
            f(&a, b.clone().into()),
            name,
            vec![a.clone().into(), b.clone().into()],
            &[],
        );
        same(
            f(&a, 2.0.into()),
            name,
            vec![a.clone().into(), 2.0.into()],
            &[],
        );
    }
    same(
        ops::mul(2.0, &a),
        "mul",
        vec![2.0.into(), a.clone().into()],
        &[],
    );
    same(
        ops::mul(&a, &b),
        "mul",
        vec![a.clone().into(), b.clone().into()],
        &[],
    );
    same(
        ops::reduce_sum(&a),
        "reduce_sum",
        vec![a.clone().into()],
        &[],
    );
    let wide = [("accumulator_dtype", OptionValue::DType(DType::FLOAT64))];
    same(
        ops::reduce_sum_with(&a, DType::FLOAT64),
        "reduce_sum",
        vec![a.clone().into()],
        &wide,
    );
    same(
        ops::matmul_with(&a, &b, DType::FLOAT64),
        "matmul",
        vec![a.clone().into(), b.clone().into()],
        &wide,
    );
    let cond = ops::lt(&a, &b).unwrap();
    assert_eq!(cond.dtype(), DType::BOOL);
    same(
        ops::select(&cond, &a, &b),
        "select",
        vec![cond.clone().into(), a.clone().into(), b.clone().into()],
        &[],
    );
    same(
        ops::select(&cond, 1.0, &b),
        "select",
        vec![cond.clone().into(), 1.0.into(), b.clone().into()],
        &[],
    );
    same(
        ops::select(&cond, 1i64, 0i64),
        "select",
        vec![cond.clone().into(), 1i64.into(), 0i64.into()],
        &[],
    );
    assert_eq!(
        ops::select(&cond, &a, 0.0).unwrap().to_values().unwrap(),
        [0.0, -2.0, 0.0, 0.0, 0.5, -6.0].map(Value::Float)
    );
    assert_eq!(
        ops::select(&a, &a, &b).unwrap_err().kind(),
        strideweave::ErrorKind::Type
    );
    assert_eq!(
        ops::relu(&a).unwrap().get(&(1, 0).into()).unwrap(),
        Value::Float(0.0)
    );
}
