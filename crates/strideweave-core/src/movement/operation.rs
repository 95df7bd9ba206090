//! `MoveOperation`: the copy step of a move between two exact carrier classes.

use parking_lot::Mutex;

use crate::carrier::Carrier;
use crate::carrier::SpanSlice;
use crate::dtype::{DType, Value};
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

/// How one recorded write is undone.
enum Undo {
    /// Write this value back to this slot.
    Slot(usize, Value),
    /// Put back a span a bulk route overwrote (its previous bytes, saved by the route).
    Span(Box<dyn FnOnce() + Send>),
}

/// What the writes of one move replaced in its destination, so that a move that fails after
/// writing part of its destination leaves it exactly as it was: the previous value of every
/// slot written through [`MoveTarget`]'s writers, and the previous contents of every span a
/// shipped bulk route overwrote. A destination that grew for the move had no slots before it
/// and journals nothing (it shrinks back instead).
pub(crate) struct SlotJournal {
    enabled: bool,
    undo: Mutex<Vec<Undo>>,
}

impl SlotJournal {
    /// A journal that records (`enabled`) or ignores the writes of one move.
    pub(crate) fn new(enabled: bool) -> SlotJournal {
        SlotJournal {
            enabled,
            undo: Mutex::new(Vec::new()),
        }
    }

    /// Records the current values of `slots` of `carrier` (each in range) before a write. A
    /// slot whose value cannot be read is not recorded (and cannot be restored): the write
    /// itself goes ahead, so journaling adds no failure of its own to a move.
    fn record(&self, carrier: &Carrier, slots: std::ops::Range<usize>) {
        if !self.enabled {
            return;
        }
        let recorded =
            slots.filter_map(|slot| Some(Undo::Slot(slot, carrier.read_unchecked(slot).ok()?)));
        self.undo.lock().extend(recorded);
    }

    /// Puts every recorded slot and span of `carrier` back, latest write first, and forgets
    /// them.
    pub(crate) fn restore(&self, carrier: &Carrier) {
        let undo = std::mem::take(&mut *self.undo.lock());
        for entry in undo.into_iter().rev() {
            match entry {
                // The value came from this slot, so restoring it cannot fail for its dtype; a
                // body that refuses anyway leaves that slot as the move left it.
                Undo::Slot(slot, value) => {
                    let _ = carrier.write_unversioned(slot, value);
                }
                Undo::Span(put_back) => put_back(),
            }
        }
    }
}

/// The destination of a move while it is being filled: writes here are checked for range
/// and dtype but do not bump the version (the move commits once), and each write first
/// records what it replaces, so a failing move restores the destination.
pub struct MoveTarget<'a> {
    carrier: &'a Carrier,
    journal: &'a SlotJournal,
}

impl<'a> MoveTarget<'a> {
    pub(crate) fn new(carrier: &'a Carrier, journal: &'a SlotJournal) -> Self {
        MoveTarget { carrier, journal }
    }

    /// The destination carrier, for typed bulk copies of a known class.
    ///
    /// Writes made directly through it are not journaled: a move operation that writes this
    /// way and can fail midway keeps the destination whole itself. The shipped bulk routes
    /// do so with [`keep_span`](MoveTarget::keep_span).
    pub fn carrier(&self) -> &Carrier {
        self.carrier
    }

    /// Before a bulk route overwrites a span of the destination directly: when the
    /// destination's previous contents must survive a failed move, `save` reads them and
    /// returns how to put them back, which a failed move runs (latest first). A save that
    /// fails fails the move before anything is written.
    pub(crate) fn keep_span(
        &self,
        save: impl FnOnce() -> Result<Box<dyn FnOnce() + Send>>,
    ) -> Result<()> {
        if self.journal.enabled {
            let put_back = save()?;
            self.journal.undo.lock().push(Undo::Span(put_back));
        }
        Ok(())
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
        self.journal.record(self.carrier, slot..slot + 1);
        self.carrier.write_unversioned(slot, value)
    }

    /// Writes `values` to slots `start..start + values.len()` of a Float32 destination, in
    /// one bulk copy when the destination's class writes spans natively (the CPU) and slot by
    /// slot otherwise; like [`write`](MoveTarget::write) it bumps no version.
    ///
    /// # Errors
    /// Index when the slots do not all lie in the destination; Type when the destination
    /// does not hold Float32; a released destination's Runtime error.
    pub fn write_f32s(&self, start: usize, values: &[f32]) -> Result<()> {
        self.check_span(start, values.len(), DType::FLOAT32)?;
        self.journal
            .record(self.carrier, start..start + values.len());
        if let Some(written) = self
            .carrier
            .body()
            .write_span(start, SpanSlice::F32(values))
        {
            return written;
        }
        for (i, x) in values.iter().enumerate() {
            self.carrier
                .write_unversioned(start + i, Value::Float(f64::from(*x)))?;
        }
        Ok(())
    }

    /// [`write_f32s`](MoveTarget::write_f32s) for an Int32 destination.
    ///
    /// # Errors
    /// As [`write_f32s`](MoveTarget::write_f32s), with Int32 for Float32.
    pub fn write_i32s(&self, start: usize, values: &[i32]) -> Result<()> {
        self.check_span(start, values.len(), DType::INT32)?;
        self.journal
            .record(self.carrier, start..start + values.len());
        if let Some(written) = self
            .carrier
            .body()
            .write_span(start, SpanSlice::I32(values))
        {
            return written;
        }
        for (i, x) in values.iter().enumerate() {
            self.carrier
                .write_unversioned(start + i, Value::Int(i64::from(*x)))?;
        }
        Ok(())
    }

    /// Checks that slots `start..start + len` lie in the destination and that it holds
    /// `dtype`.
    fn check_span(&self, start: usize, len: usize, dtype: DType) -> Result<()> {
        let size = self.carrier.size();
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::Index(format!(
                "move writes slots {start}..{start}+{len} of a {} carrier of size {size}",
                self.carrier.class()
            )));
        }
        if self.carrier.dtype() != dtype {
            return Err(Error::Type(format!(
                "move writes {dtype} slots into a {} carrier of dtype {}",
                self.carrier.class(),
                self.carrier.dtype()
            )));
        }
        self.carrier.check_live("write")
    }
}
