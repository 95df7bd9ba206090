//! Carriers: the places a tensor's slots live, and the authorities over those tensors.
//!
//! A [`Carrier`] handle holds framework-owned state (exact [`CarrierClass`], dtype,
//! mutability, version, lifecycle, ownership, claims) around a body that implements the
//! storage. A definition-free carrier class is any type implementing
//! [`DefinitionFreeCarrier`]; its capabilities are declared once with
//! [`register_operation_capabilities`].

mod class;
mod construction_count;
mod definition_free;
mod facet;
mod handle;
mod lifecycle;
mod scatter;
mod tier_pair;

/// Capability declarations are made for carrier classes, and read here; their registry lives
/// with the dispatch gate that consults it.
pub use crate::operation::{
    capabilities_for_carrier_class, matching_capability, register_operation_capabilities,
    require_capability, supports_operation_plan, unsupported_plan_reason,
};
pub use class::{CarrierClass, CarrierType, ClassKind, ClassOrigin};
pub use construction_count::constructed_on_this_thread;
pub use definition_free::{DefinitionFreeCarrier, SpanSlice, SpanValues};
pub(crate) use definition_free::{ErasedCarrier, MovementHooks};
pub use facet::CarrierFacet;
pub use handle::Carrier;
pub(crate) use lifecycle::Claim;
pub use lifecycle::{OwnerAccess, OwnershipToken};
pub use tier_pair::check_tier_pair;
