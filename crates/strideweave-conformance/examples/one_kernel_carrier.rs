//! The README's minimal carrier ("Your own carrier"): Float32 slots in a `Vec<f32>` through
//! `SlotStorage` ([`Slots`], the README's type, kept in the core's
//! `examples/slot_storage/mod.rs`, which the core's tests include too) and one synchronous
//! `neg` kernel, built with the short authoring path.
//! The conformance suite runs its storage, its `neg` on every geometry against the Generic
//! reference, its refusals and the gradient of `neg`.
//!
//! Run with `cargo run -p strideweave-conformance --example one_kernel_carrier`.

use strideweave::carrier::{Carrier, ClassKind};
use strideweave::operation::OperationCapability;
use strideweave::*;
use strideweave_conformance::{run, Factory};

#[path = "../../strideweave/examples/slot_storage/mod.rs"]
mod slot_storage;

pub use slot_storage::Slots;

/// Registers a fresh class with the `neg` kernel.
pub fn define_slots() -> Result<CarrierClass> {
    let class = CarrierClass::mint("Slots", ClassKind::Independent);
    let neg = KernelPattern::synchronous(
        [OperationCapability::builtin("neg", &[DType::FLOAT32])?],
        "slots.neg",
        |invocation, _| {
            let x = invocation.call().tensor(0)?.to_f32_vec()?;
            let negated: Vec<f32> = x.iter().map(|v| -v).collect();
            Ok(vec![invocation.result_from_f32(0, &negated)?])
        },
    )?;
    let kernels = KernelProvider::with_default_interface([neg])?;
    let definition = CarrierDefinition::new(StorageProvider::from_slots::<Slots>());
    register_carrier_definition(class, definition.with_kernels(kernels)?)?;
    Ok(class)
}

/// A conformance factory over a fresh class; the kernel-pack promise defines another.
pub fn slots_factory() -> Result<Factory> {
    Factory::defined(
        "Slots (one kernel)",
        define_slots,
        |class, dtype, values| {
            let carrier = Carrier::create(class, Slots::default(), values.len(), dtype, true)?;
            for (i, value) in values.iter().enumerate() {
                carrier.set(i, *value)?;
            }
            Ok(carrier)
        },
    )
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let report = run(&slots_factory()?);
    println!("{report}");
    if !report.is_conformant() {
        std::process::exit(1);
    }
    Ok(())
}
