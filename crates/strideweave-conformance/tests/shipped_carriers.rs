//! The conformance suite over the carriers this repository ships, and over the example
//! Device carrier of `crates/strideweave/examples/device_carrier`.

#[path = "../../strideweave/examples/device_carrier/mod.rs"]
#[allow(unused_imports, missing_docs)]
mod device_carrier;

use strideweave::carriers::{Cpu, Evictable, Generic, TiledEvictable};
use strideweave::{Carrier, DType, Result, Tensor, Value};
use strideweave_conformance::{carrier_conformance, Factory};

fn generic() -> Factory {
    Factory::new("Generic", |dtype, values| {
        Generic::carrier(values, dtype, true)
    })
}

fn cpu() -> Factory {
    Factory::new("CPU", |dtype, values| Cpu::from_values(values, dtype, true))
}

/// Evictable: its primary tier may not be empty, so a carrier holds at least one slot.
fn evictable() -> Factory {
    Factory::new("Evictable(CPU, Generic)", |dtype, values| {
        let primary = Cpu::from_values(values, dtype, true)?;
        let secondary = Generic::carrier(&[], dtype, true)?;
        Evictable::carrier(&primary, &secondary)
    })
    .with_min_slots(1)
}

/// A TiledEvictable over two CPU tiers with a `grid` of single-slot tiles, all on the
/// primary, holding `values` in colexicographic order.
fn tiled(dtype: DType, values: &[Value], grid: &[usize]) -> Result<Carrier> {
    let primary = Cpu::from_values(values, dtype, true)?;
    let secondary = Cpu::carrier(0, dtype, true, false)?;
    TiledEvictable::carrier(&primary, &secondary, grid, &vec![1; grid.len()], None)
}

/// TiledEvictable: its operations take tensors that cover the logical shape one to one, so
/// an operand is a carrier of the operand's own shape holding its elements; a carrier holds
/// at least one slot, and its factories keep the grid.
fn tiled_evictable() -> Factory {
    Factory::new("TiledEvictable(CPU, CPU)", |dtype, values| {
        tiled(dtype, values, &[values.len()])
    })
    .with_tensors(|dtype, slots, offset, layout| {
        let elements = (0..layout.size())
            .map(|i| Ok(slots[offset + layout.index_of(i)?]))
            .collect::<Result<Vec<Value>>>()?;
        let shape = layout.shape().clone();
        Tensor::compact(tiled(dtype, &elements, shape.leaves())?, shape)
    })
    .with_min_slots(1)
    .with_fixed_extent_factories()
}

fn device() -> Factory {
    let extension = device_carrier::DeviceExtension::register().expect("the Device registers");
    let class = extension.device;
    Factory::new("Device (example)", move |dtype, values| {
        let carrier = Carrier::create(
            class,
            device_carrier::Slots::default(),
            values.len(),
            dtype,
            true,
        )?;
        for (i, value) in values.iter().enumerate() {
            carrier.set(i, *value)?;
        }
        Ok(carrier)
    })
}

carrier_conformance!(generic_carrier, generic());
carrier_conformance!(cpu_carrier, cpu());
carrier_conformance!(evictable_carrier, evictable());
carrier_conformance!(tiled_evictable_carrier, tiled_evictable());
carrier_conformance!(device_example_carrier, device());
