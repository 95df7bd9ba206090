//! Pinned tiles (docs/tiers.md, Pinned tiles): the tiles a running tiled operation reads are
//! pinned; a residency request that would move one waits for the pin or fails when asked
//! not to wait; a request from inside the pinned work fails instead of waiting for itself;
//! no lock of the carrier is held while a tier is accessed, so a tier calling back into the
//! carrier cannot deadlock; concurrent streaming and residency never read a wrong value.

mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::floats;
use strideweave::carrier::{Carrier, DefinitionFreeCarrier};
use strideweave::carriers::{
    Cpu, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation, TileProgress, TileSet,
    TiledEvictable, WhenPinned,
};
use strideweave::{ops, DType, ErrorKind, Result, Shape, Tensor, Value};

fn set(coordinates: &[&[usize]]) -> TileSet {
    TileSet::new(coordinates.iter().map(|c| c.to_vec())).unwrap()
}

fn numbers(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// Runs `work` on its own thread and fails the test if it does not finish within `limit`
/// (a deadlock fails instead of hanging).
fn within<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = channel();
    thread::spawn(move || {
        let _ = done.send(work());
    });
    finished
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the work did not finish within {limit:?}: deadlock"))
}

/// A policy whose first progress report runs `probe` (on the operation's thread, mid-run).
struct Probing {
    probe: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Probing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Probing")
    }
}

impl ResidencyPolicy for Probing {
    fn plan(&self, _: &TileSet, _: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }
    fn primary_capacity(&self) -> Option<usize> {
        Some(1)
    }
    fn on_progress(&self, _: &TileProgress) {
        if let Some(probe) = self.probe.lock().unwrap().take() {
            probe();
        }
    }
}

/// A 4×2 tensor in four 2×1 tiles, seeded on a full CPU secondary, over an empty CPU
/// primary; the policy bounds it to one tile so the operation streams tile by tile.
fn streamed(policy: Arc<Probing>) -> (Carrier, Tensor) {
    let values = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0];
    let tiled = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true).unwrap(),
        &Cpu::from_f32(&values, true).unwrap(),
        &[2, 2],
        &[2, 1],
        Some(policy),
    )
    .unwrap();
    // Give one tile its own primary copy, so evicting it would replace a copy.
    TiledEvictable::promote(&tiled, &set(&[&[0, 0]])).unwrap();
    let x = Tensor::compact(tiled.clone(), Shape::new(vec![4, 2]).unwrap()).unwrap();
    (tiled, x)
}

#[test]
fn a_running_operation_pins_its_tiles_and_a_waiting_request_starts_after_it() {
    let policy = Arc::new(Probing {
        probe: Mutex::new(None),
    });
    let (tiled, x) = streamed(policy.clone());
    assert_eq!(
        TiledEvictable::pinned_tiles(&tiled).unwrap(),
        TileSet::empty()
    );
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let finished = Arc::new(AtomicBool::new(false));
    let waiter: Arc<Mutex<Option<thread::JoinHandle<Result<()>>>>> = Arc::default();
    {
        let (tiled, seen, finished, waiter) = (
            tiled.clone(),
            seen.clone(),
            finished.clone(),
            waiter.clone(),
        );
        *policy.probe.lock().unwrap() = Some(Box::new(move || {
            let pinned = TiledEvictable::pinned_tiles(&tiled).unwrap();
            let count = TiledEvictable::residency(&tiled)
                .unwrap()
                .pinned_count(&tiled)
                .unwrap();
            seen.lock()
                .unwrap()
                .push(format!("{} pinned, {count}", pinned.len()));
            let tile = set(&[&[0, 0]]);
            for error in [
                TiledEvictable::evict_async_with(&tiled, &tile, WhenPinned::Fail).unwrap_err(),
                TiledEvictable::evict_async(&tiled, &tile).unwrap_err(),
                tiled.release().unwrap_err(),
            ] {
                assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
                seen.lock().unwrap().push(error.to_string());
            }
            // Another thread's request waits for the pin.
            let other = tiled.clone();
            let flag = finished.clone();
            *waiter.lock().unwrap() = Some(thread::spawn(move || {
                let outcome = TiledEvictable::evict(&other, &set(&[&[0, 0]]));
                flag.store(true, Ordering::SeqCst);
                outcome
            }));
            thread::sleep(Duration::from_millis(100));
            seen.lock().unwrap().push(format!(
                "waiter finished: {}",
                finished.load(Ordering::SeqCst)
            ));
        }));
    }
    let sums = within(Duration::from_secs(60), move || {
        numbers(&ops::reduce_sum(&x).unwrap())
    });
    assert_eq!(sums, vec![6.0, -8.0, 10.0, -12.0]);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], "4 pinned, 4", "{seen:?}");
    assert!(
        seen[1].contains("cannot evict tile (0, 0): it is pinned by a running operation")
            && seen[1].contains("WhenPinned::Fail"),
        "{seen:?}"
    );
    assert!(
        seen[2]
            .contains("cannot evict tile (0, 0): it is pinned by the work running on this thread"),
        "{seen:?}"
    );
    assert!(
        seen[3].contains("cannot release the TiledEvictable: tile (0, 0) is pinned"),
        "{seen:?}"
    );
    assert_eq!(
        seen[4], "waiter finished: false",
        "the request waited for the pin"
    );
    let handle = waiter.lock().unwrap().take().unwrap();
    handle.join().unwrap().unwrap();
    assert_eq!(
        TiledEvictable::pinned_tiles(&tiled).unwrap(),
        TileSet::empty()
    );
    assert_eq!(
        TiledEvictable::tile_state(&tiled, &[0, 0])
            .unwrap()
            .location(),
        TileLocation::Secondary
    );
    assert_eq!(tiled.get(1).unwrap(), Value::Float(-2.0));
    assert_eq!(tiled.version(), 0);
}

#[test]
fn streaming_while_other_threads_promote_and_evict_never_deadlocks_or_misreads() {
    // 64×16 in 4×2 tiles of 16×8, seeded on the primary tier; the other tier is CPU too.
    let (rows, columns) = (64, 16);
    let values: Vec<f32> = (0..rows * columns)
        .map(|i| ((i * 37) % 101) as f32 - 50.0)
        .collect();
    let expected: Vec<f64> = (0..rows)
        .map(|r| (0..columns).map(|c| f64::from(values[r + rows * c])).sum())
        .collect();
    let tiled = TiledEvictable::carrier(
        &Cpu::from_f32(&values, true).unwrap(),
        &Cpu::from_f32(&[], true).unwrap(),
        &[4, 2],
        &[16, 8],
        None,
    )
    .unwrap();
    let x = Tensor::compact(tiled.clone(), Shape::new(vec![rows, columns]).unwrap()).unwrap();
    let rounds = 40;
    let outcome = within(Duration::from_secs(120), {
        let (tiled, values) = (tiled.clone(), values.clone());
        move || {
            let mut threads = Vec::new();
            for half in [[0, 1, 2, 3], [4, 5, 6, 7]] {
                let tiled = tiled.clone();
                threads.push(thread::spawn(move || -> Result<usize> {
                    let tiles = TileSet::new(half.iter().map(|&t| vec![t % 4, t / 4]))?;
                    for round in 0..rounds {
                        if round % 2 == 0 {
                            TiledEvictable::evict(&tiled, &tiles)?;
                        } else {
                            TiledEvictable::promote(&tiled, &tiles)?;
                        }
                    }
                    Ok(rounds)
                }));
            }
            let mut wrong = 0;
            for round in 0..rounds {
                let sums = numbers(&ops::reduce_sum(&x)?);
                let close = sums
                    .iter()
                    .zip(&expected)
                    .all(|(a, e)| (a - e).abs() <= 1e-3 * e.abs().max(1.0));
                if !close {
                    wrong += 1;
                }
                if round % 8 == 0 {
                    let copied = numbers(&ops::mul(&x, 1.0)?);
                    let same = copied.iter().zip(&values).all(|(a, v)| *a == f64::from(*v));
                    if !same {
                        wrong += 1;
                    }
                }
            }
            let moved: Vec<usize> = threads
                .into_iter()
                .map(|t| t.join().expect("a residency thread panicked"))
                .collect::<Result<_>>()?;
            Ok::<_, strideweave::Error>((wrong, moved))
        }
    })
    .unwrap();
    assert_eq!(
        outcome,
        (0, vec![rounds, rounds]),
        "no wrong value, every round ran"
    );
    // Every tile is valid afterwards, nothing pinned or pending, and the values are intact.
    assert!(TiledEvictable::invalid_tiles(&tiled).unwrap().is_empty());
    assert_eq!(
        TiledEvictable::pinned_tiles(&tiled).unwrap(),
        TileSet::empty()
    );
    assert_eq!(TiledEvictable::primary_tiles(&tiled).unwrap().len(), 8);
    for slot in [0, 17, 300, rows * columns - 1] {
        assert_eq!(
            tiled.get(slot).unwrap(),
            Value::Float(f64::from(values[slot]))
        );
    }
    assert_eq!(tiled.version(), 0);
}

// ---------------------------------------------------------------------------------------------
// A tier calling back into the carrier

type Hook = Arc<Mutex<Option<Box<dyn Fn() + Send + Sync>>>>;

thread_local! {
    /// Whether the hook is running on this thread (a hook's own tier calls do not recurse).
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

fn call(hook: &Hook) {
    if IN_HOOK.with(Cell::get) {
        return;
    }
    let hook = hook.lock().unwrap().as_ref().map(|_| Arc::clone(hook));
    if let Some(hook) = hook {
        IN_HOOK.with(|f| f.set(true));
        if let Some(run) = hook.lock().unwrap().as_ref() {
            run();
        }
        IN_HOOK.with(|f| f.set(false));
    }
}

/// A Float32 tier whose reads, factories and releases first call a shared hook.
#[derive(Debug)]
struct Calling {
    values: Mutex<Vec<Value>>,
    #[allow(dead_code)]
    hook: HookHolder,
}

struct HookHolder(Hook);

impl std::fmt::Debug for HookHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("hook")
    }
}

impl Calling {
    fn carrier(hook: &Hook, values: &[f64]) -> Carrier {
        Carrier::new(Calling::with(hook, floats(values)), DType::FLOAT32, true).unwrap()
    }

    fn with(hook: &Hook, values: Vec<Value>) -> Calling {
        Calling {
            values: Mutex::new(values),
            hook: HookHolder(Arc::clone(hook)),
        }
    }
}

impl DefinitionFreeCarrier for Calling {
    const NAME: &'static str = "Calling";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }
    fn size(&self) -> usize {
        self.values.lock().unwrap().len()
    }
    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        call(&self.hook.0);
        Ok(self.values.lock().unwrap()[index])
    }
    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.values.lock().unwrap()[index] = value;
        Ok(())
    }
    fn release(&self) -> Result<()> {
        call(&self.hook.0);
        self.values.lock().unwrap().clear();
        Ok(())
    }
    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        call(&self.hook.0);
        Ok(Calling::with(&self.hook.0, values.to_vec()))
    }
    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        call(&self.hook.0);
        Ok(Calling::with(&self.hook.0, vec![Value::Float(0.0); size]))
    }
}

#[test]
fn a_tier_calling_back_into_the_carrier_cannot_deadlock_it() {
    let hook: Hook = Arc::default();
    let values: Vec<f64> = (1..=8).map(f64::from).collect();
    let values32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let tiled = TiledEvictable::carrier(
        &Cpu::from_f32(&values32, true).unwrap(),
        &Calling::carrier(&hook, &[]),
        &[4],
        &[2],
        None,
    )
    .unwrap();
    let answers: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let (tiled, answers) = (tiled.clone(), answers.clone());
        *hook.lock().unwrap() = Some(Box::new(move || {
            let state = TiledEvictable::tile_state(&tiled, &[0]).map(|s| s.location());
            let pinned = TiledEvictable::pinned_tiles(&tiled).map(|p| p.len());
            // Toggle tile 0. Moving a pinned tile from inside the work that pins it fails;
            // outside an operation no tile is pinned and the move runs.
            let zero = set(&[&[0]]);
            let moved = match TiledEvictable::tile_state(&tiled, &[0]).map(|s| s.location()) {
                Ok(TileLocation::Primary) => TiledEvictable::evict(&tiled, &zero),
                _ => TiledEvictable::promote(&tiled, &zero),
            };
            answers.lock().unwrap().push(format!(
                "{state:?} / {pinned:?} pinned / {}",
                match moved {
                    Ok(()) => "moved".to_string(),
                    Err(error) => error.to_string(),
                }
            ));
        }));
    }
    let outcome = within(Duration::from_secs(60), {
        let tiled = tiled.clone();
        move || -> Result<Vec<f64>> {
            // Residency through the calling tier: seed copies into fresh Calling carriers,
            // then moves of own carriers back, and the releases of replaced copies.
            TiledEvictable::evict(&tiled, &set(&[&[1], &[2], &[3]]))?;
            TiledEvictable::promote(&tiled, &set(&[&[1]]))?;
            TiledEvictable::evict(&tiled, &set(&[&[1]]))?;
            // An operation staging the secondary tiles reads the calling tier on the staging
            // worker and on this thread, while every tile is pinned.
            let x = Tensor::compact(tiled.clone(), Shape::new(8).unwrap())?;
            let doubled = ops::mul(&x, 2.0)?;
            Ok(numbers(&doubled))
        }
    })
    .unwrap();
    *hook.lock().unwrap() = None;
    assert_eq!(outcome, values.iter().map(|v| v * 2.0).collect::<Vec<_>>());
    let answers = answers.lock().unwrap().clone();
    assert!(!answers.is_empty());
    assert!(
        answers.iter().any(|a| a.ends_with("/ moved")),
        "a residency request from a tier callback outside any operation runs: {answers:?}"
    );
    assert!(
        answers.iter().any(|a| a.contains("Ok(4) pinned")
            && a.contains("tile (0): it is pinned by the work running on this thread")),
        "inside the operation the request fails instead of waiting for itself: {answers:?}"
    );
    assert!(TiledEvictable::invalid_tiles(&tiled).unwrap().is_empty());
    assert_eq!(
        TiledEvictable::pinned_tiles(&tiled).unwrap(),
        TileSet::empty()
    );
    for (slot, &value) in values.iter().enumerate() {
        assert_eq!(tiled.get(slot).unwrap(), Value::Float(value));
    }
}
