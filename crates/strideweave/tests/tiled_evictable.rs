//! TiledEvictable, phase 1 (docs/tiers.md, TiledEvictable; seed: "TiledEvictable SHALL be the only
//! definition-backed shipped carrier", scenarios "Derive composite dtype support from
//! configured tiers" and "Query an absent residency facet"): construction order and rollback,
//! dtype support, the tile map, element access, the residency vocabulary, promote/evict with
//! idempotence, versions, clashes, fault injection and release.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use common::tiled::{Faults, Faulty};
use common::{f32_storage, floats, F32s};
use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    CompletionCell, PreparedTransfer, ProviderCompletion, Submitted, TransferPreparation,
    TransferProvider,
};
use strideweave::carriers::{
    Cpu, Evictable, FileBacked, Generic, ResidencyPlan, ResidencyPolicy, ResidencyPurpose,
    TileLocation, TileResidency, TileSelection, TileSet, TiledEvictable,
};
use strideweave::operation::call;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, ErrorKind, Result, Shape, Tensor,
    TransferRoute, Value,
};

// ---------------------------------------------------------------------------------------------
// Helpers

fn generic(values: &[f64]) -> Carrier {
    Generic::carrier(&floats(values), DType::FLOAT32, true).unwrap()
}

fn counting(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

fn values(carrier: &Carrier) -> Vec<Value> {
    (0..carrier.size())
        .map(|i| carrier.get(i).unwrap())
        .collect()
}

fn set(coordinates: &[&[usize]]) -> TileSet {
    TileSet::new(coordinates.iter().map(|c| c.to_vec())).unwrap()
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

fn location(carrier: &Carrier, coord: &[usize]) -> TileLocation {
    TiledEvictable::tile_state(carrier, coord)
        .unwrap()
        .location()
}

/// Neither tier is owned or released: a failed construction left nothing behind.
fn untouched(tiers: &[&Carrier]) {
    for tier in tiers {
        assert!(!tier.is_owned(), "{tier:?} stayed owned");
        assert!(!tier.is_released(), "{tier:?} was released");
    }
}

// ---------------------------------------------------------------------------------------------
// Construction

#[test]
fn construction_checks_run_in_order_and_leave_nothing_owned_on_failure() {
    let primary = generic(&counting(8));
    let secondary = generic(&[]);
    let both = [&primary, &secondary];

    // 1. Shapes.
    expect_err(
        TiledEvictable::carrier(&primary, &secondary, &[], &[], None),
        ErrorKind::Value,
        "grid_shape must have at least one axis",
    );
    expect_err(
        TiledEvictable::carrier(&primary, &secondary, &[2, 0], &[2, 2], None),
        ErrorKind::Value,
        "grid_shape extents must be >= 1, got [2, 0]",
    );
    expect_err(
        TiledEvictable::carrier(&primary, &secondary, &[2], &[2, 2], None),
        ErrorKind::Value,
        "must have the same rank",
    );
    untouched(&both);

    // 2. The same carrier twice.
    expect_err(
        TiledEvictable::carrier(&primary, &primary, &[4], &[2], None),
        ErrorKind::Value,
        "two distinct tiers",
    );
    // 3. Released (before the dtype check: this pair also has different dtypes).
    let released = Generic::carrier(&[], DType::INT32, true).unwrap();
    released.release().unwrap();
    expect_err(
        TiledEvictable::carrier(&primary, &released, &[4], &[2], None),
        ErrorKind::Runtime,
        "the secondary Generic tier of a TiledEvictable is released",
    );
    // 4. Owned by another carrier.
    let owned = generic(&[1.0]);
    let owner = Evictable::carrier(&owned, &generic(&[])).unwrap();
    expect_err(
        TiledEvictable::carrier(&owned, &secondary, &[4], &[2], None),
        ErrorKind::Runtime,
        "the primary Generic tier of a TiledEvictable is owned by another carrier",
    );
    drop(owner);
    // 5. Different dtypes.
    let ints = Generic::carrier(&[], DType::INT32, true).unwrap();
    expect_err(
        TiledEvictable::carrier(&primary, &ints, &[4], &[2], None),
        ErrorKind::Type,
        "TiledEvictable tiers must share one dtype",
    );
    untouched(&[&primary, &ints]);
    // 6. Immutable secondary (checked before the sizes: this one is also the wrong size).
    let frozen = Generic::carrier(&floats(&[1.0]), DType::FLOAT32, false).unwrap();
    expect_err(
        TiledEvictable::carrier(&primary, &frozen, &[4], &[2], None),
        ErrorKind::Runtime,
        "must be mutable",
    );
    // 7. Neither empty nor full.
    let error = expect_err(
        TiledEvictable::carrier(&primary, &generic(&[1.0, 2.0, 3.0]), &[4], &[2], None),
        ErrorKind::Value,
        "the secondary Generic tier of a TiledEvictable has size 3; expected 0 (empty) or 8",
    );
    assert!(error.to_string().contains("grid_shape [4]"), "{error}");
    expect_err(
        TiledEvictable::carrier(&primary, &secondary, &[3], &[2], None),
        ErrorKind::Value,
        "the primary Generic tier of a TiledEvictable has size 8",
    );
    untouched(&both);

    // After every refusal the same tiers still build a TiledEvictable, which owns them.
    let tiled = TiledEvictable::carrier(&primary, &secondary, &[4], &[2], None).unwrap();
    assert!(primary.is_owned() && secondary.is_owned());
    assert_eq!(
        (tiled.size(), tiled.dtype(), tiled.version()),
        (8, DType::FLOAT32, 0)
    );
    assert!(tiled.is_mutable());
    assert!(TiledEvictable::primary(&tiled).unwrap().same_as(&primary));
    assert!(TiledEvictable::secondary(&tiled)
        .unwrap()
        .same_as(&secondary));
    // An owned tier reads but cannot be written, released or reused.
    expect_err(
        primary.set(0, Value::Float(1.0)),
        ErrorKind::Runtime,
        "owned",
    );
    expect_err(secondary.release(), ErrorKind::Runtime, "owned");
    expect_err(
        TiledEvictable::carrier(&primary, &generic(&[]), &[4], &[2], None),
        ErrorKind::Runtime,
        "owned by another carrier",
    );
    // Dropping the TiledEvictable unowns its tiers without releasing them.
    drop(tiled);
    untouched(&both);
    assert_eq!(values(&primary), floats(&counting(8)));
}

#[test]
fn an_immutable_primary_makes_an_immutable_tiled_evictable() {
    let primary = Generic::carrier(&floats(&[1.0, 2.0]), DType::FLOAT32, false).unwrap();
    let tiled = TiledEvictable::carrier(&primary, &generic(&[]), &[2], &[1], None).unwrap();
    assert!(!tiled.is_mutable());
    expect_err(
        tiled.set(0, Value::Float(5.0)),
        ErrorKind::Runtime,
        "immutable",
    );
    assert_eq!(tiled.get(1).unwrap(), Value::Float(2.0));
    assert_eq!(tiled.version(), 0);
}

#[test]
fn derive_composite_dtype_support_from_configured_tiers() {
    // Generic stores Float32, Int32 and Bool; FileBacked stores Float32 and Int32.
    let primary = generic(&[]);
    let secondary = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let tiled = TiledEvictable::carrier(&primary, &secondary, &[2], &[2], None).unwrap();
    let answers = |c: &Carrier| {
        [DType::FLOAT32, DType::INT32, DType::BOOL, DType::FLOAT64]
            .map(|d| c.supports_storage_dtype(d).unwrap())
    };
    assert_eq!(answers(&tiled), [true, true, false, false]);
    // Generic and CPU share Bool; the answer follows the exact tiers of each instance.
    let cpu = Cpu::carrier(0, DType::FLOAT32, true, false).unwrap();
    let both_bool = TiledEvictable::carrier(&generic(&[]), &cpu, &[2], &[2], None).unwrap();
    assert_eq!(answers(&both_bool), [true, true, true, false]);
    // Independent of release state.
    tiled.release().unwrap();
    assert_eq!(answers(&tiled), [true, true, false, false]);
    // A dtype the intersection lacks is refused by the factories.
    expect_err(
        both_bool.allocate_like(4, true, Some(DType::FLOAT64), false),
        ErrorKind::Value,
        "TiledEvictable carriers cannot store dtype",
    );
}

#[test]
fn tiled_evictable_is_the_shipped_definition_backed_dependent_class() {
    let class = TiledEvictable::class().unwrap();
    assert_eq!(class.name(), "TiledEvictable");
    assert_eq!(class.kind(), ClassKind::Dependent);
    assert!(class.is_definition_backed());
    assert!(strideweave::carriers::extension::carrier_definition(class).is_some());
    for legacy in [
        CarrierClass::of::<Generic>(),
        CarrierClass::of::<Cpu>(),
        CarrierClass::of::<FileBacked>(),
        CarrierClass::of::<Evictable>(),
    ] {
        assert!(!legacy.is_definition_backed(), "{legacy}");
    }
    // A second definition for the class is refused and the first stays.
    let again = CarrierDefinition::new(f32_storage());
    expect_err(
        register_carrier_definition(class, again),
        ErrorKind::Type,
        "",
    );
    let tiled =
        TiledEvictable::carrier(&generic(&[1.0, 2.0]), &generic(&[]), &[1], &[2], None).unwrap();
    assert_eq!(tiled.class(), class);
    assert_eq!(tiled.get(1).unwrap(), Value::Float(2.0));
    // Its reach is the six central operations on raw tiled operands (tests/tiled_operations.rs);
    // any other operation is refused by the gate.
    let six = [
        "add",
        "elementwise_mul",
        "mul",
        "relu",
        "reduce_sum",
        "matmul",
    ];
    assert!(!tiled.capabilities().is_empty());
    assert!(tiled
        .capabilities()
        .iter()
        .all(|c| six.contains(&c.operation())));
    let tensor = Tensor::compact(tiled.clone(), Shape::new(2).unwrap()).unwrap();
    let refused = call("neg", [tensor.into()], &[]).expect_err("no capability");
    assert_eq!(refused.kind(), ErrorKind::NotImplemented, "{refused}");
}

// ---------------------------------------------------------------------------------------------
// Facets

#[test]
fn the_residency_facet_is_present_only_on_tiled_evictable() {
    let tiled =
        TiledEvictable::carrier(&generic(&[1.0, 2.0]), &generic(&[]), &[2], &[1], None).unwrap();
    let facet = tiled.facet::<TileResidency>().expect("the residency facet");
    assert!(std::ptr::eq(
        facet,
        tiled.require_facet::<TileResidency>().unwrap()
    ));
    assert_eq!(
        facet.tile_state(&tiled, &[1]).unwrap().location(),
        TileLocation::Primary
    );
    // Scenario "Query an absent residency facet", on shipped and custom carriers.
    let storage_only = CarrierClass::mint("TiledTestStorageOnly", ClassKind::Independent);
    register_carrier_definition(storage_only, CarrierDefinition::new(f32_storage())).unwrap();
    let custom = Carrier::create(storage_only, F32s::default(), 2, DType::FLOAT32, true).unwrap();
    let evictable = Evictable::carrier(&generic(&[1.0]), &generic(&[])).unwrap();
    for other in [generic(&[1.0]), custom, evictable] {
        assert!(other.facet::<TileResidency>().is_none());
        expect_err(
            other.require_facet::<TileResidency>(),
            ErrorKind::NotImplemented,
            "TileResidency",
        );
        expect_err(
            TiledEvictable::promote(&other, &set(&[&[0]])),
            ErrorKind::NotImplemented,
            "TileResidency",
        );
        expect_err(
            TiledEvictable::grid_shape(&other),
            ErrorKind::Type,
            "expected a TiledEvictable carrier",
        );
    }
    // A facet reached through one TiledEvictable refuses another class's carrier.
    expect_err(
        facet.tile_state(&generic(&[1.0]), &[0]),
        ErrorKind::Type,
        "expected a TiledEvictable carrier, got Generic",
    );
}

// ---------------------------------------------------------------------------------------------
// The tile map and element access

#[test]
fn slots_map_to_tiles_by_coordinate_division() {
    // A 6×6 tensor in a 2×3 grid of 3×2 tiles.
    let tiled = TiledEvictable::carrier(
        &generic(&counting(36)),
        &generic(&[]),
        &[2, 3],
        &[3, 2],
        None,
    )
    .unwrap();
    assert_eq!(TiledEvictable::grid_shape(&tiled).unwrap(), vec![2, 3]);
    assert_eq!(TiledEvictable::tile_shape(&tiled).unwrap(), vec![3, 2]);
    assert_eq!(TiledEvictable::logical_shape(&tiled).unwrap(), vec![6, 6]);
    // Column-major: (4, 5) is slot 4 + 5·6 = 34, in tile (4/3, 5/2) = (1, 2) at (1, 1).
    assert_eq!(TiledEvictable::slot(&tiled, &[4, 5]).unwrap(), 34);
    assert_eq!(
        TiledEvictable::locate(&tiled, 34).unwrap(),
        (vec![1, 2], vec![1, 1])
    );
    assert_eq!(
        TiledEvictable::locate(&tiled, 2).unwrap(),
        (vec![0, 0], vec![2, 0])
    );
    expect_err(
        TiledEvictable::slot(&tiled, &[6, 0]),
        ErrorKind::Index,
        "(6, 0)",
    );
    expect_err(TiledEvictable::slot(&tiled, &[1]), ErrorKind::Value, "rank");
    expect_err(
        TiledEvictable::locate(&tiled, 36),
        ErrorKind::Index,
        "slot 36",
    );

    // A write marks exactly the tile the coordinate maps to.
    for (r, c) in [(0, 0), (2, 1), (3, 1), (5, 5), (4, 2)] {
        let tiled = TiledEvictable::carrier(
            &generic(&counting(36)),
            &generic(&[]),
            &[2, 3],
            &[3, 2],
            None,
        )
        .unwrap();
        let slot = TiledEvictable::slot(&tiled, &[r, c]).unwrap();
        tiled.set(slot, Value::Float(-1.0)).unwrap();
        assert_eq!(
            TiledEvictable::dirty_tiles(&tiled).unwrap(),
            set(&[&[r / 3, c / 2]]),
            "({r}, {c})"
        );
    }

    // Every slot reads its seeded value through whichever tier holds its tile.
    TiledEvictable::evict(&tiled, &set(&[&[1, 2], &[0, 1]])).unwrap();
    assert_eq!(values(&tiled), floats(&counting(36)));
}

#[test]
fn element_access_follows_the_valid_copy() {
    // Seeded from a full primary.
    let tiled =
        TiledEvictable::carrier(&generic(&counting(4)), &generic(&[]), &[2], &[2], None).unwrap();
    assert_eq!(
        TiledEvictable::primary_tiles(&tiled).unwrap(),
        set(&[&[0], &[1]])
    );
    tiled.set(3, Value::Float(30.0)).unwrap();
    assert_eq!(tiled.version(), 1);
    assert_eq!(tiled.get(3).unwrap(), Value::Float(30.0));
    let state = TiledEvictable::tile_state(&tiled, &[1]).unwrap();
    assert!(state.is_valid() && state.is_dirty());
    assert!(!TiledEvictable::tile_state(&tiled, &[0]).unwrap().is_dirty());
    expect_err(tiled.get(4), ErrorKind::Index, "slot 4");

    // Seeded from a full secondary: tiles are secondary, reads and writes go there.
    let secondary = generic(&[5.0, 6.0, 7.0, 8.0]);
    let tiled = TiledEvictable::carrier(&generic(&[]), &secondary, &[2], &[2], None).unwrap();
    assert_eq!(
        TiledEvictable::secondary_tiles(&tiled).unwrap(),
        set(&[&[0], &[1]])
    );
    assert_eq!(values(&tiled), floats(&[5.0, 6.0, 7.0, 8.0]));
    tiled.set(0, Value::Float(50.0)).unwrap();
    assert_eq!(secondary.get(0).unwrap(), Value::Float(50.0));
    assert_eq!(location(&tiled, &[0]), TileLocation::Secondary);
    assert!(TiledEvictable::tile_state(&tiled, &[0]).unwrap().is_dirty());

    // Neither tier full: every tile is invalid; reads and writes name the tile.
    let tiled =
        TiledEvictable::carrier(&generic(&[]), &generic(&[]), &[2, 2], &[1, 1], None).unwrap();
    assert_eq!(TiledEvictable::invalid_tiles(&tiled).unwrap().len(), 4);
    let state = TiledEvictable::tile_state(&tiled, &[0, 1]).unwrap();
    assert_eq!(
        (state.location(), state.is_valid(), state.is_dirty()),
        (TileLocation::Invalid, false, false)
    );
    expect_err(
        tiled.get(2),
        ErrorKind::Runtime,
        "tile (0, 1) of the TiledEvictable is invalid",
    );
    expect_err(
        tiled.set(1, Value::Float(1.0)),
        ErrorKind::Runtime,
        "tile (1, 0)",
    );
    assert_eq!(tiled.version(), 0);
    expect_err(
        TiledEvictable::promote(&tiled, &set(&[&[1, 1]])),
        ErrorKind::Runtime,
        "cannot promote tile (1, 1): it is invalid",
    );
}

#[test]
fn implicit_tiles_read_as_zero_until_written() {
    let primary = generic(&[]);
    let tiled = TiledEvictable::zeros(&primary, &generic(&[]), &[3], &[2], None).unwrap();
    assert_eq!(values(&tiled), floats(&[0.0; 6]));
    assert_eq!(TiledEvictable::implicit_tiles(&tiled).unwrap().len(), 3);
    // Writing zero keeps a tile implicit; another value materializes it on the primary tier.
    tiled.set(0, Value::Float(0.0)).unwrap();
    assert_eq!(location(&tiled, &[0]), TileLocation::Implicit);
    tiled.set(3, Value::Float(4.0)).unwrap();
    assert_eq!(tiled.version(), 2);
    assert_eq!(location(&tiled, &[1]), TileLocation::Primary);
    assert!(TiledEvictable::tile_state(&tiled, &[1]).unwrap().is_dirty());
    assert_eq!(values(&tiled), floats(&[0.0, 0.0, 0.0, 4.0, 0.0, 0.0]));
    // Eviction leaves implicit tiles implicit; promotion materializes them on the primary.
    TiledEvictable::evict(&tiled, &set(&[&[0], &[1], &[2]])).unwrap();
    assert_eq!(
        TiledEvictable::implicit_tiles(&tiled).unwrap(),
        set(&[&[0], &[2]])
    );
    TiledEvictable::promote(&tiled, &set(&[&[0], &[2]])).unwrap();
    assert_eq!(TiledEvictable::implicit_tiles(&tiled).unwrap(), set(&[]));
    assert_eq!(
        TiledEvictable::primary_tiles(&tiled).unwrap(),
        set(&[&[0], &[2]])
    );
    assert_eq!(location(&tiled, &[1]), TileLocation::Secondary);
    assert_eq!(values(&tiled), floats(&[0.0, 0.0, 0.0, 4.0, 0.0, 0.0]));
    // The tiers of an implicit-zero carrier start empty.
    expect_err(
        TiledEvictable::zeros(&generic(&counting(6)), &generic(&[]), &[3], &[2], None),
        ErrorKind::Value,
        "an implicit-zero TiledEvictable starts empty",
    );
}

#[test]
fn factories_make_fresh_implicit_zero_tiled_evictables() {
    let primary = generic(&counting(4));
    let tiled = TiledEvictable::carrier(&primary, &generic(&[]), &[2], &[2], None).unwrap();
    let fresh = tiled.allocate_like(4, true, None, false).unwrap();
    assert_eq!(fresh.class(), tiled.class());
    assert_eq!(values(&fresh), floats(&[0.0; 4]));
    assert!(!TiledEvictable::primary(&fresh).unwrap().same_as(&primary));
    let copy = tiled
        .new_like(&floats(&[1.0, 0.0, 0.0, 0.0]), true, None)
        .unwrap();
    assert_eq!(values(&copy), floats(&[1.0, 0.0, 0.0, 0.0]));
    assert_eq!(TiledEvictable::implicit_tiles(&copy).unwrap(), set(&[&[1]]));
    expect_err(
        tiled.allocate_like(3, true, None, false),
        ErrorKind::Value,
        "has 4 slots, not 3",
    );
}

#[test]
fn a_factory_of_another_dtype_builds_tiers_of_that_dtype() {
    // Generic stores Float32, Int32 and Bool, so the intersection covers Int32.
    let primary = generic(&counting(4));
    let tiled = TiledEvictable::carrier(&primary, &generic(&[]), &[2], &[2], None).unwrap();
    let ints = tiled
        .new_like(
            &[Value::Int(7), Value::Int(0), Value::Int(0), Value::Int(-3)],
            true,
            Some(DType::INT32),
        )
        .unwrap();
    assert_eq!(ints.dtype(), DType::INT32);
    assert_eq!(
        TiledEvictable::primary(&ints).unwrap().dtype(),
        DType::INT32
    );
    assert_eq!(
        TiledEvictable::secondary(&ints).unwrap().dtype(),
        DType::INT32
    );
    assert_eq!(
        values(&ints),
        [Value::Int(7), Value::Int(0), Value::Int(0), Value::Int(-3)]
    );
    ints.set(1, Value::Int(5)).unwrap();
    assert_eq!(ints.get(1).unwrap(), Value::Int(5));
    // A dtype one tier cannot store is refused before anything is allocated.
    let cpu_tiled = TiledEvictable::carrier(
        &strideweave::carriers::Cpu::from_f32(&[0.0; 4], true).unwrap(),
        &generic(&[]),
        &[2],
        &[2],
        None,
    )
    .unwrap();
    expect_err(
        cpu_tiled.allocate_like(4, true, Some(DType::FLOAT64), false),
        ErrorKind::Value,
        "cannot store dtype",
    );
}

// ---------------------------------------------------------------------------------------------
// The residency vocabulary

#[test]
fn tile_selections_validate_and_enumerate_their_tiles() {
    expect_err(
        TileSelection::new(vec![]),
        ErrorKind::Value,
        "at least one axis",
    );
    expect_err(
        TileSelection::new(vec![vec![0], vec![]]),
        ErrorKind::Value,
        "axis 1 selects no tile index",
    );
    expect_err(
        TileSelection::new(vec![vec![1, 3, 1]]),
        ErrorKind::Value,
        "axis 0 repeats tile index 1",
    );
    let selection = TileSelection::new(vec![vec![3, 1], vec![0, 2, 1]]).unwrap();
    assert_eq!(selection.rank(), 2);
    assert_eq!(selection.per_axis(), &[vec![3, 1], vec![0, 2, 1]]);
    assert_eq!(selection.compact_grid_shape(), vec![2, 3]);
    // Compact order: the first axis fastest.
    assert_eq!(
        selection.coordinates(),
        vec![
            vec![3, 0],
            vec![1, 0],
            vec![3, 2],
            vec![1, 2],
            vec![3, 1],
            vec![1, 1]
        ]
    );
    assert_eq!(
        selection.tile_set().coordinates(),
        &[
            vec![1, 0],
            vec![3, 0],
            vec![1, 1],
            vec![3, 1],
            vec![1, 2],
            vec![3, 2]
        ]
    );
}

#[test]
fn tile_sets_are_sorted_by_reversed_tuple_and_deduplicated() {
    let tiles = TileSet::new([vec![2, 0], vec![0, 1], vec![1, 0], vec![2, 0], vec![0, 0]]).unwrap();
    assert_eq!(
        tiles.coordinates(),
        &[vec![0, 0], vec![1, 0], vec![2, 0], vec![0, 1]]
    );
    assert_eq!((tiles.len(), tiles.rank()), (4, Some(2)));
    assert!(tiles.contains(&[2, 0]) && !tiles.contains(&[1, 1]));
    let other = set(&[&[1, 0], &[1, 1]]);
    assert_eq!(tiles.intersection(&other), set(&[&[1, 0]]));
    assert_eq!(tiles.difference(&other), set(&[&[0, 0], &[2, 0], &[0, 1]]));
    assert_eq!(tiles.union(&other).unwrap().len(), 5);
    assert!(TileSet::new(Vec::<Vec<usize>>::new()).unwrap().is_empty());
    expect_err(
        TileSet::new([vec![0, 1], vec![1]]),
        ErrorKind::Value,
        "must share one rank",
    );
    expect_err(
        TileSet::new([vec![]]),
        ErrorKind::Value,
        "at least one axis",
    );
    expect_err(
        tiles.union(&set(&[&[0]])),
        ErrorKind::Value,
        "share one rank",
    );
}

#[test]
fn residency_plans_need_disjoint_sets_of_one_rank() {
    let plan = ResidencyPlan::new(set(&[&[0]]), set(&[&[1]]), set(&[&[2]])).unwrap();
    assert_eq!(
        (plan.promote(), plan.retain(), plan.evict()),
        (&set(&[&[0]]), &set(&[&[1]]), &set(&[&[2]]))
    );
    expect_err(
        ResidencyPlan::new(set(&[&[0], &[1]]), TileSet::empty(), set(&[&[1]])),
        ErrorKind::Value,
        "tile (1) is in both promote and evict",
    );
    expect_err(
        ResidencyPlan::new(TileSet::empty(), set(&[&[3]]), set(&[&[3]])),
        ErrorKind::Value,
        "tile (3) is in both retain and evict",
    );
    expect_err(
        ResidencyPlan::new(set(&[&[0]]), set(&[&[0, 1]]), TileSet::empty()),
        ErrorKind::Value,
        "must share one rank",
    );
}

/// A policy that wants tile 0 evicted, tile 3 prefetched and tile 2 retained, whatever is
/// required.
#[derive(Debug)]
struct Meddling;

impl ResidencyPolicy for Meddling {
    fn plan(&self, _required: &TileSet, _purpose: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(set(&[&[3]]), set(&[&[2]]), set(&[&[0], &[1]]))
    }
    fn primary_capacity(&self) -> Option<usize> {
        Some(2)
    }
}

#[derive(Debug)]
struct OutOfGrid;

impl ResidencyPolicy for OutOfGrid {
    fn plan(&self, required: &TileSet, _purpose: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(required.clone(), TileSet::empty(), set(&[&[9]]))
    }
}

#[test]
fn a_residency_policy_only_optimizes() {
    let build = |policy: Option<Arc<dyn ResidencyPolicy>>| {
        let tiled =
            TiledEvictable::carrier(&generic(&counting(8)), &generic(&[]), &[4], &[2], policy)
                .unwrap();
        TiledEvictable::evict(&tiled, &set(&[&[1], &[3]])).unwrap();
        tiled
    };
    // Without a policy: promote what is not resident, retain what is.
    let plain = build(None);
    let plan = TiledEvictable::plan_residency(&plain, &set(&[&[0], &[1]]), ResidencyPurpose::Read)
        .unwrap();
    assert_eq!(plan.promote(), &set(&[&[1]]));
    assert_eq!(plan.retain(), &set(&[&[0]]));
    assert!(plan.evict().is_empty());
    assert!(TiledEvictable::policy(&plain).unwrap().is_none());

    // The policy's eviction of required tile 0 and its promotion of resident tile 2 are
    // corrected; its prefetch of 3 and eviction of 1 — not primary, so nothing to evict — are
    // kept or dropped accordingly.
    let steered = build(Some(Arc::new(Meddling)));
    assert_eq!(
        TiledEvictable::policy(&steered)
            .unwrap()
            .unwrap()
            .primary_capacity(),
        Some(2)
    );
    let plan =
        TiledEvictable::plan_residency(&steered, &set(&[&[0]]), ResidencyPurpose::Write).unwrap();
    assert_eq!(plan.promote(), &set(&[&[3]]));
    assert_eq!(plan.retain(), &set(&[&[0], &[2]]));
    assert!(plan.evict().is_empty());
    // Streamed work does not need its tiles resident: the policy's plan is kept to what can
    // run — tile 1 (secondary) is not evicted, tile 0 is, and tile 3 is promoted into the
    // room the eviction leaves under the capacity of 2.
    for purpose in [ResidencyPurpose::Operation, ResidencyPurpose::Backward] {
        let plan = TiledEvictable::plan_residency(&steered, &set(&[&[1]]), purpose).unwrap();
        assert_eq!(plan.promote(), &set(&[&[3]]), "{purpose:?}");
        assert_eq!(plan.retain(), &set(&[&[2]]), "{purpose:?}");
        assert_eq!(plan.evict(), &set(&[&[0]]), "{purpose:?}");
    }
    // Planning changes nothing.
    assert_eq!(
        TiledEvictable::secondary_tiles(&steered).unwrap(),
        set(&[&[1], &[3]])
    );

    expect_err(
        TiledEvictable::plan_residency(&plain, &set(&[&[4]]), ResidencyPurpose::Read),
        ErrorKind::Value,
        "tile coordinate (4) is outside the TiledEvictable grid [4]",
    );
    let wild = build(Some(Arc::new(OutOfGrid)));
    expect_err(
        TiledEvictable::plan_residency(&wild, &set(&[&[0]]), ResidencyPurpose::Read),
        ErrorKind::Value,
        "(9)",
    );
}

// ---------------------------------------------------------------------------------------------
// Promote and evict

#[test]
fn promote_and_evict_move_tiles_idempotently_without_moving_the_version() {
    let family = Faults::sticky();
    let secondary = Faulty::carrier(&family, &[]);
    let tiled = TiledEvictable::carrier(&generic(&counting(8)), &secondary, &[2, 2], &[2, 1], None)
        .unwrap();
    tiled.set(0, Value::Float(-1.0)).unwrap();
    let version = tiled.version();
    assert_eq!(version, 1);
    let live = family.live();

    // Evict two tiles: each gets a fresh carrier of the secondary tier's factory.
    let pair = set(&[&[0, 0], &[1, 1]]);
    let handle = TiledEvictable::evict_async(&tiled, &pair).unwrap();
    let completion: &dyn ProviderCompletion<()> = &handle;
    completion.wait().unwrap();
    assert!(completion.done());
    completion.wait().unwrap(); // idempotent
    assert_eq!(TiledEvictable::secondary_tiles(&tiled).unwrap(), pair);
    assert_eq!(
        TiledEvictable::primary_tiles(&tiled).unwrap(),
        set(&[&[1, 0], &[0, 1]])
    );
    assert_eq!(family.live(), live + 2);
    // An eviction writes the contents back: the tile is clean.
    assert!(!TiledEvictable::tile_state(&tiled, &[0, 0])
        .unwrap()
        .is_dirty());
    let mut expected = counting(8);
    expected[0] = -1.0;
    assert_eq!(values(&tiled), floats(&expected));
    assert_eq!(tiled.version(), version);

    // Evicting again, or a mix with already-secondary tiles, is a no-op.
    TiledEvictable::evict(&tiled, &pair).unwrap();
    assert_eq!(family.live(), live + 2);

    // A write to an evicted tile lands on the secondary tier and marks it dirty.
    tiled.set(7, Value::Float(70.0)).unwrap();
    expected[7] = 70.0;
    assert_eq!(location(&tiled, &[1, 1]), TileLocation::Secondary);
    assert!(TiledEvictable::tile_state(&tiled, &[1, 1])
        .unwrap()
        .is_dirty());

    // Promote both back through the tiers' movement: the secondary copies are dropped
    // (released), promotion keeps the dirty bit, and the version stays.
    TiledEvictable::promote(&tiled, &pair).unwrap();
    assert_eq!(family.live(), live);
    assert_eq!(TiledEvictable::primary_tiles(&tiled).unwrap().len(), 4);
    assert!(TiledEvictable::tile_state(&tiled, &[1, 1])
        .unwrap()
        .is_dirty());
    assert_eq!(values(&tiled), floats(&expected));
    assert_eq!(tiled.version(), version + 1);
    TiledEvictable::promote(&tiled, &pair).unwrap(); // a no-op
    assert_eq!(tiled.version(), version + 1);

    // A round trip through own carriers on both tiers uses move_async both ways.
    TiledEvictable::evict(&tiled, &set(&[&[1, 1]])).unwrap();
    TiledEvictable::promote(&tiled, &set(&[&[1, 1]])).unwrap();
    assert_eq!(values(&tiled), floats(&expected));
    assert_eq!(family.live(), live);

    // Bad tiles are refused before anything moves.
    expect_err(
        TiledEvictable::evict(&tiled, &set(&[&[0, 0], &[2, 0]])),
        ErrorKind::Value,
        "tile coordinate (2, 0) is outside the TiledEvictable grid [2, 2]",
    );
    expect_err(
        TiledEvictable::promote(&tiled, &set(&[&[0]])),
        ErrorKind::Value,
        "has rank 1",
    );
    assert_eq!(TiledEvictable::primary_tiles(&tiled).unwrap().len(), 4);
    // The empty set is a no-op.
    let empty = TiledEvictable::evict_async(&tiled, &TileSet::empty()).unwrap();
    assert!(empty.done());
    empty.wait().unwrap();
}

#[test]
fn release_releases_the_tiers_and_every_tile_copy() {
    let family = Faults::sticky();
    let primary = generic(&counting(4));
    let secondary = Faulty::carrier(&family, &[]);
    let tiled = TiledEvictable::carrier(&primary, &secondary, &[2], &[2], None).unwrap();
    TiledEvictable::evict(&tiled, &set(&[&[1]])).unwrap();
    assert_eq!(family.live(), 2);
    tiled.release().unwrap();
    assert!(tiled.is_released() && primary.is_released() && secondary.is_released());
    assert_eq!(family.live(), 0);
    assert_eq!((tiled.size(), tiled.version()), (0, 0));
    expect_err(tiled.get(0), ErrorKind::Runtime, "released");
    expect_err(
        TiledEvictable::promote(&tiled, &set(&[&[1]])),
        ErrorKind::Runtime,
        "released TiledEvictable",
    );
    tiled.release().unwrap(); // idempotent
}

// ---------------------------------------------------------------------------------------------
// Fault injection

#[test]
fn a_failing_tier_move_keeps_every_tile_valid_and_the_request_retryable() {
    let family = Faults::sticky();
    let tiled = TiledEvictable::carrier(
        &generic(&counting(8)),
        &Faulty::carrier(&family, &[]),
        &[4],
        &[2],
        None,
    )
    .unwrap();
    let all = set(&[&[0], &[1], &[2], &[3]]);

    // The seed copy into the secondary tier fails on its third write: nothing moves and the
    // fresh tile carriers are disposed of.
    Faults::arm(&family.writes, 2);
    expect_err(
        TiledEvictable::evict(&tiled, &all),
        ErrorKind::Runtime,
        "injected write failure",
    );
    assert_eq!(TiledEvictable::primary_tiles(&tiled).unwrap(), all);
    assert_eq!(family.live(), 1, "only the tier itself is live");
    Faults::arm(&family.writes, -1);
    TiledEvictable::evict(&tiled, &all).unwrap();
    assert_eq!(TiledEvictable::secondary_tiles(&tiled).unwrap(), all);

    // Promotion moves each tile's own secondary carrier with the tiers' movement. The first
    // move succeeds, the second fails reading: the first is moved back, every tile keeps a
    // valid secondary copy, and the version does not move.
    let version = tiled.version();
    Faults::arm(&family.reads, 2);
    let outcome = TiledEvictable::promote_async(&tiled, &all).unwrap();
    expect_err(outcome.wait(), ErrorKind::Runtime, "injected read failure");
    assert!(outcome.done());
    expect_err(outcome.wait(), ErrorKind::Runtime, "injected read failure");
    assert_eq!(TiledEvictable::secondary_tiles(&tiled).unwrap(), all);
    for tile in 0..4 {
        assert!(TiledEvictable::tile_state(&tiled, &[tile])
            .unwrap()
            .is_valid());
    }
    assert_eq!(family.live(), 5, "the tier and four tile copies");
    Faults::arm(&family.reads, -1);
    assert_eq!(values(&tiled), floats(&counting(8)));

    // The retry succeeds.
    TiledEvictable::promote(&tiled, &all).unwrap();
    assert_eq!(TiledEvictable::primary_tiles(&tiled).unwrap(), all);
    assert_eq!(values(&tiled), floats(&counting(8)));
    assert_eq!(tiled.version(), version);
    assert_eq!(family.live(), 1);
}

// ---------------------------------------------------------------------------------------------
// Pending requests

/// A gate the test opens to let pending transfers finish.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
    fn close(&self) {
        *self.open.lock().unwrap() = false;
    }
}

/// A definition-backed tier class whose transfers to itself complete on a worker thread once
/// `gate` opens.
fn gated_tier_class(gate: &Arc<Gate>, submitted: &Arc<AtomicUsize>) -> CarrierClass {
    let class = CarrierClass::mint("GatedTier", ClassKind::Independent);
    let (gate, submitted) = (Arc::clone(gate), Arc::clone(submitted));
    let provider = TransferProvider::new(move |request| {
        let request = request.clone();
        let (gate, submitted) = (Arc::clone(&gate), Arc::clone(&submitted));
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                submitted.fetch_add(1, Ordering::SeqCst);
                let completion = CompletionCell::new();
                let worker = completion.clone();
                thread::spawn(move || {
                    gate.wait();
                    let source = request.tensor();
                    let copied = (0..request.physical_span()).try_for_each(|slot| {
                        request.write(slot, source.carrier().get(source.offset() + slot)?)
                    });
                    worker.complete(copied);
                });
                Ok(Submitted::pending(completion))
            },
        )))
    });
    let route = TransferRoute::new(class, class, "gated-copy", provider).unwrap();
    let definition = CarrierDefinition::new(f32_storage())
        .with_transfers([route])
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
    class
}

fn gated(class: CarrierClass, values: &[f64]) -> Carrier {
    let carrier =
        Carrier::create(class, F32s::default(), values.len(), DType::FLOAT32, true).unwrap();
    for (i, v) in values.iter().enumerate() {
        carrier.set(i, Value::Float(*v)).unwrap();
    }
    carrier
}

#[test]
fn a_clash_with_a_pending_request_is_a_runtime_error() {
    let gate = Arc::new(Gate::default());
    let submitted = Arc::new(AtomicUsize::new(0));
    let class = gated_tier_class(&gate, &submitted);
    let tiled = TiledEvictable::carrier(
        &gated(class, &[1.0, 2.0, 3.0, 4.0]),
        &gated(class, &[]),
        &[2],
        &[2],
        None,
    )
    .unwrap();
    // A seed copy is one bulk copy of the tile's span through the tier pair's route (the
    // gate is open for it).
    gate.open();
    TiledEvictable::evict(&tiled, &set(&[&[0]])).unwrap();
    gate.close();
    assert_eq!(submitted.load(Ordering::SeqCst), 1);

    // Promoting tile 0 moves its own secondary carrier through the gated route.
    let pending = TiledEvictable::promote_async(&tiled, &set(&[&[0]])).unwrap();
    assert_eq!(submitted.load(Ordering::SeqCst), 2);
    assert!(!pending.done());
    expect_err(
        TiledEvictable::evict_async(&tiled, &set(&[&[0], &[1]])),
        ErrorKind::Runtime,
        "tile (0) clashes with a pending residency request",
    );
    expect_err(
        TiledEvictable::promote_async(&tiled, &set(&[&[0]])),
        ErrorKind::Runtime,
        "clashes with a pending residency request",
    );
    expect_err(tiled.get(1), ErrorKind::Runtime, "pending");
    expect_err(
        tiled.set(0, Value::Float(9.0)),
        ErrorKind::Runtime,
        "pending",
    );
    expect_err(tiled.release(), ErrorKind::Runtime, "pending");
    assert!(!tiled.is_released());
    assert_eq!(location(&tiled, &[0]), TileLocation::Secondary);
    // A request on other tiles goes ahead, and reads of other tiles work.
    TiledEvictable::promote(&tiled, &set(&[&[1]])).unwrap();
    assert_eq!(tiled.get(2).unwrap(), Value::Float(3.0));

    // Waiting on another thread sees the same terminal outcome.
    let waiter = {
        let pending = pending.clone();
        thread::spawn(move || pending.wait())
    };
    gate.open();
    pending.wait().unwrap();
    waiter.join().unwrap().unwrap();
    assert!(pending.done());
    assert_eq!(location(&tiled, &[0]), TileLocation::Primary);
    assert_eq!(values(&tiled), floats(&[1.0, 2.0, 3.0, 4.0]));
    assert_eq!(tiled.version(), 0);
    // The tiles are free again.
    TiledEvictable::evict(&tiled, &set(&[&[0], &[1]])).unwrap();
    assert_eq!(TiledEvictable::secondary_tiles(&tiled).unwrap().len(), 2);
    tiled.release().unwrap();
}

#[test]
fn a_dropped_handle_does_not_cancel_its_request() {
    let gate = Arc::new(Gate::default());
    let submitted = Arc::new(AtomicUsize::new(0));
    let class = gated_tier_class(&gate, &submitted);
    let tiled = TiledEvictable::carrier(
        &gated(class, &[1.0, 2.0]),
        &gated(class, &[]),
        &[1],
        &[2],
        None,
    )
    .unwrap();
    let tile = set(&[&[0]]);
    // The seed copy runs through the gated route: open for it.
    gate.open();
    TiledEvictable::evict(&tiled, &tile).unwrap();
    gate.close();
    drop(TiledEvictable::promote_async(&tiled, &tile).unwrap());
    expect_err(tiled.get(0), ErrorKind::Runtime, "pending");
    assert_eq!(
        location(&tiled, &[0]),
        TileLocation::Secondary,
        "still pending"
    );
    gate.open();
    // Once the move finishes, a state query alone sees the request committed: nobody waits on
    // it or touches the tile.
    let mut now = location(&tiled, &[0]);
    for _ in 0..500 {
        if now == TileLocation::Primary {
            break;
        }
        thread::sleep(std::time::Duration::from_millis(2));
        now = location(&tiled, &[0]);
    }
    assert_eq!(now, TileLocation::Primary);
    assert_eq!(TiledEvictable::primary_tiles(&tiled).unwrap(), tile);
    assert_eq!(tiled.get(0).unwrap(), Value::Float(1.0));
}

#[test]
fn a_tier_claimed_by_a_pending_move_is_refused_and_the_other_tier_given_back() {
    let gate = Arc::new(Gate::default());
    let submitted = Arc::new(AtomicUsize::new(0));
    let class = gated_tier_class(&gate, &submitted);
    let source = gated(class, &[1.0, 2.0]);
    let destination = gated(class, &[0.0, 0.0]);
    let tensor = Tensor::compact(source, Shape::new(2).unwrap()).unwrap();
    let moving = strideweave::movement::move_async(&tensor, &destination).unwrap();
    assert!(!moving.done());
    let primary = generic(&[5.0, 6.0]);
    // The checks pass (the destination is live, unowned, mutable and full); claiming it
    // fails, and the primary, claimed first, is given back.
    expect_err(
        TiledEvictable::carrier(&primary, &destination, &[2], &[1], None),
        ErrorKind::Runtime,
        "claimed by a pending move",
    );
    untouched(&[&primary]);
    gate.open();
    moving.wait().unwrap();
    let tiled = TiledEvictable::carrier(&primary, &destination, &[2], &[1], None).unwrap();
    assert_eq!(values(&tiled), floats(&[5.0, 6.0]));
}

#[test]
fn scenario_21_tile_selection_and_tile_set_orders() {
    // docs/operations.md, Worked examples item 21, with its numbers.
    let selection = TileSelection::new(vec![vec![7, 2], vec![4, 9]]).unwrap();
    assert_eq!(
        selection.coordinates(),
        vec![vec![7, 4], vec![2, 4], vec![7, 9], vec![2, 9]]
    );
    let tiles = TileSet::new([vec![0, 1], vec![1, 0], vec![0, 0]]).unwrap();
    assert_eq!(tiles.coordinates(), &[vec![0, 0], vec![1, 0], vec![0, 1]]);
}
