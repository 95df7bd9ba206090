//! `ElementwiseMoveOperation`: the default route, one value at a time.

use crate::error::Result;
use crate::limits;
use crate::movement::{MoveOperation, MoveTarget};
use crate::tensor::Tensor;

/// Copies the slots the source layout addresses, one [`Value`](crate::Value) at a time,
/// leaving unaddressed slots of the destination as they were (the default route for every
/// pair without a bulk route).
#[derive(Debug, Clone, Copy, Default)]
pub struct ElementwiseMoveOperation;

impl MoveOperation for ElementwiseMoveOperation {
    fn name(&self) -> &str {
        "elementwise"
    }

    /// Each addressed slot is copied once, so the work is bounded by the slots the layout
    /// spans, not by its logical size: a broadcast of one slot copies one value.
    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, _element_count: usize) -> Result<()> {
        for slot in limits::distinct_slots(source.layout())? {
            let value = source.carrier().get(source.offset() + slot)?;
            target.write(slot, value)?;
        }
        Ok(())
    }
}
