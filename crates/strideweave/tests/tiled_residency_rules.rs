//! TiledEvictable residency, exactly as documented (docs/tiers.md, Tile state and
//! residency): promoting an implicit tile materializes it, coordinates outside the grid are
//! Value errors naming both, and a release gives up both tiers.

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use common::tiled::{expect_err, Faults, Faulty};
use strideweave::carriers::{
    CapacityPolicy, Cpu, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation, TileSet,
    TiledEvictable,
};
use strideweave::{ops, Carrier, DType, ErrorKind, Result, Shape, Tensor, Value};

fn set(coordinates: &[&[usize]]) -> TileSet {
    TileSet::new(coordinates.iter().map(|c| c.to_vec())).unwrap()
}

/// A 4×2 implicit-zero TiledEvictable in four 2×1 tiles over empty CPU tiers.
fn implicit_zeros() -> (Carrier, Carrier, Carrier) {
    let primary = Cpu::carrier(0, DType::FLOAT32, true, false).unwrap();
    let secondary = Cpu::carrier(0, DType::FLOAT32, true, false).unwrap();
    let tiled = TiledEvictable::zeros(&primary, &secondary, &[2, 2], &[2, 1], None).unwrap();
    (tiled, primary, secondary)
}

#[test]
fn promoting_an_implicit_tile_materializes_it_on_the_primary_reading_zero() {
    let (tiled, _, _) = implicit_zeros();
    let state = TiledEvictable::tile_state(&tiled, &[1, 0]).unwrap();
    assert_eq!(state.location(), TileLocation::Implicit);
    TiledEvictable::promote(&tiled, &set(&[&[1, 0]])).unwrap();
    let state = TiledEvictable::tile_state(&tiled, &[1, 0]).unwrap();
    assert_eq!(state.location(), TileLocation::Primary);
    assert!(!state.is_dirty());
    // Tile (1, 0) holds slots 2 and 3 (first mode fastest); both read zero.
    assert_eq!(tiled.get(2).unwrap(), Value::Float(0.0));
    assert_eq!(tiled.get(3).unwrap(), Value::Float(0.0));
    assert_eq!(tiled.version(), 0, "residency never moves the version");
    // The other tiles stay implicit, and promoting again changes nothing.
    assert_eq!(
        TiledEvictable::implicit_tiles(&tiled).unwrap(),
        set(&[&[0, 0], &[0, 1], &[1, 1]])
    );
    TiledEvictable::promote(&tiled, &set(&[&[1, 0]])).unwrap();
    assert_eq!(
        TiledEvictable::primary_tiles(&tiled).unwrap(),
        set(&[&[1, 0]])
    );
    // The materialized tile is an ordinary resident tile: it evicts, writes and reads back.
    TiledEvictable::evict(&tiled, &set(&[&[1, 0]])).unwrap();
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[1, 0])
            .unwrap()
            .location(),
        TileLocation::Secondary
    );
    tiled.set(3, Value::Float(7.5)).unwrap();
    assert_eq!(tiled.get(3).unwrap(), Value::Float(7.5));
    assert_eq!(tiled.get(2).unwrap(), Value::Float(0.0));
}

#[test]
fn a_failed_materialization_leaves_the_tile_implicit_and_the_request_retryable() {
    let faults = Faults::new();
    let primary = Faulty::carrier(&faults, &[]);
    let secondary = Faulty::carrier(&faults, &[]);
    let tiled = TiledEvictable::zeros(&primary, &secondary, &[2], &[2], None).unwrap();
    let live = faults.live();
    Faults::arm(&faults.allocations, 1);
    expect_err(
        TiledEvictable::promote(&tiled, &set(&[&[0], &[1]])),
        ErrorKind::Runtime,
        "injected allocation failure",
    );
    assert_eq!(
        faults.live(),
        live,
        "the copy made before the failure was released"
    );
    assert_eq!(
        TiledEvictable::implicit_tiles(&tiled).unwrap(),
        set(&[&[0], &[1]])
    );
    // Nothing stayed reserved: the same request now succeeds.
    TiledEvictable::promote(&tiled, &set(&[&[0], &[1]])).unwrap();
    assert_eq!(
        TiledEvictable::primary_tiles(&tiled).unwrap(),
        set(&[&[0], &[1]])
    );
    assert_eq!(faults.allocations.load(Ordering::SeqCst), -1);
}

#[test]
fn a_tile_coordinate_outside_the_grid_is_a_value_error_naming_both() {
    let (tiled, _, _) = implicit_zeros();
    let expected = "tile coordinate (5, 0) is outside the TiledEvictable grid [2, 2]";
    expect_err(
        TiledEvictable::tile_state(&tiled, &[5, 0]),
        ErrorKind::Value,
        expected,
    );
    expect_err(
        TiledEvictable::promote(&tiled, &set(&[&[0, 0], &[5, 0]])),
        ErrorKind::Value,
        expected,
    );
    expect_err(
        TiledEvictable::evict(&tiled, &set(&[&[5, 0]])),
        ErrorKind::Value,
        expected,
    );
    // The refused request moved nothing, not even the tile inside the grid.
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[0, 0])
            .unwrap()
            .location(),
        TileLocation::Implicit
    );
    expect_err(
        TiledEvictable::tile_state(&tiled, &[0]),
        ErrorKind::Value,
        "tile coordinate (0) has rank 1, but the TiledEvictable grid [2, 2] has rank 2",
    );
}

#[test]
fn release_releases_the_carrier_and_gives_up_both_tiers() {
    let (tiled, primary, secondary) = implicit_zeros();
    TiledEvictable::promote(&tiled, &set(&[&[0, 0]])).unwrap();
    let (tier_primary, tier_secondary) = (
        TiledEvictable::primary(&tiled).unwrap(),
        TiledEvictable::secondary(&tiled).unwrap(),
    );
    assert!(tier_primary.is_owned() && tier_secondary.is_owned());
    tiled.release().unwrap();
    assert!(tiled.is_released());
    for tier in [&tier_primary, &tier_secondary] {
        assert!(tier.is_released(), "{tier:?}");
        assert!(
            !tier.is_owned(),
            "a released tier is no longer owned: {tier:?}"
        );
    }
    // The prototypes the caller passed are the tiers themselves.
    assert!(primary.same_as(&tier_primary) && secondary.same_as(&tier_secondary));
    tiled.release().unwrap();
    expect_err(tiled.get(0), ErrorKind::Runtime, "released");
}

#[test]
fn allocate_like_empty_yields_invalid_tiles_whose_reads_name_the_tile() {
    let faults = Faults::new();
    let values: Vec<f64> = (0..8).map(f64::from).collect();
    let tiled = TiledEvictable::carrier(
        &Faulty::carrier(&faults, &values),
        &Faulty::carrier(&faults, &[]),
        &[2, 2],
        &[2, 1],
        None,
    )
    .unwrap();
    let fresh = tiled.allocate_like(8, true, None, true).unwrap();
    assert_eq!(fresh.class(), tiled.class());
    assert_eq!((fresh.size(), fresh.version()), (8, 0));
    let all = set(&[&[0, 0], &[1, 0], &[0, 1], &[1, 1]]);
    assert_eq!(TiledEvictable::invalid_tiles(&fresh).unwrap(), all);
    assert_eq!(TiledEvictable::implicit_tiles(&fresh).unwrap(), set(&[]));
    let state = TiledEvictable::tile_state(&fresh, &[1, 0]).unwrap();
    assert_eq!(
        (state.location(), state.is_valid(), state.is_dirty()),
        (TileLocation::Invalid, false, false)
    );
    // Slot 3 is coordinate (3, 0), in tile (1, 0); slot 4 is (0, 1), in tile (0, 1).
    expect_err(
        fresh.get(3),
        ErrorKind::Runtime,
        "cannot read slot 3: tile (1, 0) of the TiledEvictable is invalid",
    );
    expect_err(
        fresh.get(4),
        ErrorKind::Runtime,
        "cannot read slot 4: tile (0, 1) of the TiledEvictable is invalid",
    );
    expect_err(
        TiledEvictable::promote(&fresh, &set(&[&[1, 1]])),
        ErrorKind::Runtime,
        "cannot promote tile (1, 1): it is invalid",
    );
    // The prototype is untouched, and its tiers gave the fresh carrier empty tiers.
    assert_eq!(tiled.get(3).unwrap(), Value::Float(3.0));
    assert_eq!(TiledEvictable::primary(&fresh).unwrap().size(), 0);
    assert_eq!(TiledEvictable::secondary(&fresh).unwrap().size(), 0);
}

#[test]
fn allocate_like_not_empty_yields_implicit_zero_tiles_without_storage() {
    let faults = Faults::new();
    let tiled = TiledEvictable::carrier(
        &Faulty::carrier(&faults, &[1.0, 2.0, 3.0, 4.0]),
        &Faulty::carrier(&faults, &[]),
        &[2],
        &[2],
        None,
    )
    .unwrap();
    let live = faults.live();
    let fresh = tiled.allocate_like(4, true, None, false).unwrap();
    // Two empty tiers, no tile carrier: the zero tiles have no storage.
    assert_eq!(faults.live(), live + 2);
    assert_eq!(
        TiledEvictable::implicit_tiles(&fresh).unwrap(),
        set(&[&[0], &[1]])
    );
    assert_eq!(TiledEvictable::dirty_tiles(&fresh).unwrap(), set(&[]));
    for slot in 0..4 {
        assert_eq!(fresh.get(slot).unwrap(), Value::Float(0.0), "slot {slot}");
    }
    assert_eq!(fresh.version(), 0);
    // An empty allocation that cannot be made fails whole: nothing stays alive.
    Faults::arm(&faults.allocations, 1);
    expect_err(
        tiled.allocate_like(4, true, None, true),
        ErrorKind::Runtime,
        "injected allocation failure",
    );
    assert_eq!(faults.live(), live + 2);
}

/// A policy recording every plan it is asked for and answering a fixed suggestion.
#[derive(Debug)]
struct Recording {
    asked: Mutex<Vec<(TileSet, ResidencyPurpose)>>,
    promote: TileSet,
    evict: TileSet,
    capacity: Option<usize>,
}

impl Recording {
    fn new(promote: TileSet, evict: TileSet, capacity: Option<usize>) -> Arc<Recording> {
        Arc::new(Recording {
            asked: Mutex::new(Vec::new()),
            promote,
            evict,
            capacity,
        })
    }

    fn silent() -> Arc<Recording> {
        Recording::new(TileSet::empty(), TileSet::empty(), None)
    }

    fn take(&self) -> Vec<(TileSet, ResidencyPurpose)> {
        std::mem::take(&mut *self.asked.lock().unwrap())
    }
}

impl ResidencyPolicy for Recording {
    fn plan(&self, required: &TileSet, purpose: ResidencyPurpose) -> Result<ResidencyPlan> {
        self.asked.lock().unwrap().push((required.clone(), purpose));
        ResidencyPlan::new(self.promote.clone(), TileSet::empty(), self.evict.clone())
    }
    fn primary_capacity(&self) -> Option<usize> {
        self.capacity
    }
}

/// A 4×2 TiledEvictable of `values` in 2×1 tiles over a full CPU secondary (every tile
/// secondary) and an empty CPU primary, steered by `policy`.
fn on_secondary(values: &[f32], policy: Option<Arc<dyn ResidencyPolicy>>) -> Tensor {
    let primary = Cpu::from_f32(&[], true).unwrap();
    let secondary = Cpu::from_f32(values, true).unwrap();
    let tiled = TiledEvictable::carrier(&primary, &secondary, &[2, 2], &[2, 1], policy).unwrap();
    Tensor::compact(tiled, Shape::new(vec![4, 2]).unwrap()).unwrap()
}

fn numbers(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

const EIGHT: [f32; 8] = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0];

#[test]
fn every_tiled_operation_asks_each_operand_policy_for_an_operation_plan() {
    let (a, b) = (Recording::silent(), Recording::silent());
    let x = on_secondary(&EIGHT, Some(a.clone()));
    let y = on_secondary(&EIGHT, Some(b.clone()));
    let every = set(&[&[0, 0], &[1, 0], &[0, 1], &[1, 1]]);
    let one = vec![(every.clone(), ResidencyPurpose::Operation)];
    type Run<'a> = Box<dyn Fn() -> Result<Tensor> + 'a>;
    let runs: Vec<(&str, Run, usize)> = vec![
        ("add", Box::new(|| ops::add(&x, &y)), 1),
        (
            "elementwise_mul",
            Box::new(|| ops::elementwise_mul(&x, &y)),
            1,
        ),
        ("mul", Box::new(|| ops::mul(&x, &y)), 1),
        ("mul by a scalar", Box::new(|| ops::mul(&x, 2.0)), 0),
        ("relu", Box::new(|| ops::relu(&x)), 0),
        ("reduce_sum", Box::new(|| ops::reduce_sum(&x)), 0),
        ("matmul", Box::new(|| ops::matmul(&x, &y)), 1),
        // One carrier twice is planned once.
        ("add(x, x)", Box::new(|| ops::add(&x, &x)), 0),
    ];
    for (name, run, b_plans) in runs {
        run().unwrap();
        assert_eq!(a.take(), one, "{name}: the first operand's policy");
        assert_eq!(
            b.take().len(),
            b_plans,
            "{name}: the second operand's policy"
        );
    }
    // The silent plan moved nothing.
    assert_eq!(TiledEvictable::secondary_tiles(x.carrier()).unwrap(), every);
}

#[test]
fn the_operations_plan_is_what_runs_before_it_streams() {
    // Tile (0, 1) is promoted by the plan; the dense result is unchanged by residency.
    let policy = Recording::new(set(&[&[0, 1]]), TileSet::empty(), Some(2));
    let x = on_secondary(&EIGHT, Some(policy.clone()));
    let sums = ops::reduce_sum(&x).unwrap();
    assert_eq!(numbers(&sums), vec![6.0, -8.0, 10.0, -12.0]);
    assert_eq!(
        TiledEvictable::primary_tiles(x.carrier()).unwrap(),
        set(&[&[0, 1]])
    );
    assert_eq!(x.carrier().version(), 0, "residency moves no version");
    // Next the plan evicts it again and promotes two others: the eviction runs first, and the
    // promotions are cut to the capacity of 2 in the set's order.
    let policy = Recording::new(set(&[&[1, 0], &[1, 1], &[0, 0]]), set(&[&[0, 1]]), Some(2));
    let primary = Cpu::from_f32(&[], true).unwrap();
    let secondary = Cpu::from_f32(&EIGHT, true).unwrap();
    let tiled =
        TiledEvictable::carrier(&primary, &secondary, &[2, 2], &[2, 1], Some(policy.clone()))
            .unwrap();
    TiledEvictable::promote(&tiled, &set(&[&[0, 1]])).unwrap();
    let x = Tensor::compact(tiled.clone(), Shape::new(vec![4, 2]).unwrap()).unwrap();
    let doubled = ops::mul(&x, 2.0).unwrap();
    assert_eq!(
        numbers(&doubled),
        EIGHT
            .iter()
            .map(|&v| f64::from(v) * 2.0)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        TiledEvictable::primary_tiles(&tiled).unwrap(),
        set(&[&[0, 0], &[1, 0]])
    );
    assert_eq!(
        TiledEvictable::secondary_tiles(&tiled).unwrap(),
        set(&[&[0, 1], &[1, 1]])
    );
}

#[test]
fn the_default_policy_keeps_streamed_work_from_moving_tiles() {
    for policy in [
        None,
        Some(Arc::new(CapacityPolicy::new(2)) as Arc<dyn ResidencyPolicy>),
        Some(Arc::new(CapacityPolicy::unbounded()) as Arc<dyn ResidencyPolicy>),
    ] {
        let x = on_secondary(&EIGHT, policy.clone());
        TiledEvictable::promote(x.carrier(), &set(&[&[1, 1]])).unwrap();
        let every = set(&[&[0, 0], &[1, 0], &[0, 1], &[1, 1]]);
        let plan = TiledEvictable::plan_residency(x.carrier(), &every, ResidencyPurpose::Operation)
            .unwrap();
        assert!(
            plan.promote().is_empty() && plan.evict().is_empty(),
            "{policy:?}"
        );
        assert_eq!(plan.retain(), &TileSet::empty());
        let sums = ops::reduce_sum(&x).unwrap();
        assert_eq!(numbers(&sums), vec![6.0, -8.0, 10.0, -12.0]);
        assert_eq!(
            TiledEvictable::primary_tiles(x.carrier()).unwrap(),
            set(&[&[1, 1]]),
            "{policy:?}"
        );
        // A read plan still promotes what it requires.
        let plan =
            TiledEvictable::plan_residency(x.carrier(), &every, ResidencyPurpose::Read).unwrap();
        assert_eq!(plan.promote(), &set(&[&[0, 0], &[1, 0], &[0, 1]]));
    }
}
