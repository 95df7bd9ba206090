//! The CarrierDefinition of TiledEvictable, registered lazily through the public extension
//! surface.

use std::sync::{Arc, OnceLock};

use crate::tiled_backward::TiledAutograd;
use crate::tiled_operations;
use crate::tiled_state::tiled_storage;
use crate::TileResidency;
use strideweave_core::carrier::{CarrierClass, CarrierType, ClassKind};
use strideweave_core::error::Result;
use strideweave_core::extension::{
    register_carrier_definition, CarrierDefinition, CarrierFacet, CompositeProvider,
};
use strideweave_core::internal;

/// The private Rust type naming the TiledEvictable class: only this module can name it, so
/// nobody can register another definition for the class before ours.
struct TiledEvictableClass;

impl CarrierType for TiledEvictableClass {
    const NAME: &'static str = "TiledEvictable";
    const KIND: ClassKind = ClassKind::Dependent;
}

static CLASS: OnceLock<Result<CarrierClass>> = OnceLock::new();

/// The TiledEvictable class, its definition registered on first use (once per process).
pub(crate) fn tiled_evictable_class() -> Result<CarrierClass> {
    CLASS.get_or_init(register).clone()
}

fn register() -> Result<CarrierClass> {
    let class = CarrierClass::of_type::<TiledEvictableClass>();
    let definition = CarrierDefinition::new(tiled_storage())
        .with_composite(composite())?
        .with_facets([Arc::new(TileResidency::new()) as Arc<dyn CarrierFacet>])?;
    register_carrier_definition(class, definition)?;
    Ok(class)
}

/// The composite provider: the six central operations on raw tiled operands (see
/// `tiled_operations`).
fn composite() -> CompositeProvider {
    internal::composite_with_autograd(tiled_operations::composite(), Arc::new(TiledAutograd))
}
