//! The null carrier: the smallest carrier class there is. Its state is a vector of slot
//! values written through [`SlotStorage`]; it has no kernels, no routes and no facets, so it
//! stores Float32, Int32 and Bool values and advertises no capability. It keeps every
//! storage promise of the conformance suite, refuses every operation, and has nothing to move
//! or differentiate.
//!
//! Run with `cargo run -p strideweave-conformance --example null_carrier`: it prints the
//! suite's report and fails when a promise broke.

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::SlotStorage;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Result, StorageProvider, Value,
};
use strideweave_conformance::{run, Factory};

/// The null carrier's slots.
#[derive(Default)]
pub struct NullSlots(Vec<Value>);

impl SlotStorage for NullSlots {
    fn supports_dtype(&self, dtype: DType) -> bool {
        [DType::FLOAT32, DType::INT32, DType::BOOL].contains(&dtype)
    }
    fn physical_size(&self) -> usize {
        self.0.len()
    }
    fn allocate(&mut self, slots: usize, dtype: DType) -> Result<()> {
        self.0 = vec![dtype.zero().unwrap_or(Value::Bool(false)); slots];
        Ok(())
    }
    fn read(&self, index: usize) -> Result<Value> {
        Ok(self.0[index])
    }
    fn write(&mut self, index: usize, value: Value) -> Result<()> {
        self.0[index] = value;
        Ok(())
    }
}

/// Registers a fresh null class.
pub fn define_null() -> Result<CarrierClass> {
    let class = CarrierClass::mint("Null", ClassKind::Independent);
    register_carrier_definition(
        class,
        CarrierDefinition::new(StorageProvider::from_slots::<NullSlots>()),
    )?;
    Ok(class)
}

/// A conformance factory over a fresh null class.
pub fn null_factory() -> Result<Factory> {
    let class = define_null()?;
    Ok(Factory::new("Null", move |dtype, values| {
        let carrier = Carrier::create(class, NullSlots::default(), values.len(), dtype, true)?;
        for (i, value) in values.iter().enumerate() {
            carrier.set(i, *value)?;
        }
        Ok(carrier)
    }))
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let report = run(&null_factory()?);
    println!("{report}");
    if !report.is_conformant() {
        std::process::exit(1);
    }
    Ok(())
}
