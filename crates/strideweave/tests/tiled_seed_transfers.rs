//! The first promotion (or eviction) of a tile still in its full seed tier copies the tile's
//! span in bulk through the tiers' public non-destructive copy — the tier pair's route —
//! instead of reading the seed tier slot by slot (docs/tiers.md, Tile state and residency;
//! docs/tiled-design.md, Residency requests). A failing copy commits nothing and the request
//! can be retried; a write to another seed tile during a copy waits for it instead of failing
//! on the claimed seed tier.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    PreparedTransfer, Submitted, TransferPreparation, TransferProvider,
};
use strideweave::carriers::{Cpu, TileLocation, TileSet, TiledEvictable};
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, ErrorKind, StorageProvider,
    TransferRoute, Value,
};

/// The slots of the test tier class.
#[derive(Clone, Default)]
struct Slots {
    values: Vec<f32>,
}

/// What the test tier class counts and can be told to do.
#[derive(Default)]
struct Probe {
    /// Slot reads through the storage surface (`Carrier::get`).
    slot_reads: AtomicUsize,
    /// Runs of the bulk route to the CPU, with the slots each copied.
    route_runs: Mutex<Vec<(usize, usize)>>,
    /// Route runs still allowed before one fails (negative: none fails).
    fail_after: AtomicI64,
    /// While set, the route waits for the gate before copying.
    hold: AtomicBool,
    gate: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl Probe {
    fn reset(&self) {
        self.slot_reads.store(0, Ordering::SeqCst);
        self.route_runs.lock().unwrap().clear();
        self.fail_after.store(-1, Ordering::SeqCst);
    }
}

fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        let probe = Probe::default();
        probe.fail_after.store(-1, Ordering::SeqCst);
        probe
    })
}

/// The tests share the one probe: they run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn storage() -> StorageProvider {
    StorageProvider::new(
        |_: &Slots, dtype| dtype == DType::FLOAT32,
        |state: &Slots| state.values.len() as i64,
        |state: &mut Slots, slots, _dtype| {
            state.values = vec![0.0; slots];
            Ok(())
        },
        |state: &mut Slots| {
            state.values.clear();
            Ok(())
        },
        |state: &Slots, index| {
            probe().slot_reads.fetch_add(1, Ordering::SeqCst);
            Ok(Value::Float(f64::from(state.values[index])))
        },
        |state: &mut Slots, index, value| {
            state.values[index] = value.as_f64().unwrap_or(0.0) as f32;
            Ok(())
        },
    )
}

/// The test tier class: slots in provider state, and a bulk route to the CPU that copies a
/// tensor's physical span in one run (reading the provider state directly, not slot by
/// slot).
fn class() -> CarrierClass {
    static CLASS: OnceLock<CarrierClass> = OnceLock::new();
    *CLASS.get_or_init(|| {
        let class = CarrierClass::mint("SpanTier", ClassKind::Independent);
        let provider = TransferProvider::new(|request| {
            let request = request.clone();
            Ok(TransferPreparation::Transfer(PreparedTransfer::new(
                move || {
                    let probe = probe();
                    if probe.hold.load(Ordering::SeqCst) {
                        let mut gate = probe.gate.lock().unwrap();
                        gate.0 = true;
                        probe.changed.notify_all();
                        while !gate.1 {
                            gate = probe.changed.wait(gate).unwrap();
                        }
                    }
                    let start = request.tensor().offset();
                    let span = request.physical_span();
                    if probe.fail_after.load(Ordering::SeqCst) == 0 {
                        probe.fail_after.store(-1, Ordering::SeqCst);
                        return Err(Error::Runtime("injected route failure".into()));
                    }
                    if probe.fail_after.load(Ordering::SeqCst) > 0 {
                        probe.fail_after.fetch_sub(1, Ordering::SeqCst);
                    }
                    let values =
                        request
                            .tensor()
                            .carrier()
                            .with_provider_state(|slots: &Slots| {
                                slots.values[start..start + span].to_vec()
                            })?;
                    probe.route_runs.lock().unwrap().push((start, span));
                    request.write_f32s(0, &values)?;
                    Ok(Submitted::Ready(()))
                },
            )))
        });
        let route =
            TransferRoute::new(class, CarrierClass::of::<Cpu>(), "span", provider).expect("route");
        register_carrier_definition(
            class,
            CarrierDefinition::new(storage())
                .with_transfers(vec![route])
                .expect("definition"),
        )
        .expect("register");
        class
    })
}

/// A full tier of the test class holding `values`.
fn span_tier(values: &[f32]) -> Carrier {
    let carrier = Carrier::create(
        class(),
        Slots::default(),
        values.len(),
        DType::FLOAT32,
        true,
    )
    .expect("tier");
    for (slot, &v) in values.iter().enumerate() {
        carrier.set(slot, Value::Float(f64::from(v))).expect("fill");
    }
    carrier
}

fn counting(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 3.0).collect()
}

/// A TiledEvictable over an empty CPU primary and a full test-class secondary of `values`.
fn on_span_tier(values: &[f32], grid: &[usize], tile: &[usize]) -> Carrier {
    let primary = Cpu::from_f32(&[], true).unwrap();
    TiledEvictable::carrier(&primary, &span_tier(values), grid, tile, None).unwrap()
}

fn all_tiles(grid: &[usize]) -> TileSet {
    let mut coordinates = Vec::new();
    for j in 0..grid[1] {
        for i in 0..grid[0] {
            coordinates.push(vec![i, j]);
        }
    }
    TileSet::new(coordinates).unwrap()
}

fn values_of(carrier: &Carrier) -> Vec<f32> {
    (0..carrier.size())
        .map(|slot| carrier.get(slot).unwrap().as_f64().unwrap() as f32)
        .collect()
}

#[test]
fn the_first_promotion_of_a_seed_tile_copies_its_span_in_bulk() {
    let _serial = serial();
    // Row panels (each tile covers the first axis: its span is exactly its slots) and
    // square tiles (the span of a tile has gaps: the columns of the tiles below it).
    for (grid, tile, span) in [([1, 4], [6, 2], 12), ([2, 2], [3, 2], 9)] {
        let logical = [grid[0] * tile[0], grid[1] * tile[1]];
        let values = counting(logical[0] * logical[1]);
        let tiled = on_span_tier(&values, &grid, &tile);
        probe().reset();
        TiledEvictable::promote(&tiled, &all_tiles(&grid)).unwrap();
        let runs = probe().route_runs.lock().unwrap().clone();
        assert_eq!(runs.len(), 4, "{tile:?}: one bulk copy per tile: {runs:?}");
        assert!(runs.iter().all(|&(_, s)| s == span), "{tile:?}: {runs:?}");
        assert_eq!(
            probe().slot_reads.load(Ordering::SeqCst),
            0,
            "{tile:?}: no slot of the seed tier is read one by one"
        );
        assert_eq!(
            TiledEvictable::primary_tiles(&tiled).unwrap(),
            all_tiles(&grid)
        );
        assert_eq!(values_of(&tiled), values, "{tile:?}: every slot arrives");
        assert_eq!(tiled.version(), 0);
        // Promoting again copies nothing (the tiles are resident).
        probe().reset();
        TiledEvictable::promote(&tiled, &all_tiles(&grid)).unwrap();
        assert!(probe().route_runs.lock().unwrap().is_empty(), "{tile:?}");
        assert_eq!(values_of(&tiled), values, "{tile:?}");
    }
}

#[test]
fn a_failing_bulk_seed_copy_commits_nothing_and_the_request_can_be_retried() {
    let _serial = serial();
    let (grid, tile) = ([1, 4], [6, 2]);
    let values = counting(48);
    let tiled = on_span_tier(&values, &grid, &tile);
    probe().reset();
    // The first tile's copy succeeds, the second fails.
    probe().fail_after.store(1, Ordering::SeqCst);
    let error = TiledEvictable::promote(&tiled, &all_tiles(&grid)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(
        error.to_string().contains("injected route failure"),
        "{error}"
    );
    assert_eq!(
        TiledEvictable::secondary_tiles(&tiled).unwrap(),
        all_tiles(&grid),
        "no tile moved"
    );
    assert!(TiledEvictable::invalid_tiles(&tiled).unwrap().is_empty());
    assert!(TiledEvictable::dirty_tiles(&tiled).unwrap().is_empty());
    assert_eq!(tiled.version(), 0);
    assert_eq!(values_of(&tiled), values);
    // Nothing is left claimed: a write into a seed tile works, and the retry succeeds.
    tiled.set(47, Value::Float(99.0)).unwrap();
    let mut expected = values.clone();
    expected[47] = 99.0;
    TiledEvictable::promote(&tiled, &all_tiles(&grid)).unwrap();
    assert_eq!(
        TiledEvictable::primary_tiles(&tiled).unwrap(),
        all_tiles(&grid)
    );
    assert_eq!(values_of(&tiled), expected);
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[0, 3])
            .unwrap()
            .location(),
        TileLocation::Primary
    );
}

#[test]
fn a_seed_write_during_a_bulk_seed_copy_waits_for_it() {
    let _serial = serial();
    let (grid, tile) = ([1, 4], [6, 2]);
    let values = counting(48);
    let tiled = on_span_tier(&values, &grid, &tile);
    probe().reset();
    *probe().gate.lock().unwrap() = (false, false);
    probe().hold.store(true, Ordering::SeqCst);
    let promoting = {
        let tiled = tiled.clone();
        thread::spawn(move || TiledEvictable::promote(&tiled, &TileSet::new([vec![0, 0]])?))
    };
    // Wait until the copy of tile (0, 0) holds the seed tier.
    {
        let mut gate = probe().gate.lock().unwrap();
        while !gate.0 {
            gate = probe().changed.wait(gate).unwrap();
        }
    }
    let writing = {
        let tiled = tiled.clone();
        thread::spawn(move || tiled.set(40, Value::Float(7.0)))
    };
    thread::sleep(Duration::from_millis(50));
    assert!(!writing.is_finished(), "the write waits for the copy");
    probe().hold.store(false, Ordering::SeqCst);
    {
        let mut gate = probe().gate.lock().unwrap();
        gate.1 = true;
        probe().changed.notify_all();
    }
    promoting.join().unwrap().unwrap();
    writing.join().unwrap().unwrap();
    let mut expected = values.clone();
    expected[40] = 7.0;
    assert_eq!(values_of(&tiled), expected);
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[0, 0])
            .unwrap()
            .location(),
        TileLocation::Primary
    );
    let written = TiledEvictable::tile_state(&tiled, &[0, 3]).unwrap();
    assert_eq!(
        (written.location(), written.is_dirty()),
        (TileLocation::Secondary, true)
    );
}
