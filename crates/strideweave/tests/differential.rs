//! Differential property tests: every built-in operation on CPU agrees with the Generic
//! reference on random shapes, strides (permuted views, offsets, gaps, stride-0 broadcasts)
//! and values — exactly for Int32, Bool and the exact Float32 operations, within the
//! tolerances of docs/kernel-semantics.md otherwise.

use proptest::prelude::*;
use strideweave::carriers::{Cpu, Generic};
use strideweave::operation::{call, Operand, OptionValue};
use strideweave::{DType, Layout, Shape, Stride, Tensor, Value};

/// A layout over `extents` whose strides are a permutation of the column-major ones,
/// scaled by `gap` (1 = dense), placed at `offset`.
#[derive(Debug, Clone)]
struct Placement {
    extents: Vec<usize>,
    order: Vec<usize>,
    gap: usize,
    offset: usize,
}

impl Placement {
    fn layout(&self) -> Layout {
        let mut strides = vec![0; self.extents.len()];
        let mut running = self.gap;
        for &k in &self.order {
            strides[k] = running;
            running *= self.extents[k];
        }
        Layout::new(
            Shape::flat(&self.extents).unwrap(),
            Stride::flat(&strides).unwrap(),
        )
        .unwrap()
    }
}

fn placement(extents: Vec<usize>) -> impl Strategy<Value = Placement> {
    let n = extents.len();
    (
        Just(extents),
        Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
        1usize..3,
        0usize..3,
    )
        .prop_map(|(extents, order, gap, offset)| Placement {
            extents,
            order,
            gap,
            offset,
        })
}

/// The same slot values on a Generic and a CPU carrier, viewed through `placement`.
fn pair(placement: &Placement, dtype: DType, seed: &[i64]) -> (Tensor, Tensor) {
    let layout = placement.layout();
    let slots = placement.offset + layout.cosize();
    let values: Vec<Value> = (0..slots)
        .map(|i| {
            let raw = seed[i % seed.len()].wrapping_add(i as i64 * 7919) % 2001 - 1000;
            if dtype == DType::INT32 {
                Value::Int(raw)
            } else if dtype == DType::BOOL {
                Value::Bool(raw % 2 == 0)
            } else {
                Value::Float(raw as f64 / 37.0)
            }
        })
        .collect();
    let generic = Generic::carrier(&values, dtype, true).unwrap();
    let cpu = Cpu::from_values(&values, dtype, true).unwrap();
    (
        Tensor::new(generic, placement.offset, layout.clone()).unwrap(),
        Tensor::new(cpu, placement.offset, layout).unwrap(),
    )
}

/// A view of `(generic, cpu)` with the leaves in `mask` fixed to index 0 and then widened
/// back with stride 0 (a broadcast operand).
fn broadcast(tensors: (Tensor, Tensor), mask: &[bool]) -> (Tensor, Tensor) {
    let view = |t: &Tensor| {
        let full = t.shape().clone();
        let keys: Vec<strideweave::SliceKey> = mask
            .iter()
            .map(|&m| {
                if m {
                    strideweave::SliceKey::stepped(0, 1, 1)
                } else {
                    strideweave::SliceKey::all()
                }
            })
            .collect();
        t.slice(&keys).unwrap().broadcast_to(&full).unwrap()
    };
    (view(&tensors.0), view(&tensors.1))
}

fn close(op: &str, reference: &Value, candidate: &Value, scale: f64) -> bool {
    match (reference, candidate) {
        (Value::Float(r), Value::Float(c)) => {
            if r.is_nan() || c.is_nan() {
                return r.is_nan() && c.is_nan();
            }
            let tolerance = match op {
                "exp" | "log" | "sqrt" | "tanh" | "sigmoid" => 1e-6 + 1e-6 * r.abs(),
                "reduce_sum" | "matmul" => 1e-5 * scale + 1e-6,
                _ => 0.0,
            };
            if tolerance == 0.0 {
                r.to_bits() == c.to_bits()
            } else {
                (r - c).abs() <= tolerance || (r.is_infinite() && r == c)
            }
        }
        _ => reference == candidate,
    }
}

fn compare(
    op: &str,
    generic: &[Operand],
    cpu: &[Operand],
    options: &[(&str, OptionValue)],
) -> Result<(), TestCaseError> {
    let reference = call(op, generic.to_vec(), options);
    let candidate = call(op, cpu.to_vec(), options);
    match (reference, candidate) {
        (Ok(r), Ok(c)) => {
            prop_assert_eq!(r[0].layout(), c[0].layout());
            prop_assert_eq!(r[0].dtype(), c[0].dtype());
            let rv = r[0].to_values().unwrap();
            let cv = c[0].to_values().unwrap();
            let scale = generic
                .iter()
                .filter_map(Operand::as_tensor)
                .flat_map(|t| t.to_values().unwrap())
                .map(|v| v.as_f64().unwrap_or(0.0).abs())
                .fold(1.0f64, f64::max)
                .powi(2)
                * (generic
                    .iter()
                    .filter_map(Operand::as_tensor)
                    .map(|t| t.size())
                    .max()
                    .unwrap_or(1) as f64);
            for (i, (a, b)) in rv.iter().zip(&cv).enumerate() {
                prop_assert!(
                    close(op, a, b, scale),
                    "{op} element {i}: reference {a:?}, CPU {b:?}"
                );
            }
        }
        (Err(r), Err(c)) => prop_assert_eq!(r.kind(), c.kind(), "{}: {} vs {}", op, r, c),
        (r, c) => prop_assert!(
            false,
            "{op}: reference {:?} but CPU {:?}",
            r.map(|_| ()),
            c.map(|_| ())
        ),
    }
    Ok(())
}

const UNARY: [&str; 9] = [
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "relu",
    "reduce_max",
];
const BINARY: [&str; 10] = [
    "add",
    "sub",
    "mul",
    "elementwise_mul",
    "div",
    "maximum",
    "minimum",
    "eq",
    "lt",
    "le",
];

/// A weak scalar of any kind: a small integer, a float or a bool.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-5i64..5).prop_map(Value::Int),
        (-5.0f64..5.0).prop_map(Value::Float),
        any::<bool>().prop_map(Value::Bool),
    ]
}

fn dtype_of(index: usize) -> DType {
    [DType::FLOAT32, DType::INT32, DType::BOOL][index]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn elementwise_unary_ops_agree(
        place in prop::collection::vec(1usize..5, 1..4).prop_flat_map(placement),
        dtype in 0usize..2,
        seed in prop::collection::vec(any::<i64>(), 1..8),
    ) {
        let (g, c) = pair(&place, dtype_of(dtype), &seed);
        for op in UNARY.iter().filter(|op| **op != "reduce_max") {
            compare(op, &[g.clone().into()], &[c.clone().into()], &[])?;
        }
    }

    #[test]
    fn elementwise_binary_ops_agree_with_broadcasting(
        place in prop::collection::vec(1usize..5, 1..4).prop_flat_map(placement),
        other in prop::collection::vec(0usize..3, 4),
        dtypes in (0usize..3, 0usize..3),
        masks in (prop::collection::vec(any::<bool>(), 4), prop::collection::vec(any::<bool>(), 4)),
        seed in prop::collection::vec(any::<i64>(), 1..8),
    ) {
        let n = place.extents.len();
        let rhs_place = Placement { order: place.order.clone(), gap: 1 + other[0] % 2, offset: other[1], ..place.clone() };
        let lhs = broadcast(pair(&place, dtype_of(dtypes.0), &seed), &masks.0[..n]);
        let rhs = broadcast(pair(&rhs_place, dtype_of(dtypes.1), &seed[1..].iter().chain(&seed).copied().collect::<Vec<_>>()), &masks.1[..n]);
        for op in BINARY {
            compare(op, &[lhs.0.clone().into(), rhs.0.clone().into()], &[lhs.1.clone().into(), rhs.1.clone().into()], &[])?;
        }
    }

    #[test]
    fn ops_with_weak_scalars_agree(
        place in prop::collection::vec(1usize..5, 1..4).prop_flat_map(placement),
        dtype in 0usize..2,
        scalar in prop_oneof![(-5i64..5).prop_map(Value::Int), (-5.0f64..5.0).prop_map(Value::Float), any::<bool>().prop_map(Value::Bool)],
        seed in prop::collection::vec(any::<i64>(), 1..8),
    ) {
        let (g, c) = pair(&place, dtype_of(dtype), &seed);
        for op in ["mul", "div", "maximum", "minimum", "eq", "lt", "le"] {
            compare(op, &[g.clone().into(), scalar.into()], &[c.clone().into(), scalar.into()], &[])?;
        }
        compare("mul", &[scalar.into(), g.clone().into()], &[scalar.into(), c.clone().into()], &[])?;
    }

    #[test]
    fn select_agrees_with_broadcasting_and_scalar_branches(
        place in prop::collection::vec(1usize..5, 1..4).prop_flat_map(placement),
        other in prop::collection::vec(0usize..3, 4),
        kinds in (0usize..4, 0usize..4),
        masks in (
            prop::collection::vec(any::<bool>(), 4),
            prop::collection::vec(any::<bool>(), 4),
            prop::collection::vec(any::<bool>(), 4),
        ),
        scalars in (scalar(), scalar()),
        seed in prop::collection::vec(any::<i64>(), 1..8),
    ) {
        let n = place.extents.len();
        let cond = broadcast(pair(&place, DType::BOOL, &seed), &masks.0[..n]);
        // Each branch is a tensor of Float32, Int32 or Bool (kinds 0..3, placed differently
        // from the condition and broadcast on its own leaves) or a weak scalar (kind 3).
        let branch = |kind: usize, gap: usize, offset: usize, order: Vec<usize>, mask: &[bool], scalar: Value, shift: usize| -> (Operand, Operand) {
            if kind == 3 {
                return (scalar.into(), scalar.into());
            }
            let placed = Placement { order, gap: 1 + gap % 2, offset, ..place.clone() };
            let seed: Vec<i64> = seed[shift % seed.len()..].iter().chain(&seed).copied().collect();
            let (g, c) = broadcast(pair(&placed, dtype_of(kind), &seed), &mask[..n]);
            (g.into(), c.into())
        };
        let reversed: Vec<usize> = place.order.iter().rev().copied().collect();
        let a = branch(kinds.0, other[0], other[1], place.order.clone(), &masks.1, scalars.0, 1);
        let b = branch(kinds.1, other[2], other[3], reversed, &masks.2, scalars.1, 2);
        compare(
            "select",
            &[cond.0.into(), a.0, b.0],
            &[cond.1.into(), a.1, b.1],
            &[],
        )?;
    }

    #[test]
    fn reductions_agree(
        place in (1usize..6, 1usize..9).prop_flat_map(|(a, b)| placement(vec![a, b])),
        dtype in 0usize..2,
        wide in any::<bool>(),
        seed in prop::collection::vec(any::<i64>(), 1..8),
    ) {
        let (g, c) = pair(&place, dtype_of(dtype), &seed);
        let options: Vec<(&str, OptionValue)> = if wide && dtype == 0 {
            vec![("accumulator_dtype", OptionValue::DType(DType::FLOAT64))]
        } else {
            vec![]
        };
        compare("reduce_sum", &[g.clone().into()], &[c.clone().into()], &options)?;
        compare("reduce_max", &[g.into()], &[c.into()], &[])?;
    }

    #[test]
    fn matmul_agrees_on_permuted_operands(
        dims in (1usize..6, 1usize..6, 1usize..7),
        orders in (any::<bool>(), any::<bool>()),
        dtype in 0usize..2,
        wide in any::<bool>(),
        seed in prop::collection::vec(any::<i64>(), 1..8),
    ) {
        let (n, m, k) = dims;
        let lhs = Placement { extents: vec![n, k], order: if orders.0 { vec![0, 1] } else { vec![1, 0] }, gap: 1, offset: 1 };
        let rhs = Placement { extents: vec![m, k], order: if orders.1 { vec![0, 1] } else { vec![1, 0] }, gap: 1, offset: 0 };
        let (lg, lc) = pair(&lhs, dtype_of(dtype), &seed);
        let (rg, rc) = pair(&rhs, dtype_of(dtype), &seed[1..].iter().chain(&seed).copied().collect::<Vec<_>>());
        let options: Vec<(&str, OptionValue)> = if wide && dtype == 0 {
            vec![("accumulator_dtype", OptionValue::DType(DType::FLOAT64))]
        } else {
            vec![]
        };
        compare("matmul", &[lg.into(), rg.into()], &[lc.into(), rc.into()], &options)?;
    }
}
