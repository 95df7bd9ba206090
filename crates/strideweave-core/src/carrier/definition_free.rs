//! The definition-free authoring path: the storage hooks a shipped or third-party carrier
//! type implements to become a carrier class of its own (seed: "Definition-free carriers
//! retain the existing extension path").

use std::any::Any;
use std::sync::Arc;

use crate::carrier::class::{CarrierClass, ClassKind, ClassOrigin};
use crate::carrier::facet::CarrierFacet;
use crate::carrier::Carrier;
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::operation::{BuiltinKernel, Operation, OperationCapability};

/// The slots of one contiguous span, read natively in bulk (no [`Value`] per slot): what
/// [`DefinitionFreeCarrier::read_span`] answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SpanValues {
    /// Float32 slots.
    F32(Vec<f32>),
    /// Int32 slots.
    I32(Vec<i32>),
}

/// The values of one contiguous span to write natively in bulk: what
/// [`DefinitionFreeCarrier::write_span`] stores.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum SpanSlice<'a> {
    /// Float32 values.
    F32(&'a [f32]),
    /// Int32 values.
    I32(&'a [i32]),
}

/// The storage hooks of a definition-free carrier class.
///
/// The implementing type *is* the exact class ([`CarrierClass::of`]). The framework owns the
/// dtype, mutability, version, release state, ownership and claims, and checks them before
/// every hook: an index is in range, a value is already normalized to the dtype, a writer is
/// allowed to write, and [`release`](Self::release) runs at most once. A hook only touches
/// the type's own storage, which it guards itself (hooks take `&self` and may run on any
/// thread).
pub trait DefinitionFreeCarrier: Send + Sync + Sized + 'static {
    /// The class name used in messages.
    const NAME: &'static str;
    /// Independent (owns storage) or dependent (composes other carriers).
    const KIND: ClassKind = ClassKind::Independent;
    /// Reserved for the classes that ship with StrideWeave (closed to capability declarations,
    /// kernel packs and carrier definitions); a carrier type keeps the default.
    #[doc(hidden)]
    const ORIGIN: ClassOrigin = ClassOrigin::THIRD_PARTY;

    /// The exact class of this body: by default the class of the implementing type. A type
    /// that serves classes minted at run time (a binding's classes, one per foreign class)
    /// answers the minted class of this instance; it must answer the same class for the
    /// life of the body, and the class must be definition-free and independent or dependent
    /// as [`KIND`](Self::KIND) says.
    fn carrier_class(&self) -> CarrierClass {
        CarrierClass::of::<Self>()
    }

    /// The class's own declarations, made once per process before any registry answers a
    /// question about `class` (its capability declaration, its move operations): a type
    /// whose answers are fixed by the type itself declares them here instead of at start-up,
    /// through the same registration functions a program calls
    /// ([`register_operation_capabilities`](crate::operation::register_operation_capabilities),
    /// [`register_move_operation`](crate::movement::register_move_operation)). The default
    /// declares nothing. Errors of those functions are the hook's to handle; a panic ends
    /// the hook and leaves what it declared before.
    fn declare_class(class: CarrierClass) {
        let _ = class;
    }

    /// Whether this carrier can store `dtype` (by identity). Must not depend on the size,
    /// mutability, ownership or release state, and stays available after release.
    fn supports_storage_dtype(&self, dtype: DType) -> bool;

    /// [`supports_storage_dtype`](Self::supports_storage_dtype) for a class whose answer can
    /// fail (one that asks other carriers, such as a composite over definition-backed
    /// tiers): the framework asks this one, and an error propagates instead of reading as
    /// "not supported". The default answers `Ok(supports_storage_dtype(dtype))`.
    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        Ok(self.supports_storage_dtype(dtype))
    }

    /// The number of slots (the framework reports 0 once released).
    fn size(&self) -> usize;

    /// The value at an in-range slot.
    fn read(&self, index: usize, dtype: DType) -> Result<Value>;

    /// The values at in-range slots, in order: bulk reads for scatter and
    /// [`Tensor::to_values`](crate::Tensor::to_values). The default reads one by one; a class
    /// that can read many slots under one lock should override it.
    fn read_all(&self, indices: &[usize], dtype: DType) -> Result<Vec<Value>> {
        indices.iter().map(|&i| self.read(i, dtype)).collect()
    }

    /// Stores an already normalized value at an in-range slot.
    fn write(&self, index: usize, value: Value, dtype: DType) -> Result<()>;

    /// Stores every `(slot, value)` pair, all or nothing: the framework has checked every
    /// slot and normalized every value, so an implementation that cannot fail half way
    /// keeps scatter atomic. The default writes one by one.
    fn write_all(&self, writes: &[(usize, Value)], dtype: DType) -> Result<()> {
        writes
            .iter()
            .try_for_each(|&(index, value)| self.write(index, value, dtype))
    }

    /// Copies the `source` carrier's slots `sources` to this carrier's slots `targets`, pair
    /// by pair, natively when the class can (the CPU carrier from a CPU source of its own
    /// element type), or answers `None` (the default) so the framework moves `Value`s. The
    /// framework has checked every slot of both carriers and counts the write; a failing
    /// implementation must leave every target slot as it was.
    fn copy_slots_from(
        &self,
        source: &Carrier,
        sources: &[usize],
        targets: &[usize],
    ) -> Option<Result<()>> {
        let _ = (source, sources, targets);
        None
    }

    /// Reads the slots `start..start + len`, of the carrier's dtype, natively under one
    /// lock (uploads, bulk moves), or answers `None` (the default) so the framework reads
    /// them one [`Value`] at a time. The framework has checked the range and that the dtype
    /// is one [`SpanValues`] holds.
    fn read_span(&self, start: usize, len: usize, dtype: DType) -> Option<Result<SpanValues>> {
        let _ = (start, len, dtype);
        None
    }

    /// Writes `values` to the slots from `start` natively under one lock, or answers `None`
    /// (the default) so the framework writes them one [`Value`] at a time. The framework has
    /// checked the range, the dtype and that the writer may write, and counts the write.
    fn write_span(&self, start: usize, values: SpanSlice<'_>) -> Option<Result<()>> {
        let _ = (start, values);
        None
    }

    /// Relinquishes the storage; called at most once.
    fn release(&self) -> Result<()>;

    /// A fresh carrier of this class holding `values` (already normalized to `dtype`).
    fn new_like(&self, values: &[Value], dtype: DType) -> Result<Self>;

    /// A fresh carrier of this class with `size` slots, zeroed unless `empty` (a class may
    /// zero anyway).
    fn allocate_like(&self, size: usize, dtype: DType, empty: bool) -> Result<Self>;

    /// For a class whose instances are complete carriers built by its own constructor (a
    /// binding's foreign classes): a fresh carrier of this class holding `values`, made by
    /// the class's own factory. The framework checks it as it checks every factory's result
    /// (its class, dtype, extent and writability). `None` (the default) has the framework call
    /// [`new_like`](Self::new_like) and wrap the body.
    fn new_like_carrier(
        &self,
        values: &[Value],
        dtype: DType,
        mutable: bool,
    ) -> Option<Result<Carrier>> {
        let _ = (values, dtype, mutable);
        None
    }

    /// [`new_like_carrier`](Self::new_like_carrier) for
    /// [`allocate_like`](Self::allocate_like).
    fn allocate_like_carrier(
        &self,
        size: usize,
        dtype: DType,
        empty: bool,
        mutable: bool,
    ) -> Option<Result<Carrier>> {
        let _ = (size, dtype, empty, mutable);
        None
    }

    /// Whether an empty carrier of this class grows when it is a move destination.
    fn grows_as_destination(&self) -> bool {
        false
    }

    /// Sets the number of slots of an empty (or just grown) carrier; only called when
    /// [`grows_as_destination`](Self::grows_as_destination) is true.
    fn set_extent(&self, slots: usize, dtype: DType) -> Result<()> {
        let _ = (slots, dtype);
        Err(Error::NotImplemented(format!(
            "{} carriers do not grow as move destinations",
            Self::NAME
        )))
    }

    /// Whether carrier scatter is available; when false it is NotImplemented.
    fn supports_scatter(&self) -> bool {
        true
    }

    /// Whether a write counts from the moment its transfer starts rather than when it
    /// succeeds. A class whose writes can fail midway (a block device, where a failed
    /// direct-I/O transfer may have changed some bytes) answers true, so that a failed write
    /// still moves the version by one and tensors saved for gradients notice the possible
    /// change (docs/carriers.md, Block devices). The default, false, counts successful writes only.
    fn versions_at_transfer_start(&self) -> bool {
        false
    }

    /// The dispatch hook: a fresh [`Operation`] computing `name` on tensors of this class,
    /// or NotImplemented (the default) for an operation the class does not execute.
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        Err(Error::NotImplemented(format!(
            "{} carriers dispatch no operation '{name}'",
            Self::NAME
        )))
    }

    /// The built-in kernels of this class as one plain function, when it has them: the
    /// dispatcher calls it for a built-in operation instead of building a fresh
    /// [`Operation`] through [`dispatch_op`](Self::dispatch_op), which still answers
    /// `Carrier::dispatch_op`. Both must compute the same thing. `None` (the default) keeps
    /// every call on the dispatch hook.
    fn builtin_kernel(&self) -> Option<BuiltinKernel> {
        None
    }

    /// The capabilities of this instance, when they are an instance snapshot rather than
    /// the class declaration (dependent carriers such as Evictable). `None` (the default)
    /// means the class declaration answers every capability query and gates dispatch.
    fn instance_capabilities(&self) -> Option<Arc<[OperationCapability]>> {
        None
    }

    /// Class-specific conditions on a scatter source (for example "the source must be a CPU
    /// tensor"), checked before any write.
    fn check_scatter_source(
        &self,
        source: CarrierClass,
        source_dtype: DType,
        dtype: DType,
    ) -> Result<()> {
        let _ = (source, source_dtype, dtype);
        Ok(())
    }
}

/// The storage of a carrier body, object-safe: what a carrier handle stores and every body
/// answers (dtype support, size, reads, writes, the native bulk copy, release, fresh
/// instances). The movement and scatter hooks are apart, in [`MovementHooks`]; the execution
/// authority and reach are fixed on the handle at construction.
pub(crate) trait ErasedCarrier: Send + Sync {
    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool>;
    fn size(&self) -> usize;
    fn read(&self, index: usize, dtype: DType) -> Result<Value>;
    fn read_all(&self, indices: &[usize], dtype: DType) -> Result<Vec<Value>> {
        indices.iter().map(|&i| self.read(i, dtype)).collect()
    }
    fn write(&self, index: usize, value: Value, dtype: DType) -> Result<()>;
    fn write_all(&self, writes: &[(usize, Value)], dtype: DType) -> Result<()>;
    fn release(&self) -> Result<()>;
    fn copy_slots_from(
        &self,
        source: &Carrier,
        sources: &[usize],
        targets: &[usize],
    ) -> Option<Result<()>> {
        let _ = (source, sources, targets);
        None
    }
    /// See [`DefinitionFreeCarrier::read_span`].
    fn read_span(&self, start: usize, len: usize, dtype: DType) -> Option<Result<SpanValues>> {
        let _ = (start, len, dtype);
        None
    }
    /// See [`DefinitionFreeCarrier::write_span`].
    fn write_span(&self, start: usize, values: SpanSlice<'_>) -> Option<Result<()>> {
        let _ = (start, values);
        None
    }
    /// A fresh carrier of this class (see [`DefinitionFreeCarrier::new_like`]).
    fn new_like(&self, values: &[Value], dtype: DType, mutable: bool) -> Result<Carrier>;
    /// A fresh carrier of this class (see [`DefinitionFreeCarrier::allocate_like`]).
    fn allocate_like(
        &self,
        size: usize,
        dtype: DType,
        empty: bool,
        mutable: bool,
    ) -> Result<Carrier>;
    fn as_any(&self) -> &dyn Any;
    /// The body's movement and scatter hooks.
    fn movement(&self) -> &dyn MovementHooks;
    /// The definition-free dispatch hook (see [`DefinitionFreeCarrier::dispatch_op`]).
    fn dispatch_op(&self, name: &str) -> Result<Operation>;
    /// The carrier-specific facets of the body's definition; none for a definition-free body.
    fn facets(&self) -> &[Arc<dyn CarrierFacet>] {
        &[]
    }
}

/// The hooks of a body that take part in movement and scatter, apart from its storage: growing
/// as an empty move destination, scatter support and source conditions, and when a write
/// counts. A definition-free carrier type inherits the defaults of
/// [`DefinitionFreeCarrier`] unless it overrides them; a definition-backed body answers them
/// for its provider, which writes none.
pub(crate) trait MovementHooks {
    fn grows_as_destination(&self) -> bool;
    fn set_extent(&self, slots: usize, dtype: DType) -> Result<()>;
    fn supports_scatter(&self) -> bool;
    fn check_scatter_source(
        &self,
        source: CarrierClass,
        source_dtype: DType,
        dtype: DType,
    ) -> Result<()>;
    fn versions_at_transfer_start(&self) -> bool;
}

impl<T: DefinitionFreeCarrier> ErasedCarrier for T {
    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        DefinitionFreeCarrier::try_supports_storage_dtype(self, dtype)
    }
    fn size(&self) -> usize {
        DefinitionFreeCarrier::size(self)
    }
    fn read(&self, index: usize, dtype: DType) -> Result<Value> {
        DefinitionFreeCarrier::read(self, index, dtype)
    }
    fn read_all(&self, indices: &[usize], dtype: DType) -> Result<Vec<Value>> {
        DefinitionFreeCarrier::read_all(self, indices, dtype)
    }
    fn write(&self, index: usize, value: Value, dtype: DType) -> Result<()> {
        DefinitionFreeCarrier::write(self, index, value, dtype)
    }
    fn write_all(&self, writes: &[(usize, Value)], dtype: DType) -> Result<()> {
        DefinitionFreeCarrier::write_all(self, writes, dtype)
    }
    fn release(&self) -> Result<()> {
        DefinitionFreeCarrier::release(self)
    }
    fn copy_slots_from(
        &self,
        source: &Carrier,
        sources: &[usize],
        targets: &[usize],
    ) -> Option<Result<()>> {
        DefinitionFreeCarrier::copy_slots_from(self, source, sources, targets)
    }
    fn read_span(&self, start: usize, len: usize, dtype: DType) -> Option<Result<SpanValues>> {
        DefinitionFreeCarrier::read_span(self, start, len, dtype)
    }
    fn write_span(&self, start: usize, values: SpanSlice<'_>) -> Option<Result<()>> {
        DefinitionFreeCarrier::write_span(self, start, values)
    }
    fn new_like(&self, values: &[Value], dtype: DType, mutable: bool) -> Result<Carrier> {
        let request = Made::new(self, "new_like", values.len(), dtype, mutable);
        if let Some(made) = DefinitionFreeCarrier::new_like_carrier(self, values, dtype, mutable) {
            return request.check(self, made?);
        }
        let body = DefinitionFreeCarrier::new_like(self, values, dtype)?;
        Carrier::new(
            checked_extent(body, "new_like", values.len())?,
            dtype,
            mutable,
        )
    }
    fn allocate_like(
        &self,
        size: usize,
        dtype: DType,
        empty: bool,
        mutable: bool,
    ) -> Result<Carrier> {
        let request = Made::new(self, "allocate_like", size, dtype, mutable);
        if let Some(made) =
            DefinitionFreeCarrier::allocate_like_carrier(self, size, dtype, empty, mutable)
        {
            return request.check(self, made?);
        }
        let body = DefinitionFreeCarrier::allocate_like(self, size, dtype, empty)?;
        Carrier::new(checked_extent(body, "allocate_like", size)?, dtype, mutable)
    }
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        DefinitionFreeCarrier::dispatch_op(self, name)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn movement(&self) -> &dyn MovementHooks {
        self
    }
}

/// A fresh body from the factory hook `callback` asked for `requested` slots: the body when
/// its [`size`](DefinitionFreeCarrier::size) is exactly that, as construction requires of a
/// storage provider; otherwise the body is released (once) and the factory fails with a
/// provider contract error naming the class, the hook and both extents.
fn checked_extent<T: DefinitionFreeCarrier>(
    body: T,
    callback: &str,
    requested: usize,
) -> Result<T> {
    let reported = DefinitionFreeCarrier::size(&body);
    if reported == requested {
        return Ok(body);
    }
    // Best effort: the extent is the error to report.
    let _ = DefinitionFreeCarrier::release(&body);
    Err(Error::ProviderContract(format!(
        "{}.{callback} was asked for {requested} slots but made a carrier of {reported}",
        DefinitionFreeCarrier::carrier_class(&body)
    )))
}

/// What a factory hook was asked to make, to check a complete carrier a class's own factory
/// made ([`DefinitionFreeCarrier::new_like_carrier`]).
struct Made {
    class: CarrierClass,
    callback: &'static str,
    slots: usize,
    dtype: DType,
    mutable: bool,
}

impl Made {
    fn new<T: DefinitionFreeCarrier>(
        prototype: &T,
        callback: &'static str,
        slots: usize,
        dtype: DType,
        mutable: bool,
    ) -> Made {
        Made {
            class: DefinitionFreeCarrier::carrier_class(prototype),
            callback,
            slots,
            dtype,
            mutable,
        }
    }

    /// `made` when it is a live carrier of exactly the asked class, dtype and extent, writable
    /// when a writable one was asked for, and not `prototype` itself; otherwise it is released
    /// (once, when it is another carrier of this class) and the factory fails with a provider
    /// contract error naming the class, the hook and what differs.
    fn check<T: DefinitionFreeCarrier>(&self, prototype: &T, made: Carrier) -> Result<Carrier> {
        let Made {
            class,
            callback,
            slots,
            dtype,
            mutable,
        } = *self;
        let differs = if made.class() != class {
            Some(format!("a {} carrier", made.class()))
        } else if made.is_released() {
            Some("a released carrier".to_string())
        } else if made.dtype() != dtype {
            Some(format!("a {} carrier", made.dtype()))
        } else if made.size() != slots {
            Some(format!("a carrier of {} slots", made.size()))
        } else if mutable && !made.is_mutable() {
            Some("an immutable carrier".to_string())
        } else if made
            .downcast_ref::<T>()
            .is_some_and(|body| std::ptr::eq(body, prototype))
        {
            Some("the prototype itself".to_string())
        } else {
            None
        };
        let Some(differs) = differs else {
            return Ok(made);
        };
        let own = made
            .downcast_ref::<T>()
            .is_some_and(|body| std::ptr::eq(body, prototype));
        if made.class() == class && !own {
            // Best effort: what differs is the error to report.
            let _ = made.release();
        }
        Err(Error::ProviderContract(format!(
            "{class}.{callback} was asked for a fresh {}{dtype} carrier of {slots} slots but \
             made {differs}",
            if mutable { "mutable " } else { "" }
        )))
    }
}

impl<T: DefinitionFreeCarrier> MovementHooks for T {
    fn grows_as_destination(&self) -> bool {
        DefinitionFreeCarrier::grows_as_destination(self)
    }
    fn set_extent(&self, slots: usize, dtype: DType) -> Result<()> {
        DefinitionFreeCarrier::set_extent(self, slots, dtype)
    }
    fn supports_scatter(&self) -> bool {
        DefinitionFreeCarrier::supports_scatter(self)
    }
    fn versions_at_transfer_start(&self) -> bool {
        DefinitionFreeCarrier::versions_at_transfer_start(self)
    }
    fn check_scatter_source(
        &self,
        source: CarrierClass,
        source_dtype: DType,
        dtype: DType,
    ) -> Result<()> {
        DefinitionFreeCarrier::check_scatter_source(self, source, source_dtype, dtype)
    }
}
