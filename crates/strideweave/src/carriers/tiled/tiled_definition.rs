//! The CarrierDefinition of TiledEvictable, registered lazily through the public extension
//! surface.

use std::sync::{Arc, OnceLock};

use crate::carrier::{Carrier, CarrierClass, CarrierType, ClassKind};
use crate::carriers::extension::{
    register_carrier_definition, CarrierDefinition, CarrierFacet, CompositePreparation,
    CompositeProvider, Unsupported,
};
use crate::carriers::tiled::tiled_state::tiled_storage;
use crate::carriers::tiled::TileResidency;
use crate::error::{Error, Result};
use crate::operation::ResolvedInvocation;

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

const NO_OPERATIONS: &str = "TiledEvictable executes no operation yet: the tiled operations \
                             arrive with project/scatter (issue #7, phase 2)";

/// The composite provider: phase 1 derives no capability, so the dispatch gate refuses every
/// plan before these callbacks could run; they answer consistently anyway.
fn composite() -> CompositeProvider {
    CompositeProvider::new(
        |_: &Carrier| Ok(Vec::new()),
        |_: &Carrier, invocation: &ResolvedInvocation| {
            Err(Error::NotImplemented(format!(
                "'{}': {NO_OPERATIONS}",
                invocation.call().definition().name()
            )))
        },
        |_: &Carrier, _: &ResolvedInvocation| {
            Ok(CompositePreparation::Unsupported(Unsupported::new(
                NO_OPERATIONS,
            )?))
        },
    )
}
