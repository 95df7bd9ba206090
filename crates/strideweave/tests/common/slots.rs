//! The smallest definition-backed carrier the short authoring path builds: Float32 slots in a
//! `Vec<f32>` through `SlotStorage`, and classes of it running the given kernel patterns.

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::SlotStorage;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, KernelPattern, KernelProvider, Result,
    StorageProvider, Value,
};

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
    fn read(&self, index: usize) -> Result<Value> {
        Ok(Value::Float(self.0[index].into()))
    }
    fn write(&mut self, index: usize, value: Value) -> Result<()> {
        self.0[index] = value.as_f64().unwrap_or(f64::NAN) as f32;
        Ok(())
    }
}

/// Registers a fresh independent class named `name` over [`Slots`] whose kernels are `patterns`
/// (through the default execution interface); `elementwise_fallback` lets moves between
/// such classes copy element by element.
pub fn slots_class(
    name: &str,
    patterns: impl IntoIterator<Item = KernelPattern>,
    elementwise_fallback: bool,
) -> Result<CarrierClass> {
    let class = CarrierClass::mint(name, ClassKind::Independent);
    let storage =
        StorageProvider::from_slots::<Slots>().with_elementwise_fallback(elementwise_fallback);
    let definition = CarrierDefinition::new(storage)
        .with_kernels(KernelProvider::with_default_interface(patterns)?)?;
    register_carrier_definition(class, definition)?;
    Ok(class)
}

/// A carrier of `class` (a [`slots_class`]) holding `xs`.
pub fn slots_carrier(class: CarrierClass, xs: &[f32]) -> Result<Carrier> {
    let carrier = Carrier::create(class, Slots::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(f64::from(*x)))?;
    }
    Ok(carrier)
}
