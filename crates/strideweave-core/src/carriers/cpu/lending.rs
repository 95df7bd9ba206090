//! Lending a CPU carrier's slots to code outside the core, and borrowing memory from it.
//!
//! A language binding hands a CPU carrier's memory to another library without a copy (the
//! Python package gives numpy a read-only array over it). While such a view lives, the memory
//! must stay where it is and hold what the view shows, so a [`CpuExport`] is a shared borrow
//! of the slots:
//!
//! - it keeps the carrier (and with it the memory) alive;
//! - every write to the carrier is refused with a Runtime error while any export lives, so the
//!   view never observes a change the carrier's version did not record and never races a
//!   writer;
//! - a release while exported is deferred: the carrier is released at once (every access
//!   through it fails, as after any release) but heap memory is freed only when the last
//!   export is dropped, so the view stays valid.
//!
//! The other direction, [`Cpu::borrowing`], makes an immutable CPU carrier over memory
//! someone else owns, kept alive by an owner object the carrier drops on release.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::aligned_buffer::{AlignedBuffer, Owner};
use super::{Cpu, Element, Storage, NAME};
use crate::carrier::Carrier;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// The export bookkeeping of one CPU carrier body.
#[derive(Debug, Default)]
pub(super) struct Lending {
    /// The number of live [`CpuExport`]s.
    exports: AtomicUsize,
    /// A heap buffer released while exported, freed when the last export goes.
    parked: Mutex<Option<Box<AlignedBuffer>>>,
    /// Whether the memory is borrowed read-only ([`Cpu::borrowing`]): writes are refused.
    read_only: bool,
}

impl Lending {
    /// The bookkeeping of memory borrowed read-only.
    pub(super) fn read_only() -> Lending {
        Lending {
            read_only: true,
            ..Lending::default()
        }
    }

    /// Refuses a write while the slots are exported or borrowed read-only. Callers hold the
    /// storage's write lock (heap) or writer mutex (inline), under which no export can start.
    #[inline]
    pub(super) fn admit_write(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::Runtime(format!(
                "cannot write the {NAME} carrier: it borrows read-only memory"
            )));
        }
        let live = self.exports.load(Ordering::Acquire);
        if live > 0 {
            return Err(Error::Runtime(format!(
                "cannot write the {NAME} carrier: its slots are exported to {live} live \
                 view(s) (such as a numpy array); writes are refused until every view is dropped"
            )));
        }
        Ok(())
    }

    /// Frees a released heap buffer now, or parks it while exports live.
    pub(super) fn release_buffer(&self, buffer: Option<AlignedBuffer>) {
        let Some(buffer) = buffer else { return };
        let mut parked = self.parked.lock();
        if self.exports.load(Ordering::Acquire) > 0 {
            *parked = Some(Box::new(buffer));
        } else {
            drop(parked);
            drop(buffer);
        }
    }

    /// One export ended: the last one frees a parked buffer.
    fn end_export(&self) {
        if self.exports.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let mut parked = self.parked.lock();
        if self.exports.load(Ordering::Acquire) == 0 {
            let freed = parked.take();
            drop(parked);
            drop(freed);
        }
    }

    /// The number of live exports.
    pub(super) fn live(&self) -> usize {
        self.exports.load(Ordering::Acquire)
    }
}

/// A shared borrow of a CPU carrier's slots for code outside the core: while it lives the
/// carrier refuses writes, a release is deferred (the memory stays valid until the last
/// export drops), and [`address`](CpuExport::address) points at slot 0.
///
/// It carries the seed's rule that a tensor's values change only through versioned writes:
/// nothing can change the exported memory, so the version stays true.
///
/// ```
/// use strideweave::carriers::Cpu;
/// use strideweave::{DType, ErrorKind, Value};
/// let carrier = Cpu::from_f32(&[1.0; 32], true)?;
/// let export = Cpu::export(&carrier)?;
/// assert_eq!(export.len_bytes(), 128);
/// let refused = carrier.set(0, Value::Float(2.0)).unwrap_err();
/// assert_eq!(refused.kind(), ErrorKind::Runtime);
/// drop(export);
/// carrier.set(0, Value::Float(2.0))?;
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug)]
pub struct CpuExport {
    carrier: Carrier,
    address: usize,
    len_bytes: usize,
}

impl CpuExport {
    /// The address of slot 0 (`0` for a carrier with no slots). Valid for reads of
    /// [`len_bytes`](CpuExport::len_bytes) bytes while this export lives; nothing writes them
    /// meanwhile.
    pub fn address(&self) -> usize {
        self.address
    }

    /// The number of bytes of slots from [`address`](CpuExport::address).
    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// The exported carrier.
    pub fn carrier(&self) -> &Carrier {
        &self.carrier
    }

    /// The dtype of the slots.
    pub fn dtype(&self) -> DType {
        self.carrier.dtype()
    }
}

impl Drop for CpuExport {
    fn drop(&mut self) {
        if let Some(cpu) = self.carrier.downcast_ref::<Cpu>() {
            cpu.lending.end_export();
        }
    }
}

impl Cpu {
    /// Exports the slots of CPU carrier `carrier` (see [`CpuExport`]).
    ///
    /// # Errors
    /// A Type error naming the class for a carrier that is not CPU; a Runtime error once the
    /// carrier is released.
    pub fn export(carrier: &Carrier) -> Result<CpuExport> {
        let Some(cpu) = carrier.downcast_ref::<Cpu>() else {
            return Err(Error::Type(format!(
                "only {NAME} carriers export their slots, not a {} carrier",
                carrier.class()
            )));
        };
        let len_bytes = cpu.slots * cpu.element.width();
        let exports = &cpu.lending.exports;
        // An export starts with writers excluded, so no write is half done when it begins.
        let address = match &cpu.storage {
            Storage::Inline(inline) => inline.excluding_writers(|live| {
                live.then(|| {
                    exports.fetch_add(1, Ordering::AcqRel);
                    inline.address().unwrap_or(0)
                })
            }),
            Storage::Heap(buffer) => buffer.read().as_ref().map(|buffer| {
                exports.fetch_add(1, Ordering::AcqRel);
                buffer.address().unwrap_or(0)
            }),
        };
        let Some(address) = address else {
            return Err(Error::Runtime(format!(
                "cannot export the {NAME} carrier: it is released"
            )));
        };
        Ok(CpuExport {
            carrier: carrier.clone(),
            address,
            len_bytes,
        })
    }

    /// The number of live exports of this carrier's slots.
    pub fn live_exports(&self) -> usize {
        self.lending.live()
    }

    /// An immutable CPU carrier over `len_bytes` bytes of Float32 or Int32 slots at `address`
    /// that someone else owns; `owner` keeps them alive and is dropped when the carrier is
    /// released or dropped. Writes through the carrier are refused; the slots are read in
    /// place, without a copy.
    ///
    /// # Safety
    /// From this call until `owner` is dropped, `address` must be valid for reads of
    /// `len_bytes` initialized bytes, and those bytes must not be written while the core reads
    /// them (the carrier's reads are not synchronized with other writers of that memory).
    ///
    /// # Errors
    /// A Value error for a dtype other than Float32 or Int32, an address not 4-byte aligned,
    /// or a byte count that is not a whole number of slots.
    pub unsafe fn borrowing(
        address: NonNull<u8>,
        len_bytes: usize,
        dtype: DType,
        owner: Box<dyn Send + Sync>,
    ) -> Result<Carrier> {
        let element = Element::of(dtype)?;
        if element == Element::Bool {
            return Err(Error::Value(format!(
                "a borrowing {NAME} carrier holds Float32 or Int32 slots, not {dtype}"
            )));
        }
        let width = element.width();
        if !address.as_ptr().addr().is_multiple_of(width) || !len_bytes.is_multiple_of(width) {
            return Err(Error::Value(format!(
                "a borrowing {NAME} carrier needs {width}-byte aligned {dtype} slots, got \
                 address {:#x} and {len_bytes} bytes",
                address.as_ptr().addr()
            )));
        }
        // SAFETY: the caller guarantees validity for reads of `len_bytes` bytes until `owner`
        // drops, and the buffer keeps `owner` until it is itself dropped; the alignment to
        // `width` (4, the alignment of f32 and i32) was checked above.
        let buffer = unsafe { AlignedBuffer::borrowed(address, len_bytes, Owner::new(owner)) };
        let cpu = Cpu {
            element,
            slots: len_bytes / width,
            storage: Storage::Heap(parking_lot::RwLock::new(Some(buffer))),
            lending: Lending::read_only(),
        };
        Cpu::wrap(cpu, dtype, false)
    }
}
