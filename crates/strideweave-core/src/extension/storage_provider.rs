//! `StorageProvider`: the complete generic storage surface of a definition-backed carrier.

use std::any::{type_name, Any, TypeId};
use std::fmt;
use std::sync::Arc;

use crate::carrier::CarrierClass;
use crate::dtype::{DType, Value};
use crate::error::{guard, Error, Result};

/// The provider-owned state of one definition-backed carrier, type-erased.
pub(crate) type ErasedState = Box<dyn Any + Send + Sync>;

type SupportsFn = dyn Fn(&dyn Any, DType) -> Result<bool> + Send + Sync;
type SizeFn = dyn Fn(&dyn Any) -> Result<i64> + Send + Sync;
type AllocateFn = dyn Fn(&mut dyn Any, usize, DType) -> Result<()> + Send + Sync;
type ReleaseFn = dyn Fn(&mut dyn Any) -> Result<()> + Send + Sync;
type ReadFn = dyn Fn(&dyn Any, usize) -> Result<Value> + Send + Sync;
type WriteFn = dyn Fn(&mut dyn Any, usize, Value) -> Result<()> + Send + Sync;
type ContentsFn = dyn Fn(&mut dyn Any, AllocationContents) -> Result<()> + Send + Sync;
type FreshForFn = dyn Fn(&dyn Any, FreshRequest) -> Result<ErasedState> + Send + Sync;
type BulkReadFn = dyn Fn(&dyn Any, &[usize]) -> Result<Vec<Value>> + Send + Sync;
type HandleFn = dyn Fn(&dyn Any) -> Result<Box<dyn Any>> + Send + Sync;
type SlotCopyFn = dyn Fn(&dyn Any, &dyn Any, &[usize], &[usize]) -> Result<bool> + Send + Sync;

/// The two halves of a slot-copy hook (see [`StorageProvider::with_slot_copy`]): the handle
/// taken from one carrier's state, and the copy between two handles.
struct SlotCopy {
    handle: Box<HandleFn>,
    copy: Box<SlotCopyFn>,
}

/// What a factory (`new_like`, `allocate_like`) is about to construct, handed to a fresh-state
/// callback registered with [`StorageProvider::with_fresh_for`]: the fresh carrier's slot
/// count, dtype and mutability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FreshRequest {
    slots: usize,
    dtype: DType,
    mutable: bool,
}

impl FreshRequest {
    pub(crate) fn new(slots: usize, dtype: DType, mutable: bool) -> FreshRequest {
        FreshRequest {
            slots,
            dtype,
            mutable,
        }
    }

    /// The slot count the framework will `allocate`.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The fresh carrier's dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Whether the fresh carrier will be mutable.
    pub fn mutable(&self) -> bool {
        self.mutable
    }
}

/// What the contents of a carrier made by `allocate_like` must be: the `empty` flag of the
/// factory, handed to a provider that sets up fresh contents itself (see
/// [`StorageProvider::with_allocation_contents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocationContents {
    /// `allocate_like(.., empty = false)`: every slot reads the dtype's zero.
    Zeroed,
    /// `allocate_like(.., empty = true)`: the contents are unspecified until written; a
    /// provider may make reading them an error.
    Unspecified,
}

impl AllocationContents {
    /// The contents `allocate_like`'s `empty` flag asks for.
    pub fn from_empty(empty: bool) -> AllocationContents {
        if empty {
            AllocationContents::Unspecified
        } else {
            AllocationContents::Zeroed
        }
    }
}

struct Callbacks {
    state_type: TypeId,
    state_type_name: &'static str,
    supports_dtype: Box<SupportsFn>,
    physical_size: Box<SizeFn>,
    allocate: Box<AllocateFn>,
    release: Box<ReleaseFn>,
    read: Box<ReadFn>,
    write: Box<WriteFn>,
    fresh: Box<FreshForFn>,
}

/// The six storage callbacks of a definition-backed carrier class, typed over the author's
/// state type `S`, plus the elementwise-fallback permission.
///
/// Seed rule: "StorageProvider(supports_dtype, physical_size, allocate, release, read, write,
/// elementwise_fallback=False) SHALL store six required callbacks and one boolean fallback
/// permission as immutable fields." Callability and the bool type are enforced by the type
/// system. The callbacks are type-erased at construction into closures over `dyn Any` state
/// whose downcast to `S` the framework checks (a mismatch is a Type error).
///
/// The framework owns the carrier's dtype, mutability, version, release state and extent, and
/// checks exact class, liveness, mutability, extent and index before each callback. A
/// callback error propagates unchanged; a panic is caught and becomes a
/// [`ProviderContract`](Error::ProviderContract) error; either way nothing is published and no
/// version changes.
///
/// Factories (`new_like`, `allocate_like`) never copy the prototype's state: they build
/// **fresh** state for the new instance and `allocate` it. With [`new`](StorageProvider::new)
/// the fresh state is `S::default()`; with [`new_fallible`](StorageProvider::new_fallible)
/// the author's `fresh` callback builds it from the prototype's state, for a state whose
/// configuration (a device resource, a composite's dependency) must carry over — it should
/// take only that configuration, never the prototype's slots or other per-instance storage.
///
/// ```
/// use strideweave::carriers::extension::StorageProvider;
/// use strideweave::{DType, Error, Value};
/// #[derive(Default)]
/// struct Ring { values: Vec<i64> }
/// let storage = StorageProvider::new(
///     |_: &Ring, dtype| dtype == DType::INT32,
///     |ring: &Ring| ring.values.len() as i64,
///     |ring: &mut Ring, slots, _dtype| { ring.values = vec![0; slots]; Ok(()) },
///     |ring: &mut Ring| { ring.values.clear(); Ok(()) },
///     |ring: &Ring, index| Ok(Value::Int(ring.values[index])),
///     |ring: &mut Ring, index, value: Value| {
///         ring.values[index] = value.as_i64().ok_or_else(|| Error::Type("not an int".into()))?;
///         Ok(())
///     },
/// )
/// .with_elementwise_fallback(true);
/// assert!(storage.elementwise_fallback());
/// ```
#[derive(Clone)]
pub struct StorageProvider {
    callbacks: Arc<Callbacks>,
    elementwise_fallback: bool,
    allocation_contents: Option<Arc<ContentsFn>>,
    fresh_for: Option<Arc<FreshForFn>>,
    bulk_read: Option<Arc<BulkReadFn>>,
    slot_copy: Option<Arc<SlotCopy>>,
}

fn downcast<S: 'static>(state: &dyn Any) -> Result<&S> {
    state
        .downcast_ref::<S>()
        .ok_or_else(|| state_mismatch::<S>())
}

fn downcast_mut<S: 'static>(state: &mut dyn Any) -> Result<&mut S> {
    state
        .downcast_mut::<S>()
        .ok_or_else(|| state_mismatch::<S>())
}

fn state_mismatch<S>() -> Error {
    Error::Type(format!(
        "the storage provider state is not a {}",
        type_name::<S>()
    ))
}

impl StorageProvider {
    /// The provider of state type `S` with the six callbacks, in the seed's order, and
    /// `elementwise_fallback` off (see
    /// [`with_elementwise_fallback`](StorageProvider::with_elementwise_fallback)).
    ///
    /// - `supports_dtype(&S, dtype)`: whether the class stores `dtype` (by identity);
    ///   independent of size, mutability and release state;
    /// - `physical_size(&S)`: the slot count; negative is a Value error at the boundary;
    /// - `allocate(&mut S, slots, dtype)`: establishes storage of exactly `slots` slots for
    ///   the carrier's dtype `dtype` (the seed's callback receives the carrier, whose dtype it
    ///   may read; a factory may ask for another dtype than the prototype's);
    /// - `release(&mut S)`: relinquishes the storage; called at most once;
    /// - `read(&S, index)`: the value at an in-range slot, in a form the dtype accepts (else a
    ///   Type error);
    /// - `write(&mut S, index, value)`: stores an already normalized value at an in-range slot.
    ///
    /// `supports_dtype` and `physical_size` fail only by panicking here (a panic becomes a
    /// [`ProviderContract`](Error::ProviderContract) error); use
    /// [`new_fallible`](StorageProvider::new_fallible) to report an error from them. A
    /// factory's fresh state is `S::default()`.
    pub fn new<S, Supports, Size, Allocate, Release, Read, Write>(
        supports_dtype: Supports,
        physical_size: Size,
        allocate: Allocate,
        release: Release,
        read: Read,
        write: Write,
    ) -> StorageProvider
    where
        S: Default + Send + Sync + 'static,
        Supports: Fn(&S, DType) -> bool + Send + Sync + 'static,
        Size: Fn(&S) -> i64 + Send + Sync + 'static,
        Allocate: Fn(&mut S, usize, DType) -> Result<()> + Send + Sync + 'static,
        Release: Fn(&mut S) -> Result<()> + Send + Sync + 'static,
        Read: Fn(&S, usize) -> Result<Value> + Send + Sync + 'static,
        Write: Fn(&mut S, usize, Value) -> Result<()> + Send + Sync + 'static,
    {
        StorageProvider::new_fallible(
            move |state: &S, dtype| Ok(supports_dtype(state, dtype)),
            move |state: &S| Ok(physical_size(state)),
            allocate,
            release,
            read,
            write,
            |_: &S| Ok(S::default()),
        )
    }

    /// [`new`](StorageProvider::new) with every callback fallible, `supports_dtype` and
    /// `physical_size` included, and the factories' fresh state built by `fresh`.
    ///
    /// - `supports_dtype(&S, dtype) -> Result<bool>`: an error propagates from every path that
    ///   asks (construction, the factories, [`Carrier::supports_storage_dtype`]); it never
    ///   reads as "not supported";
    /// - `physical_size(&S) -> Result<i64>`: an error propagates (the construction fails, the
    ///   state is released, nothing is returned);
    /// - `fresh(&S) -> Result<S>`: the state of a factory's new instance, given the prototype's
    ///   state: build it from the prototype's configuration only (the framework then calls
    ///   `allocate` on it); for a state with no configuration, `|_| Ok(S::default())`. An
    ///   error or panic fails the factory with nothing constructed.
    ///
    /// [`Carrier::supports_storage_dtype`]: crate::Carrier::supports_storage_dtype
    #[allow(clippy::too_many_arguments)]
    pub fn new_fallible<S, Supports, Size, Allocate, Release, Read, Write, Fresh>(
        supports_dtype: Supports,
        physical_size: Size,
        allocate: Allocate,
        release: Release,
        read: Read,
        write: Write,
        fresh: Fresh,
    ) -> StorageProvider
    where
        S: Send + Sync + 'static,
        Supports: Fn(&S, DType) -> Result<bool> + Send + Sync + 'static,
        Size: Fn(&S) -> Result<i64> + Send + Sync + 'static,
        Allocate: Fn(&mut S, usize, DType) -> Result<()> + Send + Sync + 'static,
        Release: Fn(&mut S) -> Result<()> + Send + Sync + 'static,
        Read: Fn(&S, usize) -> Result<Value> + Send + Sync + 'static,
        Write: Fn(&mut S, usize, Value) -> Result<()> + Send + Sync + 'static,
        Fresh: Fn(&S) -> Result<S> + Send + Sync + 'static,
    {
        StorageProvider::new_with_fresh_for(
            supports_dtype,
            physical_size,
            allocate,
            release,
            read,
            write,
            move |state: &S, _: FreshRequest| fresh(state),
        )
    }

    /// [`new_fallible`](StorageProvider::new_fallible) with the factories' fresh state built
    /// by `fresh(&prototype, request)`, which also receives the [`FreshRequest`] saying what
    /// is about to be constructed (see [`with_fresh_for`](StorageProvider::with_fresh_for)):
    /// for a state whose own constructor wants the slot count, dtype and mutability, such as
    /// a carrier class written in another language whose initializer runs for framework-made
    /// instances too.
    #[allow(clippy::too_many_arguments)]
    pub fn new_with_fresh_for<S, Supports, Size, Allocate, Release, Read, Write, Fresh>(
        supports_dtype: Supports,
        physical_size: Size,
        allocate: Allocate,
        release: Release,
        read: Read,
        write: Write,
        fresh: Fresh,
    ) -> StorageProvider
    where
        S: Send + Sync + 'static,
        Supports: Fn(&S, DType) -> Result<bool> + Send + Sync + 'static,
        Size: Fn(&S) -> Result<i64> + Send + Sync + 'static,
        Allocate: Fn(&mut S, usize, DType) -> Result<()> + Send + Sync + 'static,
        Release: Fn(&mut S) -> Result<()> + Send + Sync + 'static,
        Read: Fn(&S, usize) -> Result<Value> + Send + Sync + 'static,
        Write: Fn(&mut S, usize, Value) -> Result<()> + Send + Sync + 'static,
        Fresh: Fn(&S, FreshRequest) -> Result<S> + Send + Sync + 'static,
    {
        StorageProvider {
            callbacks: Arc::new(Callbacks {
                state_type: TypeId::of::<S>(),
                state_type_name: type_name::<S>(),
                supports_dtype: Box::new(move |state, dtype| {
                    supports_dtype(downcast::<S>(state)?, dtype)
                }),
                physical_size: Box::new(move |state| physical_size(downcast::<S>(state)?)),
                allocate: Box::new(move |state, slots, dtype| {
                    allocate(downcast_mut::<S>(state)?, slots, dtype)
                }),
                release: Box::new(move |state| release(downcast_mut::<S>(state)?)),
                read: Box::new(move |state, index| read(downcast::<S>(state)?, index)),
                write: Box::new(move |state, index, value| {
                    write(downcast_mut::<S>(state)?, index, value)
                }),
                fresh: Box::new(move |state, request| {
                    let fresh: ErasedState = Box::new(fresh(downcast::<S>(state)?, request)?);
                    Ok(fresh)
                }),
            }),
            elementwise_fallback: false,
            allocation_contents: None,
            fresh_for: None,
            bulk_read: None,
            slot_copy: None,
        }
    }

    /// This provider with `contents(&mut S, AllocationContents)` setting up the contents of
    /// every carrier `allocate_like` makes, after `allocate`: [`Zeroed`] for
    /// `empty = false`, [`Unspecified`] for `empty = true`.
    ///
    /// Without it the factory writes the dtype's zero into every slot for `empty = false`
    /// and leaves an empty allocation as `allocate` made it. With it the framework writes
    /// nothing: a class whose storage knows zero (or undefined) contents without a write per
    /// slot — tiles that read as zero, say — states them here. An error or panic fails the
    /// factory, and the fresh carrier is released.
    ///
    /// [`Zeroed`]: AllocationContents::Zeroed
    /// [`Unspecified`]: AllocationContents::Unspecified
    pub fn with_allocation_contents<S, Contents>(self, contents: Contents) -> StorageProvider
    where
        S: 'static,
        Contents: Fn(&mut S, AllocationContents) -> Result<()> + Send + Sync + 'static,
    {
        StorageProvider {
            allocation_contents: Some(Arc::new(move |state, wanted| {
                contents(downcast_mut::<S>(state)?, wanted)
            })),
            ..self
        }
    }

    /// This provider with `fresh(&prototype, request)` building the state of every carrier a
    /// factory makes, in place of the `fresh` callback it was constructed with
    /// ([`new_fallible`](StorageProvider::new_fallible),
    /// [`new_with_fresh_for`](StorageProvider::new_with_fresh_for)): the same contract (configuration
    /// only, never the prototype's slots; the framework then runs its construction —
    /// `supports_dtype`, `allocate`, the `physical_size` check — on the returned state), with
    /// the [`FreshRequest`] saying what is about to be constructed. For a state whose own
    /// constructor wants the slot count, dtype and mutability — a carrier class written in
    /// another language whose initializer runs for framework-made instances too. An error or
    /// panic fails the factory with nothing constructed.
    pub fn with_fresh_for<S, Fresh>(self, fresh: Fresh) -> StorageProvider
    where
        S: Send + Sync + 'static,
        Fresh: Fn(&S, FreshRequest) -> Result<S> + Send + Sync + 'static,
    {
        StorageProvider {
            fresh_for: Some(Arc::new(move |state, request| {
                let fresh: ErasedState = Box::new(fresh(downcast::<S>(state)?, request)?);
                Ok(fresh)
            })),
            ..self
        }
    }

    /// This provider with `read_all(&S, indices)` reading many slots at once, for storage
    /// where one read per slot is costly (a device round trip each).
    ///
    /// The framework calls it wherever it reads several slots of one carrier: the sources of
    /// a scatter, the previous values a provider scope journals before a write, the values an
    /// all-or-nothing write keeps to undo itself. Every index is in range (checked before);
    /// indices may repeat and come in any order. It must return one value per index, in
    /// order (another count is a [`ProviderContract`](Error::ProviderContract) error), each
    /// validated as `read`'s answer is. Without it the framework calls `read` per slot.
    pub fn with_bulk_read<S, ReadAll>(self, read_all: ReadAll) -> StorageProvider
    where
        S: 'static,
        ReadAll: Fn(&S, &[usize]) -> Result<Vec<Value>> + Send + Sync + 'static,
    {
        StorageProvider {
            bulk_read: Some(Arc::new(move |state, indices| {
                read_all(downcast::<S>(state)?, indices)
            })),
            ..self
        }
    }

    /// This provider with a slot copy between two carriers of its class: `handle(&S)` takes
    /// what a copy needs from one carrier's state (a device buffer, say), and
    /// `copy(&destination, &source, sources, targets)` copies source slot `sources[i]` to
    /// destination slot `targets[i]` for every `i`, answering `Ok(false)` to decline (nothing
    /// written; the framework then reads and writes slot by slot).
    ///
    /// A scatter whose source is a carrier of the same class uses it. Each handle is taken
    /// under its own carrier's shared state lock, one at a time, and `copy` runs with no
    /// lock held, so two scatters in opposite directions cannot wait for each other. The
    /// framework has checked every index in range, both lists have one entry per element,
    /// `targets` has no repeated slot, and the two carriers may be the same one; their
    /// dtypes may differ (the handles must carry what `copy` needs to tell, and a copy that
    /// would have to convert declines). An error fails the scatter, which must then have
    /// written nothing: a copy is all or nothing.
    pub fn with_slot_copy<S, H, Handle, Copy>(self, handle: Handle, copy: Copy) -> StorageProvider
    where
        S: 'static,
        H: 'static,
        Handle: Fn(&S) -> Result<H> + Send + Sync + 'static,
        Copy: Fn(&H, &H, &[usize], &[usize]) -> Result<bool> + Send + Sync + 'static,
    {
        let handle: Box<HandleFn> = Box::new(move |state| {
            let taken: Box<dyn Any> = Box::new(handle(downcast::<S>(state)?)?);
            Ok(taken)
        });
        let copy: Box<SlotCopyFn> = Box::new(move |destination, source, sources, targets| {
            copy(
                downcast::<H>(destination)?,
                downcast::<H>(source)?,
                sources,
                targets,
            )
        });
        StorageProvider {
            slot_copy: Some(Arc::new(SlotCopy { handle, copy })),
            ..self
        }
    }

    /// Whether the provider copies slots between its carriers itself.
    pub(crate) fn copies_slots(&self) -> bool {
        self.slot_copy.is_some()
    }

    /// `read_all` when the provider has one (validated: one value per index, each accepted
    /// by `dtype`), otherwise `read` per index.
    pub(crate) fn call_read_all(
        &self,
        class: CarrierClass,
        state: &dyn Any,
        indices: &[usize],
        dtype: DType,
    ) -> Result<Vec<Value>> {
        let Some(read_all) = &self.bulk_read else {
            return indices
                .iter()
                .map(|&index| self.call_read(class, state, index, dtype))
                .collect();
        };
        let values = self.guarded(class, "read_all", || read_all(state, indices))?;
        if values.len() != indices.len() {
            return Err(Error::ProviderContract(format!(
                "the storage provider of {class} read {} values for {} slots",
                values.len(),
                indices.len()
            )));
        }
        values
            .into_iter()
            .zip(indices)
            .map(|(value, &index)| self.checked_value(class, value, index, dtype))
            .collect()
    }

    /// The slot copy from the carrier whose state `source` gives to the one whose state
    /// `destination` gives (each called once, one after the other, and their locks released
    /// before the copy runs): `Ok(false)` when the provider has no slot copy or declines.
    pub(crate) fn call_slot_copy<SourceState, DestinationState>(
        &self,
        class: CarrierClass,
        source: impl FnOnce() -> Result<SourceState>,
        destination: impl FnOnce() -> Result<DestinationState>,
        sources: &[usize],
        targets: &[usize],
    ) -> Result<bool>
    where
        SourceState: std::ops::Deref<Target = dyn Any + Send + Sync>,
        DestinationState: std::ops::Deref<Target = dyn Any + Send + Sync>,
    {
        let Some(slot_copy) = &self.slot_copy else {
            return Ok(false);
        };
        let from = {
            let state = source()?;
            self.guarded(class, "slot copy handle", || (slot_copy.handle)(&*state))?
        };
        let to = {
            let state = destination()?;
            self.guarded(class, "slot copy handle", || (slot_copy.handle)(&*state))?
        };
        self.guarded(class, "slot copy", || {
            (slot_copy.copy)(to.as_ref(), from.as_ref(), sources, targets)
        })
    }

    /// Whether the provider sets up the contents of factory allocations itself.
    pub(crate) fn sets_allocation_contents(&self) -> bool {
        self.allocation_contents.is_some()
    }

    /// The allocation-contents callback (see
    /// [`with_allocation_contents`](StorageProvider::with_allocation_contents)); does nothing
    /// for a provider without one.
    pub(crate) fn call_allocation_contents(
        &self,
        class: CarrierClass,
        state: &mut dyn Any,
        contents: AllocationContents,
    ) -> Result<()> {
        let Some(callback) = &self.allocation_contents else {
            return Ok(());
        };
        self.guarded(class, "allocation contents", || callback(state, contents))
    }

    /// This provider with the elementwise movement fallback permission set to `allowed`.
    pub fn with_elementwise_fallback(self, allowed: bool) -> StorageProvider {
        StorageProvider {
            elementwise_fallback: allowed,
            ..self
        }
    }

    /// Whether elementwise movement fallback is permitted (it is used only when both exact
    /// definitions of a pair permit it).
    pub fn elementwise_fallback(&self) -> bool {
        self.elementwise_fallback
    }

    /// The name of the state type `S` the callbacks are typed over.
    pub fn state_type_name(&self) -> &'static str {
        self.callbacks.state_type_name
    }

    pub(crate) fn state_type(&self) -> TypeId {
        self.callbacks.state_type
    }

    /// Runs one callback of the provider of `class` under the provider guard.
    fn guarded<T>(
        &self,
        class: CarrierClass,
        callback: &'static str,
        run: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        guard(|| format!("the storage provider of {class}"), callback, run)
    }

    pub(crate) fn call_supports_dtype(
        &self,
        class: CarrierClass,
        state: &dyn Any,
        dtype: DType,
    ) -> Result<bool> {
        self.guarded(class, "supports_dtype", || {
            (self.callbacks.supports_dtype)(state, dtype)
        })
    }

    /// `physical_size`, validated: a negative answer is a Value error naming the provider.
    pub(crate) fn call_physical_size(&self, class: CarrierClass, state: &dyn Any) -> Result<usize> {
        let size = self.guarded(class, "physical_size", || {
            (self.callbacks.physical_size)(state)
        })?;
        usize::try_from(size).map_err(|_| {
            Error::Value(format!(
                "the storage provider of {class} returned a negative physical_size {size}"
            ))
        })
    }

    pub(crate) fn call_allocate(
        &self,
        class: CarrierClass,
        state: &mut dyn Any,
        slots: usize,
        dtype: DType,
    ) -> Result<()> {
        self.guarded(class, "allocate", || {
            (self.callbacks.allocate)(state, slots, dtype)
        })
    }

    pub(crate) fn call_release(&self, class: CarrierClass, state: &mut dyn Any) -> Result<()> {
        self.guarded(class, "release", || (self.callbacks.release)(state))
    }

    /// `read`, validated: a value the dtype refuses is a Type error naming the provider.
    pub(crate) fn call_read(
        &self,
        class: CarrierClass,
        state: &dyn Any,
        index: usize,
        dtype: DType,
    ) -> Result<Value> {
        let value = self.guarded(class, "read", || (self.callbacks.read)(state, index))?;
        self.checked_value(class, value, index, dtype)
    }

    /// A value the provider read at slot `index`, normalized to `dtype`: a Type error naming
    /// the provider when the dtype does not accept it.
    fn checked_value(
        &self,
        class: CarrierClass,
        value: Value,
        index: usize,
        dtype: DType,
    ) -> Result<Value> {
        dtype.normalize(value).map_err(|error| {
            Error::Type(format!(
                "the storage provider of {class} read {} value {value} at slot {index}, which \
                 dtype {dtype} does not accept: {error}",
                value.type_name()
            ))
        })
    }

    pub(crate) fn call_write(
        &self,
        class: CarrierClass,
        state: &mut dyn Any,
        index: usize,
        value: Value,
    ) -> Result<()> {
        self.guarded(class, "write", || {
            (self.callbacks.write)(state, index, value)
        })
    }

    /// Fresh state for a factory, built from the prototype's `state` (see the type's
    /// documentation): never a copy of it.
    pub(crate) fn call_fresh(
        &self,
        class: CarrierClass,
        state: &dyn Any,
        request: FreshRequest,
    ) -> Result<ErasedState> {
        self.guarded(class, "fresh state", || match &self.fresh_for {
            Some(fresh) => fresh(state, request),
            None => (self.callbacks.fresh)(state, request),
        })
    }
}

impl fmt::Debug for StorageProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageProvider")
            .field("state", &self.callbacks.state_type_name)
            .field("elementwise_fallback", &self.elementwise_fallback)
            .field("allocation_contents", &self.allocation_contents.is_some())
            .field("fresh_for", &self.fresh_for.is_some())
            .field("bulk_read", &self.bulk_read.is_some())
            .field("slot_copy", &self.slot_copy.is_some())
            .finish()
    }
}
