//! Carrier scatter (docs/carriers.md, Scatter): element `i` of a source tensor goes to slot
//! `destination.offset + mapping_offset + mapping(i)` of the receiving carrier, atomically.

use strideweave_layout::Layout;

use crate::carrier::Carrier;
use crate::dtype::Value;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

impl Carrier {
    /// Scatters `source` into this carrier through `mapping`, bumping the version once.
    ///
    /// Every check runs before the first write, in this order: scatter unsupported by the
    /// class (NotImplemented); `destination` backed by another carrier (Value); this carrier
    /// released, claimed, immutable or owned (Runtime); `source` and `mapping` of different
    /// shapes (Value); a `mapping` that is not injective (Value); a source the class refuses
    /// (Type); a target slot out of range
    /// (Value); a value the dtype refuses (Type/Overflow). Nothing is written on failure.
    pub fn scatter(
        &self,
        source: &Tensor,
        destination: &Tensor,
        mapping: &Layout,
        mapping_offset: usize,
    ) -> Result<()> {
        if !self.supports_scatter() {
            return Err(Error::NotImplemented(format!(
                "{} carriers do not support scatter",
                self.class()
            )));
        }
        if !destination.carrier().same_as(self) {
            return Err(Error::Value(format!(
                "scatter destination is backed by another {} carrier, not the receiver",
                destination.carrier().class()
            )));
        }
        self.check_writable("scatter")?;
        if source.shape() != mapping.shape() {
            return Err(Error::Value(format!(
                "scatter mapping shape must match the source shape: the source shape {} \
                 differs from the mapping shape {}",
                source.shape(),
                mapping.shape()
            )));
        }
        if !mapping.is_injective() {
            return Err(Error::Value(format!(
                "scatter mapping {mapping} is not injective: two source elements would land on \
                 one slot"
            )));
        }
        self.check_scatter_source(source.carrier().class(), source.dtype())?;
        let base = destination.offset().checked_add(mapping_offset);
        let size = self.size();
        // An injective mapping lands its elements on distinct slots, so one with more elements
        // than the carrier has slots lands outside it; checking that first keeps every list
        // below bounded by the carrier's size, however large the source's logical size.
        let mut targets: Vec<usize> = Vec::with_capacity(mapping.size().min(size));
        for (ordinal, index) in mapping.indices().enumerate() {
            let slot = base.and_then(|b| b.checked_add(index));
            let Some(slot) = slot.filter(|s| *s < size) else {
                return Err(Error::Value(format!(
                    "scatter element {ordinal} lands outside the {} carrier of size {size} (offset {} + {mapping_offset}, mapping {mapping})",
                    self.class(),
                    destination.offset()
                )));
            };
            targets.push(slot);
        }
        // The shapes are equal, so the source has exactly one element per target.
        let offset = source.offset();
        let sources: Vec<usize> = source.layout().indices().map(|i| offset + i).collect();
        let from = source.carrier();
        from.check_readable_slots(&sources)?;
        crate::operation::provider_scope::note_slots(self, targets.iter().copied());
        self.counted_write(|body, dtype| {
            if let Some(copied) = body.copy_slots_from(from, &sources, &targets) {
                return copied;
            }
            let values = from.get_all(&sources)?;
            let writes = targets
                .iter()
                .zip(values)
                .map(|(&slot, value)| Ok((slot, dtype.normalize(value)?)))
                .collect::<Result<Vec<(usize, Value)>>>()?;
            body.write_all(&writes, dtype)
        })
    }
}
