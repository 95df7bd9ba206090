//! `Cpu`: slots in native memory, the carrier the host kernels run on.
//!
//! Memory layout of a CPU carrier of `n` slots, native-endian f32 / i32 (4 bytes) or bool
//! (1 byte, 0/1):
//!
//! ```text
//! up to 64 bytes:  Cpu { element, slots: n, Storage::Inline(InlineSlots) }
//!                                            sequence lock + [ slot 0 | ... | slot n-1 ]
//! beyond:          Cpu { element, slots: n, Storage::Heap(RwLock<Option<AlignedBuffer>>) }
//!                                                                 |
//!                        64-byte aligned (2 MiB aligned from 2 MiB up)  v
//!                                            [ slot 0 | slot 1 | ... | slot n-1 ]
//! ```
//!
//! Invariants:
//! 1. Every byte of live storage is initialized (zeroed at allocation), so safe reads never
//!    observe uninitialized memory, even of slots nobody wrote.
//! 2. Heap storage is `None` exactly when the carrier is released; a read takes the read
//!    lock and a write the write lock, so a concurrent release is seen as a Runtime error.
//!    Inline storage is read without a lock under its sequence lock ([`InlineSlots`]), which
//!    also records the release.
//! 3. All `unsafe` code lives in [`AlignedBuffer`], which owns its allocation like a
//!    `Box<[u8]>` and frees it on drop.

mod aligned_buffer;
mod inline_slots;
pub(crate) mod kernels;
mod lending;

use std::ops::Range;
use std::sync::Arc;
use std::sync::OnceLock;

use parking_lot::RwLock;

use aligned_buffer::AlignedBuffer;

/// The Index error of a bulk span that does not lie in a CPU carrier's slots (the framework
/// checks spans first, so this answers a carrier resized underneath).
fn outside(span: &Range<usize>) -> Error {
    Error::Index(format!("slots {span:?} are outside the CPU carrier"))
}

#[cfg(test)]
use aligned_buffer::{CACHE_LINE, HUGE_PAGE};
use inline_slots::{InlineSlots, INLINE_BYTES};
pub use lending::CpuExport;
use lending::Lending;

/// The most Float32 slots a CPU carrier keeps inline.
pub(crate) const INLINE_F32: usize = inline_slots::WORDS;
/// The most Bool slots a CPU carrier keeps inline.
pub(crate) const INLINE_BOOL: usize = INLINE_BYTES;
/// The number of 4-byte words the inline slots take (see [`Cpu::copy_inline`]).
pub(crate) const INLINE_WORDS: usize = inline_slots::WORDS;

use crate::carrier::{
    Carrier, CarrierClass, ClassOrigin, DefinitionFreeCarrier, SpanSlice, SpanValues,
};
use crate::carriers::block_device::routes::CpuToBlockDevice;
use crate::carriers::bulk_routes::CpuToFileBacked;
use crate::carriers::{BlockDeviceCarrier, FileBacked};
use crate::dtype::{accepts_storage_dtype, validate_storage_dtype, DType, Value};
use crate::error::{quoted, Error, Result};
use crate::internal;
use crate::operation::{Authority, Builtin, BuiltinKernel, Operation};

const NAME: &str = "CPU";
const STORABLE: [DType; 3] = [DType::FLOAT32, DType::INT32, DType::BOOL];

/// The element a CPU carrier stores, derived once from its dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Element {
    Float32,
    Int32,
    Bool,
}

impl Element {
    /// The element of a storable `dtype`; a Value error naming CPU and the dtype otherwise.
    fn of(dtype: DType) -> Result<Element> {
        validate_storage_dtype(dtype, NAME, &STORABLE)?;
        if dtype == DType::FLOAT32 {
            Ok(Element::Float32)
        } else if dtype == DType::INT32 {
            Ok(Element::Int32)
        } else if dtype == DType::BOOL {
            Ok(Element::Bool)
        } else {
            Err(Error::Value(format!(
                "carrier {NAME} does not support storage dtype {dtype}"
            )))
        }
    }

    fn dtype(self) -> DType {
        match self {
            Element::Float32 => DType::FLOAT32,
            Element::Int32 => DType::INT32,
            Element::Bool => DType::BOOL,
        }
    }

    /// Bytes per slot.
    fn width(self) -> usize {
        match self {
            Element::Float32 | Element::Int32 => 4,
            Element::Bool => 1,
        }
    }
}

/// Native host memory: Float32, Int32 or Bool slots.
///
/// Up to 64 bytes of slots live inside the carrier and are read without taking a lock, so a
/// tiny carrier is one allocation. Larger buffers are one allocation of their own, 64-byte
/// aligned, and from 2 MiB up 2 MiB aligned and advised to use transparent huge pages
/// (Linux). The typed fast paths for kernels and bulk moves borrow the slots as native
/// slices (of a heap buffer under the carrier's lock, of inline slots as a consistent copy);
/// [`pointer`](Cpu::pointer) exposes the address.
///
/// ```
/// use strideweave::carriers::Cpu;
/// use strideweave::{DType, Value};
/// let carrier = Cpu::carrier(3, DType::FLOAT32, true, false)?;
/// assert_eq!(carrier.get(2)?, Value::Float(0.0));
/// carrier.set(2, Value::Float(0.1))?;
/// assert_eq!(carrier.get(2)?, Value::Float(0.10000000149011612));
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug)]
pub struct Cpu {
    element: Element,
    slots: usize,
    storage: Storage,
    /// Live exports of the slots, and whether they are borrowed read-only.
    lending: Lending,
}

/// Where a CPU carrier's slots live.
#[derive(Debug)]
enum Storage {
    /// Up to [`INLINE_BYTES`] bytes inside the carrier, under a sequence lock.
    Inline(InlineSlots),
    /// A buffer of its own under a reader-writer lock; `None` once released.
    Heap(RwLock<Option<AlignedBuffer>>),
}

impl Cpu {
    /// A CPU carrier of `size` zeroed slots of `dtype` (Float32, Int32 or Bool).
    ///
    /// `empty` asks to skip zero-filling. CPU memory is handed out zeroed regardless, because
    /// a safe read of a never-written slot must not observe uninitialized memory; large
    /// buffers come zero-filled from the operating system without a separate zeroing pass,
    /// which is where skipping it would pay off.
    ///
    /// # Errors
    /// A Value error naming CPU and the dtype for any other dtype; a Memory error naming the
    /// byte count when the buffer cannot be allocated.
    pub fn carrier(size: usize, dtype: DType, mutable: bool, empty: bool) -> Result<Carrier> {
        let element = Element::of(dtype)?;
        Cpu::wrap(Cpu::allocate(size, element, empty)?, dtype, mutable)
    }

    /// A CPU carrier holding `values`, each normalized to `dtype` with [`DType::normalize`].
    ///
    /// # Errors
    /// A Value error for an unsupported dtype, the normalization error (Type or Overflow) of
    /// the first value that does not fit, or a Memory error.
    pub fn from_values(values: &[Value], dtype: DType, mutable: bool) -> Result<Carrier> {
        let element = Element::of(dtype)?;
        let normalized = values
            .iter()
            .map(|value| dtype.normalize(*value))
            .collect::<Result<Vec<_>>>()?;
        Cpu::wrap(Cpu::holding(&normalized, element)?, dtype, mutable)
    }

    /// A Float32 CPU carrier holding a copy of `values` (one bulk copy, no per-element
    /// conversion).
    ///
    /// ```
    /// use strideweave::carriers::Cpu;
    /// use strideweave::Value;
    /// let carrier = Cpu::from_f32(&[1.5, -2.0], true)?;
    /// assert_eq!(carrier.get(1)?, Value::Float(-2.0));
    /// # Ok::<(), strideweave::Error>(())
    /// ```
    pub fn from_f32(values: &[f32], mutable: bool) -> Result<Carrier> {
        if values.len() <= INLINE_F32 {
            return Ok(Cpu::inline_f32(values, mutable));
        }
        let cpu = Cpu::allocate(values.len(), Element::of(DType::FLOAT32)?, true)?;
        cpu.with_f32_mut(|slots| slots.copy_from_slice(values))?;
        Cpu::wrap(cpu, DType::FLOAT32, mutable)
    }

    /// A Float32 carrier holding at most [`INLINE_F32`] `values` inline, built in place: the
    /// result of a tiny operation costs one allocation and no fallible step. CPU is a
    /// shipped class, which can never take a definition, so there is nothing for the
    /// definition-free observation to guard.
    #[inline]
    pub(crate) fn inline_f32(values: &[f32], mutable: bool) -> Carrier {
        Cpu::inline_words(
            Element::Float32,
            &values[..values.len().min(INLINE_F32)],
            mutable,
        )
    }

    /// An Int32 carrier holding at most [`INLINE_F32`] `values` inline, built like
    /// [`inline_f32`](Cpu::inline_f32).
    #[inline]
    pub(crate) fn inline_i32(values: &[i32], mutable: bool) -> Carrier {
        Cpu::inline_words(
            Element::Int32,
            &values[..values.len().min(INLINE_F32)],
            mutable,
        )
    }

    /// A Bool carrier holding at most `INLINE_BYTES` `values` (each 0 or 1) inline, built
    /// like [`inline_f32`](Cpu::inline_f32).
    #[inline]
    pub(crate) fn inline_bool(values: &[u8], mutable: bool) -> Carrier {
        let values = &values[..values.len().min(INLINE_BOOL)];
        Cpu::inline_with(Element::Bool, values.len(), mutable, |slots| {
            slots.fill_fresh_bytes(values)
        })
    }

    /// A carrier of 4-byte `element` slots holding `values` inline (at most [`INLINE_F32`]).
    #[inline]
    fn inline_words<T: inline_slots::Word>(
        element: Element,
        values: &[T],
        mutable: bool,
    ) -> Carrier {
        Cpu::inline_with(element, values.len(), mutable, |slots| {
            slots.fill_fresh(values)
        })
    }

    /// A carrier of `count` inline `element` slots that `fill` stores before anyone else
    /// can see them.
    #[inline]
    fn inline_with(
        element: Element,
        count: usize,
        mutable: bool,
        fill: impl FnOnce(&InlineSlots),
    ) -> Carrier {
        let body = Cpu {
            element,
            slots: count,
            storage: Storage::Inline(InlineSlots::zeroed(element.width() * count)),
            lending: Lending::default(),
        };
        let authority = Authority::Hook {
            builtin: Some(crate::carriers::cpu::kernels::execute),
        };
        let carrier = Carrier::from_erased_body(
            body,
            Cpu::carrier_class(),
            authority,
            element.dtype(),
            mutable,
        );
        if let Some(Storage::Inline(slots)) = carrier.downcast_ref::<Cpu>().map(|cpu| &cpu.storage)
        {
            fill(slots);
        }
        carrier
    }

    /// An Int32 CPU carrier holding a copy of `values`.
    pub fn from_i32(values: &[i32], mutable: bool) -> Result<Carrier> {
        let cpu = Cpu::allocate(values.len(), Element::of(DType::INT32)?, true)?;
        cpu.with_i32_mut(|slots| slots.copy_from_slice(values))?;
        Cpu::wrap(cpu, DType::INT32, mutable)
    }

    /// The address of the first slot; `None` when the carrier has no slots or is released.
    ///
    /// The address stays valid until the carrier is released or dropped. It is 64-byte
    /// aligned for slots beyond 64 bytes; smaller carriers keep their slots inline, 4-byte
    /// aligned. Memory reached through it is outside the carrier's locking: reading or
    /// writing it while the carrier is in use is the caller's responsibility.
    pub fn pointer(&self) -> Option<usize> {
        match &self.storage {
            Storage::Inline(inline) => inline.address(),
            Storage::Heap(buffer) => buffer
                .read_recursive()
                .as_ref()
                .and_then(AlignedBuffer::address),
        }
    }

    /// The exact class of CPU carriers, looked up once per process.
    pub(crate) fn carrier_class() -> CarrierClass {
        static CLASS: OnceLock<CarrierClass> = OnceLock::new();
        *CLASS.get_or_init(CarrierClass::of::<Cpu>)
    }

    /// A CPU carrier of the body `cpu`, which holds `dtype` slots.
    #[inline]
    pub(crate) fn wrap(cpu: Cpu, dtype: DType, mutable: bool) -> Result<Carrier> {
        Carrier::with_class(cpu, Cpu::carrier_class(), dtype, mutable)
    }

    /// A fresh, unwrapped CPU body of `size` zeroed slots of `dtype`, for kernels to fill
    /// through the typed accessors ([`with_f32_mut`](Cpu::with_f32_mut) and its siblings)
    /// before wrapping it with [`Carrier::new`]: one allocation, no per-element `Value`.
    ///
    /// # Errors
    /// A Value error for a dtype CPU cannot store; a Memory error when the buffer cannot be
    /// allocated.
    pub(crate) fn zeroed(size: usize, dtype: DType) -> Result<Cpu> {
        Cpu::allocate(size, Element::of(dtype)?, true)
    }

    /// `slots` zeroed slots of `element` (see [`Cpu::carrier`] for `empty`).
    fn allocate(slots: usize, element: Element, empty: bool) -> Result<Cpu> {
        // Skipping the zeroing would expose uninitialized memory to safe reads (invariant 1).
        let _ = empty;
        let width = element.width();
        crate::limits::check_allocation(slots, width, || {
            format!("a {NAME} carrier of {} slots", element.dtype())
        })?;
        // The check above refused a count whose bytes overflow.
        let bytes = slots.saturating_mul(width);
        let storage = if bytes <= INLINE_BYTES {
            Storage::Inline(InlineSlots::zeroed(bytes))
        } else {
            Storage::Heap(RwLock::new(Some(AlignedBuffer::zeroed(bytes)?)))
        };
        Ok(Cpu {
            element,
            slots,
            storage,
            lending: Lending::default(),
        })
    }

    /// A fresh carrier body holding already normalized `values`.
    fn holding(values: &[Value], element: Element) -> Result<Cpu> {
        let encoded = values
            .iter()
            .map(|value| encode(element, *value))
            .collect::<Result<Vec<_>>>()?;
        let cpu = Cpu::allocate(values.len(), element, true)?;
        cpu.with_bytes_mut(|bytes| {
            for (chunk, code) in bytes.chunks_exact_mut(element.width()).zip(encoded) {
                store(chunk, code);
            }
        })?;
        Ok(cpu)
    }

    /// Runs `f` on the raw slot bytes (native endianness): a heap buffer under its read lock,
    /// inline slots as a consistent copy.
    ///
    /// `f` must not write to this carrier (that would wait for the read lock to go).
    ///
    /// # Errors
    /// A Runtime error once the carrier is released.
    pub(crate) fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        match &self.storage {
            Storage::Inline(inline) => inline.read_bytes(f, || released("read")),
            Storage::Heap(buffer) => {
                let buffer = buffer.read_recursive();
                let buffer = buffer.as_ref().ok_or_else(|| released("read"))?;
                Ok(f(buffer.as_bytes()))
            }
        }
    }

    /// Runs `f` on the raw slot bytes (native endianness) as one write: a heap buffer under
    /// its write lock, inline slots published when `f` returns.
    ///
    /// `f` must not access this carrier again (that would deadlock). Bool slots must be left
    /// holding 0 or 1.
    ///
    /// # Errors
    /// A Runtime error once the carrier is released.
    pub(crate) fn with_bytes_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        match &self.storage {
            Storage::Inline(inline) => {
                inline.write_bytes(f, || released("write"), || self.lending.admit_write())
            }
            Storage::Heap(buffer) => {
                let mut buffer = buffer.write();
                let buffer = buffer.as_mut().ok_or_else(|| released("write"))?;
                self.lending.admit_write()?;
                Ok(f(buffer.as_bytes_mut()))
            }
        }
    }

    /// Runs `f` on the Float32 slots, read like [`with_bytes`](Cpu::with_bytes).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Float32; a Runtime error once released.
    #[inline]
    pub(crate) fn with_f32<R>(&self, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
        self.expect_element(Element::Float32)?;
        self.read_typed(f)
    }

    /// Runs `f` on the Float32 slots as one write, like [`with_bytes_mut`](Cpu::with_bytes_mut).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Float32; a Runtime error once released.
    pub(crate) fn with_f32_mut<R>(&self, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
        self.expect_element(Element::Float32)?;
        self.write_typed(f)
    }

    /// Runs `f` on the Int32 slots, read like [`with_bytes`](Cpu::with_bytes).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Int32; a Runtime error once released.
    pub(crate) fn with_i32<R>(&self, f: impl FnOnce(&[i32]) -> R) -> Result<R> {
        self.expect_element(Element::Int32)?;
        self.read_typed(f)
    }

    /// Runs `f` on the Int32 slots as one write, like [`with_bytes_mut`](Cpu::with_bytes_mut).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Int32; a Runtime error once released.
    pub(crate) fn with_i32_mut<R>(&self, f: impl FnOnce(&mut [i32]) -> R) -> Result<R> {
        self.expect_element(Element::Int32)?;
        self.write_typed(f)
    }

    /// Runs `f` on the Float32 slots of a body nobody else can see yet (no lock taken).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Float32; a Runtime error once released.
    #[inline]
    pub(crate) fn with_f32_exclusive<R>(&mut self, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
        self.expect_element(Element::Float32)?;
        self.exclusive_typed(f)
    }

    /// Runs `f` on the Int32 slots of a body nobody else can see yet (no lock taken).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Int32; a Runtime error once released.
    pub(crate) fn with_i32_exclusive<R>(&mut self, f: impl FnOnce(&mut [i32]) -> R) -> Result<R> {
        self.expect_element(Element::Int32)?;
        self.exclusive_typed(f)
    }

    /// Runs `f` on the raw slot bytes of a body nobody else can see yet (no lock taken).
    /// Bool slots must be left holding 0 or 1.
    ///
    /// # Errors
    /// A Runtime error once released.
    pub(crate) fn with_bytes_exclusive<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        match &mut self.storage {
            Storage::Inline(inline) => inline.exclusive_bytes(f, || released("write")),
            Storage::Heap(buffer) => {
                let buffer = buffer.get_mut().as_mut().ok_or_else(|| released("write"))?;
                Ok(f(buffer.as_bytes_mut()))
            }
        }
    }

    /// A consistent copy of the slots into `words` when they are kept inline (native byte
    /// order: one slot per word for Float32 and Int32, four Bool bytes per word), and the
    /// number of slots; `None` for slots on the heap or once released, where the caller takes
    /// the locked read instead. Tiny kernels read their operands with it, lock-free.
    #[inline]
    pub(crate) fn copy_inline(&self, words: &mut [u32; INLINE_WORDS]) -> Option<usize> {
        match &self.storage {
            Storage::Inline(inline) => inline.copy_words(words).map(|()| self.slots),
            Storage::Heap(_) => None,
        }
    }

    /// The typed read behind [`with_f32`](Cpu::with_f32) and [`with_i32`](Cpu::with_i32);
    /// the caller checked the element type.
    #[inline]
    fn read_typed<T: Slot, R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        match &self.storage {
            Storage::Inline(inline) => inline.read(f, || released("read")),
            Storage::Heap(buffer) => {
                let buffer = buffer.read_recursive();
                let buffer = buffer.as_ref().ok_or_else(|| released("read"))?;
                Ok(f(buffer.typed::<T>()))
            }
        }
    }

    /// The typed write behind [`with_f32_mut`](Cpu::with_f32_mut) and
    /// [`with_i32_mut`](Cpu::with_i32_mut); the caller checked the element type.
    fn write_typed<T: Slot, R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        match &self.storage {
            Storage::Inline(inline) => {
                inline.write(f, || released("write"), || self.lending.admit_write())
            }
            Storage::Heap(buffer) => {
                let mut buffer = buffer.write();
                let buffer = buffer.as_mut().ok_or_else(|| released("write"))?;
                self.lending.admit_write()?;
                Ok(f(buffer.typed_mut::<T>()))
            }
        }
    }

    /// The typed exclusive access behind [`with_f32_exclusive`](Cpu::with_f32_exclusive) and
    /// [`with_i32_exclusive`](Cpu::with_i32_exclusive).
    #[inline]
    fn exclusive_typed<T: Slot, R>(&mut self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        match &mut self.storage {
            Storage::Inline(inline) => inline.exclusive(f, || released("write")),
            Storage::Heap(buffer) => {
                let buffer = buffer.get_mut().as_mut().ok_or_else(|| released("write"))?;
                Ok(f(buffer.typed_mut::<T>()))
            }
        }
    }

    fn expect_element(&self, wanted: Element) -> Result<()> {
        if self.element == wanted {
            return Ok(());
        }
        Err(Error::Type(format!(
            "the {NAME} carrier holds {} slots, not {}",
            self.element.dtype(),
            wanted.dtype()
        )))
    }
}

impl DefinitionFreeCarrier for Cpu {
    const NAME: &'static str = NAME;
    const ORIGIN: ClassOrigin = ClassOrigin::SHIPPED;

    /// The CPU executes every plan of the built-in operations (its kernels) and moves in
    /// bulk to FileBacked and BlockDeviceCarrier.
    fn declare_class(class: CarrierClass) {
        // A shipped class declares once, before any query of it, so none of this can be
        // refused.
        let _ = internal::declare_shipped_capabilities(
            class,
            internal::builtin_capabilities().iter().cloned(),
        );
        let _ = internal::declare_shipped_move_operation(
            class,
            CarrierClass::of::<FileBacked>(),
            Arc::new(CpuToFileBacked),
        );
        let _ = internal::declare_shipped_move_operation(
            class,
            CarrierClass::of::<BlockDeviceCarrier>(),
            Arc::new(CpuToBlockDevice),
        );
    }

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        accepts_storage_dtype(dtype, &STORABLE)
    }

    fn size(&self) -> usize {
        self.slots
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        let value = match self.element {
            Element::Float32 => {
                self.with_f32(|slots| slots.get(index).map(|x| Value::Float(f64::from(*x))))?
            }
            Element::Int32 => {
                self.with_i32(|slots| slots.get(index).map(|i| Value::Int(i64::from(*i))))?
            }
            Element::Bool => {
                self.with_bytes(|slots| slots.get(index).map(|b| Value::Bool(*b != 0)))?
            }
        };
        value.ok_or_else(|| vanished(index))
    }

    /// One read lock for all the slots.
    fn read_all(&self, indices: &[usize], _dtype: DType) -> Result<Vec<Value>> {
        let values = match self.element {
            Element::Float32 => self.with_f32(|slots| {
                indices
                    .iter()
                    .map(|&i| slots.get(i).map(|x| Value::Float(f64::from(*x))))
                    .collect::<Option<Vec<_>>>()
            })?,
            Element::Int32 => self.with_i32(|slots| {
                indices
                    .iter()
                    .map(|&i| slots.get(i).map(|x| Value::Int(i64::from(*x))))
                    .collect::<Option<Vec<_>>>()
            })?,
            Element::Bool => self.with_bytes(|slots| {
                indices
                    .iter()
                    .map(|&i| slots.get(i).map(|b| Value::Bool(*b != 0)))
                    .collect::<Option<Vec<_>>>()
            })?,
        };
        values.ok_or_else(|| {
            let first = indices.iter().copied().find(|&i| i >= self.slots);
            vanished(first.unwrap_or(self.slots))
        })
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        let stored = match (self.element, value) {
            (Element::Float32, Value::Float(x)) => {
                // The value is normalized, so this cast is exact.
                self.with_f32_mut(|slots| slots.get_mut(index).map(|slot| *slot = x as f32))?
            }
            (Element::Int32, Value::Int(i)) => {
                let i = i32::try_from(i).map_err(|_| out_of_range(i))?;
                self.with_i32_mut(|slots| slots.get_mut(index).map(|slot| *slot = i))?
            }
            (Element::Bool, Value::Bool(b)) => {
                self.with_bytes_mut(|slots| slots.get_mut(index).map(|slot| *slot = u8::from(b)))?
            }
            _ => return Err(wrong_kind(self.element, value)),
        };
        stored.ok_or_else(|| vanished(index))
    }

    fn write_all(&self, writes: &[(usize, Value)], _dtype: DType) -> Result<()> {
        let element = self.element;
        let width = element.width();
        let encoded = writes
            .iter()
            .map(|&(index, value)| Ok((index, encode(element, value)?)))
            .collect::<Result<Vec<_>>>()?;
        self.with_bytes_mut(|bytes| {
            let len = bytes.len();
            let misfit = encoded
                .iter()
                .find(|(index, _)| slot_range(*index, width).is_none_or(|range| range.end > len));
            if let Some(&(index, _)) = misfit {
                return Err(vanished(index));
            }
            for &(index, code) in &encoded {
                if let Some(chunk) = slot_range(index, width).and_then(|range| bytes.get_mut(range))
                {
                    store(chunk, code);
                }
            }
            Ok(())
        })?
    }

    /// A CPU source of the same element type is copied byte for byte: gathered under its
    /// read lock, then written under this carrier's write lock (never both at once, so two
    /// scatters in opposite directions cannot deadlock, and a carrier may scatter into
    /// itself).
    fn read_span(&self, start: usize, len: usize, dtype: DType) -> Option<Result<SpanValues>> {
        let span = start..start.checked_add(len)?;
        let read = if dtype == DType::FLOAT32 {
            self.with_f32(|slots| slots.get(span.clone()).map(|s| SpanValues::F32(s.to_vec())))
        } else if dtype == DType::INT32 {
            self.with_i32(|slots| slots.get(span.clone()).map(|s| SpanValues::I32(s.to_vec())))
        } else {
            return None;
        };
        Some(read.and_then(|values| values.ok_or_else(|| outside(&span))))
    }

    fn write_span(&self, start: usize, values: SpanSlice<'_>) -> Option<Result<()>> {
        fn store<T: Copy>(slots: &mut [T], start: usize, values: &[T]) -> Result<()> {
            let span = start..start.saturating_add(values.len());
            slots
                .get_mut(span.clone())
                .ok_or_else(|| outside(&span))?
                .copy_from_slice(values);
            Ok(())
        }
        let written = match values {
            SpanSlice::F32(values) => self.with_f32_mut(|slots| store(slots, start, values)),
            SpanSlice::I32(values) => self.with_i32_mut(|slots| store(slots, start, values)),
        };
        Some(written.and_then(|stored| stored))
    }

    fn copy_slots_from(
        &self,
        source: &Carrier,
        sources: &[usize],
        targets: &[usize],
    ) -> Option<Result<()>> {
        let from = source.downcast_ref::<Cpu>()?;
        if from.element != self.element || sources.len() != targets.len() {
            return None;
        }
        let width = self.element.width();
        let gathered = from.with_bytes(|bytes| {
            let mut out = Vec::with_capacity(sources.len() * width);
            for &i in sources {
                let slot = slot_range(i, width).and_then(|r| bytes.get(r));
                out.extend_from_slice(slot.ok_or_else(|| vanished(i))?);
            }
            Ok(out)
        });
        let gathered = match gathered.and_then(|g| g) {
            Ok(gathered) => gathered,
            Err(error) => return Some(Err(error)),
        };
        Some(
            self.with_bytes_mut(|bytes| {
                let len = bytes.len();
                if let Some(&bad) = targets
                    .iter()
                    .find(|&&t| slot_range(t, width).is_none_or(|r| r.end > len))
                {
                    return Err(vanished(bad));
                }
                for (&t, chunk) in targets.iter().zip(gathered.chunks_exact(width)) {
                    if let Some(slot) = slot_range(t, width).and_then(|r| bytes.get_mut(r)) {
                        slot.copy_from_slice(chunk);
                    }
                }
                Ok(())
            })
            .and_then(|written| written),
        )
    }

    fn release(&self) -> Result<()> {
        match &self.storage {
            Storage::Inline(inline) => inline.release(),
            Storage::Heap(buffer) => {
                let buffer = buffer.write().take();
                // Freed outside the lock, or once the last export of the slots is dropped.
                self.lending.release_buffer(buffer);
            }
        }
        Ok(())
    }

    fn new_like(&self, values: &[Value], dtype: DType) -> Result<Self> {
        Cpu::holding(values, Element::of(dtype)?)
    }

    fn allocate_like(&self, size: usize, dtype: DType, empty: bool) -> Result<Self> {
        Cpu::allocate(size, Element::of(dtype)?, empty)
    }

    /// A fresh [`Operation`] running the fast CPU kernel of the built-in `name`
    /// (docs/kernel-semantics.md); NotImplemented for any other name.
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        let Some(builtin) = Builtin::from_name(name) else {
            return Err(Error::NotImplemented(format!(
                "{NAME} carriers dispatch no operation {} (only the built-in operations)",
                quoted(name)
            )));
        };
        Ok(Operation::new(move |invocation| {
            crate::carriers::cpu::kernels::execute(builtin, invocation).map(|result| vec![result])
        }))
    }

    fn builtin_kernel(&self) -> Option<BuiltinKernel> {
        Some(crate::carriers::cpu::kernels::execute)
    }

    fn check_scatter_source(
        &self,
        source: CarrierClass,
        source_dtype: DType,
        dtype: DType,
    ) -> Result<()> {
        if source != Cpu::carrier_class() {
            return Err(Error::Type(format!(
                "{NAME} scatter needs a {NAME} source tensor, not a {source} one"
            )));
        }
        let bool_mismatch = (source_dtype == DType::BOOL) != (dtype == DType::BOOL);
        let narrowing = source_dtype == DType::FLOAT32 && dtype == DType::INT32;
        if bool_mismatch || narrowing {
            return Err(Error::Type(format!(
                "{NAME} scatter cannot write {source_dtype} values into {dtype} slots"
            )));
        }
        Ok(())
    }
}

/// The bytes of slot `index` for elements `width` bytes wide, unless that overflows.
fn slot_range(index: usize, width: usize) -> Option<Range<usize>> {
    let start = index.checked_mul(width)?;
    Some(start..start.checked_add(width)?)
}

/// An already normalized value as native-endian bytes (Bool uses the first byte only).
fn encode(element: Element, value: Value) -> Result<[u8; 4]> {
    match (element, value) {
        (Element::Float32, Value::Float(x)) => Ok((x as f32).to_ne_bytes()),
        (Element::Int32, Value::Int(i)) => i32::try_from(i)
            .map(i32::to_ne_bytes)
            .map_err(|_| out_of_range(i)),
        (Element::Bool, Value::Bool(b)) => Ok([u8::from(b), 0, 0, 0]),
        _ => Err(wrong_kind(element, value)),
    }
}

/// Copies the leading bytes of `code` into the slot `chunk`.
fn store(chunk: &mut [u8], code: [u8; 4]) {
    for (byte, encoded) in chunk.iter_mut().zip(code) {
        *byte = encoded;
    }
}

fn wrong_kind(element: Element, value: Value) -> Error {
    Error::Type(format!(
        "a {NAME} {} slot cannot hold {} value {value}",
        element.dtype(),
        value.type_name()
    ))
}

fn out_of_range(i: i64) -> Error {
    Error::Overflow(format!(
        "int value {i} is out of range for a {NAME} Int32 slot"
    ))
}

fn released(action: &str) -> Error {
    Error::Runtime(format!(
        "cannot {action} the {NAME} carrier: it is released"
    ))
}

/// A slot that passed the framework's range check but is gone: a concurrent release.
fn vanished(index: usize) -> Error {
    Error::Runtime(format!(
        "slot {index} of a {NAME} carrier vanished: it was released concurrently"
    ))
}

/// A 4-byte element type of typed slot access: a view of a heap buffer's bytes and the bits
/// of an inline word.
trait Slot: aligned_buffer::Plain + inline_slots::Word {}

impl Slot for f32 {}
impl Slot for i32 {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carriers::Generic;
    use crate::error::ErrorKind;

    fn body(carrier: &Carrier) -> &Cpu {
        carrier
            .downcast_ref::<Cpu>()
            .unwrap_or_else(|| panic!("{carrier:?} is not a CPU carrier"))
    }

    fn values(carrier: &Carrier) -> Result<Vec<Value>> {
        (0..carrier.size()).map(|i| carrier.get(i)).collect()
    }

    #[test]
    fn unsupported_dtypes_are_value_errors_naming_cpu_and_the_dtype() {
        for dtype in [DType::FLOAT64, DType::INT8, DType::E4M3, DType::ANY] {
            let error = Cpu::carrier(2, dtype, true, false).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            let message = error.to_string();
            assert!(message.contains("CPU"), "{message}");
            assert!(message.contains(dtype.name()), "{message}");
            let error = Cpu::from_values(&[], dtype, true).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
        }
    }

    #[test]
    fn new_buffers_are_zeroed_and_cache_line_aligned() -> Result<()> {
        let cases = [
            (DType::FLOAT32, Value::Float(0.0)),
            (DType::INT32, Value::Int(0)),
            (DType::BOOL, Value::Bool(false)),
        ];
        for (dtype, zero) in cases {
            for empty in [false, true] {
                // 65 slots are more than 64 bytes for every dtype: a heap buffer.
                let carrier = Cpu::carrier(65, dtype, true, empty)?;
                assert_eq!(values(&carrier)?, vec![zero; 65], "{dtype} empty={empty}");
                let address = body(&carrier).pointer();
                assert!(address.is_some_and(|a| a % CACHE_LINE == 0), "{address:?}");
                assert_eq!(carrier.version(), 0);
            }
        }
        Ok(())
    }

    #[test]
    fn an_empty_carrier_has_no_pointer_and_no_bytes() -> Result<()> {
        let carrier = Cpu::carrier(0, DType::FLOAT32, true, false)?;
        assert_eq!(carrier.size(), 0);
        assert_eq!(body(&carrier).pointer(), None);
        assert_eq!(body(&carrier).with_bytes(<[u8]>::len)?, 0);
        assert_eq!(body(&carrier).with_f32(<[f32]>::len)?, 0);
        assert_eq!(carrier.get(0).unwrap_err().kind(), ErrorKind::Index);
        Ok(())
    }

    #[test]
    fn buffers_from_two_mebibytes_are_huge_page_aligned() -> Result<()> {
        let small = AlignedBuffer::zeroed(HUGE_PAGE - 1)?;
        assert!(small.address().is_some_and(|a| a % CACHE_LINE == 0));
        assert_eq!(small.as_bytes().len(), HUGE_PAGE - 1);
        let large = AlignedBuffer::zeroed(HUGE_PAGE + 12)?;
        assert!(large.address().is_some_and(|a| a % HUGE_PAGE == 0));
        assert_eq!(large.as_bytes().len(), HUGE_PAGE + 12);
        assert!(large.as_bytes().iter().all(|&b| b == 0));
        Ok(())
    }

    #[test]
    fn unallocatable_sizes_are_memory_errors_naming_the_byte_count() {
        for len in [usize::MAX, usize::MAX / 2, 1 << 62] {
            let error = AlignedBuffer::zeroed(len).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
            assert!(
                error.to_string().contains(&format!("{len} bytes")),
                "{error}"
            );
        }
        let error = Cpu::carrier(usize::MAX / 2, DType::INT32, true, false).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
        let message = error.to_string();
        assert!(
            message.contains("Int32") && message.contains("more than usize::MAX bytes"),
            "{message}"
        );
        let error = Cpu::carrier(1 << 61, DType::FLOAT32, true, true).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
        assert!(
            error
                .to_string()
                .contains(&format!("{} bytes", 1_usize << 63)),
            "{error}"
        );
    }

    #[test]
    fn typed_views_share_the_slots_with_the_handle() -> Result<()> {
        let floats = Cpu::from_values(&[1.0.into(), 2.0.into()], DType::FLOAT32, true)?;
        assert_eq!(body(&floats).with_f32(<[f32]>::to_vec)?, [1.0, 2.0]);
        body(&floats).with_f32_mut(|slots| slots.iter_mut().for_each(|x| *x *= 3.0))?;
        assert_eq!(values(&floats)?, [Value::Float(3.0), Value::Float(6.0)]);
        let bytes = body(&floats).with_bytes(<[u8]>::to_vec)?;
        assert_eq!(bytes.get(..4), Some(&3.0_f32.to_ne_bytes()[..]));

        let ints = Cpu::from_values(&[(-5).into(), 7.into()], DType::INT32, true)?;
        assert_eq!(body(&ints).with_i32(<[i32]>::to_vec)?, [-5, 7]);
        body(&ints).with_i32_mut(|slots| slots.reverse())?;
        assert_eq!(values(&ints)?, [Value::Int(7), Value::Int(-5)]);
        Ok(())
    }

    #[test]
    fn typed_views_of_another_dtype_are_type_errors() -> Result<()> {
        let ints = Cpu::carrier(2, DType::INT32, true, false)?;
        let error = body(&ints).with_f32(|_| ()).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);
        assert!(
            error
                .to_string()
                .contains("CPU carrier holds Int32 slots, not Float32"),
            "{error}"
        );
        let bools = Cpu::carrier(2, DType::BOOL, true, false)?;
        for error in [
            body(&bools).with_i32(|_| ()).unwrap_err(),
            body(&bools).with_i32_mut(|_| ()).unwrap_err(),
            body(&bools).with_f32_mut(|_| ()).unwrap_err(),
        ] {
            assert_eq!(error.kind(), ErrorKind::Type, "{error}");
            assert!(error.to_string().contains("Bool"), "{error}");
        }
        Ok(())
    }

    #[test]
    fn released_storage_is_a_runtime_error_for_every_access() -> Result<()> {
        // 4 slots are inline, 40 on the heap: both storages refuse every access.
        for slots in [4, 40] {
            let carrier = Cpu::carrier(slots, DType::FLOAT32, true, false)?;
            carrier.release()?;
            let cpu = body(&carrier);
            assert_eq!(cpu.pointer(), None);
            for error in [
                cpu.with_bytes(|_| ()).unwrap_err(),
                cpu.with_bytes_mut(|_| ()).unwrap_err(),
                cpu.with_f32(|_| ()).unwrap_err(),
                cpu.with_f32_mut(|_| ()).unwrap_err(),
                // The hooks themselves, as a read racing a release would see them.
                DefinitionFreeCarrier::read(cpu, 0, DType::FLOAT32).unwrap_err(),
                DefinitionFreeCarrier::write(cpu, 0, Value::Float(1.0), DType::FLOAT32)
                    .unwrap_err(),
            ] {
                assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
                assert!(error.to_string().contains("CPU"), "{error}");
            }
        }
        Ok(())
    }

    #[test]
    fn up_to_64_bytes_live_inline_zeroed_and_at_a_stable_address() -> Result<()> {
        let cases = [
            (DType::FLOAT32, 16, Value::Float(1.0), Value::Float(0.0)),
            (DType::INT32, 2, Value::Int(1), Value::Int(0)),
            (DType::BOOL, 64, Value::Bool(true), Value::Bool(false)),
        ];
        for (dtype, slots, one, zero) in cases {
            let carrier = Cpu::carrier(slots, dtype, true, false)?;
            let cpu = body(&carrier);
            assert!(
                matches!(cpu.storage, Storage::Inline(_)),
                "{dtype} x {slots}"
            );
            let address = cpu
                .pointer()
                .expect("a live non-empty carrier has an address");
            assert_eq!(address % 4, 0);
            let width = Element::of(dtype)?.width();
            assert_eq!(cpu.with_bytes(<[u8]>::to_vec)?, vec![0; slots * width]);
            carrier.set(slots - 1, one)?;
            assert_eq!(carrier.get(slots - 1)?, one);
            assert_eq!(carrier.get(0)?, zero);
            assert_eq!(cpu.pointer(), Some(address));
        }
        let heap = Cpu::carrier(17, DType::FLOAT32, true, false)?;
        assert!(matches!(body(&heap).storage, Storage::Heap(_)));
        Ok(())
    }

    #[test]
    fn inline_typed_access_round_trips_and_a_failing_write_publishes_nothing() -> Result<()> {
        let carrier = Cpu::from_i32(&[1, -2, 3], true)?;
        let cpu = body(&carrier);
        assert_eq!(cpu.with_i32(<[i32]>::to_vec)?, [1, -2, 3]);
        cpu.with_i32_mut(|slots| slots[1] = i32::MIN)?;
        assert_eq!(cpu.with_i32(<[i32]>::to_vec)?, [1, i32::MIN, 3]);
        assert_eq!(
            cpu.with_bytes(|bytes| bytes[4..8].to_vec())?,
            i32::MIN.to_ne_bytes()
        );
        // A write whose closure panics leaves every slot as it was.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cpu.with_i32_mut(|slots| {
                slots[0] = 99;
                panic!("injected");
            })
        }));
        assert!(panicked.is_err());
        assert_eq!(cpu.with_i32(<[i32]>::to_vec)?, [1, i32::MIN, 3]);
        assert_eq!(cpu.with_f32(|_| ()).unwrap_err().kind(), ErrorKind::Type);
        Ok(())
    }

    #[test]
    fn a_release_racing_inline_reads_and_writes_ends_every_access_cleanly() -> Result<()> {
        // Readers and a writer run while another thread releases: each access either sees a
        // whole write or fails with the Runtime error of a released carrier, and after the
        // release every access fails.
        for _ in 0..50 {
            let carrier = Cpu::carrier(8, DType::FLOAT32, true, false)?;
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    for round in 1..=200u8 {
                        let write = body(&carrier).with_f32_mut(|s| s.fill(f32::from(round)));
                        if let Err(error) = write {
                            assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
                        }
                    }
                });
                scope.spawn(|| {
                    for _ in 0..200 {
                        match body(&carrier).with_f32(<[f32]>::to_vec) {
                            Ok(seen) => assert!(seen.iter().all(|&x| x == seen[0]), "{seen:?}"),
                            Err(error) => assert_eq!(error.kind(), ErrorKind::Runtime, "{error}"),
                        }
                    }
                });
                scope.spawn(|| carrier.release()).join().expect("release")
            })?;
            let error = body(&carrier).with_f32(|_| ()).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
            assert_eq!(body(&carrier).pointer(), None);
        }
        Ok(())
    }

    #[test]
    fn concurrent_inline_reads_never_see_a_torn_write() -> Result<()> {
        // The writer keeps all 16 slots equal; any reader seeing two different values would
        // have observed half of a write.
        let carrier = Cpu::carrier(16, DType::FLOAT32, true, false)?;
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| -> Result<()> {
                for round in 1..=20_000u16 {
                    body(&carrier).with_f32_mut(|slots| slots.fill(f32::from(round)))?;
                }
                Ok(())
            });
            let mut last = 0.0f32;
            while !writer.is_finished() {
                let seen = body(&carrier).with_f32(<[f32]>::to_vec)?;
                assert!(seen.iter().all(|&x| x == seen[0]), "torn read {seen:?}");
                assert!(
                    seen[0] >= last,
                    "reads went back in time: {} < {last}",
                    seen[0]
                );
                last = seen[0];
            }
            writer.join().expect("writer thread")?;
            Ok::<(), crate::Error>(())
        })?;
        assert_eq!(body(&carrier).with_f32(|slots| slots[15])?, 20_000.0);
        Ok(())
    }

    #[test]
    fn bool_slots_store_zero_or_one_and_read_any_nonzero_byte_as_true() -> Result<()> {
        let carrier = Cpu::from_values(&[true.into(), false.into()], DType::BOOL, true)?;
        assert_eq!(body(&carrier).with_bytes(<[u8]>::to_vec)?, [1, 0]);
        body(&carrier).with_bytes_mut(|bytes| bytes.iter_mut().for_each(|b| *b = 7))?;
        assert_eq!(values(&carrier)?, [Value::Bool(true), Value::Bool(true)]);
        Ok(())
    }

    #[test]
    fn from_values_normalizes_every_value() -> Result<()> {
        let carrier =
            Cpu::from_values(&[0.1.into(), 1e40.into(), 3.into()], DType::FLOAT32, false)?;
        assert_eq!(
            values(&carrier)?,
            [
                Value::Float(0.10000000149011612),
                Value::Float(f64::INFINITY),
                Value::Float(3.0)
            ]
        );
        assert!(!carrier.is_mutable());
        let overflow = Cpu::from_values(&[Value::Int(1 << 31)], DType::INT32, true).unwrap_err();
        assert_eq!(overflow.kind(), ErrorKind::Overflow);
        let wrong = Cpu::from_values(&[Value::Int(1)], DType::BOOL, true).unwrap_err();
        assert_eq!(wrong.kind(), ErrorKind::Type);
        Ok(())
    }

    #[test]
    fn hooks_refuse_values_of_the_wrong_kind() -> Result<()> {
        let carrier = Cpu::carrier(2, DType::FLOAT32, true, false)?;
        let cpu = body(&carrier);
        let error =
            DefinitionFreeCarrier::write(cpu, 0, Value::Bool(true), DType::FLOAT32).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);
        assert!(error
            .to_string()
            .contains("CPU Float32 slot cannot hold bool value true"));
        let ints = Cpu::carrier(1, DType::INT32, true, false)?;
        let error = DefinitionFreeCarrier::write(body(&ints), 0, Value::Int(1 << 40), DType::INT32)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Overflow);
        assert_eq!(values(&ints)?, [Value::Int(0)]);
        Ok(())
    }

    #[test]
    fn write_all_is_all_or_nothing() -> Result<()> {
        let carrier = Cpu::carrier(3, DType::INT32, true, false)?;
        let cpu = body(&carrier);
        let out_of_range = [(0, Value::Int(1)), (3, Value::Int(2))];
        let error = DefinitionFreeCarrier::write_all(cpu, &out_of_range, DType::INT32).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime);
        assert!(error.to_string().contains("slot 3"), "{error}");
        let wrong_kind = [(0, Value::Int(1)), (1, Value::Float(2.0))];
        let error = DefinitionFreeCarrier::write_all(cpu, &wrong_kind, DType::INT32).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);
        assert_eq!(values(&carrier)?, [Value::Int(0); 3]);
        let writes = [(2, Value::Int(9)), (0, Value::Int(-4))];
        DefinitionFreeCarrier::write_all(cpu, &writes, DType::INT32)?;
        assert_eq!(
            values(&carrier)?,
            [Value::Int(-4), Value::Int(0), Value::Int(9)]
        );
        Ok(())
    }

    #[test]
    fn factories_make_fresh_cpu_carriers_even_from_a_released_prototype() -> Result<()> {
        let prototype = Cpu::carrier(2, DType::FLOAT32, true, false)?;
        prototype.release()?;
        let fresh = prototype.new_like(&[Value::Int(4)], true, Some(DType::INT32))?;
        assert_eq!(fresh.class(), CarrierClass::of::<Cpu>());
        assert_eq!(
            (fresh.dtype(), values(&fresh)?),
            (DType::INT32, vec![Value::Int(4)])
        );
        let allocated = prototype.allocate_like(5, true, None, true)?;
        assert_eq!(allocated.dtype(), DType::FLOAT32);
        assert_eq!(values(&allocated)?, vec![Value::Float(0.0); 5]);
        let error = prototype
            .allocate_like(3, true, Some(DType::FLOAT64), false)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        Ok(())
    }

    #[test]
    fn scatter_sources_must_be_cpu_and_dtype_compatible() -> Result<()> {
        let carrier = Cpu::carrier(1, DType::FLOAT32, true, false)?;
        let cpu = body(&carrier);
        let check =
            |source, source_dtype, dtype| cpu.check_scatter_source(source, source_dtype, dtype);
        let cpu_class = CarrierClass::of::<Cpu>();
        let error = check(
            CarrierClass::of::<Generic>(),
            DType::FLOAT32,
            DType::FLOAT32,
        )
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);
        assert!(error.to_string().contains("not a Generic one"), "{error}");
        for (source_dtype, dtype) in [
            (DType::BOOL, DType::FLOAT32),
            (DType::INT32, DType::BOOL),
            (DType::FLOAT32, DType::INT32),
        ] {
            let error = check(cpu_class, source_dtype, dtype).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Type, "{error}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("{source_dtype} values into {dtype} slots")),
                "{message}"
            );
        }
        for (source_dtype, dtype) in [
            (DType::FLOAT32, DType::FLOAT32),
            (DType::INT32, DType::FLOAT32),
            (DType::INT32, DType::INT32),
            (DType::BOOL, DType::BOOL),
        ] {
            check(cpu_class, source_dtype, dtype)?;
        }
        Ok(())
    }

    #[test]
    fn storage_dtypes_are_matched_by_identity() {
        let Ok(carrier) = Cpu::carrier(1, DType::BOOL, true, false) else {
            panic!("a Bool CPU carrier");
        };
        for dtype in STORABLE {
            assert!(carrier.supports_storage_dtype(dtype).unwrap(), "{dtype}");
        }
        for dtype in [DType::FLOAT64, DType::INT8, DType::FLOATING, DType::E2M1] {
            assert!(!carrier.supports_storage_dtype(dtype).unwrap(), "{dtype}");
        }
    }
}
