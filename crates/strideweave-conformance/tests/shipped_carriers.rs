//! The conformance suite over the carriers this repository ships, and over the example
//! Device carrier of `crates/strideweave/examples/device_carrier`.

#[path = "../../strideweave/examples/device_carrier/mod.rs"]
#[allow(unused_imports, missing_docs)]
mod device_carrier;

use strideweave::carrier::CarrierClass;
use strideweave::carriers::{Cpu, Evictable, Generic, TileResidency, TiledEvictable};
use strideweave::{Carrier, DType, Result, Tensor, Value};
use strideweave_conformance::{
    carrier_conformance, check, CarrierFactory, Factory, Promise, Verdict,
};

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

/// A TiledEvictable over two CPU tiers with a `grid` of `tile`s, all on the primary, holding
/// `values` in colexicographic order.
fn tiled(dtype: DType, values: &[Value], grid: &[usize], tile: &[usize]) -> Result<Carrier> {
    let primary = Cpu::from_values(values, dtype, true)?;
    let secondary = Cpu::carrier(0, dtype, true, false)?;
    TiledEvictable::carrier(&primary, &secondary, grid, tile, None)
}

/// TiledEvictable: its operations take tensors that cover the logical shape one to one, so
/// an operand is a carrier of the operand's own shape (single-slot tiles) holding its
/// elements; a carrier holds at least one slot, its factories keep the grid, the tiling hook
/// builds the multi-axis grids the projections are checked on, and its definition registers
/// the `TileResidency` facet.
fn tiled_evictable() -> Factory {
    Factory::new("TiledEvictable(CPU, CPU)", |dtype, values| {
        tiled(dtype, values, &[values.len()], &[1])
    })
    .with_tensors(|dtype, slots, offset, layout| {
        let elements = (0..layout.size())
            .map(|i| Ok(slots[offset + layout.index_of(i)?]))
            .collect::<Result<Vec<Value>>>()?;
        let shape = layout.shape().clone();
        let single = vec![1; shape.leaves().len()];
        Tensor::compact(tiled(dtype, &elements, shape.leaves(), &single)?, shape)
    })
    .with_tiling(tiled)
    .with_facet::<TileResidency>()
    .with_min_slots(1)
    .with_fixed_extent_factories()
}

/// A Device carrier of `class` holding `values`.
fn device_carrier(class: CarrierClass, dtype: DType, values: &[Value]) -> Result<Carrier> {
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
}

/// The example Device with its fast pack attached; its definition registers the `DeviceInfo`
/// facet, and each kernel-pack check defines a fresh Device class (without the fast pack).
fn device() -> Factory {
    let extension = device_carrier::DeviceExtension::register().expect("the Device registers");
    let class = extension.device;
    Factory::new("Device (example)", move |dtype, values| {
        device_carrier(class, dtype, values)
    })
    .with_facet::<device_carrier::DeviceInfo>()
    .with_fresh_class(|| {
        let class = device_carrier::define_device(Box::leak(Box::default()))?;
        let factory = Factory::new("Device (fresh)", move |dtype, values| {
            device_carrier(class, dtype, values)
        });
        Ok((class, factory))
    })
}

carrier_conformance!(generic_carrier, generic());
carrier_conformance!(cpu_carrier, cpu());
carrier_conformance!(evictable_carrier, evictable());
carrier_conformance!(tiled_evictable_carrier, tiled_evictable());
carrier_conformance!(device_example_carrier, device());

#[test]
fn the_shipped_facets_are_declared_and_found_by_exact_type() {
    for factory in [tiled_evictable(), device()] {
        let outcome = check(&factory, Promise::Facets);
        assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
        assert_eq!(
            outcome.notes,
            [
                "1 declared facets found by exact type in 5 states; an unregistered facet type \
                 answered none"
            ],
            "{}",
            factory.name()
        );
    }
}

#[test]
fn the_example_device_takes_the_suites_kernel_packs_on_a_fresh_class() {
    let outcome = check(&device(), Promise::KernelPacks);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert!(
        outcome.notes[0].starts_with("three packs on the fresh Device"),
        "{:?}",
        outcome.notes
    );
}

#[test]
fn the_shipped_classes_that_take_no_packs_say_which_seed_rule_forbids_them() {
    for (factory, reason) in [
        (generic(), "Generic is a definition-free shipped class"),
        (cpu(), "CPU is a definition-free shipped class"),
        (evictable(), "Evictable is a definition-free shipped class"),
        (tiled_evictable(), "TiledEvictable is a dependent carrier"),
    ] {
        match check(&factory, Promise::KernelPacks).verdict {
            Verdict::NotApplicable(why) => assert!(why.starts_with(reason), "{why}"),
            other => panic!("{}: {other:?}", factory.name()),
        }
    }
}
