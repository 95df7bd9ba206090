//! A residency policy whose progress observer fails (`ResidencyPolicy::try_on_progress`):
//! the tiled operation, its backward pass or the accumulation of two gradients stops at the
//! failing report and fails with that error, publishing nothing (docs/tiers.md, progress).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use strideweave::carrier::Carrier;
use strideweave::carriers::{
    Cpu, FileBacked, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation, TileProgress,
    TileSet, TiledEvictable,
};
use strideweave::movement::move_to;
use strideweave::{ops, DType, Error, Layout, Result, Tensor};

/// Bounds the primary tier at two tiles, plans nothing, records every report and fails the
/// `fail_at`-th report of the operation named `fail_on` (0: never).
#[derive(Debug)]
struct Stopping {
    fail_on: Mutex<String>,
    fail_at: AtomicUsize,
    reports: Mutex<Vec<(String, usize)>>,
}

impl Stopping {
    fn new(fail_on: &str, fail_at: usize) -> Arc<Stopping> {
        Arc::new(Stopping {
            fail_on: Mutex::new(fail_on.to_owned()),
            fail_at: AtomicUsize::new(fail_at),
            reports: Mutex::new(Vec::new()),
        })
    }

    fn reports(&self) -> Vec<(String, usize)> {
        self.reports.lock().unwrap().clone()
    }
}

impl ResidencyPolicy for Stopping {
    fn plan(&self, _: &TileSet, _: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }

    fn primary_capacity(&self) -> Option<usize> {
        Some(2)
    }

    fn try_on_progress(&self, progress: &TileProgress) -> Result<()> {
        let name = progress.operation().to_owned();
        self.reports
            .lock()
            .unwrap()
            .push((name.clone(), progress.completed()));
        if *self.fail_on.lock().unwrap() == name
            && self.fail_at.load(Ordering::SeqCst) == progress.completed()
        {
            return Err(Error::Lookup(format!(
                "observer of {name} failed at item {}",
                progress.completed()
            )));
        }
        Ok(())
    }
}

/// A 4x4 tensor's carrier (values 0..16) in four 4x1 tiles on a FileBacked secondary tier.
fn streamed(policy: Arc<Stopping>) -> Carrier {
    let values: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let flat = Layout::from_flat(&[16], &[1]).unwrap();
    move_to(
        &Tensor::new(Cpu::from_f32(&values, true).unwrap(), 0, flat).unwrap(),
        &file,
    )
    .unwrap();
    let primary = Cpu::carrier(0, DType::FLOAT32, true, false).unwrap();
    TiledEvictable::carrier(&primary, &file, &[1, 4], &[4, 1], Some(policy)).unwrap()
}

fn whole(carrier: &Carrier) -> Tensor {
    Tensor::new(
        carrier.clone(),
        0,
        Layout::from_flat(&[4, 4], &[1, 4]).unwrap(),
    )
    .unwrap()
}

fn all_secondary(carrier: &Carrier) -> bool {
    (0..4).all(|k| {
        TiledEvictable::tile_state(carrier, &[0, k])
            .unwrap()
            .location()
            == TileLocation::Secondary
    })
}

fn floats(t: &Tensor) -> Vec<f64> {
    t.to_values()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn a_failing_observer_stops_a_streamed_operation_which_publishes_nothing() {
    for at in 1..=4 {
        let policy = Stopping::new("reduce_sum", at);
        let carrier = streamed(Arc::clone(&policy));
        let error = ops::reduce_sum(&whole(&carrier)).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("lookup error: observer of reduce_sum failed at item {at}")
        );
        let reports = policy.reports();
        assert_eq!(reports.len(), at, "no item runs after the failing report");
        assert_eq!(carrier.version(), 0);
        assert!(all_secondary(&carrier));
        policy.fail_at.store(0, Ordering::SeqCst);
        let sums = ops::reduce_sum(&whole(&carrier)).unwrap();
        assert_eq!(floats(&sums), vec![24.0, 28.0, 32.0, 36.0]);
    }
}

#[test]
fn a_failing_observer_during_backward_leaves_no_gradient() {
    let policy = Stopping::new("reduce_sum.backward", 2);
    let carrier = streamed(Arc::clone(&policy));
    let x = whole(&carrier);
    x.set_requires_grad(true).unwrap();
    let y = ops::reduce_sum(&x).unwrap();
    let ones = Tensor::new(
        Cpu::from_f32(&[1.0; 4], true).unwrap(),
        0,
        Layout::from_flat(&[4], &[1]).unwrap(),
    )
    .unwrap();
    let error = y.backward(Some(&ones), true).unwrap_err();
    assert_eq!(
        error.to_string(),
        "lookup error: observer of reduce_sum.backward failed at item 2"
    );
    assert!(x.grad().is_none());
    assert!(all_secondary(&carrier) && carrier.version() == 0);
    policy.fail_at.store(0, Ordering::SeqCst);
    y.backward(Some(&ones), false).unwrap();
    assert_eq!(floats(&x.grad().unwrap()), vec![1.0; 16]);
}
