//! The smallest definition-backed carrier the short authoring path builds: the Float32
//! [`Slots`] of `examples/slot_storage` (the conformance kit's one-kernel example includes the
//! same file), and classes of it running the given kernel patterns.

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, KernelPattern, KernelProvider, Result,
    StorageProvider, Value,
};

#[path = "../../examples/slot_storage/mod.rs"]
mod slot_storage;

pub use slot_storage::Slots;

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
