//! [`Tripwire`]: the suite's own definition-free carrier whose reads or writes fail on a
//! chosen pass, the failing end of a move when the class under test has no fault points.

use std::sync::Arc;

use parking_lot::Mutex;
use strideweave::carrier::DefinitionFreeCarrier;
use strideweave::{Carrier, DType, Error, Result, Value};

/// When the tripwire fails: after `passes` more reads (or writes), once.
#[derive(Default)]
pub(crate) struct Trip {
    read: Option<u64>,
    write: Option<u64>,
}

/// The shared trigger of one tripwire carrier.
#[derive(Clone, Default)]
pub(crate) struct Trigger(Arc<Mutex<Trip>>);

impl Trigger {
    /// Fails the read after `skip` more reads.
    pub(crate) fn fail_read_after(&self, skip: u64) {
        self.0.lock().read = Some(skip);
    }

    /// Fails the write after `skip` more writes.
    pub(crate) fn fail_write_after(&self, skip: u64) {
        self.0.lock().write = Some(skip);
    }

    /// Disarms both, saying whether an armed failure fired.
    pub(crate) fn disarm(&self) -> bool {
        let mut trip = self.0.lock();
        let fired = trip.read.is_none() && trip.write.is_none();
        *trip = Trip::default();
        fired
    }

    fn pass(armed: &mut Option<u64>, what: &str) -> Result<()> {
        match armed {
            Some(0) => {
                *armed = None;
                Err(Error::Runtime(format!(
                    "the conformance Tripwire failed a {what} on purpose"
                )))
            }
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// Float32, Int32 or Bool slots whose read or write fails when its [`Trigger`] says so.
pub(crate) struct Tripwire {
    values: Mutex<Vec<Value>>,
    trigger: Trigger,
}

impl Tripwire {
    /// A tripwire carrier of `dtype` holding `values`, and its trigger.
    pub(crate) fn carrier(dtype: DType, values: &[Value]) -> Result<(Carrier, Trigger)> {
        let trigger = Trigger::default();
        let body = Tripwire {
            values: Mutex::new(values.to_vec()),
            trigger: trigger.clone(),
        };
        Ok((Carrier::new(body, dtype, true)?, trigger))
    }
}

impl DefinitionFreeCarrier for Tripwire {
    const NAME: &'static str = "conformance Tripwire";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        [DType::FLOAT32, DType::INT32, DType::BOOL].contains(&dtype)
    }

    fn size(&self) -> usize {
        self.values.lock().len()
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        Trigger::pass(&mut self.trigger.0.lock().read, "read")?;
        Ok(self.values.lock()[index])
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        Trigger::pass(&mut self.trigger.0.lock().write, "write")?;
        self.values.lock()[index] = value;
        Ok(())
    }

    fn release(&self) -> Result<()> {
        self.values.lock().clear();
        Ok(())
    }

    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        Ok(Tripwire {
            values: Mutex::new(values.to_vec()),
            trigger: Trigger::default(),
        })
    }

    fn allocate_like(&self, size: usize, dtype: DType, _empty: bool) -> Result<Self> {
        let zero = dtype.zero().unwrap_or(Value::Bool(false));
        Ok(Tripwire {
            values: Mutex::new(vec![zero; size]),
            trigger: Trigger::default(),
        })
    }
}
