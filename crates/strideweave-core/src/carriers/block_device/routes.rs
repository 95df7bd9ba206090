//! The bulk routes CPU ↔ BlockDeviceCarrier (docs/carriers.md, Block devices): aligned
//! direct I/O of the tensor's `cosize` slots. BlockDeviceCarrier declares them, and that its
//! routes are fixed (every other pair with a BlockDeviceCarrier end is NotImplemented rather
//! than copied elementwise), in its `declare_class` hook.

use std::ops::Range;

use crate::carriers::{BlockDeviceCarrier, Cpu};
use crate::error::{Error, Result};
use crate::movement::{MoveOperation, MoveTarget};
use crate::tensor::Tensor;

/// The source slots `offset..offset + element_count`, unless that overflows.
fn slot_range(source: &Tensor, element_count: usize) -> Result<Range<usize>> {
    let start = source.offset();
    match start.checked_add(element_count) {
        Some(end) => Ok(start..end),
        None => Err(Error::Value(format!(
            "a bulk move of {element_count} slots from offset {start} overflows"
        ))),
    }
}

fn wrong_class(route: &str, side: &str) -> Error {
    Error::ProviderContract(format!("the {route} route was given a non-{side} carrier"))
}

/// CPU → BlockDeviceCarrier: writes the source's `cosize` slots to slots `0..cosize` of the
/// device extent with aligned direct I/O.
#[derive(Debug, Default)]
pub(crate) struct CpuToBlockDevice;

impl MoveOperation for CpuToBlockDevice {
    fn name(&self) -> &str {
        "bulk CPU->BlockDeviceCarrier"
    }

    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        let range = slot_range(source, element_count)?;
        let cpu = source
            .carrier()
            .downcast_ref::<Cpu>()
            .ok_or_else(|| wrong_class(self.name(), "CPU"))?;
        let block = target
            .carrier()
            .downcast_ref::<BlockDeviceCarrier>()
            .ok_or_else(|| wrong_class(self.name(), "BlockDeviceCarrier"))?;
        // No save of the destination's previous contents: a write that fails faults the
        // device, which then refuses every further access, so a partly written extent is
        // never read back through it.
        cpu.with_f32(|slots| match slots.get(range.clone()) {
            Some(span) => block.write_f32(0, span),
            None => Err(Error::Index(format!(
                "slots {range:?} are outside the CPU carrier's {} slots",
                slots.len()
            ))),
        })?
    }
}

/// BlockDeviceCarrier → CPU: reads the source's `cosize` slots from the device extent into
/// slots `0..cosize` of the CPU carrier with aligned direct I/O.
#[derive(Debug, Default)]
pub(crate) struct BlockDeviceToCpu;

impl MoveOperation for BlockDeviceToCpu {
    fn name(&self) -> &str {
        "bulk BlockDeviceCarrier->CPU"
    }

    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        let range = slot_range(source, element_count)?;
        let block = source
            .carrier()
            .downcast_ref::<BlockDeviceCarrier>()
            .ok_or_else(|| wrong_class(self.name(), "BlockDeviceCarrier"))?;
        let cpu = target
            .carrier()
            .downcast_ref::<Cpu>()
            .ok_or_else(|| wrong_class(self.name(), "CPU"))?;
        target.keep_span(|| {
            // A destination too small is refused below, before anything is written.
            let previous =
                cpu.with_f32(|slots| slots[..element_count.min(slots.len())].to_vec())?;
            let destination = target.carrier().clone();
            Ok(Box::new(move || {
                if let Some(cpu) = destination.downcast_ref::<Cpu>() {
                    let _ = cpu
                        .with_f32_mut(|slots| slots[..previous.len()].copy_from_slice(&previous));
                }
            }))
        })?;
        cpu.with_f32_mut(|slots| {
            let available = slots.len();
            match slots.get_mut(..element_count) {
                Some(span) => block.read_f32(range.start, span),
                None => Err(Error::Index(format!(
                    "the CPU carrier's {available} slots cannot hold {element_count} slots"
                ))),
            }
        })?
    }
}

#[cfg(test)]
mod tests {
    use crate::carrier::CarrierClass;
    use crate::carriers::{BlockDeviceCarrier, FileBacked, Generic};
    use crate::error::ErrorKind;
    use crate::movement::registry::{refuse_fixed_registry_change, refuse_unrouted_fixed_pair};

    #[test]
    fn only_pairs_with_a_block_end_are_refused() {
        let block = CarrierClass::of::<BlockDeviceCarrier>();
        let generic = CarrierClass::of::<Generic>();
        let file = CarrierClass::of::<FileBacked>();
        for (source, destination) in [(generic, block), (block, file), (block, block)] {
            let error = refuse_unrouted_fixed_pair(source, destination).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
            let pair = format!("from {source} to {destination}");
            assert!(error.to_string().contains(&pair), "{error}");
            let error = refuse_fixed_registry_change(source, destination).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            assert!(error.to_string().contains(&pair), "{error}");
        }
        assert!(refuse_unrouted_fixed_pair(generic, file).is_ok());
        assert!(refuse_fixed_registry_change(file, generic).is_ok());
    }
}
