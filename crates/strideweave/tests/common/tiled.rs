//! Helpers for the TiledEvictable tests: tiers of Generic, a tier class with injectable
//! one-shot faults shared by its whole factory family, and small assertions.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use strideweave::carrier::{Carrier, DefinitionFreeCarrier};
use strideweave::carriers::{Generic, TileLocation, TiledEvictable};
use strideweave::{DType, Error, ErrorKind, Result, Shape, Tensor, Value};

use super::floats;

/// A mutable Float32 Generic carrier holding `values`.
pub fn generic(values: &[f64]) -> Carrier {
    Generic::carrier(&floats(values), DType::FLOAT32, true).unwrap()
}

/// `0, 1, …, n-1`.
pub fn counting(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

/// A TiledEvictable over a full Generic primary holding `values` (canonical slots) and an
/// empty Generic secondary.
pub fn tiled(values: &[f64], grid: &[usize], tile: &[usize]) -> Carrier {
    TiledEvictable::carrier(&generic(values), &generic(&[]), grid, tile, None).unwrap()
}

/// The canonical (column-major) tensor over all of `carrier`, of the flat shape `extents`.
pub fn whole(carrier: &Carrier, extents: &[usize]) -> Tensor {
    Tensor::compact(carrier.clone(), Shape::flat(extents).unwrap()).unwrap()
}

/// The values of `tensor` as f64, in colexicographic order.
pub fn floats_of(tensor: &Tensor) -> Vec<f64> {
    tensor
        .to_values()
        .unwrap()
        .into_iter()
        .map(|v| v.as_f64().expect("a float"))
        .collect()
}

/// The error of `result`, checked to be of `kind` and to mention `needle`.
pub fn expect_err<T: std::fmt::Debug>(result: Result<T>, kind: ErrorKind, needle: &str) -> Error {
    let error = result.expect_err("expected an error");
    assert_eq!(error.kind(), kind, "{error}");
    assert!(
        error.to_string().contains(needle),
        "'{error}' should mention '{needle}'"
    );
    error
}

/// Every tile state of `carrier`, tile by tile in canonical grid order, with its dirty bit.
pub fn tile_states(carrier: &Carrier) -> Vec<(TileLocation, bool)> {
    let grid = TiledEvictable::grid_shape(carrier).unwrap();
    let count: usize = grid.iter().product();
    (0..count)
        .map(|mut index| {
            let coord: Vec<usize> = grid
                .iter()
                .map(|&g| {
                    let c = index % g;
                    index /= g;
                    c
                })
                .collect();
            let state = TiledEvictable::tile_state(carrier, &coord).unwrap();
            (state.location(), state.is_dirty())
        })
        .collect()
}

/// The fault switches and live-carrier count shared by a [`Faulty`] carrier and everything
/// its factories make.
///
/// Each budget counts the operations still allowed before an injected failure; negative
/// means no fault is armed. By default the budget disarms after **one** failure, so the state
/// can be inspected (and the operation retried) afterwards; a [`sticky`](Faults::sticky)
/// family keeps failing until the budget is set again.
#[derive(Debug)]
pub struct Faults {
    pub reads: AtomicI64,
    pub writes: AtomicI64,
    /// Factory calls (`new_like`, `allocate_like`).
    pub allocations: AtomicI64,
    /// Carriers of the family made and not yet released.
    pub live: AtomicI64,
    /// Whether an exhausted budget keeps failing.
    sticky: bool,
}

impl Faults {
    /// A family whose faults fire once.
    pub fn new() -> Arc<Faults> {
        Faults::with_stickiness(false)
    }

    /// A family whose exhausted budgets fail every later operation.
    pub fn sticky() -> Arc<Faults> {
        Faults::with_stickiness(true)
    }

    fn with_stickiness(sticky: bool) -> Arc<Faults> {
        Arc::new(Faults {
            reads: AtomicI64::new(-1),
            writes: AtomicI64::new(-1),
            allocations: AtomicI64::new(-1),
            live: AtomicI64::new(0),
            sticky,
        })
    }

    /// Arms `budget` to fail after `n` more successful operations.
    pub fn arm(budget: &AtomicI64, n: i64) {
        budget.store(n, Ordering::SeqCst);
    }

    pub fn live(&self) -> i64 {
        self.live.load(Ordering::SeqCst)
    }

    fn spend(&self, budget: &AtomicI64, what: &str) -> Result<()> {
        let left = budget.load(Ordering::SeqCst);
        if left == 0 {
            if !self.sticky {
                budget.store(-1, Ordering::SeqCst);
            }
            return Err(Error::Runtime(format!("injected {what} failure")));
        }
        if left > 0 {
            budget.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A Float32 tier class whose family shares one [`Faults`].
#[derive(Debug)]
pub struct Faulty {
    values: Mutex<Vec<Value>>,
    faults: Arc<Faults>,
}

impl Faulty {
    /// A mutable carrier of the family holding `values`.
    pub fn carrier(faults: &Arc<Faults>, values: &[f64]) -> Carrier {
        faults.live.fetch_add(1, Ordering::SeqCst);
        let body = Faulty {
            values: Mutex::new(floats(values)),
            faults: Arc::clone(faults),
        };
        Carrier::new(body, DType::FLOAT32, true).unwrap()
    }

    fn sibling(&self, values: Vec<Value>) -> Result<Faulty> {
        self.faults.spend(&self.faults.allocations, "allocation")?;
        self.faults.live.fetch_add(1, Ordering::SeqCst);
        Ok(Faulty {
            values: Mutex::new(values),
            faults: Arc::clone(&self.faults),
        })
    }
}

impl DefinitionFreeCarrier for Faulty {
    const NAME: &'static str = "Faulty";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }
    fn size(&self) -> usize {
        self.values.lock().unwrap().len()
    }
    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        self.faults.spend(&self.faults.reads, "read")?;
        Ok(self.values.lock().unwrap()[index])
    }
    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.faults.spend(&self.faults.writes, "write")?;
        self.values.lock().unwrap()[index] = value;
        Ok(())
    }
    fn release(&self) -> Result<()> {
        self.values.lock().unwrap().clear();
        self.faults.live.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        self.sibling(values.to_vec())
    }
    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        self.sibling(vec![Value::Float(0.0); size])
    }
}
