//! The route of a pair with no registered move operation.

use std::sync::Arc;

use crate::carrier::CarrierClass;
use crate::error::{Error, Result};
use crate::extension::carrier_definition;
use crate::movement::registry::refuse_unrouted_fixed_pair;
use crate::movement::{ElementwiseMoveOperation, MoveOperation};

/// The operation moving `source` to `destination` when no route is registered.
///
/// When either exact class is definition-backed, elementwise fallback is permitted only when
/// both are and both storage providers set `elementwise_fallback`; otherwise NotImplemented
/// naming the exact pair. Definition-free pairs keep their rule (elementwise, except a
/// BlockDeviceCarrier end).
pub(crate) fn unrouted_move_operation(
    source: CarrierClass,
    destination: CarrierClass,
) -> Result<Arc<dyn MoveOperation>> {
    if source.is_definition_backed() || destination.is_definition_backed() {
        let permits = |class: CarrierClass| {
            carrier_definition(class).is_some_and(|d| d.storage().elementwise_fallback())
        };
        let describe = |class: CarrierClass| match carrier_definition(class) {
            Some(d) if d.storage().elementwise_fallback() => "permits elementwise fallback",
            Some(_) => "does not permit elementwise fallback",
            None => "is definition-free",
        };
        if permits(source) && permits(destination) {
            return Ok(Arc::new(ElementwiseMoveOperation));
        }
        return Err(Error::NotImplemented(format!(
            "no move route from {source} to {destination}: elementwise fallback needs both \
             classes ({source}, {destination}) definition-backed with storage providers that permit it ({source} {}, \
             {destination} {})",
            describe(source),
            describe(destination)
        )));
    }
    refuse_unrouted_fixed_pair(source, destination)?;
    Ok(Arc::new(ElementwiseMoveOperation))
}
