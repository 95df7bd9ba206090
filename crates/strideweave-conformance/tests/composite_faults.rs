//! Failure injection through the shipped composite carriers: Evictable and TiledEvictable
//! over Ring tiers, whose every callback consults one fault injector, so the suite arms a
//! fault in the tiers' storage and kernels under every composite action.

mod common;

use common::{define_ring, ring_carrier, ring_faults, Flaw};
use strideweave::carriers::{Evictable, TileResidency, TiledEvictable};
use strideweave::{Result, Tensor, Value};
use strideweave_conformance::{carrier_conformance, Factory};

/// Evictable(Ring, Ring): the tiers move to each other by the elementwise fallback both
/// Ring storage providers permit.
fn evictable_over_rings() -> Factory {
    let faults = ring_faults();
    let class = define_ring(Flaw::None, &faults, &["neg", "relu"]);
    Factory::new("Evictable(Ring, Ring)", move |dtype, values| {
        let primary = ring_carrier(class, dtype, values)?;
        let secondary = ring_carrier(class, dtype, &[])?;
        Evictable::carrier(&primary, &secondary)
    })
    .with_faults(faults)
    .with_min_slots(1)
}

/// TiledEvictable(Ring, Ring) with single-slot tiles on the primary, one carrier per operand
/// shape (as for TiledEvictable over CPU tiers in shipped_carriers.rs).
fn tiled_over_rings() -> Factory {
    let faults = ring_faults();
    let class = define_ring(Flaw::None, &faults, &["neg", "relu"]);
    let tiled = move |dtype, values: &[Value], grid: &[usize], tile: &[usize]| {
        let primary = ring_carrier(class, dtype, values)?;
        let secondary = ring_carrier(class, dtype, &[])?;
        TiledEvictable::carrier(&primary, &secondary, grid, tile, None)
    };
    Factory::new("TiledEvictable(Ring, Ring)", move |dtype, values| {
        tiled(dtype, values, &[values.len()], &[1])
    })
    .with_tensors(move |dtype, slots, offset, layout| {
        let elements = (0..layout.size())
            .map(|i| Ok(slots[offset + layout.index_of(i)?]))
            .collect::<Result<Vec<Value>>>()?;
        let shape = layout.shape().clone();
        let single = vec![1; shape.leaves().len()];
        Tensor::compact(tiled(dtype, &elements, shape.leaves(), &single)?, shape)
    })
    .with_tiling(tiled)
    .with_facet::<TileResidency>()
    .with_faults(faults)
    .with_min_slots(1)
    .with_fixed_extent_factories()
}

carrier_conformance!(evictable_over_ring_tiers, evictable_over_rings());
carrier_conformance!(tiled_evictable_over_ring_tiers, tiled_over_rings());
