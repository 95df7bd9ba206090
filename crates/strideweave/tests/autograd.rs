//! Reverse-mode autograd (docs/autograd.md; docs/operations.md, Worked examples 8–13): recording,
//! backward, grad, cotangent rules, graph release, version checks, failure atomicity, and a
//! finite-difference check of every differentiable operation.

use strideweave::autograd::{grad, is_grad_enabled, no_grad};
use strideweave::carriers::{Cpu, Generic};
use strideweave::{ops, DType, ErrorKind, Layout, Result, Shape, Tensor, Value};

fn leaf(values: &[f32], shape: Shape) -> Tensor {
    let t = Tensor::compact(Cpu::from_f32(values, true).unwrap(), shape).unwrap();
    t.set_requires_grad(true).unwrap();
    t
}

fn ones_like(t: &Tensor) -> Tensor {
    let n = t.layout().cosize();
    let carrier = Cpu::from_f32(&vec![1.0; n], true).unwrap();
    Tensor::new(carrier, 0, t.layout().clone()).unwrap()
}

fn floats(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .into_iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn scenario_08_grad_does_not_touch_dot_grad_and_backward_accumulates() {
    let x = leaf(&[2.0, 3.0], Shape::new(2).unwrap());
    let y = ops::mul(&x, 2.0).unwrap();
    let grads = grad(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        &[Some(ones_like(&y))],
        false,
    )
    .unwrap();
    assert_eq!(floats(grads[0].as_ref().unwrap()), [2.0, 2.0]);
    assert!(x.grad().is_none());
    let z = ops::add(&x, &x).unwrap();
    z.backward(Some(&ones_like(&z)), false).unwrap();
    assert_eq!(floats(&x.grad().unwrap()), [2.0, 2.0]);
    assert_eq!(x.grad().unwrap().carrier().class(), x.carrier().class());
}

#[test]
fn scenario_09_an_implicit_cotangent_needs_shape_one() {
    let single = leaf(&[3.0], Shape::new(1).unwrap());
    ops::mul(&single, 2.0)
        .unwrap()
        .backward(None, false)
        .unwrap();
    assert_eq!(floats(&single.grad().unwrap()), [2.0]);
    for shape in [Shape::new((1, 1)).unwrap(), Shape::new(2).unwrap()] {
        let n = shape.size();
        let x = leaf(&vec![1.0; n], shape);
        let error = ops::mul(&x, 2.0)
            .unwrap()
            .backward(None, false)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    }
}

#[test]
fn scenario_10_a_broadcast_leaf_gets_slot_sums_in_canonical_layout() {
    let carrier = Cpu::from_f32(&[1.0, 2.0], true).unwrap();
    let x = Tensor::new(carrier, 0, "(4,2):(0,1)".parse().unwrap()).unwrap();
    x.set_requires_grad(true).unwrap();
    let ones = Tensor::compact(
        Cpu::from_f32(&[1.0; 8], true).unwrap(),
        Shape::new((4, 2)).unwrap(),
    )
    .unwrap();
    x.backward(Some(&ones), false).unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.layout().to_string(), "(4,2):(1,4)");
    assert_eq!(floats(&g), [4.0; 8]);

    let carrier = Cpu::from_f32(&[1.0; 5], true).unwrap();
    let overlapping = Tensor::new(carrier, 0, "(4,2):(1,1)".parse().unwrap()).unwrap();
    overlapping.set_requires_grad(true).unwrap();
    let error = overlapping.backward(Some(&ones), false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(overlapping.grad().is_none());
}

#[test]
fn scenario_11_a_freed_graph_cannot_be_reused_and_retained_graphs_accumulate() {
    let x = leaf(&[1.0, 2.0], Shape::new(2).unwrap());
    let y = ops::mul(&x, 3.0).unwrap();
    y.backward(Some(&ones_like(&y)), false).unwrap();
    let error = y.backward(Some(&ones_like(&y)), false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("retain_graph=true"), "{error}");
    assert_eq!(
        floats(&x.grad().unwrap()),
        [3.0, 3.0],
        "the failed pass changed nothing"
    );

    let w = leaf(&[1.0, 2.0], Shape::new(2).unwrap());
    let v = ops::mul(&w, 3.0).unwrap();
    v.backward(Some(&ones_like(&v)), true).unwrap();
    v.backward(Some(&ones_like(&v)), true).unwrap();
    assert_eq!(floats(&w.grad().unwrap()), [6.0, 6.0]);
}

#[test]
fn scenario_12_an_in_place_write_after_recording_refuses_backward() {
    let x = leaf(&[1.0, 2.0], Shape::new(2).unwrap());
    let y = ops::elementwise_mul(&x, &x).unwrap();
    x.set(&0.into(), Value::Float(5.0)).unwrap();
    let error = y.backward(Some(&ones_like(&y)), false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(
        error.to_string().contains("in-place modification"),
        "{error}"
    );
    assert!(x.grad().is_none());
}

#[test]
fn scenario_13_grad_of_an_unrelated_input_is_none() {
    let x = leaf(&[1.0], Shape::new(1).unwrap());
    let unrelated = leaf(&[1.0], Shape::new(1).unwrap());
    let y = ops::mul(&x, 2.0).unwrap();
    let grads = grad(&[y], &[x, unrelated], &[None], false).unwrap();
    assert!(grads[0].is_some());
    assert!(grads[1].is_none());
    // A single tensor as `inputs` and `create_graph` cannot be written: `inputs` is a slice.
}

#[test]
fn only_float32_is_differentiable() {
    let ints = Tensor::compact(
        Cpu::from_i32(&[1, 2], true).unwrap(),
        Shape::new(2).unwrap(),
    )
    .unwrap();
    assert_eq!(
        ints.set_requires_grad(true).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(ints.retain_grad().unwrap_err().kind(), ErrorKind::Runtime);
    assert_eq!(
        ints.backward(None, false).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    let floats_no_grad =
        Tensor::compact(Cpu::from_f32(&[1.0], true).unwrap(), Shape::new(1).unwrap()).unwrap();
    assert_eq!(
        floats_no_grad.backward(None, false).unwrap_err().kind(),
        ErrorKind::Runtime
    );
}

#[test]
fn no_grad_records_nothing() {
    let x = leaf(&[1.0], Shape::new(1).unwrap());
    let y = {
        let _off = no_grad();
        assert!(!is_grad_enabled());
        ops::mul(&x, 2.0).unwrap()
    };
    assert!(y.grad_fn().is_none() && !y.requires_grad());
    let z = ops::mul(&x, 2.0).unwrap();
    assert_eq!(z.grad_fn().unwrap().name(), "mul");
    assert_eq!(z.grad_fn().unwrap().inputs().len(), 1);
}

#[test]
fn retained_non_leaf_gradients_and_leaf_gradients_on_generic() {
    let carrier = Generic::carrier(
        &[Value::Float(1.0), Value::Float(-2.0)],
        DType::FLOAT32,
        true,
    )
    .unwrap();
    let x = Tensor::compact(carrier, Shape::new(2).unwrap()).unwrap();
    x.set_requires_grad(true).unwrap();
    let h = ops::mul(&x, 3.0).unwrap();
    h.retain_grad().unwrap();
    let y = ops::relu(&h).unwrap();
    let ones = Tensor::compact(
        Generic::carrier(&[Value::Float(1.0); 2], DType::FLOAT32, true).unwrap(),
        Shape::new(2).unwrap(),
    )
    .unwrap();
    y.backward(Some(&ones), false).unwrap();
    assert_eq!(floats(&h.grad().unwrap()), [1.0, 0.0]);
    assert_eq!(floats(&x.grad().unwrap()), [3.0, 0.0]);
    assert_eq!(x.grad().unwrap().carrier().class(), x.carrier().class());
}

#[test]
fn a_deep_chain_does_not_overflow_the_stack() {
    let x = leaf(&[1.0], Shape::new(1).unwrap());
    let mut y = x.clone();
    for _ in 0..100_000 {
        y = ops::mul(&y, 1.0).unwrap();
    }
    y.backward(None, false).unwrap();
    assert_eq!(floats(&x.grad().unwrap()), [1.0]);
}

/// Central differences of `f` (summed against `cotangent`) with respect to each input.
fn numerical(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Vec<f32>],
    shapes: &[Shape],
    cotangent: &[f32],
) -> Vec<Vec<f64>> {
    let eval = |values: &[Vec<f32>]| -> f64 {
        let _off = no_grad();
        let tensors: Vec<Tensor> = values
            .iter()
            .zip(shapes)
            .map(|(v, s)| Tensor::compact(Cpu::from_f32(v, true).unwrap(), s.clone()).unwrap())
            .collect();
        let out = f(&tensors).unwrap();
        floats(&out)
            .iter()
            .zip(cotangent)
            .map(|(o, c)| o * f64::from(*c))
            .sum()
    };
    let eps = 1e-2f32;
    inputs
        .iter()
        .enumerate()
        .map(|(k, values)| {
            (0..values.len())
                .map(|i| {
                    let mut plus = inputs.to_vec();
                    let mut minus = inputs.to_vec();
                    plus[k][i] += eps;
                    minus[k][i] -= eps;
                    (eval(&plus) - eval(&minus)) / (2.0 * f64::from(eps))
                })
                .collect()
        })
        .collect()
}

fn check(
    name: &str,
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: Vec<Vec<f32>>,
    shapes: Vec<Shape>,
) {
    let leaves: Vec<Tensor> = inputs
        .iter()
        .zip(&shapes)
        .map(|(v, s)| leaf(v, s.clone()))
        .collect();
    let out = f(&leaves).unwrap();
    let cotangent: Vec<f32> = (0..out.layout().cosize())
        .map(|i| 0.5 + (i % 3) as f32 * 0.25)
        .collect();
    let cot = Tensor::new(
        Cpu::from_f32(&cotangent, true).unwrap(),
        0,
        out.layout().clone(),
    )
    .unwrap();
    let analytic = grad(&[out], &leaves, &[Some(cot)], false).unwrap();
    let expected = numerical(f, &inputs, &shapes, &cotangent);
    for (k, (a, e)) in analytic.iter().zip(&expected).enumerate() {
        let a = floats(
            a.as_ref()
                .unwrap_or_else(|| panic!("{name}: no gradient for input {k}")),
        );
        for (i, (x, y)) in a.iter().zip(e).enumerate() {
            assert!(
                (x - y).abs() <= 2e-2 * (1.0 + y.abs()),
                "{name} input {k} element {i}: analytic {x}, numerical {y}"
            );
        }
    }
}

#[test]
fn finite_differences_agree_for_every_differentiable_operation() {
    let a = vec![0.7, -1.3, 2.1, 0.4, -0.6, 1.7];
    let b = vec![1.1, 0.5, -0.9, 2.3, 1.4, -0.8];
    let positive = vec![0.7, 1.3, 2.1, 0.4, 0.6, 1.7];
    let s23 = || Shape::new((2, 3)).unwrap();
    let s21 = || Shape::new((2, 1)).unwrap();
    check(
        "add",
        &|t| ops::add(&t[0], &t[1]),
        vec![a.clone(), b.clone()],
        vec![s23(), s23()],
    );
    check(
        "add broadcast",
        &|t| ops::add(&t[0], &t[1]),
        vec![a.clone(), vec![0.3, -0.2]],
        vec![s23(), s21()],
    );
    check(
        "sub",
        &|t| ops::sub(&t[0], &t[1]),
        vec![a.clone(), b.clone()],
        vec![s23(), s23()],
    );
    check(
        "mul",
        &|t| ops::mul(&t[0], &t[1]),
        vec![a.clone(), b.clone()],
        vec![s23(), s23()],
    );
    check(
        "mul scalar",
        &|t| ops::mul(1.5, &t[0]),
        vec![a.clone()],
        vec![s23()],
    );
    check(
        "elementwise_mul broadcast",
        &|t| ops::elementwise_mul(&t[0], &t[1]),
        vec![a.clone(), vec![0.3, -0.2]],
        vec![s23(), s21()],
    );
    check(
        "div",
        &|t| ops::div(&t[0], &t[1]),
        vec![a.clone(), b.clone()],
        vec![s23(), s23()],
    );
    check("neg", &|t| ops::neg(&t[0]), vec![a.clone()], vec![s23()]);
    check("abs", &|t| ops::abs(&t[0]), vec![a.clone()], vec![s23()]);
    check("exp", &|t| ops::exp(&t[0]), vec![a.clone()], vec![s23()]);
    check(
        "log",
        &|t| ops::log(&t[0]),
        vec![positive.clone()],
        vec![s23()],
    );
    check(
        "sqrt",
        &|t| ops::sqrt(&t[0]),
        vec![positive.clone()],
        vec![s23()],
    );
    check("tanh", &|t| ops::tanh(&t[0]), vec![a.clone()], vec![s23()]);
    check(
        "sigmoid",
        &|t| ops::sigmoid(&t[0]),
        vec![a.clone()],
        vec![s23()],
    );
    check("relu", &|t| ops::relu(&t[0]), vec![a.clone()], vec![s23()]);
    check(
        "maximum",
        &|t| ops::maximum(&t[0], &t[1]),
        vec![a.clone(), b.clone()],
        vec![s23(), s23()],
    );
    check(
        "minimum",
        &|t| ops::minimum(&t[0], &t[1]),
        vec![a.clone(), b.clone()],
        vec![s23(), s23()],
    );
    check(
        "reduce_sum",
        &|t| ops::reduce_sum(&t[0]),
        vec![a.clone()],
        vec![s23()],
    );
    check(
        "reduce_max",
        &|t| ops::reduce_max(&t[0]),
        vec![a.clone()],
        vec![s23()],
    );
    check(
        "matmul",
        &|t| ops::matmul(&t[0], &t[1]),
        vec![a.clone(), b.clone()],
        vec![s23(), s23()],
    );
    check(
        "matmul of a permuted operand",
        &|t| ops::matmul(&t[0], &t[1].permute(&[1, 0])?),
        vec![a.clone(), b.clone()],
        vec![s23(), Shape::new((3, 2)).unwrap()],
    );
    let _ = Layout::scalar();
}

#[test]
fn scenario_16_move_backward_returns_to_the_source_class() {
    use strideweave::carriers::Generic;
    use strideweave::movement::move_to;
    let x = leaf(&[1.0, 2.0, 3.0], Shape::new(3).unwrap());
    let destination = Generic::carrier(&[Value::Float(0.0); 3], DType::FLOAT32, true).unwrap();
    let moved = move_to(&x, &destination).unwrap();
    assert_eq!(moved.grad_fn().unwrap().name(), "move");
    let doubled = ops::mul(&moved, 2.0).unwrap();
    let ones = Tensor::compact(
        Generic::carrier(&[Value::Float(1.0); 3], DType::FLOAT32, true).unwrap(),
        Shape::new(3).unwrap(),
    )
    .unwrap();
    doubled.backward(Some(&ones), true).unwrap();
    let g = x.grad().unwrap();
    assert_eq!(floats(&g), [2.0, 2.0, 2.0]);
    assert_eq!(
        g.carrier().class(),
        x.carrier().class(),
        "the gradient returns to CPU"
    );

    // A stride-0 cotangent for the moved tensor is refused before any gradient changes.
    let broadcast_cot = Tensor::new(
        Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true).unwrap(),
        0,
        "3:0".parse().unwrap(),
    )
    .unwrap();
    let error = strideweave::autograd::grad(
        std::slice::from_ref(&moved),
        std::slice::from_ref(&x),
        &[Some(broadcast_cot)],
        true,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(floats(&x.grad().unwrap()), [2.0, 2.0, 2.0]);
}

#[test]
fn views_pass_gradients_through_storage_slots() {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Shape::new((2, 3)).unwrap());
    let column = x
        .slice(&[
            strideweave::SliceKey::all(),
            strideweave::SliceKey::Index(1),
        ])
        .unwrap();
    let transposed = x.permute(&[1, 0]).unwrap();
    let y = ops::add(
        &ops::reduce_sum(&transposed).unwrap(),
        &ops::mul(
            column
                .unsqueeze(0)
                .unwrap()
                .squeeze(0)
                .unwrap()
                .reshape(&Shape::new(2).unwrap())
                .unwrap()
                .slice(&[strideweave::SliceKey::Index(0)])
                .unwrap()
                .unsqueeze(0)
                .unwrap()
                .broadcast_to(&Shape::new(3).unwrap())
                .unwrap(),
            10.0,
        )
        .unwrap(),
    )
    .unwrap();
    y.backward(Some(&ones_like(&y)), false).unwrap();
    // reduce_sum over the transposed mode 1 gives every element 1; the column element (0,1)
    // is read three times (broadcast) with weight 10.
    assert_eq!(floats(&x.grad().unwrap()), [1.0, 1.0, 31.0, 1.0, 1.0, 1.0]);
}

mod common;

/// Marks the Flaky class that executes the custom operation of these tests.
struct CustomCarrier;

#[test]
fn a_custom_operation_differentiates_through_its_declared_vjp() {
    use strideweave::carrier::{register_operation_capabilities, CarrierClass};
    use strideweave::operation::{
        define_operation, Arithmetic, BoundOperationCall, OperandKind, OperandPlan, OperandSpec,
        OperationCapability, OperationPlan, OperationSchema, ResolvedInvocation, ResultSpec, Vjp,
    };
    type Carrier = common::Flaky<CustomCarrier>;
    let plan = || {
        OperationPlan::new(
            "custom.triple",
            [OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32).unwrap()],
            Arithmetic::Binary32,
            None,
            None,
            DType::FLOAT32,
        )
        .unwrap()
    };
    let resolve = move |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let x = call.tensor(0)?;
        let result = ResultSpec::canonical(DType::FLOAT32, x.shape().clone());
        ResolvedInvocation::new(call.clone(), plan(), [result], [0], None)
    };
    let schema = OperationSchema::new(
        [OperandSpec::new("x", OperandKind::Tensor, true).unwrap()],
        [],
    )
    .unwrap();
    let vjp = Vjp::rule(|context, cotangents| {
        assert_eq!(context.saved_operands().len(), 1);
        assert_eq!(context.outputs().len(), 1);
        assert!(
            context.outputs()[0].grad_fn().is_none(),
            "saved outputs are detached"
        );
        assert_eq!(
            context.invocation().call().definition().name(),
            "custom.triple"
        );
        // d(3x)/dx = 3: the operation itself scales the cotangent, on the carrier it runs on.
        let g = cotangents[0].as_ref().expect("a cotangent");
        Ok(vec![Some(
            strideweave::operation::call("custom.triple", [g.into()], &[])?.remove(0),
        )])
    });
    let triple = define_operation("custom.triple", schema, resolve, None, vjp).unwrap();
    register_operation_capabilities(
        CarrierClass::of::<Carrier>(),
        [OperationCapability::from_plan(plan())],
    )
    .unwrap();

    let x = Tensor::compact(Carrier::carrier(&[1.0, -2.0], true), Shape::new(2).unwrap()).unwrap();
    x.set_requires_grad(true).unwrap();
    let y = triple.call(vec![x.clone().into()], &[]).unwrap().remove(0);
    assert_eq!(floats(&y), [3.0, -6.0]);
    assert_eq!(y.grad_fn().unwrap().name(), "custom.triple");
    let ones =
        Tensor::compact(Carrier::carrier(&[1.0, 1.0], true), Shape::new(2).unwrap()).unwrap();
    y.backward(Some(&ones), false).unwrap();
    assert_eq!(floats(&x.grad().unwrap()), [3.0, 3.0]);
}

mod random_strides {
    use proptest::prelude::*;
    use strideweave::autograd::{grad, no_grad};
    use strideweave::carriers::Cpu;
    use strideweave::{ops, Layout, Result, Shape, Stride, Tensor};

    /// A leaf over a permuted, gapped placement of `extents` at `offset`.
    fn placed(values: &[f32], extents: &[usize], order: &[usize], offset: usize) -> Tensor {
        let mut strides = vec![0; extents.len()];
        let mut running = 1;
        for &k in order {
            strides[k] = running;
            running *= extents[k] + 1;
        }
        let layout = Layout::new(
            Shape::flat(extents).unwrap(),
            Stride::flat(&strides).unwrap(),
        )
        .unwrap();
        let mut slots = vec![0.0f32; offset + layout.cosize()];
        for (i, v) in values.iter().enumerate().take(layout.size()) {
            slots[offset + layout.index_of(i).unwrap()] = *v;
        }
        let t = Tensor::new(Cpu::from_f32(&slots, true).unwrap(), offset, layout).unwrap();
        t.set_requires_grad(true).unwrap();
        t
    }

    /// A unary function of a tensor under test.
    type Function = Box<dyn Fn(&Tensor) -> Result<Tensor>>;

    fn value_of(f: &dyn Fn(&Tensor) -> Result<Tensor>, x: &Tensor, weights: &[f64]) -> f64 {
        let _off = no_grad();
        let out = f(x).unwrap();
        out.to_values()
            .unwrap()
            .iter()
            .zip(weights)
            .map(|(v, w)| v.as_f64().unwrap() * w)
            .sum()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn finite_differences_agree_on_permuted_gapped_operands(
            extents in (1usize..4, 1usize..4),
            swap in any::<bool>(),
            offset in 0usize..3,
            seed in prop::collection::vec(-2.0f32..2.0, 9),
            op in 0usize..22,
        ) {
            let dims = [extents.0, extents.1];
            let order = if swap { [1, 0] } else { [0, 1] };
            // Keep away from kinks (|x| near 0 for relu/abs, ties for extrema) and from the
            // domain edges of log, sqrt and div, where central differences are not derivatives.
            let kink = |v: &f32| v.abs() < 0.05 || (op == 15 && (v - 0.25).abs() < 0.05);
            let used = &seed[..dims[0] * dims[1]];
            let positive: Vec<f32> = used.iter().map(|v| v.abs() + 0.5).collect();
            let x = match op {
                9..=11 => placed(&positive, &dims, &order, offset),
                _ => placed(&seed, &dims, &order, offset),
            };
            if matches!(op, 12..=17) {
                prop_assume!(!used.iter().any(kink));
                let mut sorted: Vec<f32> = used.to_vec();
                sorted.sort_by(f32::total_cmp);
                prop_assume!(sorted.windows(2).all(|w| w[1] - w[0] > 0.05));
            }
            let f: Function = match op {
                0 => Box::new(ops::tanh),
                1 => Box::new(|t| ops::elementwise_mul(t, t)),
                2 => Box::new(ops::reduce_sum),
                3 => Box::new(|t| ops::matmul(t, t)),
                4 => Box::new(|t| ops::add(t, &t.slice(&[strideweave::SliceKey::all(), strideweave::SliceKey::stepped(0, 1, 1)])?.broadcast_to(t.shape())?)),
                5 => Box::new(|t| ops::sigmoid(&t.permute(&[1, 0])?)),
                6 => Box::new(|t| ops::sub(t, &ops::mul(t, 0.5)?)),
                7 => Box::new(|t| ops::mul(-1.5, t)),
                8 => Box::new(|t| ops::neg(&ops::exp(t)?)),
                9 => Box::new(|t| ops::div(&ops::log(t)?, t)),
                10 => Box::new(ops::sqrt),
                11 => Box::new(|t| ops::div(t, 3.0)),
                12 => Box::new(ops::relu),
                13 => Box::new(ops::abs),
                14 => Box::new(|t| ops::maximum(t, &ops::mul(t, -1.0)?)),
                15 => Box::new(|t| ops::minimum(t, 0.25)),
                16 => Box::new(ops::reduce_max),
                17 => Box::new(|t| ops::select(&ops::lt(t, 0.0)?, t, &ops::mul(t, 2.0)?)),
                18 => Box::new(|t| ops::mul(&t.unsqueeze(0)?.squeeze(0)?, 2.0)),
                19 => Box::new(|t| {
                    // The column-major selector of the same shape: every element once.
                    let rows = t.shape().mode(0)?.size();
                    ops::mul(&t.as_strided(t.shape().clone(), Stride::flat(&[1, rows])?)?, 3.0)
                }),
                20 => Box::new(|t| ops::elementwise_mul(&t.broadcast_in_dim(&Shape::new((t.shape().mode(0)?.size(), t.shape().mode(1)?.size(), 2))?, &[0, 1])?, &t.unsqueeze(-1)?.broadcast_to(&Shape::new((t.shape().mode(0)?.size(), t.shape().mode(1)?.size(), 2))?)?)),
                _ => Box::new(|t| ops::matmul(&t.permute(&[1, 0])?, &t.permute(&[1, 0])?)),
            };
            let out = f(&x).unwrap();
            let weights: Vec<f64> = (0..out.size()).map(|i| 0.5 + (i % 4) as f64 * 0.25).collect();
            let cot_values: Vec<f32> = weights.iter().map(|w| *w as f32).collect();
            let cot = Tensor::new(
                Cpu::from_f32(&cot_values, true).unwrap(),
                0,
                Layout::column_major(out.shape().clone()),
            ).unwrap();
            prop_assume!(out.layout() == cot.layout());
            let analytic = grad(std::slice::from_ref(&out), std::slice::from_ref(&x), &[Some(cot)], false).unwrap();
            let analytic: Vec<f64> = analytic[0].as_ref().unwrap().to_values().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            let eps = 1e-2f32;
            for i in 0..x.size() {
                let bump = |delta: f32| {
                    let mut values: Vec<f32> = x.to_values().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
                    values[i] += delta;
                    placed(&values, &dims, &order, offset)
                };
                let numeric = (value_of(&*f, &bump(eps), &weights) - value_of(&*f, &bump(-eps), &weights)) / (2.0 * f64::from(eps));
                prop_assert!((analytic[i] - numeric).abs() <= 3e-2 * (1.0 + numeric.abs()), "op {} element {}: analytic {}, numeric {}", op, i, analytic[i], numeric);
            }
        }
    }
}

/// A Float32 CPU tensor of `values` under `layout`.
fn under(values: &[f32], layout: &str) -> Tensor {
    Tensor::new(
        Cpu::from_f32(values, true).unwrap(),
        0,
        layout.parse().unwrap(),
    )
    .unwrap()
}

#[test]
fn batched_grad_stacks_one_pass_per_cotangent() -> Result<()> {
    use strideweave::autograd::grad_batched;
    // y = W·x as matmul((2,3), (1,3)) -> (2,1); the batch of cotangents are the two unit
    // rows, so the stacked gradient for x holds the rows of W.
    let w = leaf(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0], Shape::new((2, 3))?);
    let x = leaf(&[1.0, 1.0, 1.0], Shape::new((1, 3))?);
    let y = ops::matmul(&w, &x)?;
    assert_eq!(y.layout().to_string(), "(2,1):(1,2)");
    // Batch mode 2 (stride 2) prepended to y's layout.
    let cotangents = under(&[1.0, 0.0, 0.0, 1.0], "(2,2,1):(2,1,2)");
    let grads = grad_batched(
        std::slice::from_ref(&y),
        &[x.clone(), w.clone()],
        std::slice::from_ref(&cotangents),
        true,
    )?;
    let dx = grads[0].clone().expect("x is reachable");
    // One gradient has x's layout (1,3):(1,1), cosize 3: the batch stride is 3.
    assert_eq!(dx.layout().to_string(), "(2,1,3):(3,1,1)");
    assert_eq!(floats(&dx), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // Each slice equals the single-cotangent grad of that row.
    for k in 0..2 {
        let row = Tensor::new(cotangents.carrier().clone(), 2 * k, y.layout().clone())?;
        let single = grad(
            std::slice::from_ref(&y),
            std::slice::from_ref(&x),
            &[Some(row)],
            true,
        )?;
        let expected = floats(&single[0].clone().unwrap());
        let slice: Vec<f64> = (0..3).map(|j| floats(&dx)[k + 2 * j]).collect();
        assert_eq!(slice, expected);
    }
    let dw = grads[1].clone().expect("w is reachable");
    assert_eq!(dw.shape(), &Shape::new((2, 2, 3))?);
    assert!(
        x.grad().is_none() && w.grad().is_none(),
        "grad never touches .grad"
    );
    Ok(())
}

#[test]
fn batched_grad_checks_everything_before_the_first_pass_and_frees_the_graph_last() -> Result<()> {
    use strideweave::autograd::grad_batched;
    let x = leaf(&[1.0, 2.0], Shape::new(2)?);
    let unrelated = leaf(&[3.0], Shape::new(1)?);
    let y = ops::mul(&x, 3.0)?;
    let wrong_layout = under(&[1.0, 0.0, 0.0, 1.0], "(2,2):(1,2)");
    let error = grad_batched(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        &[wrong_layout],
        false,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(error.to_string().contains("leaf batch mode"), "{error}");
    let error = grad_batched(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        &[],
        false,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    let z = ops::mul(&x, 2.0)?;
    let two = under(&[1.0; 4], "(2,2):(2,1)");
    let three = under(&[1.0; 6], "(3,2):(2,1)");
    let error = grad_batched(
        &[y.clone(), z.clone()],
        std::slice::from_ref(&x),
        &[two.clone(), three],
        false,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(error.to_string().contains("one batch extent"), "{error}");

    // Three passes without retain_graph: the graph survives until the last one.
    let batch = under(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], "(3,2):(2,1)");
    let grads = grad_batched(
        std::slice::from_ref(&y),
        &[x.clone(), unrelated.clone()],
        &[batch],
        false,
    )?;
    assert_eq!(
        floats(&grads[0].clone().unwrap()),
        [3.0, 0.0, 3.0, 0.0, 3.0, 3.0]
    );
    assert!(grads[1].is_none(), "an unreachable input gives None");
    let error = grad(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        &[Some(ones_like(&y))],
        false,
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(error.to_string().contains("retain_graph"), "{error}");
    Ok(())
}

#[test]
fn set_requires_grad_on_a_released_carrier_is_a_runtime_error_and_changes_nothing() {
    let t = Tensor::compact(
        Cpu::from_f32(&[1.0, 2.0], true).unwrap(),
        Shape::new(2).unwrap(),
    )
    .unwrap();
    t.carrier().release().unwrap();
    for requires in [true, false] {
        let error = t.set_requires_grad(requires).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime);
        assert_eq!(
            error.to_string(),
            "runtime error: cannot change requires_grad: CPU is released"
        );
    }
    assert!(!t.requires_grad());
}

#[test]
fn an_assigned_gradient_keeps_its_leafs_dtype_and_shape() -> Result<()> {
    let w = Tensor::compact(Cpu::from_f32(&[1.0, 2.0], true)?, Shape::new(2)?)?;
    w.set_requires_grad(true)?;
    let ints = Tensor::compact(Cpu::from_i32(&[1, 2], true)?, Shape::new(2)?)?;
    let error = w.set_grad(Some(ints)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    let message = error.to_string();
    assert!(
        message.contains("Int32") && message.contains("Float32"),
        "{message}"
    );
    let longer = Tensor::compact(Cpu::from_f32(&[1.0, 2.0, 3.0], true)?, Shape::new(3)?)?;
    let error = w.set_grad(Some(longer)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(w.grad().is_none(), "a refused gradient is not kept");
    let fitting = Tensor::compact(Cpu::from_f32(&[0.5, 0.25], true)?, Shape::new(2)?)?;
    w.set_grad(Some(fitting.clone()))?;
    assert!(w.grad().is_some_and(|g| g.same_as(&fitting)));
    Ok(())
}
