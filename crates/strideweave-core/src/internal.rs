//! Hooks the seed reserves to the framework, for StrideWeave's own carrier crates
//! (`strideweave-tiled`): they are not part of the carrier extension, and the `strideweave`
//! crate does not re-export them.
//!
//! The seed keeps meaning, versions, autograd and publication framework-owned ("a provider's
//! failure changes nothing"); TiledEvictable is the framework's own definition-backed carrier,
//! so it may record gradient rules for its framework operations (`project`, `scatter`),
//! supply the streamed gradients of the operations it executes, and journal its own writes
//! in a provider scope. A third-party provider uses the extension instead; a test
//! (`crates/strideweave/tests/layering.rs`) checks that no other crate names this module.

use std::sync::Arc;

pub use crate::autograd::node::BackwardRule;
pub use crate::autograd::record::record_rule;
pub use crate::extension::composite::CompositeAutograd;
pub use crate::operation::provider_scope::note_slots;

use crate::carrier::{Carrier, CarrierClass, OwnershipToken};
use crate::dtype::Value;
use crate::error::Result;
use crate::extension::CompositeProvider;
use crate::movement::MoveOperation;
use crate::operation::{OperationCapability, ResultSpec};
use crate::tensor::Tensor;

/// Every plan of the built-in operations on the dtypes the shipped computing classes store:
/// what Generic and the CPU declare of themselves. Computed once.
pub fn builtin_capabilities() -> Arc<[OperationCapability]> {
    crate::operation::capability_registry::builtin_capabilities()
}

/// Declares the capabilities of the shipped `class`, from its `declare_class` hook: a Type
/// error for a class that is not shipped or has already declared, a Value error for
/// duplicates.
pub fn declare_shipped_capabilities(
    class: CarrierClass,
    capabilities: impl IntoIterator<Item = OperationCapability>,
) -> Result<()> {
    crate::operation::capability_registry::declare_shipped_capabilities(class, capabilities)
}

/// Registers the route from the shipped class `source` to `destination`, from the source's
/// `declare_class` hook (a route of a class whose routes are fixed included).
pub fn declare_shipped_move_operation(
    source: CarrierClass,
    destination: CarrierClass,
    operation: Arc<dyn MoveOperation>,
) -> Result<()> {
    crate::movement::registry::declare_shipped_move_operation(source, destination, operation)
}

/// Fixes the routes of the shipped `class` to the ones it declares (`moves` says where it
/// moves, for messages): no other pair with it at an end is registered, unregistered or
/// copied elementwise.
pub fn declare_fixed_routes(class: CarrierClass, moves: &'static str) -> Result<()> {
    crate::movement::registry::declare_fixed_routes(class, moves)
}

/// `provider` with the framework-internal gradient `hooks` of the class it serves.
pub fn composite_with_autograd(
    provider: CompositeProvider,
    hooks: Arc<dyn CompositeAutograd>,
) -> CompositeProvider {
    provider.with_autograd(hooks)
}

/// Fails with [`Error::Released`](crate::Error::Released) naming `action` unless `carrier` is
/// live.
pub fn check_live(carrier: &Carrier, action: &str) -> Result<()> {
    carrier.check_live(action)
}

/// Fails naming `action` unless a write to `carrier` is allowed: live, not claimed by a
/// pending move, mutable.
pub fn check_writable(carrier: &Carrier, action: &str) -> Result<()> {
    carrier.check_writable(action)
}

/// Moves `carrier`'s version by one, journaled while provider work runs on this thread: a
/// framework operation's one version step after writing with [`write_unversioned`].
pub fn bump_version(carrier: &Carrier) {
    carrier.bump_version();
}

/// Writes `value` (already checked and normalized) to `slot` of `carrier` without moving its
/// version; the framework operation publishes one version step when it commits.
pub fn write_unversioned(carrier: &Carrier, slot: usize, value: Value) -> Result<()> {
    carrier.write_unversioned(slot, value)
}

/// Whether an empty `carrier` grows when it is a destination.
pub fn grows_as_destination(carrier: &Carrier) -> bool {
    carrier.grows_as_destination()
}

/// Sets the number of slots of an empty (or just grown) `carrier` that grows as a
/// destination.
pub fn set_extent(carrier: &Carrier, slots: usize) -> Result<()> {
    carrier.set_extent(slots)
}

/// Gives up `token`'s ownership once its carrier is released (a released tier of a released
/// tier carrier is no longer owned); a live carrier stays owned. Idempotent.
pub fn relinquish_released(token: &OwnershipToken) {
    token.relinquish_released();
}

/// The tensor of `spec`'s layout over `carrier` from slot 0, sharing the spec's layout
/// rather than copying it: a composite's result.
pub fn result_tensor(carrier: Carrier, spec: &ResultSpec) -> Result<Tensor> {
    Tensor::with_shared_layout(carrier, 0, spec.shared_layout().clone())
}
