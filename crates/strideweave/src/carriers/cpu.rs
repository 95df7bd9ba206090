//! `Cpu`: slots in one aligned native allocation, the carrier the host kernels run on.
//!
//! Memory layout of a CPU carrier of `n` slots:
//!
//! ```text
//! Cpu { element, slots: n, buffer: RwLock<Option<AlignedBuffer>> }
//!                                        |
//!                                        v  64-byte aligned (2 MiB aligned from 2 MiB up)
//!                                        [ slot 0 | slot 1 | ... | slot n-1 ]
//!                                          native-endian f32 / i32 (4 bytes) or bool (1 byte, 0/1)
//! ```
//!
//! Invariants:
//! 1. Every byte of a live buffer is initialized (zeroed at allocation), so safe reads never
//!    observe uninitialized memory, even of slots nobody wrote.
//! 2. The buffer is `None` exactly when the carrier is released; a read takes the read lock
//!    and a write the write lock, so a concurrent release is seen as a Runtime error.
//! 3. All `unsafe` code lives in [`AlignedBuffer`], which owns its allocation like a
//!    `Box<[u8]>` and frees it on drop.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::OnceLock;

use parking_lot::RwLock;

use crate::carrier::{Carrier, CarrierClass, DefinitionFreeCarrier};
use crate::dtype::{accepts_storage_dtype, validate_storage_dtype, DType, Value};
use crate::error::{Error, Result};
use crate::operation::{Operation, BUILTIN_OPERATIONS};

const NAME: &str = "CPU";
const STORABLE: [DType; 3] = [DType::FLOAT32, DType::INT32, DType::BOOL];

/// The alignment of every CPU buffer: one cache line (and one AVX-512 vector).
const CACHE_LINE: usize = 64;
/// Buffers of at least this many bytes are aligned to it and advised to use huge pages.
const HUGE_PAGE: usize = 2 << 20;
/// The alignment asked of the allocator. The system allocator serves it with `calloc`,
/// which skips the zeroing pass for memory fresh from the OS; the wider alignment is then
/// reached by offsetting into a slightly larger allocation.
const BASE_ALIGN: usize = 16;

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

/// Native host memory: one aligned allocation of Float32, Int32 or Bool slots.
///
/// Buffers are 64-byte aligned, and from 2 MiB up 2 MiB aligned and advised to use
/// transparent huge pages (Linux). The typed fast paths for kernels and bulk moves borrow the
/// slots as native slices under the carrier's lock; [`pointer`](Cpu::pointer) exposes the
/// address.
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
    /// `None` once released.
    buffer: RwLock<Option<AlignedBuffer>>,
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
        let cpu = Cpu::allocate(values.len(), Element::of(DType::FLOAT32)?, true)?;
        cpu.with_f32_mut(|slots| slots.copy_from_slice(values))?;
        Cpu::wrap(cpu, DType::FLOAT32, mutable)
    }

    /// An Int32 CPU carrier holding a copy of `values`.
    pub fn from_i32(values: &[i32], mutable: bool) -> Result<Carrier> {
        let cpu = Cpu::allocate(values.len(), Element::of(DType::INT32)?, true)?;
        cpu.with_i32_mut(|slots| slots.copy_from_slice(values))?;
        Cpu::wrap(cpu, DType::INT32, mutable)
    }

    /// The address of the first slot; `None` when the carrier has no slots or is released.
    ///
    /// The address stays valid until the carrier is released or dropped.
    pub fn pointer(&self) -> Option<usize> {
        self.buffer
            .read_recursive()
            .as_ref()
            .and_then(AlignedBuffer::address)
    }

    /// The exact class of CPU carriers, looked up once per process.
    pub(crate) fn carrier_class() -> CarrierClass {
        static CLASS: OnceLock<CarrierClass> = OnceLock::new();
        *CLASS.get_or_init(CarrierClass::of::<Cpu>)
    }

    /// A CPU carrier of the body `cpu`, which holds `dtype` slots.
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
        let bytes = slots.checked_mul(width).ok_or_else(|| {
            Error::Memory(format!(
                "cannot allocate {slots} {} slots of {width} bytes for a {NAME} carrier: \
                 the byte count overflows",
                element.dtype()
            ))
        })?;
        Ok(Cpu {
            element,
            slots,
            buffer: RwLock::new(Some(AlignedBuffer::zeroed(bytes)?)),
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

    /// Runs `f` on the raw slot bytes (native endianness) under the read lock.
    ///
    /// `f` must not write to this carrier (that would wait for the read lock to go).
    ///
    /// # Errors
    /// A Runtime error once the carrier is released.
    pub(crate) fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let buffer = self.buffer.read_recursive();
        let buffer = buffer.as_ref().ok_or_else(|| released("read"))?;
        Ok(f(buffer.as_bytes()))
    }

    /// Runs `f` on the raw slot bytes (native endianness) under the write lock.
    ///
    /// `f` must not access this carrier again (that would deadlock). Bool slots must be left
    /// holding 0 or 1.
    ///
    /// # Errors
    /// A Runtime error once the carrier is released.
    pub(crate) fn with_bytes_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let mut buffer = self.buffer.write();
        let buffer = buffer.as_mut().ok_or_else(|| released("write"))?;
        Ok(f(buffer.as_bytes_mut()))
    }

    /// Runs `f` on the Float32 slots under the read lock.
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Float32; a Runtime error once released.
    pub(crate) fn with_f32<R>(&self, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
        self.expect_element(Element::Float32)?;
        let buffer = self.buffer.read_recursive();
        let buffer = buffer.as_ref().ok_or_else(|| released("read"))?;
        Ok(f(buffer.typed::<f32>()))
    }

    /// Runs `f` on the Float32 slots under the write lock.
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Float32; a Runtime error once released.
    pub(crate) fn with_f32_mut<R>(&self, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
        self.expect_element(Element::Float32)?;
        let mut buffer = self.buffer.write();
        let buffer = buffer.as_mut().ok_or_else(|| released("write"))?;
        Ok(f(buffer.typed_mut::<f32>()))
    }

    /// Runs `f` on the Int32 slots under the read lock.
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Int32; a Runtime error once released.
    pub(crate) fn with_i32<R>(&self, f: impl FnOnce(&[i32]) -> R) -> Result<R> {
        self.expect_element(Element::Int32)?;
        let buffer = self.buffer.read_recursive();
        let buffer = buffer.as_ref().ok_or_else(|| released("read"))?;
        Ok(f(buffer.typed::<i32>()))
    }

    /// Runs `f` on the Int32 slots under the write lock.
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Int32; a Runtime error once released.
    pub(crate) fn with_i32_mut<R>(&self, f: impl FnOnce(&mut [i32]) -> R) -> Result<R> {
        self.expect_element(Element::Int32)?;
        let mut buffer = self.buffer.write();
        let buffer = buffer.as_mut().ok_or_else(|| released("write"))?;
        Ok(f(buffer.typed_mut::<i32>()))
    }

    /// Runs `f` on the Float32 slots of a body nobody else can see yet (no lock taken).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Float32; a Runtime error once released.
    pub(crate) fn with_f32_exclusive<R>(&mut self, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
        self.expect_element(Element::Float32)?;
        let buffer = self
            .buffer
            .get_mut()
            .as_mut()
            .ok_or_else(|| released("write"))?;
        Ok(f(buffer.typed_mut::<f32>()))
    }

    /// Runs `f` on the Int32 slots of a body nobody else can see yet (no lock taken).
    ///
    /// # Errors
    /// A Type error when the carrier does not hold Int32; a Runtime error once released.
    pub(crate) fn with_i32_exclusive<R>(&mut self, f: impl FnOnce(&mut [i32]) -> R) -> Result<R> {
        self.expect_element(Element::Int32)?;
        let buffer = self
            .buffer
            .get_mut()
            .as_mut()
            .ok_or_else(|| released("write"))?;
        Ok(f(buffer.typed_mut::<i32>()))
    }

    /// Runs `f` on the raw slot bytes of a body nobody else can see yet (no lock taken).
    /// Bool slots must be left holding 0 or 1.
    ///
    /// # Errors
    /// A Runtime error once released.
    pub(crate) fn with_bytes_exclusive<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let buffer = self
            .buffer
            .get_mut()
            .as_mut()
            .ok_or_else(|| released("write"))?;
        Ok(f(buffer.as_bytes_mut()))
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
        let buffer = self.buffer.write().take();
        // Free outside the lock.
        drop(buffer);
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
        let Some(position) = BUILTIN_OPERATIONS.iter().position(|&known| known == name) else {
            return Err(Error::NotImplemented(format!(
                "{NAME} carriers dispatch no operation '{name}' (only the built-in operations)"
            )));
        };
        Ok(DISPATCH[position]())
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

/// A fresh [`Operation`] running the CPU kernel of built-in operation `I`. The closure
/// captures nothing (the name is a constant), so creating the operation allocates only its
/// shared state.
fn dispatch_builtin<const I: usize>() -> Operation {
    Operation::new(|invocation| crate::kernels::cpu::execute(BUILTIN_OPERATIONS[I], invocation))
}

/// [`dispatch_builtin`] for each built-in operation, in `BUILTIN_OPERATIONS` order.
const DISPATCH: [fn() -> Operation; BUILTIN_OPERATIONS.len()] = [
    dispatch_builtin::<0>,
    dispatch_builtin::<1>,
    dispatch_builtin::<2>,
    dispatch_builtin::<3>,
    dispatch_builtin::<4>,
    dispatch_builtin::<5>,
    dispatch_builtin::<6>,
    dispatch_builtin::<7>,
    dispatch_builtin::<8>,
    dispatch_builtin::<9>,
    dispatch_builtin::<10>,
    dispatch_builtin::<11>,
    dispatch_builtin::<12>,
    dispatch_builtin::<13>,
    dispatch_builtin::<14>,
    dispatch_builtin::<15>,
    dispatch_builtin::<16>,
    dispatch_builtin::<17>,
    dispatch_builtin::<18>,
    dispatch_builtin::<19>,
    dispatch_builtin::<20>,
    dispatch_builtin::<21>,
];

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

/// A zero-sized type aligned like a cache line, for the dangling pointer of empty buffers.
#[repr(align(64))]
struct CacheLine;

/// Element types that may view an [`AlignedBuffer`]'s bytes.
///
/// # Safety
/// Implementors have no padding, an alignment of at most [`CACHE_LINE`], and every bit
/// pattern of their size is a valid value.
unsafe trait Plain: Copy {}

// SAFETY: f32 is 4 bytes, 4-aligned, without padding, and every bit pattern is an f32.
unsafe impl Plain for f32 {}
// SAFETY: i32 is 4 bytes, 4-aligned, without padding, and every bit pattern is an i32.
unsafe impl Plain for i32 {}

/// One zero-initialized heap allocation, aligned to 64 bytes (2 MiB from 2 MiB up), owned
/// like a `Box<[u8]>` and freed on drop.
#[derive(Debug)]
struct AlignedBuffer {
    /// The first byte; aligned, and dangling (but still aligned) when `len` is 0.
    ptr: NonNull<u8>,
    /// The number of usable bytes from `ptr`.
    len: usize,
    /// The allocation as made, for `dealloc`; `None` when `len` is 0.
    allocation: Option<(NonNull<u8>, Layout)>,
}

// SAFETY: the buffer uniquely owns its allocation (no other pointer to it escapes except
// through borrows of the buffer), so moving it to another thread is like moving a Box<[u8]>.
unsafe impl Send for AlignedBuffer {}
// SAFETY: shared access only hands out `&[T]` through `&self`; mutation needs `&mut self`.
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// `len` zeroed bytes; a Memory error naming `len` when they cannot be allocated.
    fn zeroed(len: usize) -> Result<AlignedBuffer> {
        if len == 0 {
            return Ok(AlignedBuffer {
                ptr: NonNull::<CacheLine>::dangling().cast(),
                len: 0,
                allocation: None,
            });
        }
        let align = if len >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            CACHE_LINE
        };
        let failure = || Error::Memory(format!("cannot allocate {len} bytes for a {NAME} carrier"));
        // Enough room to move the start up to the next multiple of `align`.
        let padded = len.checked_add(align - BASE_ALIGN).ok_or_else(failure)?;
        let layout = Layout::from_size_align(padded, BASE_ALIGN).map_err(|_| failure())?;
        // SAFETY: `layout` has a non-zero size (`padded >= len > 0`).
        let base = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or_else(failure)?;
        let misalignment = base.as_ptr().addr() % align;
        let offset = if misalignment == 0 {
            0
        } else {
            align - misalignment
        };
        // The allocation is at least BASE_ALIGN aligned, so the offset is at most
        // `align - BASE_ALIGN`; check rather than trust a custom global allocator.
        if offset > padded - len {
            // SAFETY: `base` was just returned by `alloc_zeroed(layout)` and is freed once.
            unsafe { dealloc(base.as_ptr(), layout) };
            return Err(failure());
        }
        // SAFETY: `offset + len <= padded`, so the result stays inside the allocation.
        let ptr = unsafe { base.add(offset) };
        let buffer = AlignedBuffer {
            ptr,
            len,
            allocation: Some((base, layout)),
        };
        buffer.advise_huge_pages();
        Ok(buffer)
    }

    /// Asks Linux to back the whole 2 MiB blocks of a large buffer with huge pages.
    #[cfg(target_os = "linux")]
    fn advise_huge_pages(&self) {
        let huge_len = self.len - self.len % HUGE_PAGE;
        if huge_len == 0 {
            return;
        }
        // SAFETY: `ptr` is 2 MiB aligned (hence page aligned) for buffers of at least 2 MiB,
        // and `[ptr, ptr + huge_len)` lies inside this live allocation. MADV_HUGEPAGE is a
        // hint that changes neither the contents nor the validity of the mapping; its result
        // is irrelevant to correctness.
        unsafe {
            libc::madvise(self.ptr.as_ptr().cast(), huge_len, libc::MADV_HUGEPAGE);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn advise_huge_pages(&self) {}

    /// The address of the first byte; `None` for an empty buffer.
    fn address(&self) -> Option<usize> {
        (self.len > 0).then(|| self.ptr.as_ptr().addr())
    }

    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialized (zeroed at allocation) bytes owned by
        // `self` (or dangling and aligned with `len == 0`), and the borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, and `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    fn typed<T: Plain>(&self) -> &[T] {
        let count = self.len / std::mem::size_of::<T>();
        // SAFETY: `ptr` is aligned to at least CACHE_LINE >= align_of::<T>() (T: Plain), the
        // `count * size_of::<T>() <= len` bytes are initialized and owned by `self`, every bit
        // pattern is a valid T (T: Plain), and the borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<T>(), count) }
    }

    fn typed_mut<T: Plain>(&mut self) -> &mut [T] {
        let count = self.len / std::mem::size_of::<T>();
        // SAFETY: as in `typed`; `&mut self` makes this the only borrow, and any T written is
        // valid bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<T>(), count) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if let Some((base, layout)) = self.allocation.take() {
            // SAFETY: `base` was returned by `alloc_zeroed(layout)` and is freed only here,
            // once (`take` leaves `None` behind).
            unsafe { dealloc(base.as_ptr(), layout) };
        }
    }
}

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
                let carrier = Cpu::carrier(17, dtype, true, empty)?;
                assert_eq!(values(&carrier)?, vec![zero; 17], "{dtype} empty={empty}");
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
            message.contains("Int32") && message.contains("overflows"),
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
        let carrier = Cpu::carrier(4, DType::FLOAT32, true, false)?;
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
            DefinitionFreeCarrier::write(cpu, 0, Value::Float(1.0), DType::FLOAT32).unwrap_err(),
        ] {
            assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
            assert!(error.to_string().contains("CPU"), "{error}");
        }
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
            assert!(carrier.supports_storage_dtype(dtype), "{dtype}");
        }
        for dtype in [DType::FLOAT64, DType::INT8, DType::FLOATING, DType::E2M1] {
            assert!(!carrier.supports_storage_dtype(dtype), "{dtype}");
        }
    }
}
