//! What every check shares: a context collecting notes, the broken-promise shorthand, a
//! reproducible generator, snapshots and value comparison.

use strideweave::{Carrier, DType, Error, ErrorKind, Result, Value};

use crate::factory::CarrierFactory;
use crate::report::{Broken, Promise};

/// The result of one check: `Err` is the first broken promise found.
pub(crate) type Check = std::result::Result<(), Broken>;

/// The state of one promise's check: the factory, the notes, the generator.
pub(crate) struct Context<'a> {
    pub(crate) factory: &'a dyn CarrierFactory,
    pub(crate) promise: Promise,
    pub(crate) notes: Vec<String>,
    pub(crate) rng: Rng,
    /// Set by a check that found its promise does not apply, with the reason.
    pub(crate) not_applicable: Option<String>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(factory: &'a dyn CarrierFactory, promise: Promise) -> Context<'a> {
        Context {
            factory,
            promise,
            notes: Vec::new(),
            rng: Rng(0x9e37_79b9_7f4a_7c15 ^ promise as u64),
            not_applicable: None,
        }
    }

    /// A broken promise observing `observed` (the carrier's name is prefixed).
    pub(crate) fn broken(&self, observed: impl std::fmt::Display) -> Broken {
        Broken {
            promise: self.promise,
            observed: format!("{}: {observed}", self.factory.name()),
        }
    }

    /// `Err(broken(observed))` unless `holds`.
    pub(crate) fn ensure(&self, holds: bool, observed: impl FnOnce() -> String) -> Check {
        if holds {
            Ok(())
        } else {
            Err(self.broken(observed()))
        }
    }

    /// The value of `result`, or a broken promise saying that `what` failed with its error.
    pub(crate) fn ok<T>(&self, result: Result<T>, what: impl FnOnce() -> String) -> Result2<T> {
        result.map_err(|error| self.broken(format!("{} failed: {error}", what())))
    }

    /// Checks that `result` failed with an error of `kind`.
    pub(crate) fn expect_error<T>(
        &self,
        result: Result<T>,
        kind: ErrorKind,
        what: impl FnOnce() -> String,
    ) -> Result2<Error> {
        match result {
            Ok(_) => Err(self.broken(format!("{} succeeded; a {kind:?} error was due", what()))),
            Err(error) if error.kind() == kind => Ok(error),
            Err(error) => Err(self.broken(format!(
                "{} failed with a {:?} error where a {kind:?} error was due: {error}",
                what(),
                error.kind()
            ))),
        }
    }

    /// A fresh carrier of the class under test.
    pub(crate) fn carrier(&self, dtype: DType, values: &[Value]) -> Result2<Carrier> {
        self.ok(self.factory.carrier(dtype, values), || {
            format!("the factory's carrier({dtype}, {} values)", values.len())
        })
    }

    /// The storage dtypes the class stores among Float32, Int32 and Bool, asked of a
    /// carrier holding one value of the first dtype the factory accepts.
    pub(crate) fn storable(&self) -> Result2<Vec<DType>> {
        let mut last = None;
        for dtype in SHIPPED_STORAGE {
            let value = self.rng.clone().value(dtype);
            match self.factory.carrier(dtype, &[value]) {
                Ok(carrier) => {
                    let mut storable = Vec::new();
                    for candidate in SHIPPED_STORAGE {
                        let answer = self.ok(carrier.supports_storage_dtype(candidate), || {
                            format!("supports_storage_dtype({candidate})")
                        })?;
                        if answer {
                            storable.push(candidate);
                        }
                    }
                    self.ensure(storable.contains(&dtype), || {
                        format!(
                            "a carrier of {dtype} answered supports_storage_dtype({dtype}) = false \
                             for its own dtype"
                        )
                    })?;
                    return Ok(storable);
                }
                Err(error) => last = Some(error),
            }
        }
        Err(self.broken(format!(
            "the factory built no carrier of Float32, Int32 or Bool: {}",
            last.map_or_else(String::new, |e| e.to_string())
        )))
    }
}

/// `Result` whose error is a broken promise.
pub(crate) type Result2<T> = std::result::Result<T, Broken>;

/// The dtypes a carrier may store (design: F64 is accumulator-only; narrow formats and
/// compounds are never stored).
pub(crate) const SHIPPED_STORAGE: [DType; 3] = [DType::FLOAT32, DType::INT32, DType::BOOL];

/// A small deterministic generator (xorshift64), so a failure reproduces.
#[derive(Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An integer in `lo..=hi`.
    pub(crate) fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    /// A value of `dtype`: a multiple of 1/8 in [-4, 4] (exact in binary32), an integer in
    /// [-9, 9], or a bool.
    pub(crate) fn value(&mut self, dtype: DType) -> Value {
        if dtype == DType::INT32 {
            Value::Int(self.int(-9, 9))
        } else if dtype == DType::BOOL {
            Value::Bool(self.next().is_multiple_of(2))
        } else {
            Value::Float(self.int(-32, 32) as f64 / 8.0)
        }
    }

    /// `n` values of `dtype`.
    pub(crate) fn values(&mut self, dtype: DType, n: usize) -> Vec<Value> {
        (0..n).map(|_| self.value(dtype)).collect()
    }
}

/// Every slot value and the version of a carrier, for "nothing changed" checks (a released
/// carrier has no slots to read).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    pub(crate) values: Vec<Value>,
    pub(crate) version: u64,
    pub(crate) released: bool,
}

impl Snapshot {
    pub(crate) fn of(carrier: &Carrier) -> Result<Snapshot> {
        let released = carrier.is_released();
        let values = if released {
            Vec::new()
        } else {
            (0..carrier.size())
                .map(|i| carrier.get(i))
                .collect::<Result<_>>()?
        };
        Ok(Snapshot {
            values,
            version: carrier.version(),
            released,
        })
    }

    /// What differs between this snapshot and `after`, or `None`.
    pub(crate) fn difference(&self, after: &Snapshot) -> Option<String> {
        if self.released != after.released {
            return Some(format!(
                "released changed from {} to {}",
                self.released, after.released
            ));
        }
        if self.version != after.version {
            return Some(format!(
                "version changed from {} to {}",
                self.version, after.version
            ));
        }
        if self.values.len() != after.values.len() {
            return Some(format!(
                "size changed from {} to {}",
                self.values.len(),
                after.values.len()
            ));
        }
        self.values
            .iter()
            .zip(&after.values)
            .enumerate()
            .find(|(_, (a, b))| !same_value(a, b))
            .map(|(i, (a, b))| format!("slot {i} changed from {a} to {b}"))
    }
}

/// Equality of stored values, NaN equal to NaN.
pub(crate) fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

/// Whether `candidate` is within `atol + rtol·|reference|` of `reference` (NaN matches NaN,
/// an infinity only itself; a zero tolerance asks for the same value).
pub(crate) fn close(reference: &Value, candidate: &Value, atol: f64, rtol: f64) -> bool {
    match (reference, candidate) {
        (Value::Float(r), Value::Float(c)) => {
            if r.is_nan() || c.is_nan() {
                r.is_nan() && c.is_nan()
            } else if r.is_infinite() || (atol == 0.0 && rtol == 0.0) {
                r == c
            } else {
                (r - c).abs() <= atol + rtol * r.abs()
            }
        }
        _ => reference == candidate,
    }
}
