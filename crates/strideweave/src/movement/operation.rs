//! `MoveOperation`: the copy step of a move between two exact carrier classes.

use crate::carrier::Carrier;
use crate::dtype::Value;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Copies a tensor's slots into a destination carrier: the route for one exact pair of
/// carrier classes (the definition-free movement registration of the seed).
///
/// The framework has already checked every precondition, claimed both carriers and sized
/// the destination; the operation only copies. It commits nothing: the framework bumps the
/// destination version, releases the source and publishes the result only after `copy`
/// returns `Ok`.
pub trait MoveOperation: Send + Sync {
    /// A name for messages.
    fn name(&self) -> &str;

    /// Copies the `element_count` (= `source.layout().cosize()`) slots starting at
    /// `source.offset()` to slots `0..element_count` of the target. Slots the layout does
    /// not address may be left stale.
    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()>;
}

/// The destination of a move while it is being filled: writes here are checked for range
/// and dtype but do not bump the version (the move commits once).
pub struct MoveTarget<'a> {
    carrier: &'a Carrier,
}

impl<'a> MoveTarget<'a> {
    pub(crate) fn new(carrier: &'a Carrier) -> Self {
        MoveTarget { carrier }
    }

    /// The destination carrier, for typed bulk copies of a known class.
    pub fn carrier(&self) -> &Carrier {
        self.carrier
    }

    /// Writes one slot (normalized to the destination dtype).
    pub fn write(&self, slot: usize, value: Value) -> Result<()> {
        let size = self.carrier.size();
        if slot >= size {
            return Err(Error::Index(format!(
                "move writes slot {slot} of a {} carrier of size {size}",
                self.carrier.class()
            )));
        }
        let value = self.carrier.dtype().normalize(value)?;
        self.carrier.write_unversioned(slot, value)
    }
}
