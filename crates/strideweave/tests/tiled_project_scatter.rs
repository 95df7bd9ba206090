//! TiledEvictable, phase 2a (docs/tiers.md, project and scatter): `project` and `scatter` — the
//! compact map, tile-footprint compatibility, destinations, tile states and versions, the
//! completion handles, gradients (analytic and finite-difference, through compositions) and failure
//! atomicity under injected tier faults. Item 22 of docs/operations.md, Worked
//! examples, is the first test.

mod common;

use std::slice;
use std::sync::Arc;
use std::thread;

use common::tiled::{
    counting, expect_err, floats_of, generic, tile_states, tiled, whole, Faults, Faulty,
};
use common::Flaky;
use strideweave::autograd::{grad, no_grad};
use strideweave::carrier::Carrier;
use strideweave::carriers::extension::ProviderCompletion;
use strideweave::carriers::{
    Generic, ScatterReduction, TileLocation, TileSelection, TileSet, TiledEvictable,
};
use strideweave::{ops, DType, ErrorKind, Layout, Shape, Tensor, Value};

// ---------------------------------------------------------------------------------------------
// Helpers

fn selection(per_axis: &[&[usize]]) -> TileSelection {
    TileSelection::new(per_axis.iter().map(|axis| axis.to_vec()).collect()).unwrap()
}

fn project(tensor: &Tensor, per_axis: &[&[usize]]) -> Tensor {
    TiledEvictable::project(tensor, &selection(per_axis), None)
        .unwrap()
        .wait()
        .unwrap()
}

fn scatter(
    compact: &Tensor,
    template: &Tensor,
    per_axis: &[&[usize]],
    reduction: ScatterReduction,
) -> Tensor {
    TiledEvictable::scatter(compact, template, &selection(per_axis), reduction)
        .unwrap()
        .wait()
        .unwrap()
}

/// A tensor over a fresh Generic carrier holding `values` with exactly `like`'s layout (a
/// cotangent for `like`).
fn cotangent(values: &[f64], like: &Tensor) -> Tensor {
    Tensor::new(generic(values), 0, like.layout().clone()).unwrap()
}

fn layout(written: &str) -> Layout {
    written.parse().unwrap()
}

const PRIMARY: TileLocation = TileLocation::Primary;
const SECONDARY: TileLocation = TileLocation::Secondary;
const INVALID: TileLocation = TileLocation::Invalid;
const IMPLICIT: TileLocation = TileLocation::Implicit;

// ---------------------------------------------------------------------------------------------
// project

#[test]
fn scenario_22_project_then_replace_scatter_round_trips() {
    // grid (4,), tile (2,), values 0..7: project [2, 0] → [4, 5, 0, 1].
    let carrier = tiled(&counting(8), &[4], &[2]);
    let x = whole(&carrier, &[8]);
    let handle = TiledEvictable::project(&x, &selection(&[&[2, 0]]), None).unwrap();
    assert!(handle.done());
    let compact = handle.wait().unwrap();
    assert!(
        handle.wait().unwrap().same_as(&compact),
        "wait returns one object"
    );
    assert_eq!(floats_of(&compact), [4.0, 5.0, 0.0, 1.0]);
    assert_eq!(compact.shape(), &Shape::flat(&[4]).unwrap());
    assert!(compact.layout().is_column_major() && compact.offset() == 0);
    // The default destination is a fresh carrier of the primary tier's class.
    let primary = TiledEvictable::primary(&carrier).unwrap();
    assert_eq!(compact.carrier().class(), primary.class());
    assert!(!compact.carrier().same_as(&primary));

    // Replace-scatter, then project the same selection → the same values; other tiles invalid.
    let scattered = scatter(&compact, &x, &[&[2, 0]], ScatterReduction::Replace);
    assert!(!scattered.carrier().same_as(&carrier));
    assert_eq!(
        tile_states(scattered.carrier()),
        [
            (PRIMARY, true),
            (INVALID, false),
            (PRIMARY, true),
            (INVALID, false)
        ]
    );
    assert_eq!(scattered.carrier().version(), 1);
    assert_eq!(scattered.layout(), x.layout());
    let again = project(&scattered, &[&[2, 0]]);
    assert_eq!(floats_of(&again), [4.0, 5.0, 0.0, 1.0]);
    expect_err(scattered.carrier().get(2), ErrorKind::Runtime, "tile (1)");
    // The template was only read.
    assert_eq!(carrier.version(), 0);
    assert_eq!(tile_states(&carrier), vec![(PRIMARY, false); 4]);
}

#[test]
fn project_maps_compact_coordinates_to_the_selected_tiles_without_moving_residency() {
    // grid (3, 2) of (2, 3) tiles: logical (6, 6), slot = x + 6y holds x + 6y.
    let carrier = tiled(&counting(36), &[3, 2], &[2, 3]);
    TiledEvictable::evict(&carrier, &TileSet::new([vec![2, 1]]).unwrap()).unwrap();
    carrier.set(0, Value::Float(-1.0)).unwrap(); // tile (0, 0) dirty, version 1
    let before = (tile_states(&carrier), carrier.version());
    let x = whole(&carrier, &[6, 6]);

    let compact = project(&x, &[&[2, 0], &[1]]);
    assert_eq!(compact.shape(), &Shape::flat(&[4, 3]).unwrap());
    let per_axis = [vec![2, 0], vec![1]];
    for c1 in 0..3 {
        for c0 in 0..4 {
            let l0 = per_axis[0][c0 / 2] * 2 + c0 % 2;
            let l1 = per_axis[1][c1 / 3] * 3 + c1 % 3;
            let expected = (l0 + 6 * l1) as f64;
            assert_eq!(
                compact.get_leaves(&[c0, c1]).unwrap(),
                Value::Float(expected),
                "compact ({c0}, {c1}) ↦ logical ({l0}, {l1})"
            );
        }
    }
    // Read through the secondary copy of tile (2, 1); nothing moved, nothing was written.
    assert_eq!(tile_states(&carrier), before.0);
    assert_eq!(carrier.version(), before.1);
    assert_eq!(
        TiledEvictable::tile_state(&carrier, &[2, 1])
            .unwrap()
            .location(),
        SECONDARY
    );

    // Implicit tiles give zeros.
    let zeros = TiledEvictable::zeros(&generic(&[]), &generic(&[]), &[2], &[2], None).unwrap();
    zeros.set(3, Value::Float(7.0)).unwrap();
    let compact = project(&whole(&zeros, &[4]), &[&[0, 1]]);
    assert_eq!(floats_of(&compact), [0.0, 0.0, 0.0, 7.0]);
    assert_eq!(tile_states(&zeros), [(IMPLICIT, false), (PRIMARY, true)]);
}

#[test]
fn project_rejects_bad_input_before_anything_changes() {
    let carrier = tiled(&counting(8), &[4], &[2]);
    let x = whole(&carrier, &[8]);
    // Not a TiledEvictable tensor.
    expect_err(
        TiledEvictable::project(
            &whole(&generic(&counting(8)), &[8]),
            &selection(&[&[0]]),
            None,
        ),
        ErrorKind::Type,
        "expected a TiledEvictable carrier, got Generic",
    );
    // A selection of another rank, a tile index outside the grid.
    expect_err(
        TiledEvictable::project(&x, &selection(&[&[0], &[0]]), None),
        ErrorKind::Value,
        "rank 2",
    );
    expect_err(
        TiledEvictable::project(&x, &selection(&[&[1, 4]]), None),
        ErrorKind::Index,
        "axis 0 selects tile index 4",
    );
    // An invalid selected tile is named.
    let invalid = TiledEvictable::carrier(&generic(&[]), &generic(&[]), &[4], &[2], None).unwrap();
    expect_err(
        TiledEvictable::project(&whole(&invalid, &[8]), &selection(&[&[1]]), None),
        ErrorKind::Runtime,
        "tile (1): it is invalid",
    );
    assert_eq!(tile_states(&carrier), vec![(PRIMARY, false); 4]);
    assert_eq!(carrier.version(), 0);
    // A released carrier.
    carrier.release().unwrap();
    expect_err(
        TiledEvictable::project(&x, &selection(&[&[0]]), None),
        ErrorKind::Runtime,
        "released",
    );
}

#[test]
fn full_tensor_apis_demand_tile_footprint_compatibility() {
    // Logical (4, 4) in 2×2 tiles; slot = x + 4y holds x + 4y.
    let carrier = tiled(&counting(16), &[2, 2], &[2, 2]);
    let canonical = whole(&carrier, &[4, 4]);
    TiledEvictable::check_footprint(&canonical).unwrap();

    // A permutation inside every tile (each tile transposed) is compatible: x = lx + 2tx,
    // y = ly + 2ty ↦ slot 2tx + ly + 8ty + 4lx.
    let within = Tensor::new(carrier.clone(), 0, layout("((2,2),(2,2)):((4,2),(1,8))")).unwrap();
    TiledEvictable::check_footprint(&within).unwrap();
    let compact = project(&within, &[&[1], &[0]]);
    for c1 in 0..2 {
        for c0 in 0..2 {
            let slot = 2 + c1 + 4 * c0;
            assert_eq!(
                compact.get_leaves(&[c0, c1]).unwrap(),
                Value::Float(slot as f64)
            );
        }
    }

    // Transposing the whole tensor remaps tiles (0, 1) and (1, 0).
    let transposed = canonical.permute(&[1, 0]).unwrap();
    for result in [
        TiledEvictable::check_footprint(&transposed),
        TiledEvictable::project(&transposed, &selection(&[&[0], &[0]]), None).map(|_| ()),
        TiledEvictable::scatter(
            &whole(&generic(&counting(4)), &[2, 2]),
            &transposed,
            &selection(&[&[0], &[0]]),
            ScatterReduction::Replace,
        )
        .map(|_| ()),
    ] {
        expect_err(result, ErrorKind::Value, "spans or remaps");
    }
    // A flat view does not have one mode per grid axis.
    expect_err(
        TiledEvictable::check_footprint(&whole(&carrier, &[16])),
        ErrorKind::Value,
        "top-level modes cover the TiledEvictable's logical shape [4, 4]",
    );

    // One axis: a layout spanning tiles, and one aliasing a slot.
    let line = tiled(&counting(4), &[2], &[2]);
    let spanning = Tensor::new(line.clone(), 0, layout("((2,2)):((2,1))")).unwrap();
    expect_err(
        TiledEvictable::check_footprint(&spanning),
        ErrorKind::Value,
        "logical coordinate (1) of tile (0) maps to slot 2 of carrier tile (1)",
    );
    let single = tiled(&counting(2), &[1], &[2]);
    let aliasing = Tensor::new(single, 0, layout("2:0")).unwrap();
    expect_err(
        TiledEvictable::check_footprint(&aliasing),
        ErrorKind::Value,
        "aliases slot 0",
    );
    // Checked before any state change.
    assert_eq!(carrier.version(), 0);
    assert_eq!(tile_states(&carrier), vec![(PRIMARY, false); 4]);
}

#[test]
fn project_into_a_given_destination_publishes_once() {
    let carrier = tiled(&counting(8), &[4], &[2]);
    let x = whole(&carrier, &[8]);
    let pick = selection(&[&[3, 1]]);

    let destination = generic(&[9.0; 6]);
    let compact = TiledEvictable::project(&x, &pick, Some(&destination))
        .unwrap()
        .wait()
        .unwrap();
    assert!(compact.carrier().same_as(&destination));
    assert_eq!(floats_of(&compact), [6.0, 7.0, 2.0, 3.0]);
    assert_eq!(destination.get(4).unwrap(), Value::Float(9.0));
    assert_eq!(destination.version(), 1);

    // An empty growable destination grows to exactly the compact size.
    let growable = Flaky::<()>::growable();
    let grown = TiledEvictable::project(&x, &pick, Some(&growable))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(growable.size(), 4);
    assert_eq!(floats_of(&grown), [6.0, 7.0, 2.0, 3.0]);

    // The move-like checks, each before anything changes.
    let attempt = |destination: &Carrier| TiledEvictable::project(&x, &pick, Some(destination));
    expect_err(attempt(&carrier), ErrorKind::Value, "its own carrier");
    expect_err(
        attempt(&generic(&[0.0; 3])),
        ErrorKind::Value,
        "has 3 slots but the projection needs 4",
    );
    let immutable = Generic::carrier(&[Value::Float(0.0); 4], DType::FLOAT32, false).unwrap();
    expect_err(attempt(&immutable), ErrorKind::Runtime, "immutable");
    let integers = Generic::carrier(&[Value::Int(0); 4], DType::INT32, true).unwrap();
    expect_err(attempt(&integers), ErrorKind::Type, "Int32");
    let tier = TiledEvictable::secondary(&carrier).unwrap();
    expect_err(attempt(&tier), ErrorKind::Runtime, "owned");
    let released = generic(&[0.0; 4]);
    released.release().unwrap();
    expect_err(attempt(&released), ErrorKind::Runtime, "released");
    assert_eq!(destination.version(), 1);
    assert_eq!(carrier.version(), 0);
}

#[test]
fn the_handles_are_blocking_provider_completions() {
    fn outcome(completion: &dyn ProviderCompletion<Tensor>) -> Tensor {
        assert!(completion.done());
        completion.wait().unwrap()
    }
    let carrier = tiled(&counting(8), &[4], &[2]);
    let x = whole(&carrier, &[8]);
    let projection = TiledEvictable::project(&x, &selection(&[&[1]]), None).unwrap();
    let compact = outcome(&projection);
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let handle = projection.clone();
            thread::spawn(move || handle.wait().unwrap())
        })
        .collect();
    for waiter in waiters {
        assert!(waiter.join().unwrap().same_as(&compact));
    }
    let scattering =
        TiledEvictable::scatter(&compact, &x, &selection(&[&[1]]), ScatterReduction::Add).unwrap();
    let scattered = outcome(&scattering);
    assert!(scattering.wait().unwrap().same_as(&scattered));
    // A failure is the same error on every wait.
    let faults = Faults::new();
    let fragile = TiledEvictable::carrier(
        &Faulty::carrier(&faults, &counting(8)),
        &Faulty::carrier(&faults, &[]),
        &[4],
        &[2],
        None,
    )
    .unwrap();
    Faults::arm(&faults.reads, 0);
    let failed =
        TiledEvictable::project(&whole(&fragile, &[8]), &selection(&[&[1]]), None).unwrap();
    assert!(failed.done());
    let first = failed.wait().unwrap_err();
    assert_eq!(failed.wait().unwrap_err().to_string(), first.to_string());
}

// ---------------------------------------------------------------------------------------------
// scatter

#[test]
fn scatter_fills_selected_tiles_of_a_fresh_tiled_evictable() {
    // Logical (4, 4) in 2×2 tiles; slot = x + 4y holds x + 4y. Tile (1, 1) is evicted.
    let carrier = tiled(&counting(16), &[2, 2], &[2, 2]);
    TiledEvictable::evict(&carrier, &TileSet::new([vec![1, 1]]).unwrap()).unwrap();
    let before = tile_states(&carrier);
    let template = whole(&carrier, &[4, 4]);
    // Tiles (1, 0) and (1, 1): compact (2, 4), compact (c0, c1) ↦ logical (2 + c0, c1).
    let compact_values: Vec<f64> = (0..8).map(|i| 100.0 + i as f64).collect();
    let compact = whole(&generic(&compact_values), &[2, 4]);

    for reduction in [ScatterReduction::Replace, ScatterReduction::Add] {
        let result = scatter(&compact, &template, &[&[1], &[0, 1]], reduction);
        let fresh = result.carrier();
        assert!(!fresh.same_as(&carrier));
        assert_eq!(fresh.class(), carrier.class());
        assert_eq!(fresh.version(), 1, "one publication");
        assert_eq!(TiledEvictable::grid_shape(fresh).unwrap(), [2, 2]);
        assert_eq!(TiledEvictable::tile_shape(fresh).unwrap(), [2, 2]);
        for (mine, theirs) in [
            (
                TiledEvictable::primary(fresh).unwrap(),
                TiledEvictable::primary(&carrier).unwrap(),
            ),
            (
                TiledEvictable::secondary(fresh).unwrap(),
                TiledEvictable::secondary(&carrier).unwrap(),
            ),
        ] {
            assert_eq!(
                mine.class(),
                theirs.class(),
                "tier classes are the template's"
            );
            assert!(!mine.same_as(&theirs), "fresh tiers");
        }
        // Tiles in canonical grid order: (0,0), (1,0), (0,1), (1,1).
        assert_eq!(
            tile_states(fresh),
            [
                (INVALID, false),
                (PRIMARY, true),
                (INVALID, false),
                (PRIMARY, true)
            ]
        );
        for y in 0..4 {
            for x in 2..4 {
                let from_compact = compact_values[(x - 2) + 2 * y];
                let expected = match reduction {
                    ScatterReduction::Replace => from_compact,
                    ScatterReduction::Add => from_compact + (x + 4 * y) as f64,
                };
                assert_eq!(
                    result.get_leaves(&[x, y]).unwrap(),
                    Value::Float(expected),
                    "{reduction} at ({x}, {y})"
                );
            }
        }
        // The template was only read.
        assert_eq!(tile_states(&carrier), before);
        assert_eq!(carrier.version(), 0);
    }

    // Adding into an implicit template tile adds to zero.
    let zeros = TiledEvictable::zeros(&generic(&[]), &generic(&[]), &[2], &[2], None).unwrap();
    let added = scatter(
        &whole(&generic(&[1.5, 2.5]), &[2]),
        &whole(&zeros, &[4]),
        &[&[1]],
        ScatterReduction::Add,
    );
    assert_eq!(added.get_leaves(&[3]).unwrap(), Value::Float(2.5));
    assert_eq!(
        tile_states(added.carrier()),
        [(INVALID, false), (PRIMARY, true)]
    );
}

#[test]
fn scatter_rejects_bad_input_before_anything_changes() {
    let carrier = tiled(&counting(8), &[4], &[2]);
    let template = whole(&carrier, &[8]);
    let compact = whole(&generic(&[1.0, 2.0]), &[2]);
    let one = selection(&[&[1]]);
    let attempt = |compact: &Tensor, template: &Tensor, reduction| {
        TiledEvictable::scatter(compact, template, &one, reduction)
    };
    expect_err(
        attempt(
            &compact,
            &whole(&generic(&counting(8)), &[8]),
            ScatterReduction::Replace,
        ),
        ErrorKind::Type,
        "expected a TiledEvictable carrier",
    );
    expect_err(
        attempt(
            &whole(&generic(&[1.0; 4]), &[4]),
            &template,
            ScatterReduction::Replace,
        ),
        ErrorKind::Value,
        "compact shape [2]",
    );
    let integers = Tensor::compact(
        Generic::carrier(&[Value::Int(1), Value::Int(2)], DType::INT32, true).unwrap(),
        Shape::flat(&[2]).unwrap(),
    )
    .unwrap();
    expect_err(
        attempt(&integers, &template, ScatterReduction::Replace),
        ErrorKind::Type,
        "template's dtype Float32",
    );
    expect_err(
        TiledEvictable::scatter(
            &compact,
            &template,
            &selection(&[&[7]]),
            ScatterReduction::Add,
        ),
        ErrorKind::Index,
        "tile index 7",
    );
    // Add needs valid template tiles; Replace does not read them.
    let invalid = TiledEvictable::carrier(&generic(&[]), &generic(&[]), &[4], &[2], None).unwrap();
    let invalid_template = whole(&invalid, &[8]);
    expect_err(
        attempt(&compact, &invalid_template, ScatterReduction::Add),
        ErrorKind::Runtime,
        "tile (1): the template's tile is invalid",
    );
    let replaced = attempt(&compact, &invalid_template, ScatterReduction::Replace)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(floats_of(&project(&replaced, &[&[1]])), [1.0, 2.0]);
    // A released compact.
    let gone = whole(&generic(&[1.0, 2.0]), &[2]);
    gone.carrier().release().unwrap();
    expect_err(
        attempt(&gone, &template, ScatterReduction::Replace),
        ErrorKind::Runtime,
        "released",
    );
    assert_eq!(carrier.version(), 0);
    assert_eq!(tile_states(&carrier), vec![(PRIMARY, false); 4]);
}

#[test]
fn scatter_reductions_parse_from_their_names() {
    assert_eq!(
        "replace".parse::<ScatterReduction>().unwrap(),
        ScatterReduction::Replace
    );
    assert_eq!(
        "add".parse::<ScatterReduction>().unwrap(),
        ScatterReduction::Add
    );
    expect_err(
        "max".parse::<ScatterReduction>(),
        ErrorKind::Value,
        "\"replace\" or \"add\", got \"max\"",
    );
    assert_eq!(ScatterReduction::default().to_string(), "replace");
}

// ---------------------------------------------------------------------------------------------
// Gradients

#[test]
fn project_gradient_scatters_the_cotangent_into_an_implicit_zero_tiled_evictable() {
    let carrier = tiled(&counting(8), &[4], &[2]);
    let x = whole(&carrier, &[8]);
    x.set_requires_grad(true).unwrap();
    let y = project(&x, &[&[2, 0]]);
    let node = y.grad_fn().expect("a gather node");
    assert_eq!(node.name(), "tiled.project");
    assert_eq!(node.inputs().len(), 1);

    let c = cotangent(&[1.0, 2.0, 3.0, 4.0], &y);
    let gx = grad(
        slice::from_ref(&y),
        slice::from_ref(&x),
        &[Some(c.clone())],
        true,
    )
    .unwrap()[0]
        .clone()
        .expect("x is reachable");
    assert_eq!(
        gx.carrier().class(),
        carrier.class(),
        "the leaf's exact class"
    );
    assert_eq!(gx.layout(), x.layout());
    assert_eq!(floats_of(&gx), [3.0, 4.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0]);
    assert_eq!(
        TiledEvictable::implicit_tiles(gx.carrier()).unwrap(),
        TileSet::new([vec![1], vec![3]]).unwrap(),
        "unselected tiles stay implicit zeros"
    );
    assert!(x.grad().is_none(), "grad never touches .grad");

    // Overlapping selections sum.
    let z = project(&x, &[&[1, 2]]);
    let d = cotangent(&[10.0, 20.0, 30.0, 40.0], &z);
    let both = grad(
        &[y.clone(), z.clone()],
        slice::from_ref(&x),
        &[Some(c.clone()), Some(d)],
        true,
    )
    .unwrap();
    let summed = both[0].clone().unwrap();
    assert_eq!(
        floats_of(&summed),
        [3.0, 4.0, 10.0, 20.0, 31.0, 42.0, 0.0, 0.0]
    );

    // backward accumulates into the TiledEvictable leaf's .grad, on the leaf's class.
    y.backward(Some(&c), true).unwrap();
    y.backward(Some(&c), false).unwrap();
    let accumulated = x.grad().expect("a leaf gradient");
    assert_eq!(accumulated.carrier().class(), carrier.class());
    assert_eq!(
        floats_of(&accumulated),
        [6.0, 8.0, 0.0, 0.0, 2.0, 4.0, 0.0, 0.0]
    );

    // Nothing is recorded without a differentiating input or with recording off.
    let plain = whole(&tiled(&counting(8), &[4], &[2]), &[8]);
    assert!(project(&plain, &[&[0]]).grad_fn().is_none());
    let _off = no_grad();
    assert!(project(&x, &[&[0]]).grad_fn().is_none());
}

#[test]
fn scatter_gradients_follow_the_reduction() {
    let pick: &[&[usize]] = &[&[1, 3]];
    for reduction in [ScatterReduction::Replace, ScatterReduction::Add] {
        let carrier = tiled(&counting(8), &[4], &[2]);
        let template = whole(&carrier, &[8]);
        let compact = whole(&generic(&[10.0, 11.0, 12.0, 13.0]), &[4]);
        template.set_requires_grad(true).unwrap();
        compact.set_requires_grad(true).unwrap();
        let out = scatter(&compact, &template, pick, reduction);
        assert_eq!(out.grad_fn().unwrap().name(), "tiled.scatter");
        let g = cotangent(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &out);
        let grads = grad(
            &[out],
            &[compact.clone(), template.clone()],
            &[Some(g)],
            false,
        )
        .unwrap();
        let (gc, gt) = (grads[0].clone().unwrap(), grads[1].clone().unwrap());
        // compact ← gather(g) over tiles 1 and 3.
        assert_eq!(floats_of(&gc), [3.0, 4.0, 7.0, 8.0]);
        assert_eq!(gc.carrier().class(), compact.carrier().class());
        // template ← g, except on replaced tiles.
        let expected = match reduction {
            ScatterReduction::Replace => [1.0, 2.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0],
            ScatterReduction::Add => [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        };
        assert_eq!(floats_of(&gt), expected, "{reduction}");
        assert_eq!(gt.carrier().class(), carrier.class());
    }
}

/// `F = Σ w ⊙ y ⊙ y` with `y = project(scatter(compact, template, s1, reduction), s2)` over
/// logical (6, 4) in 2×2 tiles; returns the compact leaf, the template leaf and `y ⊙ y`.
fn composed(
    compact_values: &[f64],
    template_values: &[f64],
    reduction: ScatterReduction,
) -> (Tensor, Tensor, Tensor) {
    let template = whole(&tiled(template_values, &[3, 2], &[2, 2]), &[6, 4]);
    let compact = whole(&generic(compact_values), &[4, 2]);
    template.set_requires_grad(true).unwrap();
    compact.set_requires_grad(true).unwrap();
    // s1: tiles (2, 1) and (0, 1); s2: tile (0, 1) of those.
    let scattered = scatter(&compact, &template, &[&[2, 0], &[1]], reduction);
    let y = project(&scattered, &[&[0], &[1]]);
    let squared = ops::elementwise_mul(&y, &y).unwrap();
    (compact, template, squared)
}

#[test]
fn gradients_through_project_of_scatter_match_finite_differences() {
    let weights = [1.0, -2.0, 0.5, 3.0];
    let compact_values: Vec<f64> = (0..8).map(|i| 0.25 * i as f64 - 1.0).collect();
    let template_values: Vec<f64> = (0..24).map(|i| 0.1 * i as f64 - 1.2).collect();
    let objective = |c: &[f64], t: &[f64], reduction| -> f64 {
        let _off = no_grad();
        let (_, _, squared) = composed(c, t, reduction);
        floats_of(&squared)
            .iter()
            .zip(weights)
            .map(|(z, w)| z * w)
            .sum()
    };
    let h = 1.0 / 64.0;
    for reduction in [ScatterReduction::Replace, ScatterReduction::Add] {
        let (compact, template, squared) = composed(&compact_values, &template_values, reduction);
        let w = cotangent(&weights, &squared);
        let grads = grad(&[squared], &[compact, template], &[Some(w)], false).unwrap();
        let analytic_c = floats_of(grads[0].as_ref().unwrap());
        let analytic_t = floats_of(grads[1].as_ref().unwrap());
        for (i, analytic) in analytic_c.iter().enumerate() {
            let (mut up, mut down) = (compact_values.clone(), compact_values.clone());
            up[i] += h;
            down[i] -= h;
            let numeric = (objective(&up, &template_values, reduction)
                - objective(&down, &template_values, reduction))
                / (2.0 * h);
            assert!(
                (numeric - analytic).abs() < 1e-3,
                "{reduction}: d/dcompact[{i}] analytic {analytic}, numeric {numeric}"
            );
        }
        let mut nonzero = 0;
        for (i, analytic) in analytic_t.iter().enumerate() {
            let (mut up, mut down) = (template_values.clone(), template_values.clone());
            up[i] += h;
            down[i] -= h;
            let numeric = (objective(&compact_values, &up, reduction)
                - objective(&compact_values, &down, reduction))
                / (2.0 * h);
            assert!(
                (numeric - analytic).abs() < 1e-3,
                "{reduction}: d/dtemplate[{i}] analytic {analytic}, numeric {numeric}"
            );
            nonzero += usize::from(*analytic != 0.0);
        }
        // Replace cuts the template off the selected tiles; Add passes the 4 projected slots.
        let expected = match reduction {
            ScatterReduction::Replace => 0,
            ScatterReduction::Add => 4,
        };
        assert_eq!(nonzero, expected, "{reduction}");
    }
}

#[test]
fn gradients_through_scatter_of_project_reach_the_tiled_source() {
    let source = tiled(&counting(8), &[4], &[2]);
    let x = whole(&source, &[8]);
    let template = whole(&tiled(&[0.5; 8], &[4], &[2]), &[8]);
    x.set_requires_grad(true).unwrap();
    template.set_requires_grad(true).unwrap();
    let pick: &[&[usize]] = &[&[3, 0]];
    let z = scatter(
        &project(&x, pick),
        &template,
        pick,
        ScatterReduction::Replace,
    );
    // z = x on tiles 3 and 0; those are the only valid tiles of z.
    assert_eq!(floats_of(&project(&z, pick)), [6.0, 7.0, 0.0, 1.0]);
    let g = cotangent(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &z);
    let grads = grad(&[z], &[x.clone(), template.clone()], &[Some(g)], false).unwrap();
    let (gx, gt) = (grads[0].clone().unwrap(), grads[1].clone().unwrap());
    assert_eq!(floats_of(&gx), [1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 7.0, 8.0]);
    assert_eq!(floats_of(&gt), [0.0, 0.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0]);
    assert_eq!(gx.carrier().class(), source.class());
}

// ---------------------------------------------------------------------------------------------
// Failure atomicity

/// A TiledEvictable over Faulty tiers (grid (4,), tile (2,), values 0..7) with tile 1 evicted
/// into an own secondary copy.
fn fragile(faults: &Arc<Faults>) -> Carrier {
    let carrier = TiledEvictable::carrier(
        &Faulty::carrier(faults, &counting(8)),
        &Faulty::carrier(faults, &[]),
        &[4],
        &[2],
        None,
    )
    .unwrap();
    TiledEvictable::evict(&carrier, &TileSet::new([vec![1]]).unwrap()).unwrap();
    carrier
}

#[test]
fn a_failing_tier_read_or_allocation_in_project_publishes_nothing() {
    let faults = Faults::new();
    let carrier = fragile(&faults);
    let x = whole(&carrier, &[8]);
    let pick = selection(&[&[0, 1, 3]]);
    let snapshot = || (tile_states(&carrier), carrier.version(), faults.live());
    let before = snapshot();

    // A read fault part way through the gather (the third read).
    Faults::arm(&faults.reads, 2);
    let failed = TiledEvictable::project(&x, &pick, None).unwrap();
    expect_err(failed.wait(), ErrorKind::Runtime, "injected read failure");
    assert_eq!(snapshot(), before);
    // ... into a given destination, which keeps its values and version.
    let destination = generic(&[9.0; 6]);
    Faults::arm(&faults.reads, 4);
    let failed = TiledEvictable::project(&x, &pick, Some(&destination)).unwrap();
    expect_err(failed.wait(), ErrorKind::Runtime, "injected read failure");
    assert_eq!(floats_of(&whole(&destination, &[6])), [9.0; 6]);
    assert_eq!(destination.version(), 0);
    assert_eq!(snapshot(), before);

    // The primary factory failing to make the default destination.
    Faults::arm(&faults.allocations, 0);
    let failed = TiledEvictable::project(&x, &pick, None).unwrap();
    expect_err(
        failed.wait(),
        ErrorKind::Runtime,
        "injected allocation failure",
    );
    assert_eq!(snapshot(), before);

    // A destination write failing part way: the written slots get their values back.
    let other = Faults::new();
    let destination = Faulty::carrier(&other, &[9.0; 6]);
    Faults::arm(&other.writes, 2);
    let failed = TiledEvictable::project(&x, &pick, Some(&destination)).unwrap();
    expect_err(failed.wait(), ErrorKind::Runtime, "injected write failure");
    assert_eq!(floats_of(&whole(&destination, &[6])), [9.0; 6]);
    assert_eq!(destination.version(), 0);

    // Disarmed, the same projection succeeds.
    let compact = TiledEvictable::project(&x, &pick, None)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(floats_of(&compact), [0.0, 1.0, 2.0, 3.0, 6.0, 7.0]);
    assert_eq!(
        faults.live(),
        before.2 + 1,
        "only the published compact carrier"
    );
}

#[test]
fn a_failing_tier_read_or_allocation_in_scatter_publishes_nothing() {
    let faults = Faults::new();
    let carrier = fragile(&faults);
    let template = whole(&carrier, &[8]);
    let compact = whole(&generic(&[1.0, 1.0, 1.0, 1.0]), &[4]);
    let pick = selection(&[&[1, 2]]);
    let snapshot = || (tile_states(&carrier), carrier.version(), faults.live());
    let before = snapshot();
    let attempt = |reduction| TiledEvictable::scatter(&compact, &template, &pick, reduction);

    // Add reads the template: a read fault on its secondary copy of tile 1.
    Faults::arm(&faults.reads, 1);
    expect_err(
        attempt(ScatterReduction::Add).unwrap().wait(),
        ErrorKind::Runtime,
        "injected read failure",
    );
    assert_eq!(snapshot(), before);

    // The fresh TiledEvictable's tiers (allocations 1 and 2), then its tile copies (3, 4):
    // every failure point leaves no carrier of the family behind.
    for budget in [0, 1, 2, 3] {
        Faults::arm(&faults.allocations, budget);
        expect_err(
            attempt(ScatterReduction::Replace).unwrap().wait(),
            ErrorKind::Runtime,
            "injected allocation failure",
        );
        assert_eq!(snapshot(), before, "allocation budget {budget}");
    }

    // Disarmed, the same scatter succeeds: two fresh tiers and two tile copies.
    let added = attempt(ScatterReduction::Add).unwrap().wait().unwrap();
    assert_eq!(faults.live(), before.2 + 4);
    assert_eq!(snapshot().0, before.0);
    assert_eq!(
        floats_of(&project(&added, &[&[1, 2]])),
        [3.0, 4.0, 5.0, 6.0]
    );
}

// ---------------------------------------------------------------------------------------------
// Brute force over a 3-axis geometry, and gradients through a permuted layout

#[test]
fn project_and_scatter_agree_with_the_compact_map_by_brute_force() {
    // grid (2, 3, 2) of (1, 2, 3) tiles: logical (2, 6, 6), tile edges on every axis.
    let (grid, tile) = ([2, 3, 2], [1, 2, 3]);
    let logical = [2, 6, 6];
    let size: usize = logical.iter().product();
    let carrier = tiled(&counting(size), &grid, &tile);
    let x = whole(&carrier, &logical);
    let selections: [&[&[usize]]; 4] = [
        &[&[0, 1], &[0, 1, 2], &[0, 1]],
        &[&[1], &[2, 0], &[1]],
        &[&[1, 0], &[1], &[1, 0]],
        &[&[0], &[2], &[0]],
    ];
    for per_axis in selections {
        let compact = project(&x, per_axis);
        let extents: Vec<usize> = per_axis
            .iter()
            .zip(tile)
            .map(|(indices, t)| indices.len() * t)
            .collect();
        assert_eq!(compact.shape(), &Shape::flat(&extents).unwrap());
        let values = floats_of(&compact);
        for (ordinal, value) in values.iter().enumerate() {
            let mut rest = ordinal;
            let mut slot = 0;
            let mut stride = 1;
            for axis in 0..3 {
                let c = rest % extents[axis];
                rest /= extents[axis];
                let l = per_axis[axis][c / tile[axis]] * tile[axis] + c % tile[axis];
                slot += l * stride;
                stride *= logical[axis];
            }
            assert_eq!(
                *value, slot as f64,
                "{per_axis:?}: compact ordinal {ordinal}"
            );
        }
        // project ∘ replace-scatter is the identity on the compact.
        let negated: Vec<f64> = values.iter().map(|v| -v).collect();
        let written = whole(&generic(&negated), &extents);
        let scattered = scatter(&written, &x, per_axis, ScatterReduction::Replace);
        assert_eq!(floats_of(&project(&scattered, per_axis)), negated);
        let selected = selection(per_axis).tile_set();
        assert_eq!(
            TiledEvictable::invalid_tiles(scattered.carrier())
                .unwrap()
                .coordinates()
                .len(),
            12 - selected.coordinates().len()
        );
        assert_eq!(
            TiledEvictable::dirty_tiles(scattered.carrier()).unwrap(),
            selected
        );
    }
}

#[test]
fn gradients_follow_a_within_tile_permuted_layout() {
    // Logical (4, 4) in 2×2 tiles, every tile transposed in the layout.
    let carrier = tiled(&counting(16), &[2, 2], &[2, 2]);
    let x = Tensor::new(carrier, 0, layout("((2,2),(2,2)):((4,2),(1,8))")).unwrap();
    x.set_requires_grad(true).unwrap();
    let y = project(&x, &[&[1], &[0]]);
    let c = cotangent(&[1.0, 2.0, 3.0, 4.0], &y);
    let gx = grad(slice::from_ref(&y), slice::from_ref(&x), &[Some(c)], false).unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(
        gx.layout(),
        x.layout(),
        "the leaf's injective layout is kept"
    );
    // By logical coordinate: the cotangent lands on tile (1, 0), i.e. x ∈ {2, 3}, y ∈ {0, 1}.
    for yy in 0..4 {
        for xx in 0..4 {
            let expected = if xx >= 2 && yy < 2 {
                (1 + (xx - 2) + 2 * yy) as f64
            } else {
                0.0
            };
            assert_eq!(
                gx.get(&(xx, yy).into()).unwrap(),
                Value::Float(expected),
                "({xx}, {yy})"
            );
        }
    }
}
