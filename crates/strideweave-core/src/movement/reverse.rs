//! The route back: what a move recorded for gradients needs before it starts.

use crate::carrier::CarrierClass;
use crate::error::{Error, Result};
use crate::extension::carrier_definition;
use crate::movement::registry::registered_move_operation;
use crate::movement::unrouted::unrouted_move_operation;

/// Checks that a route from `destination` back to `source` exists, by the same selection a
/// move from `destination` to `source` would make (the destination definition's exact
/// `TransferRoute`, a registered move operation, or the rule for an unrouted pair). A move
/// recorded for gradients asks this before anything is claimed, because its backward returns
/// the cotangent to the source's class along that route; none is a NotImplemented error.
pub(crate) fn check_route_back(source: CarrierClass, destination: CarrierClass) -> Result<()> {
    if carrier_definition(destination).is_some_and(|d| d.transfer_route(source).is_some())
        || registered_move_operation(destination, source).is_some()
    {
        return Ok(());
    }
    unrouted_move_operation(destination, source)
        .map(|_| ())
        .map_err(|error| {
            Error::NotImplemented(format!(
                "cannot record the move from {source} to {destination} for gradients: its \
                 backward needs a route back from {destination} to {source} ({error}); move \
                 it under no_grad or detach it first"
            ))
        })
}
