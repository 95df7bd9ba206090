//! Carriers: the places a tensor's slots live, and the authorities over those tensors.
//!
//! A [`Carrier`] handle holds framework-owned state (exact [`CarrierClass`], dtype,
//! mutability, version, lifecycle, ownership, claims) around a body that implements the
//! storage. A definition-free carrier class is any type implementing
//! [`DefinitionFreeCarrier`]; its capabilities are declared once with
//! [`register_operation_capabilities`].

mod capability_registry;
mod class;
mod defined;
mod definition_free;
mod handle;
mod lifecycle;
mod scatter;
mod state_lock;

pub use capability_registry::{
    capabilities_for_carrier_class, matching_capability, register_operation_capabilities,
    require_capability, supports_operation_plan, unsupported_plan_reason,
};
pub(crate) use capability_registry::{
    check_capability, missing_plan_reason, seal_definition_capabilities,
};
pub use class::{CarrierClass, CarrierType, ClassKind};
pub use definition_free::DefinitionFreeCarrier;
pub use handle::Carrier;
pub(crate) use lifecycle::Claim;
pub use lifecycle::{OwnerAccess, OwnershipToken};
