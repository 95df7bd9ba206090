//! Tiled operations (docs/tiers.md, Operations on raw tiled operands: the six central
//! operations, with a dense result on the primary tier's class; seed scenario "Compose a
//! definition-free compute carrier"): the composite provider's capabilities, the six
//! operations on raw TiledEvictable operands against the same operations on dense tensors,
//! broadcasting, refusals before any state change, gradients, fault injection, and out-of-core
//! streaming with progress.

mod common;

use std::sync::{Arc, Mutex};

use common::floats;
use common::tiled::{Faults, Faulty};
use strideweave::carrier::{Carrier, CarrierClass};
use strideweave::carriers::{
    Cpu, FileBacked, Generic, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation,
    TileProgress, TileSet, TiledEvictable,
};
use strideweave::movement::move_to;
use strideweave::{ops, DType, Error, ErrorKind, Layout, Result, Shape, Tensor, Value};

// ---------------------------------------------------------------------------------------------
// Helpers

/// Deterministic, varied values (some negative) for `n` slots.
fn wavy(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + seed * 13) % 23) as f32 - 11.0) / 4.0)
        .collect()
}

/// `values` as the f64 the Value-based test carriers take.
fn widen(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&v| f64::from(v)).collect()
}

fn cpu(values: &[f32]) -> Carrier {
    Cpu::from_f32(values, true).unwrap()
}

fn empty_cpu() -> Carrier {
    Cpu::from_f32(&[], true).unwrap()
}

/// A TiledEvictable over a full CPU primary holding `values` and an empty CPU secondary.
fn tiled(values: &[f32], grid: &[usize], tile: &[usize]) -> Carrier {
    TiledEvictable::carrier(&cpu(values), &empty_cpu(), grid, tile, None).unwrap()
}

fn shape_of(extents: &[usize]) -> Shape {
    match extents {
        [one] => Shape::new(*one).unwrap(),
        many => Shape::new(many.to_vec()).unwrap(),
    }
}

/// The canonical tensor over a TiledEvictable carrier.
fn whole(carrier: &Carrier) -> Tensor {
    let shape = TiledEvictable::logical_shape(carrier).unwrap();
    Tensor::compact(carrier.clone(), shape_of(&shape)).unwrap()
}

/// The dense CPU tensor of the same values and logical shape.
fn dense(values: &[f32], shape: &[usize]) -> Tensor {
    Tensor::compact(cpu(values), shape_of(shape)).unwrap()
}

fn numbers(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn assert_close(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= 1e-4 * (1.0 + e.abs()),
            "element {i}: {a} vs {e} ({actual:?} vs {expected:?})"
        );
    }
}

fn expect_err<T: std::fmt::Debug>(result: Result<T>, kind: ErrorKind, needle: &str) -> Error {
    let error = result.expect_err("expected an error");
    assert_eq!(error.kind(), kind, "{error}");
    assert!(
        error.to_string().contains(needle),
        "'{error}' should mention '{needle}'"
    );
    error
}

fn set(coordinates: &[&[usize]]) -> TileSet {
    TileSet::new(coordinates.iter().map(|c| c.to_vec())).unwrap()
}

/// Every tile's location, in the canonical tile order.
fn locations(carrier: &Carrier) -> Vec<TileLocation> {
    let grid = TiledEvictable::grid_shape(carrier).unwrap();
    let count: usize = grid.iter().product();
    (0..count)
        .map(|t| {
            let mut rest = t;
            let coord: Vec<usize> = grid
                .iter()
                .map(|&g| {
                    let c = rest % g;
                    rest /= g;
                    c
                })
                .collect();
            TiledEvictable::tile_state(carrier, &coord)
                .unwrap()
                .location()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Capabilities and result carriers

#[test]
fn capabilities_are_the_primary_tiers_plans_for_the_six_operations() {
    let six = [
        "add",
        "elementwise_mul",
        "mul",
        "relu",
        "reduce_sum",
        "matmul",
    ];
    for secondary in [
        empty_cpu(),
        FileBacked::carrier(None, DType::FLOAT32, true).unwrap(),
    ] {
        let primary = cpu(&[0.0; 4]);
        let expected: Vec<String> = primary
            .capabilities()
            .iter()
            .filter(|c| {
                let out = c.plan().output();
                six.contains(&c.operation())
                    && primary.supports_storage_dtype(out).unwrap()
                    && secondary.supports_storage_dtype(out).unwrap()
            })
            .map(|c| c.to_string())
            .collect();
        let carrier = TiledEvictable::carrier(&primary, &secondary, &[2], &[2], None).unwrap();
        let actual: Vec<String> = carrier
            .capabilities()
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert!(!actual.is_empty());
        let mut sorted_expected = expected.clone();
        sorted_expected.sort();
        let mut sorted_actual = actual.clone();
        sorted_actual.sort();
        assert_eq!(sorted_actual, sorted_expected);
        assert!(actual.iter().all(|c| !c.contains("neg")));
        // A factory product (a fresh implicit-zero TiledEvictable) derives the same reach.
        let fresh = carrier.allocate_like(4, true, None, false).unwrap();
        assert_eq!(fresh.capabilities().len(), carrier.capabilities().len());
    }
}

#[test]
fn compose_a_definition_free_compute_carrier() {
    // Seed scenario: TiledEvictable over a definition-free CPU (and Generic) compute carrier
    // derives and prepares its work through the tier's public behaviour; the tier class
    // stays definition-free.
    for primary_class in ["CPU", "Generic"] {
        let values = wavy(8, 1);
        let primary = match primary_class {
            "CPU" => cpu(&values),
            _ => Generic::carrier(
                &floats(&values.iter().map(|&v| v as f64).collect::<Vec<_>>()),
                DType::FLOAT32,
                true,
            )
            .unwrap(),
        };
        let secondary = primary.allocate_like(0, true, None, true).unwrap();
        let class = primary.class();
        let carrier =
            TiledEvictable::carrier(&primary, &secondary, &[2, 2], &[2, 1], None).unwrap();
        let expected: Vec<f64> = values.iter().map(|&v| f64::from(v.max(0.0))).collect();
        // In one call over the full primary tier, then tile by tile with a tile on the
        // secondary tier (of the same class: read in place by the tier's dispatch).
        for evict in [false, true] {
            if evict {
                TiledEvictable::evict(&carrier, &set(&[&[1, 0]])).unwrap();
            }
            let result = ops::relu(&whole(&carrier)).unwrap();
            assert_eq!(result.carrier().class(), class);
            assert_close(&numbers(&result), &expected);
        }
        assert!(!class.is_definition_backed());
    }
}

// ---------------------------------------------------------------------------------------------
// Values: every operation against the same operation on dense tensors

/// A TiledEvictable holding `values`, with the tiles of `evicted` moved to the secondary tier.
fn mixed(values: &[f32], grid: &[usize], tile: &[usize], evicted: &[&[usize]]) -> Carrier {
    let carrier = tiled(values, grid, tile);
    TiledEvictable::evict(&carrier, &set(evicted)).unwrap();
    carrier
}

#[test]
fn elementwise_operations_match_dense_ones_tile_by_tile() {
    let (grid, tile) = ([2, 3], [3, 2]);
    let shape = [6, 6];
    let (a, b) = (wavy(36, 1), wavy(36, 2));
    let x = mixed(&a, &grid, &tile, &[&[1, 0], &[0, 2]]);
    let y = mixed(&b, &grid, &tile, &[&[1, 0], &[1, 1]]);
    let before = (locations(&x), locations(&y));
    let (tx, ty) = (whole(&x), whole(&y));
    let (dx, dy) = (dense(&a, &shape), dense(&b, &shape));
    let cases: Vec<(Tensor, Tensor)> = vec![
        (ops::add(&tx, &ty).unwrap(), ops::add(&dx, &dy).unwrap()),
        (
            ops::elementwise_mul(&tx, &ty).unwrap(),
            ops::elementwise_mul(&dx, &dy).unwrap(),
        ),
        (ops::mul(&tx, &ty).unwrap(), ops::mul(&dx, &dy).unwrap()),
        (ops::mul(&tx, 2.5).unwrap(), ops::mul(&dx, 2.5).unwrap()),
        (ops::mul(-0.5, &ty).unwrap(), ops::mul(-0.5, &dy).unwrap()),
        (ops::relu(&tx).unwrap(), ops::relu(&dx).unwrap()),
    ];
    for (tiled_result, dense_result) in cases {
        assert_eq!(tiled_result.carrier().class(), CarrierClass::of::<Cpu>());
        assert_eq!(tiled_result.layout(), dense_result.layout());
        assert_eq!(tiled_result.offset(), 0);
        assert_eq!(tiled_result.carrier().size(), 36);
        assert_close(&numbers(&tiled_result), &numbers(&dense_result));
    }
    // Reading never moves a tile, writes one, or moves a version.
    assert_eq!((locations(&x), locations(&y)), before);
    assert_eq!((x.version(), y.version()), (0, 0));
    assert!(TiledEvictable::dirty_tiles(&x).unwrap().is_empty());
}

#[test]
fn implicit_tiles_compute_as_zeros() {
    let carrier =
        TiledEvictable::zeros(&empty_cpu(), &empty_cpu(), &[2, 2], &[2, 2], None).unwrap();
    carrier.set(0, Value::Float(3.0)).unwrap(); // materializes tile (0, 0) only
    let values = numbers(&ops::add(&whole(&carrier), &whole(&carrier)).unwrap());
    let mut expected = vec![0.0; 16];
    expected[0] = 6.0;
    assert_eq!(values, expected);
    assert_eq!(
        TiledEvictable::implicit_tiles(&carrier).unwrap().len(),
        3,
        "computing does not materialize implicit tiles"
    );
}

#[test]
fn reduce_sum_matches_dense_over_every_tiling() {
    for (grid, tile) in [
        ([1, 1], [4, 6]),
        ([2, 3], [2, 2]),
        ([4, 1], [1, 6]),
        ([1, 6], [4, 1]),
    ] {
        let values = wavy(24, 3);
        let carrier = mixed(&values, &grid, &tile, &[&[0, 0]]);
        let reference = dense(&values, &[4, 6]);
        let result = ops::reduce_sum(&whole(&carrier)).unwrap();
        assert_eq!(result.shape(), &Shape::new(4).unwrap());
        assert_eq!(result.carrier().class(), CarrierClass::of::<Cpu>());
        assert_close(
            &numbers(&result),
            &numbers(&ops::reduce_sum(&reference).unwrap()),
        );
        let wide = ops::reduce_sum_with(&whole(&carrier), DType::FLOAT64).unwrap();
        assert_close(
            &numbers(&wide),
            &numbers(&ops::reduce_sum_with(&reference, DType::FLOAT64).unwrap()),
        );
    }
}

#[test]
fn an_int32_reduction_narrows_only_its_total() {
    // Item 2 of docs/operations.md, Worked examples, one column per tile: the partial sums
    // combine with the plan's own exact accumulation.
    let primary = Cpu::from_i32(&[2147483647, 1, -1], true).unwrap();
    let secondary = Cpu::from_i32(&[], true).unwrap();
    let carrier = TiledEvictable::carrier(&primary, &secondary, &[1, 3], &[1, 1], None).unwrap();
    let result = ops::reduce_sum(&whole(&carrier)).unwrap();
    assert_eq!(result.dtype(), DType::INT32);
    assert_eq!(result.to_values().unwrap(), [Value::Int(2147483647)]);
}

#[test]
fn matmul_matches_dense_with_tiled_contractions() {
    // (6, 4) · (2, 4) → (6, 2): lhs tiles (3, 2), rhs tiles (1, 2): K tiled alike.
    let (l, r) = (wavy(24, 4), wavy(8, 5));
    let lhs = mixed(&l, &[2, 2], &[3, 2], &[&[1, 1]]);
    let rhs = mixed(&r, &[2, 2], &[1, 2], &[&[0, 1]]);
    let result = ops::matmul(&whole(&lhs), &whole(&rhs)).unwrap();
    let reference = ops::matmul(&dense(&l, &[6, 4]), &dense(&r, &[2, 4])).unwrap();
    assert_eq!(result.shape(), reference.shape());
    assert_close(&numbers(&result), &numbers(&reference));
    let wide = ops::matmul_with(&whole(&lhs), &whole(&rhs), DType::FLOAT64).unwrap();
    assert_close(&numbers(&wide), &numbers(&reference));
    // A single output block is the per-tile result itself.
    let single = ops::matmul(
        &whole(&tiled(&l, &[1, 2], &[6, 2])),
        &whole(&tiled(&r, &[1, 2], &[2, 2])),
    )
    .unwrap();
    assert_close(&numbers(&single), &numbers(&reference));
}

#[test]
fn extent_one_modes_broadcast_across_tiles() {
    // (4, 3) + (4, 1) and (1, 3) · (4, 3) elementwise.
    let (a, b, c) = (wavy(12, 6), wavy(4, 7), wavy(3, 8));
    // Once with every operand in its full primary tier (one call), once streamed tile by tile.
    for evicted in [false, true] {
        let x = tiled(&a, &[2, 3], &[2, 1]);
        let column = tiled(&b, &[2, 1], &[2, 1]);
        let row = tiled(&c, &[1, 3], &[1, 1]);
        if evicted {
            TiledEvictable::evict(&x, &set(&[&[1, 2]])).unwrap();
            TiledEvictable::evict(&column, &set(&[&[0, 0]])).unwrap();
            TiledEvictable::evict(&row, &set(&[&[0, 1]])).unwrap();
        }
        let sum = ops::add(&whole(&x), &whole(&column)).unwrap();
        let expected = ops::add(&dense(&a, &[4, 3]), &dense(&b, &[4, 1])).unwrap();
        assert_eq!(sum.shape(), expected.shape());
        assert_close(&numbers(&sum), &numbers(&expected));
        let product = ops::elementwise_mul(&whole(&row), &whole(&x)).unwrap();
        let expected = ops::elementwise_mul(&dense(&c, &[1, 3]), &dense(&a, &[4, 3])).unwrap();
        assert_close(&numbers(&product), &numbers(&expected));
    }
}

#[test]
fn a_permutation_inside_tiles_is_computed_in_the_tensors_order() {
    // Logical (4, 2) in tiles (4, 1): a tensor whose mode 0 visits slots 0, 2, 1, 3 of each
    // tile is tile-footprint compatible.
    let values = wavy(8, 9);
    let carrier = tiled(&values, &[1, 2], &[4, 1]);
    let permuted = Tensor::new(
        carrier.clone(),
        0,
        "((2,2),2):((2,1),4)".parse::<Layout>().unwrap(),
    )
    .unwrap();
    let result = ops::relu(&permuted).unwrap();
    let expected: Vec<f64> = [0, 2, 1, 3, 4, 6, 5, 7]
        .iter()
        .map(|&s| f64::from(values[s].max(0.0)))
        .collect();
    assert_eq!(numbers(&result), expected);
}

// ---------------------------------------------------------------------------------------------
// Refusals: before any state change

#[test]
fn incompatible_operands_are_refused_before_anything_changes() {
    let values = wavy(16, 10);
    let x = mixed(&values, &[2, 1], &[2, 4], &[&[1, 0]]);
    let before = locations(&x);
    // A transposed view spans tiles: Value.
    let transposed = whole(&x).permute(&[1, 0]).unwrap();
    expect_err(
        ops::relu(&transposed),
        ErrorKind::Value,
        "tile-footprint compatible",
    );
    // Operands tiled differently: Value.
    let y = tiled(&values, &[1, 2], &[4, 2]);
    expect_err(
        ops::add(&whole(&x), &whole(&y)),
        ErrorKind::Value,
        "tiled alike",
    );
    // A contraction tiled differently: Value.
    let rhs = tiled(&wavy(8, 11), &[1, 4], &[2, 1]);
    expect_err(
        ops::matmul(&whole(&x), &whole(&rhs)),
        ErrorKind::Value,
        "tile by tile",
    );
    // Operands computing on different primary classes: Type.
    let generic_values: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
    let generic = Generic::carrier(&floats(&generic_values), DType::FLOAT32, true).unwrap();
    let other = TiledEvictable::carrier(
        &generic,
        &generic.allocate_like(0, true, None, true).unwrap(),
        &[2, 1],
        &[2, 4],
        None,
    )
    .unwrap();
    expect_err(
        ops::add(&whole(&x), &whole(&other)),
        ErrorKind::Type,
        "primary tier class",
    );
    // An invalid tile: Runtime naming it.
    let invalid = TiledEvictable::carrier(&empty_cpu(), &empty_cpu(), &[2], &[2], None).unwrap();
    expect_err(
        ops::relu(&whole(&invalid)),
        ErrorKind::Runtime,
        "tile (0) is invalid",
    );
    // Nothing moved.
    assert_eq!(locations(&x), before);
    assert_eq!(x.version(), 0);
    // A released operand: Runtime.
    let released = tiled(&values, &[2, 1], &[2, 4]);
    let tensor = whole(&released);
    released.release().unwrap();
    expect_err(ops::reduce_sum(&tensor), ErrorKind::Runtime, "released");
}

// ---------------------------------------------------------------------------------------------
// Gradients: one node for the outer call, the built-in rules, full-shaped leaf gradients

/// The gradients of `f(inputs)` for the cotangent `seed`, through `autograd::grad`.
fn gradients(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    seed: usize,
) -> (Tensor, Vec<Tensor>) {
    for input in inputs {
        input.set_requires_grad(true).unwrap();
    }
    let output = f(inputs).unwrap();
    let cotangent =
        Tensor::compact(cpu(&wavy(output.size(), seed)), output.shape().clone()).unwrap();
    let grads = strideweave::autograd::grad(
        std::slice::from_ref(&output),
        inputs,
        &[Some(cotangent)],
        false,
    )
    .unwrap()
    .into_iter()
    .map(|g| g.expect("every input is reachable"))
    .collect();
    (output, grads)
}

#[test]
fn gradients_match_the_dense_computation() {
    type Op = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;
    type Geometry = Vec<(Vec<usize>, Vec<usize>)>;
    let cases: Vec<(&str, Op, Geometry)> = vec![
        (
            "add",
            Box::new(|t| ops::add(&t[0], &t[1])),
            vec![(vec![2, 2], vec![2, 3]), (vec![2, 1], vec![2, 1])],
        ),
        (
            "elementwise_mul",
            Box::new(|t| ops::elementwise_mul(&t[0], &t[1])),
            vec![(vec![2, 2], vec![2, 3]), (vec![1, 2], vec![1, 3])],
        ),
        (
            "mul",
            Box::new(|t| ops::mul(&t[0], &t[1])),
            vec![(vec![2, 2], vec![2, 3]), (vec![2, 2], vec![2, 3])],
        ),
        (
            "mul scalar",
            Box::new(|t| ops::mul(&t[0], 3.0)),
            vec![(vec![2, 2], vec![2, 3])],
        ),
        (
            "relu",
            Box::new(|t| ops::relu(&t[0])),
            vec![(vec![2, 2], vec![2, 3])],
        ),
        (
            "reduce_sum",
            Box::new(|t| ops::reduce_sum(&t[0])),
            vec![(vec![2, 2], vec![2, 3])],
        ),
        (
            "matmul",
            Box::new(|t| ops::matmul(&t[0], &t[1])),
            vec![(vec![2, 2], vec![2, 3]), (vec![3, 2], vec![1, 3])],
        ),
    ];
    for (seed, (name, f, geometry)) in cases.into_iter().enumerate() {
        let mut tiled_inputs = Vec::new();
        let mut dense_inputs = Vec::new();
        for (k, (grid, tile)) in geometry.iter().enumerate() {
            let shape: Vec<usize> = grid.iter().zip(tile).map(|(g, t)| g * t).collect();
            let values = wavy(shape.iter().product(), seed * 3 + k);
            // The first operand has a FileBacked secondary tier, so its evicted tile is staged
            // by a bulk copy; the second a CPU one, read in place.
            let secondary = match k {
                0 => FileBacked::carrier(None, DType::FLOAT32, true).unwrap(),
                _ => empty_cpu(),
            };
            let carrier =
                TiledEvictable::carrier(&cpu(&values), &secondary, grid, tile, None).unwrap();
            // The first operand streams (a tile on the secondary tier); a second stays in its
            // full primary tier unless the first is streamed too.
            if k == 0 || grid[1] > 1 {
                let last = [grid[0] - 1, grid[1] - 1];
                TiledEvictable::evict(&carrier, &set(&[&last])).unwrap();
            }
            tiled_inputs.push(whole(&carrier));
            dense_inputs.push(dense(&values, &shape));
        }
        let (tiled_output, tiled_grads) = gradients(&*f, &tiled_inputs, seed + 40);
        let (dense_output, dense_grads) = gradients(&*f, &dense_inputs, seed + 40);
        assert_close(&numbers(&tiled_output), &numbers(&dense_output));
        for (k, (tg, dg)) in tiled_grads.iter().zip(&dense_grads).enumerate() {
            assert_eq!(
                tg.shape(),
                tiled_inputs[k].shape(),
                "{name}: a full-shaped gradient"
            );
            assert_eq!(
                tg.carrier().class(),
                tiled_inputs[k].carrier().class(),
                "{name}: a leaf gradient lives on the leaf's class"
            );
            assert_close(&numbers(tg), &numbers(dg));
        }
    }
}

#[test]
fn one_node_records_the_outer_call_and_leaf_gradients_accumulate() {
    let values = wavy(12, 20);
    let carrier = tiled(&values, &[2, 3], &[2, 1]);
    let x = whole(&carrier);
    x.set_requires_grad(true).unwrap();
    let y = ops::elementwise_mul(&x, &x).unwrap();
    let node = y.grad_fn().expect("the outer call is recorded");
    assert_eq!(node.name(), "elementwise_mul");
    assert_eq!(node.inputs().len(), 2);
    assert!(node.inputs().iter().all(|t| t.carrier().same_as(&carrier)));
    let ones = Tensor::compact(cpu(&[1.0; 12]), y.shape().clone()).unwrap();
    y.backward(Some(&ones), true).unwrap();
    y.backward(Some(&ones), false).unwrap();
    let grad = x.grad().expect("a leaf gradient");
    assert_eq!(grad.carrier().class(), carrier.class());
    let expected: Vec<f64> = values.iter().map(|&v| 4.0 * f64::from(v)).collect();
    assert_close(&numbers(&grad), &expected);
}

#[test]
fn a_matmul_gradient_agrees_with_finite_differences() {
    let (l, r) = (wavy(24, 30), wavy(8, 31));
    let rhs = whole(&tiled(&r, &[1, 2], &[2, 2]));
    let loss = |values: &[f32]| -> f64 {
        let lhs = whole(&tiled(values, &[3, 2], &[2, 2]));
        numbers(&ops::matmul(&lhs, &rhs).unwrap()).iter().sum()
    };
    let lhs = whole(&tiled(&l, &[3, 2], &[2, 2]));
    lhs.set_requires_grad(true).unwrap();
    let product = ops::matmul(&lhs, &rhs).unwrap();
    let ones = Tensor::compact(cpu(&[1.0; 12]), product.shape().clone()).unwrap();
    product.backward(Some(&ones), false).unwrap();
    let analytic = numbers(&lhs.grad().unwrap());
    let h = 1e-2_f32;
    for slot in [0, 5, 11, 23] {
        let (mut up, mut down) = (l.clone(), l.clone());
        up[slot] += h;
        down[slot] -= h;
        let numeric = (loss(&up) - loss(&down)) / (2.0 * f64::from(h));
        assert!(
            (numeric - analytic[slot]).abs() < 1e-2,
            "slot {slot}: {numeric} vs {}",
            analytic[slot]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Fault injection: a failing tier read mid-operation

#[test]
fn a_failing_tier_read_mid_operation_publishes_nothing() {
    for capacity in [None, Some(1)] {
        let faults = Faults::sticky();
        let values = wavy(24, 50);
        let policy = capacity.map(|c| Arc::new(Capacity::new(c)) as Arc<dyn ResidencyPolicy>);
        let carrier = TiledEvictable::carrier(
            &cpu(&values),
            &Faulty::carrier(&faults, &[]),
            &[4, 1],
            &[2, 3],
            policy,
        )
        .unwrap();
        TiledEvictable::evict(&carrier, &set(&[&[1, 0], &[2, 0], &[3, 0]])).unwrap();
        let before = locations(&carrier);
        let x = whole(&carrier);
        x.set_requires_grad(true).unwrap();
        // Two staged tiles read fine, the third fails half way.
        Faults::arm(&faults.reads, 2 * 6 + 3);
        for attempt in [ops::reduce_sum(&x), ops::relu(&x), ops::add(&x, &x)] {
            expect_err(attempt, ErrorKind::Runtime, "injected read failure");
            Faults::arm(&faults.reads, 2 * 6 + 3);
        }
        assert_eq!(carrier.version(), 0, "no version moved");
        assert_eq!(locations(&carrier), before, "no tile moved");
        assert!(TiledEvictable::dirty_tiles(&carrier).unwrap().is_empty());
        assert!(x.grad().is_none());
        // Every tile still has its valid copy, and the operation can be retried.
        Faults::arm(&faults.reads, -1);
        assert_close(&numbers(&x), &widen(&values));
        let retried = ops::reduce_sum(&x).unwrap();
        assert_close(
            &numbers(&retried),
            &numbers(&ops::reduce_sum(&dense(&values, &[8, 3])).unwrap()),
        );
    }
}

#[test]
fn a_failing_read_of_a_whole_seed_tier_publishes_nothing() {
    // Every tile still in a full secondary seed tier, no capacity: the operation copies the
    // whole tier in one go, and the copy fails half way.
    let faults = Faults::sticky();
    let values = wavy(24, 51);
    let carrier = TiledEvictable::carrier(
        &empty_cpu(),
        &Faulty::carrier(&faults, &widen(&values)),
        &[2, 2],
        &[3, 2],
        None,
    )
    .unwrap();
    let before = locations(&carrier);
    Faults::arm(&faults.reads, 10);
    expect_err(
        ops::relu(&whole(&carrier)),
        ErrorKind::Runtime,
        "injected read failure",
    );
    assert_eq!((carrier.version(), locations(&carrier)), (0, before));
    Faults::arm(&faults.reads, -1);
    let expected: Vec<f64> = values.iter().map(|&v| f64::from(v.max(0.0))).collect();
    assert_close(&numbers(&ops::relu(&whole(&carrier)).unwrap()), &expected);
}

// ---------------------------------------------------------------------------------------------
// Out of core: streaming tiles through a bounded primary tier, with progress

/// A policy bounding the primary tier and recording progress reports.
#[derive(Debug)]
struct Capacity {
    capacity: usize,
    reports: Mutex<Vec<TileProgress>>,
}

impl Capacity {
    fn new(capacity: usize) -> Capacity {
        Capacity {
            capacity,
            reports: Mutex::new(Vec::new()),
        }
    }
}

impl ResidencyPolicy for Capacity {
    /// Suggests nothing: operations stream, and a read plan gets its required tiles from the
    /// framework's correction.
    fn plan(&self, _: &TileSet, _: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }
    fn primary_capacity(&self) -> Option<usize> {
        Some(self.capacity)
    }
    fn on_progress(&self, progress: &TileProgress) {
        self.reports.lock().unwrap().push(progress.clone());
    }
}

/// A TiledEvictable of `values` in tiles of `tile` over a full FileBacked secondary and an
/// empty CPU primary, steered by `policy`.
fn on_disk(values: &[f32], grid: &[usize], tile: &[usize], policy: Arc<Capacity>) -> Carrier {
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let layout = Layout::from_flat(&[values.len()], &[1]).unwrap();
    move_to(&Tensor::new(cpu(values), 0, layout).unwrap(), &file).unwrap();
    TiledEvictable::carrier(&empty_cpu(), &file, grid, tile, Some(policy)).unwrap()
}

#[test]
fn a_tensor_larger_than_its_primary_tier_streams_through_it() {
    // Tiles and output blocks of 8 slots: while a partial sum combines into the running sum
    // of its block, three blocks (the old sum, the partial, the new sum) take three tiles of
    // the capacity beside the staged ones; one item is staged however full the tier is.
    let values = wavy(64, 60);
    for (capacity, depth) in [(1, 1), (4, 1), (5, 2), (6, 3), (7, 3)] {
        let policy = Arc::new(Capacity::new(capacity));
        let carrier = on_disk(&values, &[1, 8], &[8, 1], Arc::clone(&policy));
        let secondary = TiledEvictable::secondary(&carrier).unwrap();
        let result = ops::reduce_sum(&whole(&carrier)).unwrap();
        assert_close(
            &numbers(&result),
            &numbers(&ops::reduce_sum(&dense(&values, &[8, 8])).unwrap()),
        );
        let reports = policy.reports.lock().unwrap().clone();
        assert_eq!(reports.len(), 8, "one report per tile");
        let last = reports.last().unwrap();
        assert_eq!(
            (last.operation(), last.completed(), last.total()),
            ("reduce_sum", 8, 8)
        );
        assert_eq!((last.staged_tiles(), last.staged_slots()), (8, 64));
        assert_eq!(last.fraction(), 1.0);
        assert!(
            reports.iter().all(|r| r.prefetch_depth() == depth),
            "capacity {capacity}"
        );
        assert!(reports
            .windows(2)
            .all(|w| w[0].completed() + 1 == w[1].completed()));
        assert_eq!(
            (
                last.tile_slots(),
                last.capacity_slots(),
                last.resident_slots()
            ),
            (8, Some(8 * capacity), 0)
        );
        let peak = reports.iter().map(TileProgress::peak_slots).max().unwrap();
        if depth == 1 {
            // One staged tile and the three blocks of a combination.
            assert_eq!(peak, 32, "capacity {capacity}");
        }
        if capacity >= 4 {
            assert!(peak <= 8 * capacity, "capacity {capacity}: peak {peak}");
        }
        // Streaming copies: the tiles stay on the secondary tier, which stays live.
        assert_eq!(TiledEvictable::secondary_tiles(&carrier).unwrap().len(), 8);
        assert!(TiledEvictable::primary_tiles(&carrier).unwrap().is_empty());
        assert!(!secondary.is_released());
        assert_eq!(carrier.version(), 0);
    }
}

#[test]
fn a_large_secondary_tile_of_a_float32_sum_is_staged_in_cache_sized_pieces() {
    // Four tiles of 1024 × 256 (262 144 slots) on a full Faulty secondary: a Float32
    // `reduce_sum` stages each in two pieces of 128 columns (131 072 slots each), sums every
    // piece as it lands and reports one item per tile; a Float64 accumulation stages whole
    // tiles.
    let (rows, columns) = (1024, 1024);
    let values = wavy(rows * columns, 61);
    let reference = dense(&values, &[rows, columns]);
    for depth_capacity in [1, 3] {
        let faults = Faults::sticky();
        let policy = Arc::new(Capacity::new(depth_capacity));
        let carrier = TiledEvictable::carrier(
            &empty_cpu(),
            &Faulty::carrier(&faults, &widen(&values)),
            &[1, 4],
            &[rows, 256],
            Some(policy.clone()),
        )
        .unwrap();
        let x = whole(&carrier);
        let result = ops::reduce_sum(&x).unwrap();
        assert_close(
            &numbers(&result),
            &numbers(&ops::reduce_sum(&reference).unwrap()),
        );
        let reports = policy.reports.lock().unwrap().clone();
        assert_eq!(reports.len(), 4, "one report per tile, not per piece");
        let last = reports.last().unwrap();
        assert_eq!((last.completed(), last.total()), (4, 4));
        assert_eq!(
            (
                last.staged_tiles(),
                last.staged_copies(),
                last.staged_slots()
            ),
            (4, 8, rows * columns),
            "capacity {depth_capacity}: two copies of half a tile each"
        );
        assert!(last.staged_peak() <= depth_capacity);
        policy.reports.lock().unwrap().clear();
        let wide = ops::reduce_sum_with(&x, DType::FLOAT64).unwrap();
        assert_close(
            &numbers(&wide),
            &numbers(&ops::reduce_sum_with(&reference, DType::FLOAT64).unwrap()),
        );
        let last = policy.reports.lock().unwrap().last().unwrap().clone();
        assert_eq!((last.staged_tiles(), last.staged_copies()), (4, 4));
        // A read failing in the second piece of the first tile publishes nothing; the retry
        // sums everything.
        Faults::arm(&faults.reads, 131_072 + 10);
        expect_err(
            ops::reduce_sum(&x),
            ErrorKind::Runtime,
            "injected read failure",
        );
        assert_eq!(carrier.version(), 0);
        assert_eq!(TiledEvictable::secondary_tiles(&carrier).unwrap().len(), 4);
        assert!(TiledEvictable::primary_tiles(&carrier).unwrap().is_empty());
        Faults::arm(&faults.reads, -1);
        assert_close(
            &numbers(&ops::reduce_sum(&x).unwrap()),
            &numbers(&ops::reduce_sum(&reference).unwrap()),
        );
    }
}

#[test]
fn a_tensor_within_the_capacity_is_copied_whole_in_one_call() {
    // All eight tiles fit (capacity 8, or no capacity): the seed tier is copied once, in
    // bulk, and the operation runs as one call; the tiles still stay on the secondary tier.
    let values = wavy(64, 64);
    let policy = Arc::new(Capacity::new(8));
    let carrier = on_disk(&values, &[1, 8], &[8, 1], Arc::clone(&policy));
    let result = ops::reduce_sum(&whole(&carrier)).unwrap();
    assert_close(
        &numbers(&result),
        &numbers(&ops::reduce_sum(&dense(&values, &[8, 8])).unwrap()),
    );
    let reports = policy.reports.lock().unwrap().clone();
    assert_eq!(reports.len(), 1);
    let report = &reports[0];
    assert_eq!(
        (report.completed(), report.total(), report.prefetch_depth()),
        (1, 1, 1)
    );
    assert_eq!((report.staged_tiles(), report.staged_slots()), (8, 64));
    assert_eq!(TiledEvictable::secondary_tiles(&carrier).unwrap().len(), 8);
    assert_eq!(carrier.version(), 0);
}

#[test]
fn resident_tiles_count_against_the_capacity() {
    let values = wavy(64, 61);
    let policy = Arc::new(Capacity::new(5));
    let carrier = on_disk(&values, &[1, 8], &[8, 1], Arc::clone(&policy));
    TiledEvictable::promote(&carrier, &set(&[&[0, 0], &[0, 5]])).unwrap();
    let result = ops::relu(&whole(&carrier)).unwrap();
    let expected: Vec<f64> = values.iter().map(|&v| f64::from(v.max(0.0))).collect();
    assert_close(&numbers(&result), &expected);
    let reports = policy.reports.lock().unwrap().clone();
    // Five tiles of capacity, two resident, one output block held until it is placed: two
    // items in flight; six tiles staged.
    let last = reports.last().unwrap();
    assert_eq!(last.prefetch_depth(), 2);
    assert_eq!(last.staged_tiles(), 6);
    assert_eq!(last.resident_slots(), 16);
    assert_eq!(TiledEvictable::primary_tiles(&carrier).unwrap().len(), 2);
}

#[test]
fn an_out_of_core_matmul_streams_the_left_operand() {
    let (l, r) = (wavy(96, 62), wavy(24, 63));
    // A left tile of 4 × 3 is staged as its span in the file (3 columns of the 8-row
    // tensor: 20 slots), and the two output blocks of 4 × 2 take four blocks while one
    // combines (32 slots): 7 tiles of 12 slots leave room for two items in flight.
    let policy = Arc::new(Capacity::new(7));
    let lhs = on_disk(&l, &[2, 4], &[4, 3], Arc::clone(&policy));
    let rhs = tiled(&r, &[1, 4], &[2, 3]);
    let result = ops::matmul(&whole(&lhs), &whole(&rhs)).unwrap();
    let reference = ops::matmul(&dense(&l, &[8, 12]), &dense(&r, &[2, 12])).unwrap();
    assert_close(&numbers(&result), &numbers(&reference));
    let reports = policy.reports.lock().unwrap().clone();
    assert_eq!(reports.len(), 8);
    assert_eq!(reports.last().unwrap().prefetch_depth(), 2);
    let peak = reports.iter().map(TileProgress::peak_slots).max().unwrap();
    assert!(
        (52..=84).contains(&peak),
        "peak {peak}: one staged tile and four blocks at least"
    );
}

#[test]
fn resident_tiles_are_read_in_place_without_staging() {
    // Rank 1 and rank 3 canonical tensors: still in their full primary tier, one call
    // computes the result; with every tile promoted into its own primary carrier, each tile
    // is read in place. Neither stages anything.
    for (grid, tile) in [(vec![4], vec![3]), (vec![2, 1, 2], vec![1, 3, 2])] {
        let size: usize = grid.iter().zip(&tile).map(|(g, t)| g * t).product();
        let tiles: usize = grid.iter().product();
        let values = wavy(size, 70);
        let expected: Vec<f64> = values.iter().map(|&v| f64::from(v.max(0.0))).collect();
        let policy = Arc::new(Capacity::new(100));
        let carrier = TiledEvictable::carrier(
            &cpu(&values),
            &empty_cpu(),
            &grid,
            &tile,
            Some(Arc::clone(&policy) as Arc<dyn ResidencyPolicy>),
        )
        .unwrap();
        assert_close(&numbers(&ops::relu(&whole(&carrier)).unwrap()), &expected);
        let reports = policy.reports.lock().unwrap().clone();
        assert_eq!((reports.len(), reports[0].total()), (1, 1), "one call");
        assert_eq!(reports[0].staged_tiles(), 0);
        let all = TiledEvictable::primary_tiles(&carrier).unwrap();
        // Evicted to a secondary tier of the primary's class, the tiles' copies are tensors of
        // the computing class already: read in place. Promoted back into their own primary
        // carriers, likewise.
        TiledEvictable::evict(&carrier, &all).unwrap();
        for _ in 0..2 {
            policy.reports.lock().unwrap().clear();
            assert_close(&numbers(&ops::relu(&whole(&carrier)).unwrap()), &expected);
            let reports = policy.reports.lock().unwrap().clone();
            assert_eq!(reports.len(), tiles, "one item per tile");
            assert_eq!(reports.last().unwrap().staged_tiles(), 0, "grid {grid:?}");
            TiledEvictable::promote(&carrier, &all).unwrap();
        }
    }
}

#[test]
fn the_whole_tensor_copy_and_the_tile_stream_reuse_their_staging_buffers() {
    // Within the capacity the whole seed tier is copied in one go: the first call allocates
    // the buffer, a repeated call reuses it from the carrier's staging pool.
    let values = wavy(64, 65);
    let expected = numbers(&ops::reduce_sum(&dense(&values, &[8, 8])).unwrap());
    let policy = Arc::new(Capacity::new(8));
    let carrier = on_disk(&values, &[1, 8], &[8, 1], Arc::clone(&policy));
    for call in 0..3 {
        let result = ops::reduce_sum(&whole(&carrier)).unwrap();
        assert_close(&numbers(&result), &expected);
        let report = policy.reports.lock().unwrap().last().unwrap().clone();
        assert_eq!(
            (report.total(), report.staged_slots()),
            (1, 64),
            "call {call}"
        );
        assert_eq!(
            report.allocated_buffers(),
            usize::from(call == 0),
            "call {call}: only the first call allocates its whole-tensor buffer"
        );
    }
    // Streamed (capacity 4 of 8 tiles): the pool hands buffers back, so however the calls'
    // tile transfers overlap (that depends on timing), no more buffers are ever made than
    // the capacity lets be staged at once, against 8 a call without the pool; the results do
    // not change.
    let policy = Arc::new(Capacity::new(4));
    let carrier = on_disk(&values, &[1, 8], &[8, 1], Arc::clone(&policy));
    let mut allocated = Vec::new();
    for _ in 0..3 {
        let result = ops::reduce_sum(&whole(&carrier)).unwrap();
        assert_close(&numbers(&result), &expected);
        let report = policy.reports.lock().unwrap().last().unwrap().clone();
        assert_eq!(report.total(), 8);
        assert!(report.staged_peak() <= 4, "{report:?}");
        allocated.push(report.allocated_buffers());
    }
    assert!(allocated[0] >= 1, "{allocated:?}");
    assert!(
        allocated.iter().sum::<usize>() <= 4,
        "three streamed calls made {allocated:?} buffers: repeated calls reuse the pool"
    );
    // A whole-tensor buffer kept by the pool is given up once the tensor streams: after a
    // promotion the same carrier streams, and a release leaves nothing behind.
    let policy = Arc::new(Capacity::new(8));
    let carrier = on_disk(&values, &[1, 8], &[8, 1], Arc::clone(&policy));
    ops::reduce_sum(&whole(&carrier)).unwrap();
    TiledEvictable::promote(&carrier, &set(&[&[0, 3]])).unwrap();
    let result = ops::reduce_sum(&whole(&carrier)).unwrap();
    assert_close(&numbers(&result), &expected);
    assert_eq!(policy.reports.lock().unwrap().last().unwrap().total(), 8);
    carrier.release().unwrap();
    assert!(carrier.is_released());
}
