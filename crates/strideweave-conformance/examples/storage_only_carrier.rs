//! The storage-only carrier (the seed's scenario "Define a custom storage-only carrier"):
//! storage and a transfer route to the CPU, no kernel provider. It allocates, stores and
//! moves Float32 and Int32 slots while advertising no computational capability; the
//! conformance suite checks its storage, its refusals and its move to the CPU.
//!
//! Run with `cargo run -p strideweave-conformance --example storage_only_carrier`: it prints
//! the suite's report and fails when a promise broke.

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    PreparedTransfer, SlotStorage, Submitted, TransferPreparation, TransferProvider,
};
use strideweave::carriers::Cpu;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Result, StorageProvider, TransferRoute,
    Value,
};
use strideweave_conformance::{run, Factory};

/// The storage-only carrier's slots: numbers kept as `f64`, read back in the carrier's dtype.
#[derive(Default)]
pub struct Shelf {
    slots: Vec<f64>,
    dtype: Option<DType>,
}

impl SlotStorage for Shelf {
    fn supports_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32 || dtype == DType::INT32
    }
    fn physical_size(&self) -> usize {
        self.slots.len()
    }
    fn allocate(&mut self, slots: usize, dtype: DType) -> Result<()> {
        self.slots = vec![0.0; slots];
        self.dtype = Some(dtype);
        Ok(())
    }
    fn read(&self, index: usize) -> Result<Value> {
        let x = self.slots[index];
        Ok(if self.dtype == Some(DType::INT32) {
            Value::Int(x as i64)
        } else {
            Value::Float(x)
        })
    }
    fn write(&mut self, index: usize, value: Value) -> Result<()> {
        self.slots[index] = match value {
            Value::Int(i) => i as f64,
            other => other.as_f64().unwrap_or(f64::NAN),
        };
        Ok(())
    }
}

/// The route to the CPU: the request's source slots written into the destination.
fn to_cpu(class: CarrierClass) -> Result<TransferRoute> {
    let provider = TransferProvider::new(|request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let source = request.tensor();
                for slot in 0..request.physical_span() {
                    request.write(slot, source.carrier().get(source.offset() + slot)?)?;
                }
                Ok(Submitted::Ready(()))
            },
        )))
    });
    TransferRoute::new(class, CarrierClass::of::<Cpu>(), "shelf-to-cpu", provider)
}

/// Registers a fresh storage-only class.
pub fn define_shelf() -> Result<CarrierClass> {
    let class = CarrierClass::mint("Shelf", ClassKind::Independent);
    let definition = CarrierDefinition::new(StorageProvider::from_slots::<Shelf>())
        .with_transfers(vec![to_cpu(class)?])?;
    register_carrier_definition(class, definition)?;
    Ok(class)
}

/// A conformance factory over a fresh storage-only class.
pub fn shelf_factory() -> Result<Factory> {
    let class = define_shelf()?;
    Ok(Factory::new(
        "Shelf (storage only)",
        move |dtype, values| {
            let carrier = Carrier::create(class, Shelf::default(), values.len(), dtype, true)?;
            for (i, value) in values.iter().enumerate() {
                carrier.set(i, *value)?;
            }
            Ok(carrier)
        },
    ))
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let report = run(&shelf_factory()?);
    println!("{report}");
    if !report.is_conformant() {
        std::process::exit(1);
    }
    Ok(())
}
