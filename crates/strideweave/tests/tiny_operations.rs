//! Tiny Float32 elementwise operations on CPU tensors, through the one pipeline that every
//! call takes: the typed `ops` functions against the per-element formulas of
//! docs/kernel-semantics.md, bit for bit, on both sides of the inline-result size, with the
//! layout, carrier class, version, mutability and freshness of `operation::call`, and the
//! same errors and autograd recording.

use proptest::prelude::*;
use strideweave::carriers::{Cpu, Generic};
use strideweave::operation::call;
use strideweave::{ops, DType, ErrorKind, Layout, Result, Shape, Tensor, Value};

type Unary = fn(&Tensor) -> Result<Tensor>;
type Binary = fn(&Tensor, &Tensor) -> Result<Tensor>;

const UNARY: [(&str, Unary); 8] = [
    ("neg", ops::neg),
    ("abs", ops::abs),
    ("exp", ops::exp),
    ("log", ops::log),
    ("sqrt", ops::sqrt),
    ("tanh", ops::tanh),
    ("sigmoid", ops::sigmoid),
    ("relu", ops::relu),
];

fn mul(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    ops::mul(lhs, rhs)
}
fn div(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    ops::div(lhs, rhs)
}
fn maximum(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    ops::maximum(lhs, rhs)
}
fn minimum(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    ops::minimum(lhs, rhs)
}

const BINARY: [(&str, Binary); 7] = [
    ("add", ops::add),
    ("sub", ops::sub),
    ("elementwise_mul", ops::elementwise_mul),
    ("mul", mul),
    ("div", div),
    ("maximum", maximum),
    ("minimum", minimum),
];

/// A Float32 CPU tensor of `values` under the canonical layout of `shape`, `offset` slots
/// into its carrier.
fn cpu_tensor(values: &[f32], shape: &Shape, offset: usize) -> Result<Tensor> {
    let mut slots = vec![-7.0f32; offset];
    slots.extend_from_slice(values);
    Tensor::new(
        Cpu::from_f32(&slots, true)?,
        offset,
        Layout::column_major(shape.clone()),
    )
}

fn bits(t: &Tensor) -> Result<Vec<u32>> {
    t.to_values()?
        .into_iter()
        .map(|v| match v {
            Value::Float(x) => Ok((x as f32).to_bits()),
            other => panic!("expected a Float32 value, got {other:?}"),
        })
        .collect()
}

/// The per-element formula of the unary `name` (docs/kernel-semantics.md).
fn unary_formula(name: &str) -> fn(f32) -> f32 {
    match name {
        "neg" => |a| -a,
        "abs" => f32::abs,
        "exp" => f32::exp,
        "log" => f32::ln,
        "sqrt" => f32::sqrt,
        "tanh" => f32::tanh,
        "sigmoid" => |a| 1.0 / (1.0 + (-a).exp()),
        "relu" => |a| if a > 0.0 || a.is_nan() { a } else { 0.0 },
        other => panic!("no formula for {other}"),
    }
}

/// The per-element formula of the binary `name`: IEEE arithmetic, and IEEE 754-2019
/// maximum/minimum (the first NaN operand propagates, +0.0 is above -0.0).
fn binary_formula(name: &str) -> fn(f32, f32) -> f32 {
    match name {
        "add" => |a, b| a + b,
        "sub" => |a, b| a - b,
        "elementwise_mul" | "mul" => |a, b| a * b,
        "div" => |a, b| a / b,
        "maximum" => |a, b| {
            if a.is_nan() {
                a
            } else if b.is_nan() || b > a || (b == a && a.is_sign_negative()) {
                b
            } else {
                a
            }
        },
        "minimum" => |a, b| {
            if a.is_nan() {
                a
            } else if b.is_nan() || b < a || (b == a && b.is_sign_negative()) {
                b
            } else {
                a
            }
        },
        other => panic!("no formula for {other}"),
    }
}

/// `typed` (from `ops`) and `general` (from `operation::call`) are the same fresh result, and `operands` kept their versions.
fn assert_same_result(typed: &Tensor, general: &Tensor, operands: &[&Tensor]) -> Result<()> {
    assert_eq!(bits(typed)?, bits(general)?);
    assert_eq!(typed.layout(), general.layout());
    assert_eq!(typed.dtype(), general.dtype());
    assert_eq!(typed.offset(), 0);
    assert_eq!(typed.carrier().class(), general.carrier().class());
    assert_eq!(typed.carrier().size(), general.carrier().size());
    assert_eq!(typed.version(), 0);
    assert!(typed.carrier().is_mutable());
    assert!(typed.is_leaf() && !typed.requires_grad());
    for operand in operands {
        assert!(!operand.carrier().same_as(typed.carrier()));
        assert_eq!(operand.version(), 0);
    }
    Ok(())
}

fn special() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -1.0e3f32..1.0e3,
        1 => Just(f32::NAN),
        1 => Just(0.0f32),
        1 => Just(-0.0f32),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
    ]
}

/// Shapes of up to 300 elements (inline results hold at most 16 Float32 slots, and one thread
/// computes up to a few hundred), flat and nested.
fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (1usize..=300).prop_map(|n| Shape::new(n).expect("shape")),
        (1usize..=16, 1usize..=18).prop_map(|(a, b)| Shape::new((a, b)).expect("shape")),
        (1usize..=4, 1usize..=4, 1usize..=4)
            .prop_map(|(a, b, c)| Shape::new((a, (b, c))).expect("shape")),
    ]
}

fn case() -> impl Strategy<Value = (Shape, Vec<f32>, Vec<f32>, usize, usize)> {
    shapes().prop_flat_map(|shape| {
        let n = shape.size();
        (
            Just(shape),
            prop::collection::vec(special(), n),
            prop::collection::vec(special(), n),
            0usize..3,
            0usize..3,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn typed_ops_and_kernels_compute_the_formulas((shape, xs, ys, ox, oy) in case()) {
        let x = cpu_tensor(&xs, &shape, ox)?;
        let y = cpu_tensor(&ys, &shape, oy)?;
        for (name, op) in UNARY {
            let f = unary_formula(name);
            let expected: Vec<u32> = xs.iter().map(|&a| f(a).to_bits()).collect();
            let general = call(name, [x.clone().into()], &[])?.remove(0);
            prop_assert_eq!(&bits(&general)?, &expected, "call('{}')", name);
            assert_same_result(&op(&x)?, &general, &[&x])?;
        }
        for (name, op) in BINARY {
            let f = binary_formula(name);
            let expected: Vec<u32> = xs.iter().zip(&ys).map(|(&a, &b)| f(a, b).to_bits()).collect();
            let general = call(name, [x.clone().into(), y.clone().into()], &[])?.remove(0);
            prop_assert_eq!(&bits(&general)?, &expected, "call('{}')", name);
            assert_same_result(&op(&x, &y)?, &general, &[&x, &y])?;
            // The same tensor on both sides reads one carrier twice.
            let expected: Vec<u32> = xs.iter().map(|&a| f(a, a).to_bits()).collect();
            let general = call(name, [x.clone().into(), x.clone().into()], &[])?.remove(0);
            prop_assert_eq!(&bits(&general)?, &expected, "call('{}', x, x)", name);
            assert_same_result(&op(&x, &x)?, &general, &[&x])?;
        }
    }
}

#[test]
fn an_operand_requiring_gradients_is_recorded() -> Result<()> {
    let shape = Shape::new(3)?;
    let x = cpu_tensor(&[1.0, -2.0, 3.0], &shape, 0)?;
    let y = cpu_tensor(&[0.5, 0.5, 0.5], &shape, 0)?;
    x.set_requires_grad(true)?;
    let z = ops::add(&x, &y)?;
    assert_eq!(
        z.grad_fn().map(|n| n.name().to_string()),
        Some("add".into())
    );
    let r = ops::relu(&x)?;
    assert_eq!(
        r.grad_fn().map(|n| n.name().to_string()),
        Some("relu".into())
    );
    // Under no_grad nothing is recorded, and the values are those of the pipeline.
    let plain = {
        let _guard = strideweave::autograd::no_grad();
        ops::add(&x, &y)?
    };
    assert!(plain.grad_fn().is_none() && !plain.requires_grad());
    assert_eq!(bits(&plain)?, bits(&z)?);
    Ok(())
}

#[test]
fn views_broadcasts_and_int32_take_the_strided_kernels() -> Result<()> {
    let shape = Shape::new((2, 3))?;
    let x = cpu_tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &shape, 0)?;
    // A row-major view: not canonical, computed by the general kernels.
    let permuted = Tensor::new(x.carrier().clone(), 0, "(2,3):(3,1)".parse()?)?;
    let sum = ops::add(&x, &permuted)?;
    assert_eq!(
        sum.to_values()?,
        [2.0, 6.0, 5.0, 9.0, 8.0, 12.0].map(Value::Float).to_vec()
    );
    assert_eq!(
        ops::neg(&permuted)?.to_values()?,
        [-1.0, -4.0, -2.0, -5.0, -3.0, -6.0]
            .map(Value::Float)
            .to_vec()
    );
    // A broadcast (different layouts) is the general pipeline's.
    let row = cpu_tensor(&[10.0, 20.0, 30.0], &Shape::new((1, 3))?, 0)?;
    let broadcast = ops::add(&x, &row)?;
    assert_eq!(
        broadcast.to_values()?,
        [11.0, 12.0, 23.0, 24.0, 35.0, 36.0]
            .map(Value::Float)
            .to_vec()
    );
    // Int32 keeps its overflow check.
    let big = Tensor::compact(Cpu::from_i32(&[i32::MAX], true)?, Shape::new(1)?)?;
    let one = Tensor::compact(Cpu::from_i32(&[1], true)?, Shape::new(1)?)?;
    let error = ops::add(&big, &one).expect_err("Int32 overflow");
    assert_eq!(error.kind(), ErrorKind::Overflow);
    assert!(error.to_string().contains("2147483647 + 1"), "{error}");
    Ok(())
}

#[test]
fn errors_are_the_pipelines() -> Result<()> {
    let shape = Shape::new(2)?;
    let x = cpu_tensor(&[1.0, 2.0], &shape, 0)?;
    let y = cpu_tensor(&[3.0, 4.0], &shape, 0)?;
    let generic = Tensor::compact(
        Generic::carrier(
            &[Value::Float(1.0), Value::Float(2.0)],
            DType::FLOAT32,
            true,
        )?,
        shape.clone(),
    )?;
    let mixed = ops::add(&x, &generic).expect_err("mixed carriers");
    let general =
        call("add", [x.clone().into(), generic.clone().into()], &[]).expect_err("mixed carriers");
    assert_eq!(mixed.kind(), ErrorKind::Type);
    assert_eq!(mixed.to_string(), general.to_string());

    y.carrier().release()?;
    let released = ops::add(&x, &y).expect_err("released operand");
    let general =
        call("add", [x.clone().into(), y.clone().into()], &[]).expect_err("released operand");
    assert_eq!(released.kind(), ErrorKind::Runtime);
    assert_eq!(released.to_string(), general.to_string());
    assert_eq!(x.version(), 0);
    Ok(())
}

/// A tensor of `values` (of `dtype`) under the canonical layout of `shape`: inline slots when
/// `heap` is false, else the leading slots of a carrier too large to keep them inline.
fn tensor_of(values: &[Value], dtype: DType, shape: &Shape, heap: bool) -> Result<Tensor> {
    let mut slots = values.to_vec();
    if heap {
        slots.resize(80, values[0]);
    }
    Tensor::new(
        Cpu::from_values(&slots, dtype, true)?,
        0,
        Layout::column_major(shape.clone()),
    )
}

/// `call(name, operands)` on inline operands and on the same operands on heap slots: the
/// same values, dtype, layout and error (kind and message).
fn assert_inline_matches_heap(name: &str, operands: &[(&[Value], Option<DType>)]) -> Result<()> {
    let shape = Shape::new(operands[0].0.len())?;
    let build = |heap: bool| -> Result<Vec<strideweave::operation::Operand>> {
        operands
            .iter()
            .map(|(values, dtype)| match dtype {
                Some(dtype) => {
                    let shape = Shape::new(values.len())?;
                    Ok(tensor_of(values, *dtype, &shape, heap)?.into())
                }
                None => Ok(values[0].into()),
            })
            .collect()
    };
    let inline = call(name, build(false)?, &[]);
    let heap = call(name, build(true)?, &[]);
    match (inline, heap) {
        (Ok(inline), Ok(heap)) => {
            let (inline, heap) = (&inline[0], &heap[0]);
            // Compared as text, so that NaN matches NaN.
            let text = |t: &Tensor| -> Result<String> { Ok(format!("{:?}", t.to_values()?)) };
            assert_eq!(text(inline)?, text(heap)?, "{name} {operands:?}");
            assert_eq!(inline.dtype(), heap.dtype(), "{name}");
            assert_eq!(inline.layout(), heap.layout(), "{name}");
            assert_eq!(inline.layout().shape(), &shape, "{name}");
        }
        (Err(inline), Err(heap)) => {
            assert_eq!(inline.kind(), heap.kind(), "{name}");
            assert_eq!(inline.to_string(), heap.to_string(), "{name}");
        }
        (inline, heap) => panic!("{name} {operands:?}: inline {inline:?}, heap {heap:?}"),
    }
    Ok(())
}

#[test]
fn inline_operands_compute_what_the_general_loop_computes_for_every_dtype() -> Result<()> {
    let ints = [3, -7, 0, 12].map(Value::Int);
    let others = [5, 2, -9, 12].map(Value::Int);
    let near_max = [1, i32::MAX as i64, i32::MAX as i64 - 1, 0].map(Value::Int);
    let ones = [1, 1, 1, 1].map(Value::Int);
    let floats = [1.5, -0.0, f64::NAN, 4.0].map(Value::Float);
    let bools = [true, false, true, false].map(Value::Bool);
    let flipped = [true, true, false, false].map(Value::Bool);
    let (i, f, b) = (Some(DType::INT32), Some(DType::FLOAT32), Some(DType::BOOL));
    let binary = [
        "add",
        "sub",
        "mul",
        "elementwise_mul",
        "maximum",
        "minimum",
        "eq",
        "lt",
        "le",
    ];
    for name in binary {
        assert_inline_matches_heap(name, &[(&ints, i), (&others, i)])?;
        // An Int32 result leaving the range: the same first overflowing element.
        assert_inline_matches_heap(name, &[(&near_max, i), (&ones, i)])?;
        // A weak scalar, a one-element tensor broadcast, and Int32 read as Float32.
        assert_inline_matches_heap(name, &[(&ints, i), (&[Value::Int(4)], None)])?;
        assert_inline_matches_heap(name, &[(&ints, i), (&[Value::Int(-2)], i)])?;
        assert_inline_matches_heap(name, &[(&floats, f), (&ints, i)])?;
        assert_inline_matches_heap(name, &[(&floats, f), (&[Value::Float(2.0)], None)])?;
    }
    for name in ["neg", "abs", "relu"] {
        assert_inline_matches_heap(name, &[(&ints, i)])?;
        assert_inline_matches_heap(name, &[(&[Value::Int(i64::from(i32::MIN)); 3], i)])?;
    }
    assert_inline_matches_heap("eq", &[(&bools, b), (&flipped, b)])?;
    assert_inline_matches_heap("eq", &[(&bools, b), (&[Value::Bool(true)], None)])?;
    // The Int32 overflow is reported for the first element in order, inline as on the heap.
    let error = call(
        "add",
        [
            tensor_of(&near_max, DType::INT32, &Shape::new(4)?, false)?.into(),
            tensor_of(&ones, DType::INT32, &Shape::new(4)?, false)?.into(),
        ],
        &[],
    )
    .expect_err("overflow");
    assert_eq!(error.kind(), ErrorKind::Overflow);
    assert_eq!(
        error.to_string(),
        "overflow error: 'add' overflows Int32: 2147483647 + 1"
    );
    Ok(())
}

/// A reduction of `values` (of `dtype`) laid out as `layout`, once over inline slots and once
/// over the leading slots of a carrier too large to keep them inline: the same values (bit
/// for bit, as text so NaN matches NaN), dtype and layout, or the same error.
fn assert_inline_reduction_matches_heap(
    name: &str,
    values: &[Value],
    dtype: DType,
    layout: &Layout,
    options: &[(&str, strideweave::operation::OptionValue)],
) -> Result<()> {
    let run = |heap: bool| {
        let mut slots = values.to_vec();
        if heap {
            slots.resize(80, values[0]);
        }
        let x = Tensor::new(Cpu::from_values(&slots, dtype, true)?, 0, layout.clone())?;
        call(name, [x.into()], options)
    };
    match (run(false), run(true)) {
        (Ok(inline), Ok(heap)) => {
            let (inline, heap) = (&inline[0], &heap[0]);
            let text = |t: &Tensor| -> Result<String> {
                Ok(match t.dtype() {
                    d if d == DType::FLOAT32 => format!(
                        "{:?}",
                        t.to_values()?
                            .iter()
                            .map(|v| (v.as_f64().unwrap_or(0.0) as f32).to_bits())
                            .collect::<Vec<_>>()
                    ),
                    _ => format!("{:?}", t.to_values()?),
                })
            };
            assert_eq!(text(inline)?, text(heap)?, "{name} {layout} {values:?}");
            assert_eq!(inline.dtype(), heap.dtype(), "{name} {layout}");
            assert_eq!(inline.layout(), heap.layout(), "{name} {layout}");
        }
        (Err(inline), Err(heap)) => {
            assert_eq!(inline.kind(), heap.kind(), "{name} {layout}");
            assert_eq!(inline.to_string(), heap.to_string(), "{name} {layout}");
        }
        (inline, heap) => panic!("{name} {layout}: inline {inline:?}, heap {heap:?}"),
    }
    Ok(())
}

#[test]
fn inline_reductions_compute_what_the_general_loop_computes() -> Result<()> {
    // Values whose Float32 sum depends on the order: large and small magnitudes, -0.0, NaN.
    let floats: Vec<Value> = (0..16)
        .map(|i| {
            Value::Float(match i % 5 {
                0 => 1.0e8,
                1 => 1.0 + f64::from(i) * 0.37,
                2 => -1.0e8,
                3 => -0.0,
                _ => f64::from(i) * -3.1,
            })
        })
        .collect();
    let with_nan: Vec<Value> = floats
        .iter()
        .enumerate()
        .map(|(i, v)| if i == 6 { Value::Float(f64::NAN) } else { *v })
        .collect();
    let ints: Vec<Value> = (0..16).map(|i| Value::Int((i * 7919) % 41 - 20)).collect();
    let huge: Vec<Value> = (0..16).map(|_| Value::Int(i64::from(i32::MAX))).collect();
    let f64_accumulator = [(
        "accumulator_dtype",
        strideweave::operation::OptionValue::DType(DType::FLOAT64),
    )];
    // Every (n, k) with n·k ≤ 16, column-major and as the transposed view (mode 1 contiguous).
    for n in 1..=16usize {
        for k in 1..=16 / n {
            let compact: Layout = format!("({n},{k}):(1,{n})").parse()?;
            let transposed: Layout = format!("({n},{k}):({k},1)").parse()?;
            for layout in [&compact, &transposed] {
                let len = n * k;
                for name in ["reduce_sum", "reduce_max"] {
                    assert_inline_reduction_matches_heap(
                        name,
                        &floats[..len],
                        DType::FLOAT32,
                        layout,
                        &[],
                    )?;
                    assert_inline_reduction_matches_heap(
                        name,
                        &with_nan[..len],
                        DType::FLOAT32,
                        layout,
                        &[],
                    )?;
                    assert_inline_reduction_matches_heap(
                        name,
                        &ints[..len],
                        DType::INT32,
                        layout,
                        &[],
                    )?;
                }
                assert_inline_reduction_matches_heap(
                    "reduce_sum",
                    &floats[..len],
                    DType::FLOAT32,
                    layout,
                    &f64_accumulator,
                )?;
                // An Int32 sum leaving the range names the same result ordinal.
                assert_inline_reduction_matches_heap(
                    "reduce_sum",
                    &huge[..len],
                    DType::INT32,
                    layout,
                    &[],
                )?;
            }
        }
    }
    let x = Tensor::new(
        Cpu::from_values(&huge[..4], DType::INT32, true)?,
        0,
        "(1,4):(1,1)".parse()?,
    )?;
    let error = ops::reduce_sum(&x).expect_err("overflow");
    assert_eq!(error.kind(), ErrorKind::Overflow);
    assert_eq!(
        error.to_string(),
        "overflow error: 'reduce_sum' overflows Int32: the sum over mode 1 at result ordinal 0 is 8589934588"
    );
    Ok(())
}

/// An `(rows, k)` Float32 matmul operand holding `value(i, kk)` at `(i, kk)`, column-major or
/// as the transposed view, `offset` slots into its carrier: inline slots when they fit and
/// `heap` is false, else the leading slots of a carrier too large to keep them inline.
fn product_operand(
    (rows, k): (usize, usize),
    value: impl Fn(usize, usize) -> f32,
    transposed: bool,
    offset: usize,
    heap: bool,
) -> Result<Tensor> {
    let (text, position): (String, Box<dyn Fn(usize, usize) -> usize>) = if transposed {
        (
            format!("({rows},{k}):({k},1)"),
            Box::new(move |i, kk| i * k + kk),
        )
    } else {
        (
            format!("({rows},{k}):(1,{rows})"),
            Box::new(move |i, kk| i + kk * rows),
        )
    };
    let mut slots = vec![-5.0f32; offset + rows * k];
    for i in 0..rows {
        for kk in 0..k {
            slots[offset + position(i, kk)] = value(i, kk);
        }
    }
    if heap {
        slots.resize(80, 0.5);
    }
    Tensor::new(Cpu::from_f32(&slots, true)?, offset, text.parse()?)
}

#[test]
fn inline_products_compute_what_the_general_product_computes() -> Result<()> {
    // Small integers: every order of summation gives the same Float32 sums.
    let exact_a = |i: usize, kk: usize| ((i * 7 + kk * 3) % 11) as f32 - 5.0;
    let exact_b = |j: usize, kk: usize| ((j * 5 + kk * 13) % 9) as f32 - 4.0;
    // Order-sensitive values: the inline arm sums in ascending k, a product then a sum.
    let rough_a = |i: usize, kk: usize| {
        if kk.is_multiple_of(2) {
            1.0e7
        } else {
            0.3 + i as f32 * 0.11
        }
    };
    let rough_b = |j: usize, kk: usize| {
        if kk % 3 == 1 {
            -1.0
        } else {
            0.7 + j as f32 * 0.13
        }
    };
    let mut inline_cases = 0;
    for n in 1..=5usize {
        for m in 1..=6usize {
            for k in 1..=5usize {
                for (transposed, offset) in [(false, 0), (true, 0), (false, 1), (true, 1)] {
                    let build = |heap: bool| -> Result<[Tensor; 2]> {
                        Ok([
                            product_operand((n, k), exact_a, transposed, offset, heap)?,
                            product_operand((m, k), exact_b, !transposed, offset, heap)?,
                        ])
                    };
                    let [a, b] = build(false)?;
                    let [ha, hb] = build(true)?;
                    let (inline, general) = (ops::matmul(&a, &b)?, ops::matmul(&ha, &hb)?);
                    let expected: Vec<Value> = (0..m)
                        .flat_map(|j| (0..n).map(move |i| (i, j)))
                        .map(|(i, j)| {
                            let sum: f32 = (0..k).map(|kk| exact_a(i, kk) * exact_b(j, kk)).sum();
                            Value::Float(f64::from(sum))
                        })
                        .collect();
                    let case =
                        format!("({n},{k})·({m},{k}) transposed {transposed} offset {offset}");
                    assert_eq!(inline.to_values()?, expected, "{case}");
                    assert_eq!(general.to_values()?, expected, "{case}");
                    assert_eq!(inline.layout(), general.layout(), "{case}");
                    assert_eq!(inline.dtype(), DType::FLOAT32, "{case}");

                    if n <= 4 && n * m <= 16 && (n * k + offset).max(m * k + offset) <= 16 {
                        inline_cases += 1;
                        let a = product_operand((n, k), rough_a, transposed, offset, false)?;
                        let b = product_operand((m, k), rough_b, !transposed, offset, false)?;
                        let got = bits(&ops::matmul(&a, &b)?)?;
                        let want: Vec<u32> = (0..m)
                            .flat_map(|j| (0..n).map(move |i| (i, j)))
                            .map(|(i, j)| {
                                let mut sum = 0.0f32;
                                for kk in 0..k {
                                    sum += rough_a(i, kk) * rough_b(j, kk);
                                }
                                sum.to_bits()
                            })
                            .collect();
                        assert_eq!(got, want, "{case}, order-sensitive values");
                    }
                }
            }
        }
    }
    assert!(inline_cases > 100, "{inline_cases} inline cases");
    // A broadcast operand (stride 0 along its rows) and an Int32 operand read as Float32
    // take the same arm or fall through to the general product, with the same values.
    let row: Tensor = Tensor::new(
        Cpu::from_f32(&[1.5, -2.0, 4.0], true)?,
        0,
        "(4,3):(0,1)".parse()?,
    )?;
    let ints = Tensor::new(
        Cpu::from_i32(&[1, 2, 3, 4, 5, 6], true)?,
        0,
        "(2,3):(1,2)".parse()?,
    )?;
    let product = ops::matmul(&row, &ints)?;
    let expected: Vec<Value> = [[1, 3, 5], [2, 4, 6]]
        .iter()
        .flat_map(|r| {
            let sum = 1.5 * r[0] as f32 - 2.0 * r[1] as f32 + 4.0 * r[2] as f32;
            [Value::Float(f64::from(sum)); 4]
        })
        .collect();
    assert_eq!(product.to_values()?, expected);
    assert_eq!(product.dtype(), DType::FLOAT32);
    Ok(())
}
