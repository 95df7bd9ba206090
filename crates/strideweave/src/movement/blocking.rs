//! `move_to`: the blocking move.

use std::sync::Arc;

use crate::carrier::{Carrier, Claim};
use crate::error::{Error, Result};
use crate::movement::unrouted::unrouted_move_operation;
use crate::movement::{registered_move_operation, MoveOperation, MoveTarget};
use crate::tensor::Tensor;

/// Copies `tensor` into `destination`, releases the source carrier and returns the tensor
/// at offset 0 of `destination` with the same layout.
///
/// Every check runs before any copy, in this order (semantics-operations.md §4): source
/// released, owned or claimed (Runtime); destination is the source (Value); destination
/// released, claimed, immutable or owned (Runtime); dtypes differ (Type); destination too
/// small and unable to grow (Value). An empty destination that grows as a move destination
/// is sized to exactly `cosize` slots. On any failure the source is live and unchanged, no
/// version moves, and a grown destination is shrunk back.
pub fn move_to(tensor: &Tensor, destination: &Carrier) -> Result<Tensor> {
    let source = tensor.carrier();
    source.check_live("move a tensor")?;
    if source.is_owned() && !source.lifecycle().owner_access_here() {
        return Err(Error::Runtime(format!(
            "cannot move a tensor whose {} carrier is owned by another carrier",
            source.class()
        )));
    }
    if destination.same_as(source) {
        return Err(Error::Value(format!(
            "cannot move a tensor onto its own {} carrier",
            source.class()
        )));
    }
    destination.check_writable("move into the destination")?;
    if destination.dtype() != source.dtype() {
        return Err(Error::Type(format!(
            "cannot move a {} tensor into a {} destination",
            source.dtype(),
            destination.dtype()
        )));
    }
    let cosize = tensor.layout().cosize();
    let available = destination.size();
    let grow = available < cosize;
    if grow && !(available == 0 && destination.grows_as_destination()) {
        return Err(Error::Value(format!(
            "the {} destination has {available} slots but the tensor needs {cosize}",
            destination.class()
        )));
    }
    let operation: Arc<dyn MoveOperation> =
        match registered_move_operation(source.class(), destination.class()) {
            Some(operation) => operation,
            None => unrouted_move_operation(source.class(), destination.class())?,
        };

    let source_claim = Claim::new(source)?;
    let _destination_claim = Claim::new(destination)?;
    if grow {
        destination.set_extent(cosize)?;
    }
    let copied = operation
        .copy(tensor, &MoveTarget::new(destination), cosize)
        .and_then(|()| Tensor::new(destination.clone(), 0, tensor.layout().clone()));
    let moved = match copied {
        Ok(moved) => moved,
        Err(error) => {
            if grow {
                // Best effort: the copy's error is the one to report.
                let _ = destination.set_extent(0);
            }
            return Err(error);
        }
    };
    destination.bump_version();
    source_claim.release_carrier()?;
    crate::autograd::record_move(tensor, &moved);
    Ok(moved)
}
