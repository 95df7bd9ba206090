//! Every built-in, walked through its typed identity ([`Builtin::ALL`]): its registered
//! definition carries that identity, its CPU kernel agrees with the Generic reference, and
//! where it has a gradient, the CPU and reference gradients agree with each other and with
//! central finite differences. A new built-in without a case in the operand builder fails
//! these tests (inside the crate the kernels match on `Builtin` exhaustively; outside it the
//! enum is non-exhaustive).

use strideweave::autograd::{grad, no_grad};
use strideweave::carriers::{Cpu, Generic};
use strideweave::operation::{call, operation_definition, Builtin, Operand, BUILTIN_OPERATIONS};
use strideweave::{Carrier, DType, Shape, Tensor, Value};

/// Which carrier class the operands live on.
#[derive(Clone, Copy, Debug)]
enum On {
    Reference,
    Cpu,
}

fn carrier(on: On, values: &[Value], dtype: DType) -> Carrier {
    match on {
        On::Reference => Generic::carrier(values, dtype, true).unwrap(),
        On::Cpu => Cpu::from_values(values, dtype, true).unwrap(),
    }
}

/// A Float32 tensor of `shape` whose values follow `seed`, kept at least 0.1 away from 0
/// (and positive where `positive`), so kinks and domains stay clear of finite differences.
fn floats(on: On, shape: (usize, usize), seed: usize, positive: bool) -> Tensor {
    let n = shape.0 * shape.1;
    let values: Vec<Value> = (0..n)
        .map(|i| {
            let raw = ((i * 37 + seed * 11) % 23) as f64 / 7.0 - 1.5;
            let away = if raw.abs() < 0.1 { raw + 0.35 } else { raw };
            Value::Float(if positive { away.abs() + 0.5 } else { away })
        })
        .collect();
    let t = Tensor::compact(
        carrier(on, &values, DType::FLOAT32),
        Shape::new(shape).unwrap(),
    );
    t.unwrap()
}

fn bools(on: On, shape: (usize, usize)) -> Tensor {
    let n = shape.0 * shape.1;
    let values: Vec<Value> = (0..n).map(|i| Value::Bool(i % 3 != 1)).collect();
    Tensor::compact(
        carrier(on, &values, DType::BOOL),
        Shape::new(shape).unwrap(),
    )
    .unwrap()
}

/// The operands `builtin` is exercised on: one case per built-in, chosen so every operand
/// kind its schema takes appears.
fn operands(builtin: Builtin, on: On) -> Vec<Operand> {
    let x = |seed| Operand::Tensor(floats(on, (3, 4), seed, false));
    let positive = |seed| Operand::Tensor(floats(on, (3, 4), seed, true));
    match builtin {
        Builtin::Add
        | Builtin::Sub
        | Builtin::ElementwiseMul
        | Builtin::Maximum
        | Builtin::Minimum
        | Builtin::Eq
        | Builtin::Lt
        | Builtin::Le => vec![x(1), x(2)],
        Builtin::Mul => vec![x(1), Operand::Scalar(Value::Float(-1.5))],
        Builtin::Div => vec![x(1), positive(2)],
        Builtin::Neg
        | Builtin::Abs
        | Builtin::Exp
        | Builtin::Tanh
        | Builtin::Sigmoid
        | Builtin::Relu
        | Builtin::ReduceSum
        | Builtin::ReduceMax => vec![x(3)],
        Builtin::Log | Builtin::Sqrt => vec![positive(3)],
        Builtin::Matmul => vec![x(4), Operand::Tensor(floats(on, (2, 4), 5, false))],
        Builtin::Select => vec![
            Operand::Tensor(bools(on, (3, 4))),
            x(6),
            Operand::Scalar(Value::Float(0.25)),
        ],
        other => panic!("the built-in {other} has no operand case in this test"),
    }
}

fn values_f64(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .into_iter()
        .map(|v| match v {
            Value::Bool(b) => f64::from(u8::from(b)),
            other => other.as_f64().unwrap(),
        })
        .collect()
}

fn close(a: &[f64], b: &[f64], tolerance: f64) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= tolerance * (1.0 + x.abs().max(y.abs())))
}

fn run(builtin: Builtin, operands: &[Operand]) -> Tensor {
    let mut results = call(builtin.name(), operands.to_vec(), &[])
        .unwrap_or_else(|e| panic!("{builtin} failed: {e}"));
    assert_eq!(results.len(), 1, "{builtin} returns one result");
    results.remove(0)
}

/// The Float32 tensor operands a gradient flows to (a `select` condition is Bool).
fn differentiable(operands: &[Operand]) -> Vec<Tensor> {
    operands
        .iter()
        .filter_map(Operand::as_tensor)
        .filter(|t| t.dtype() == DType::FLOAT32)
        .cloned()
        .collect()
}

/// The gradient of `Σ w·builtin(operands)` with respect to each differentiable operand, or
/// `None` when the built-in records no gradient.
fn gradients(builtin: Builtin, operands: &[Operand]) -> Option<Vec<Vec<f64>>> {
    let inputs = differentiable(operands);
    for t in &inputs {
        t.set_requires_grad(true).unwrap();
    }
    let y = run(builtin, operands);
    if !y.requires_grad() {
        return None;
    }
    let w = floats(On::Cpu, (1, y.size()), 7, true);
    let w = Tensor::new(carrier_like(&y, &values_f64(&w)), 0, y.layout().clone()).unwrap();
    let grads = grad(&[y], &inputs, &[Some(w)], false).unwrap();
    Some(
        grads
            .into_iter()
            .map(|g| values_f64(&g.expect("a gradient for every differentiable operand")))
            .collect(),
    )
}

/// A Float32 carrier of `y`'s class holding `values`.
fn carrier_like(y: &Tensor, values: &[f64]) -> Carrier {
    let values: Vec<Value> = values.iter().map(|&v| Value::Float(v)).collect();
    y.carrier()
        .new_like(&values, true, Some(DType::FLOAT32))
        .unwrap()
}

/// Central finite differences of `Σ w·builtin(operands)` (the same `w` as [`gradients`]).
fn finite_differences(builtin: Builtin, operands: &[Operand]) -> Vec<Vec<f64>> {
    let step = 1e-2;
    let objective = |operands: &[Operand]| -> f64 {
        let _off = no_grad();
        let y = run(builtin, operands);
        let w = values_f64(&floats(On::Cpu, (1, y.size()), 7, true));
        values_f64(&y).iter().zip(&w).map(|(a, b)| a * b).sum()
    };
    let mut all = Vec::new();
    for (position, operand) in operands.iter().enumerate() {
        let Some(t) = operand.as_tensor().filter(|t| t.dtype() == DType::FLOAT32) else {
            continue;
        };
        let base = values_f64(t);
        let mut derivative = Vec::new();
        for i in 0..base.len() {
            let at = |delta: f64| {
                let mut moved = base.clone();
                moved[i] += delta;
                let values: Vec<Value> = moved.iter().map(|&v| Value::Float(v)).collect();
                let shifted = Tensor::compact(
                    Cpu::from_values(&values, DType::FLOAT32, true).unwrap(),
                    t.shape().clone(),
                )
                .unwrap();
                let mut changed = operands.to_vec();
                changed[position] = Operand::Tensor(shifted);
                objective(&changed)
            };
            derivative.push((at(step) - at(-step)) / (2.0 * step));
        }
        all.push(derivative);
    }
    all
}

#[test]
fn every_builtin_is_registered_under_its_typed_identity() {
    assert_eq!(Builtin::ALL.len(), BUILTIN_OPERATIONS.len());
    for builtin in Builtin::ALL {
        let definition = operation_definition(builtin.name()).unwrap();
        assert_eq!(definition.builtin(), Some(builtin));
        assert!(definition.is_builtin());
        assert_eq!(definition.name(), builtin.name());
    }
}

#[test]
fn every_builtin_agrees_between_cpu_and_the_reference() {
    for builtin in Builtin::ALL {
        let reference = run(builtin, &operands(builtin, On::Reference));
        let cpu = run(builtin, &operands(builtin, On::Cpu));
        assert_eq!(reference.shape(), cpu.shape(), "{builtin}");
        assert_eq!(reference.dtype(), cpu.dtype(), "{builtin}");
        assert!(
            close(&values_f64(&reference), &values_f64(&cpu), 1e-6),
            "{builtin}: reference {:?} vs CPU {:?}",
            values_f64(&reference),
            values_f64(&cpu)
        );
    }
}

#[test]
fn every_differentiable_builtin_has_agreeing_gradients() {
    let mut differentiated = Vec::new();
    for builtin in Builtin::ALL {
        let on_cpu = gradients(builtin, &operands(builtin, On::Cpu));
        let on_reference = gradients(builtin, &operands(builtin, On::Reference));
        assert_eq!(on_cpu.is_some(), on_reference.is_some(), "{builtin}");
        let (Some(cpu), Some(reference)) = (on_cpu, on_reference) else {
            continue;
        };
        differentiated.push(builtin.name());
        let numeric = finite_differences(builtin, &operands(builtin, On::Cpu));
        assert_eq!(cpu.len(), numeric.len(), "{builtin}");
        for (k, ((c, r), n)) in cpu.iter().zip(&reference).zip(&numeric).enumerate() {
            assert!(
                close(c, r, 1e-5),
                "{builtin} operand {k}: CPU {c:?} vs reference {r:?}"
            );
            assert!(
                close(c, n, 2e-2),
                "{builtin} operand {k}: CPU {c:?} vs numeric {n:?}"
            );
        }
    }
    // The comparisons are the built-ins without gradients.
    let without: Vec<&str> = Builtin::ALL
        .into_iter()
        .map(Builtin::name)
        .filter(|name| !differentiated.contains(name))
        .collect();
    assert_eq!(without, ["eq", "lt", "le"]);
}
