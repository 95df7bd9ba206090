//! The smallest storage the short authoring path takes: Float32 slots in a `Vec<f32>` through
//! `SlotStorage` (the README's "Your own carrier" writes the same type inline). The core's
//! tests (`tests/common/slots.rs`) and the conformance kit's one-kernel example include this
//! one file, so the carrier they run is written once.

use strideweave::carriers::extension::SlotStorage;
use strideweave::{DType, Result, Value};

/// Float32 slots.
#[derive(Default)]
pub struct Slots(Vec<f32>);

impl SlotStorage for Slots {
    fn supports_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }
    fn physical_size(&self) -> usize {
        self.0.len()
    }
    fn allocate(&mut self, slots: usize, _: DType) -> Result<()> {
        self.0 = vec![0.0; slots];
        Ok(())
    }
    fn read(&self, i: usize) -> Result<Value> {
        Ok(Value::Float(self.0[i].into()))
    }
    fn write(&mut self, i: usize, value: Value) -> Result<()> {
        self.0[i] = value.as_f64().unwrap_or(f64::NAN) as f32;
        Ok(())
    }
}
