//! `BlockDeviceCarrier`: Float32 slots in one extent of a [`BlockDevice`].

use crate::carrier::CarrierClass;
use crate::carriers::block_device::routes::BlockDeviceToCpu;
use crate::carriers::Cpu;
use crate::internal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::device::BlockDevice;
use crate::carrier::{ClassOrigin, DefinitionFreeCarrier};
use crate::dtype::{accepts_storage_dtype, DType, Value};
use crate::error::{Error, Result};

/// The class name used in messages.
pub(super) const NAME: &str = "BlockDeviceCarrier";
/// The dtypes a block device carrier stores.
pub(super) const STORABLE: [DType; 1] = [DType::FLOAT32];
/// Bytes per slot: one little-endian binary32.
pub(super) const SLOT_BYTES: u64 = 4;

/// Storage-only Float32 slots in one extent of a [`BlockDevice`], 4 bytes little-endian
/// each, starting at [`device_offset_bytes`](BlockDeviceCarrier::device_offset_bytes).
///
/// The only way to make one is [`BlockDevice::allocate`] (or the `new_like` and
/// `allocate_like` factories of an existing one, which allocate from the same device). The
/// size is fixed; scatter and every operation are NotImplemented and the class declares no
/// capabilities; moves exist only to and from CPU carriers. Releasing (or dropping) the
/// carrier returns its extent to the device, once.
#[derive(Debug)]
pub struct BlockDeviceCarrier {
    device: BlockDevice,
    offset: u64,
    extent: u64,
    slots: usize,
    /// Set (under the device lock) once the extent is retired.
    retired: AtomicBool,
}

impl BlockDeviceCarrier {
    /// A carrier of `slots` slots in the extent `[offset, offset + extent)`, already taken
    /// from `device`'s free ranges and counted as live.
    pub(super) fn placed(
        device: BlockDevice,
        offset: u64,
        extent: u64,
        slots: usize,
    ) -> BlockDeviceCarrier {
        BlockDeviceCarrier {
            device,
            offset,
            extent,
            slots,
            retired: AtomicBool::new(false),
        }
    }

    /// The device holding the slots.
    pub fn device(&self) -> &BlockDevice {
        &self.device
    }

    /// The device byte at which slot 0 lives (a multiple of the allocation alignment; 0 for
    /// a carrier of no slots).
    pub fn device_offset_bytes(&self) -> u64 {
        self.offset
    }

    /// The bytes of the device this carrier holds: `size * 4` rounded up to the allocation
    /// alignment (0 for a carrier of no slots).
    pub fn extent_bytes(&self) -> u64 {
        self.extent
    }

    /// Reads slots `first..first + out.len()` into `out` with aligned direct I/O.
    ///
    /// # Errors
    /// An Index error for slots beyond the carrier; a Runtime error once released or when
    /// the device is closed or faulted; the device's Io or Runtime error when a transfer
    /// fails (which faults the device).
    pub(crate) fn read_f32(&self, first: usize, out: &mut [f32]) -> Result<()> {
        let start = self.span(first, out.len(), "read")?;
        let bytes = byte_count(out.len())?;
        self.device
            .read(&self.retired, start, bytes, |position, data| {
                let slots = out.iter_mut().skip(slot_of(position));
                for (slot, word) in slots.zip(data.chunks_exact(4)) {
                    *slot = f32::from_le_bytes(word_of(word));
                }
            })
    }

    /// Writes `values` to slots `first..first + values.len()` with aligned direct I/O.
    ///
    /// # Errors
    /// As [`read_f32`](BlockDeviceCarrier::read_f32).
    pub(crate) fn write_f32(&self, first: usize, values: &[f32]) -> Result<()> {
        let start = self.span(first, values.len(), "write")?;
        let bytes = byte_count(values.len())?;
        self.device
            .write(&self.retired, start, bytes, |position, data| {
                let slots = values.iter().skip(slot_of(position));
                for (value, word) in slots.zip(data.chunks_exact_mut(4)) {
                    for (byte, encoded) in word.iter_mut().zip(value.to_le_bytes()) {
                        *byte = encoded;
                    }
                }
            })
    }

    /// The device byte of slot `first`, after checking `first..first + count` lies inside
    /// the carrier (an Index error otherwise).
    fn span(&self, first: usize, count: usize, action: &str) -> Result<u64> {
        let fits = first
            .checked_add(count)
            .is_some_and(|end| end <= self.slots);
        if !fits {
            return Err(Error::Index(format!(
                "cannot {action} {count} slots from slot {first}: the {NAME} has {} slots",
                self.slots
            )));
        }
        // Inside the extent, which lies inside the device, so this cannot overflow.
        Ok(self.offset + byte_count(first)?)
    }
}

impl DefinitionFreeCarrier for BlockDeviceCarrier {
    const NAME: &'static str = NAME;
    const ORIGIN: ClassOrigin = ClassOrigin::SHIPPED;

    /// BlockDeviceCarrier stores only (it declares no capability) and moves only to and from
    /// the CPU, in bulk: its routes are fixed.
    fn declare_class(class: CarrierClass) {
        // A shipped class declares once, before any query of it, so none of this can be
        // refused.
        let _ = internal::declare_shipped_capabilities(class, []);
        let _ = internal::declare_fixed_routes(class, "moves only to and from CPU");
        let _ = internal::declare_shipped_move_operation(
            class,
            CarrierClass::of::<Cpu>(),
            Arc::new(BlockDeviceToCpu),
        );
    }

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        accepts_storage_dtype(dtype, &STORABLE)
    }

    fn size(&self) -> usize {
        if self.retired.load(Ordering::Acquire) {
            0
        } else {
            self.slots
        }
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        let mut value = [0.0];
        self.read_f32(index, &mut value)?;
        Ok(Value::Float(f64::from(value[0])))
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.write_f32(index, &[float32(value)?])
    }

    fn release(&self) -> Result<()> {
        self.device.retire(&self.retired, self.offset, self.extent)
    }

    fn new_like(&self, values: &[Value], dtype: DType) -> Result<Self> {
        let floats = values
            .iter()
            .map(|value| float32(*value))
            .collect::<Result<Vec<_>>>()?;
        // On failure the new carrier is dropped, which returns its extent.
        let body = self.device.allocate_body(values.len(), dtype, true)?;
        body.write_f32(0, &floats)?;
        Ok(body)
    }

    fn allocate_like(&self, size: usize, dtype: DType, empty: bool) -> Result<Self> {
        self.device.allocate_body(size, dtype, empty)
    }

    fn supports_scatter(&self) -> bool {
        false
    }

    /// A write is counted when its transfer starts (docs/carriers.md, Block devices): a transfer
    /// that fails midway may have changed bytes on the device.
    fn versions_at_transfer_start(&self) -> bool {
        true
    }
}

impl Drop for BlockDeviceCarrier {
    fn drop(&mut self) {
        // An unreleased carrier still holds its extent; nobody can reach it any more.
        let _ = self.device.retire(&self.retired, self.offset, self.extent);
    }
}

/// An already normalized Float32 value as an `f32` (exact), or a Type error.
fn float32(value: Value) -> Result<f32> {
    match value {
        Value::Float(x) => Ok(x as f32),
        _ => Err(Error::Type(format!(
            "a {NAME} Float32 slot cannot hold {} value {value}",
            value.type_name()
        ))),
    }
}

/// The bytes of `slots` slots.
fn byte_count(slots: usize) -> Result<u64> {
    u64::try_from(slots)
        .ok()
        .and_then(|slots| slots.checked_mul(SLOT_BYTES))
        .ok_or_else(|| Error::Index(format!("{slots} slots are beyond any {NAME}")))
}

/// The slot at byte `position` of a span (positions are multiples of 4).
fn slot_of(position: u64) -> usize {
    usize::try_from(position / SLOT_BYTES).unwrap_or(usize::MAX)
}

/// A 4-byte chunk as an array (`chunks_exact(4)` guarantees the length).
fn word_of(word: &[u8]) -> [u8; 4] {
    word.try_into().unwrap_or_default()
}
