//! `Carrier`: the cheap, clonable handle to one live storage instance.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::carrier::class::CarrierClass;
use crate::carrier::definition_free::{DefinitionFreeCarrier, ErasedCarrier};
use crate::carrier::facet::CarrierFacet;
use crate::carrier::lifecycle::{Lifecycle, OwnershipToken};
use crate::dtype::{DType, Value};
use crate::error::{Error, Result, UnsupportedOperationPlan};
use crate::operation::{
    capabilities_for_carrier_class, check_capability, matching_capability, missing_plan_reason,
    supports_operation_plan, unsupported_plan_reason, Authority, Operation, OperationCapability,
    OperationPlan,
};

/// The framework-owned state of a carrier and, last, its body: the storage behind the
/// handle, stored unsized in the same allocation.
///
/// A carrier is three things fixed at construction: its storage (the body: a definition-free
/// carrier, or the definition-backed body driven by a sealed `CarrierDefinition`), its
/// execution [`Authority`], and its reach (the capabilities it answers: the class
/// declaration, or an instance snapshot).
struct Inner<B: ?Sized = dyn ErasedCarrier> {
    class: CarrierClass,
    /// Who executes operations on this carrier's tensors.
    authority: Authority,
    /// The instance's capability snapshot; unset when the class declaration answers. Set
    /// at most once, before the carrier is exposed.
    reach: OnceLock<Arc<[OperationCapability]>>,
    /// The concrete type of `body`, for [`Carrier::downcast_ref`].
    body_type: TypeId,
    dtype: DType,
    intrinsically_mutable: bool,
    version: AtomicU64,
    lifecycle: Lifecycle,
    body: B,
}

/// A flat run of slots of one dtype, and the authority over the tensors it backs.
///
/// Cloning is cheap and shares the carrier. The framework owns its exact class, dtype,
/// intrinsic mutability, version, release state, ownership and claims (docs/carriers.md,
/// The carrier handle):
///
/// 1. the version moves by exactly 1 per successful public write and never on allocation,
///    construction, release or a failed write;
/// 2. after [`release`](Carrier::release) (idempotent) access and mutation fail with a
///    Runtime error, the size is 0, and the dtype, [`supports_storage_dtype`] and the
///    factories still work;
/// 3. `is_mutable = intrinsic && (not owned || inside the owner's access on this thread)`,
///    and every write path obeys it.
///
/// [`supports_storage_dtype`]: Carrier::supports_storage_dtype
#[derive(Clone)]
pub struct Carrier {
    inner: Arc<Inner>,
}

impl Carrier {
    /// Wraps a definition-free carrier `body` holding `dtype` slots.
    ///
    /// Fails with a Value error when the class cannot store `dtype` (categories never can),
    /// and with a Type error when the class is definition-backed. A successful construction
    /// observes the class: from then on neither a carrier definition nor a capability
    /// declaration can be registered for it (Type, "already observed"). A refused
    /// construction constructs nothing and seals nothing.
    pub fn new<T: DefinitionFreeCarrier>(body: T, dtype: DType, mutable: bool) -> Result<Carrier> {
        let class = DefinitionFreeCarrier::carrier_class(&body);
        Carrier::with_class(body, class, dtype, mutable)
    }

    /// [`Carrier::new`] for a caller that already knows the exact class of the body (it must
    /// be the body's [`carrier_class`](DefinitionFreeCarrier::carrier_class)), sparing the
    /// look-up of the class by type. Inlined: every kernel result is wrapped here.
    #[inline]
    pub(crate) fn with_class<T: DefinitionFreeCarrier>(
        body: T,
        class: CarrierClass,
        dtype: DType,
        mutable: bool,
    ) -> Result<Carrier> {
        debug_assert!(
            class == DefinitionFreeCarrier::carrier_class(&body),
            "{class} is not the class of the body"
        );
        const ACTION: &str = "construct a definition-free carrier body";
        // Construction observes the class, but only once it can no longer be refused: a
        // refused construction constructs nothing and seals nothing.
        if !class.was_constructed() {
            class.check_definition_free(ACTION)?;
        }
        if !DefinitionFreeCarrier::try_supports_storage_dtype(&body, dtype)? {
            return Err(Error::UnstorableDtype { class, dtype });
        }
        class.observe_construction(ACTION)?;
        let authority = Authority::Hook {
            builtin: DefinitionFreeCarrier::builtin_kernel(&body),
        };
        let reach = OnceLock::new();
        if let Some(snapshot) = DefinitionFreeCarrier::instance_capabilities(&body) {
            let _ = reach.set(snapshot);
        }
        super::construction_count::count_construction();
        let inner: Arc<Inner> = Arc::new(Inner {
            class,
            authority,
            reach,
            body_type: TypeId::of::<T>(),
            dtype,
            intrinsically_mutable: mutable,
            version: AtomicU64::new(0),
            lifecycle: Lifecycle::default(),
            body,
        });
        Ok(Carrier { inner })
    }

    /// Wraps an already validated erased `body` of the exact `class`, executed by
    /// `authority`, with no check left to fail: the definition-backed path
    /// (`Carrier::create`) and tiny CPU results (`Cpu::inline_f32` and its siblings).
    #[inline]
    pub(crate) fn from_erased_body<B: ErasedCarrier + 'static>(
        body: B,
        class: CarrierClass,
        authority: Authority,
        dtype: DType,
        mutable: bool,
    ) -> Carrier {
        super::construction_count::count_construction();
        let inner: Arc<Inner> = Arc::new(Inner {
            class,
            authority,
            reach: OnceLock::new(),
            body_type: TypeId::of::<B>(),
            dtype,
            intrinsically_mutable: mutable,
            version: AtomicU64::new(0),
            lifecycle: Lifecycle::default(),
            body,
        });
        Carrier { inner }
    }

    /// The carrier-specific facet of exact type `F` registered by this carrier's definition,
    /// or `None` (always for a definition-free carrier).
    pub fn facet<F: CarrierFacet>(&self) -> Option<&F> {
        self.body()
            .facets()
            .iter()
            .find_map(|facet| (&**facet as &dyn Any).downcast_ref::<F>())
    }

    /// [`facet`](Carrier::facet), or a NotImplemented error naming the missing facet type.
    pub fn require_facet<F: CarrierFacet>(&self) -> Result<&F> {
        self.facet::<F>().ok_or_else(|| {
            Error::NotImplemented(format!(
                "the {} carrier has no {} facet",
                self.class(),
                std::any::type_name::<F>()
            ))
        })
    }

    pub(crate) fn body(&self) -> &dyn ErasedCarrier {
        &self.inner.body
    }

    /// Who executes operations on this carrier's tensors (fixed at construction).
    #[inline]
    pub(crate) fn authority(&self) -> &Authority {
        &self.inner.authority
    }

    /// Fixes the instance's capability snapshot; called once by the construction of a
    /// definition-backed dependent carrier, before the carrier is exposed.
    pub(crate) fn fix_reach(&self, snapshot: Arc<[OperationCapability]>) {
        let _ = self.inner.reach.set(snapshot);
    }

    /// The instance snapshot, when this carrier's reach is one.
    fn snapshot(&self) -> Option<&Arc<[OperationCapability]>> {
        self.inner.reach.get()
    }

    pub(crate) fn lifecycle(&self) -> &Lifecycle {
        &self.inner.lifecycle
    }

    /// The exact class.
    pub fn class(&self) -> CarrierClass {
        self.inner.class
    }

    /// The dtype of every slot.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The number of slots; 0 once released.
    pub fn size(&self) -> usize {
        if self.is_released() {
            0
        } else {
            self.body().size()
        }
    }

    /// The version: how many successful public writes this carrier has seen.
    pub fn version(&self) -> u64 {
        self.inner.version.load(Ordering::Acquire)
    }

    /// Whether [`release`](Carrier::release) has run.
    pub fn is_released(&self) -> bool {
        self.inner.lifecycle.is_released()
    }

    /// Whether another carrier owns this one.
    pub fn is_owned(&self) -> bool {
        self.inner.lifecycle.is_owned()
    }

    /// Whether a pending move claims this carrier (as its source or destination): writing,
    /// releasing or moving it is refused until the move's terminal outcome.
    pub fn is_claimed(&self) -> bool {
        self.inner.lifecycle.is_claimed()
    }

    /// Whether the carrier was created mutable (ownership aside).
    pub fn is_intrinsically_mutable(&self) -> bool {
        self.inner.intrinsically_mutable
    }

    /// Whether a write is allowed here and now: intrinsically mutable, and not owned unless
    /// this thread is inside the owner's access scope.
    pub fn is_mutable(&self) -> bool {
        let lifecycle = &self.inner.lifecycle;
        self.inner.intrinsically_mutable && (!lifecycle.is_owned() || lifecycle.owner_access_here())
    }

    /// Whether this class can store `dtype` (by identity); independent of state, also after
    /// release. A failing answer (a definition-backed class whose provider's `supports_dtype`
    /// errors or panics) is that error, never "not supported".
    pub fn supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        self.body().try_supports_storage_dtype(dtype)
    }

    /// Whether `self` and `other` are the same carrier.
    pub fn same_as(&self, other: &Carrier) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A process-unique identity of this carrier (for version tokens and diagnostics).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.inner).cast::<()>() as usize
    }

    /// How many handles to this carrier exist now, this one included: every clone, tensor,
    /// operation in flight and composing carrier holds one. A language binding whose object
    /// holds a handle asks it to know whether that handle is the last one (1), and so
    /// whether the carrier lives only as long as its object (for a garbage collector).
    ///
    /// ```
    /// use strideweave::carriers::Cpu;
    /// use strideweave::DType;
    /// let carrier = Cpu::carrier(2, DType::FLOAT32, true, false)?;
    /// assert_eq!(carrier.handle_count(), 1);
    /// let clone = carrier.clone();
    /// assert_eq!(carrier.handle_count(), 2);
    /// drop(clone);
    /// assert_eq!(carrier.handle_count(), 1);
    /// # Ok::<(), strideweave::Error>(())
    /// ```
    pub fn handle_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The definition-free implementation as its concrete type, for typed fast paths
    /// (kernels and bulk moves of that class).
    ///
    /// The type test compares the `TypeId` recorded when the body was wrapped, rather than
    /// asking the body through its vtable: for a tiny operation that call (whose 16-byte
    /// result comes back through memory) costs more than the arithmetic.
    #[inline]
    pub fn downcast_ref<T: DefinitionFreeCarrier>(&self) -> Option<&T> {
        if self.inner.body_type != TypeId::of::<T>() {
            return None;
        }
        let body: *const dyn ErasedCarrier = &self.inner.body;
        // SAFETY: `body_type` is `TypeId::of` the concrete type the body was wrapped as (both
        // constructors record it from their type parameter, and the body never changes), so
        // equal `TypeId`s mean the erased body is a `T`. Casting the trait-object pointer to
        // `*const T` keeps its data address, which points to that live `T` inside this
        // carrier's allocation; the reference borrows `self`, which keeps the allocation.
        Some(unsafe { &*body.cast::<T>() })
    }

    /// Fails unless the carrier is live (reading is allowed).
    pub(crate) fn check_live(&self, action: &str) -> Result<()> {
        if self.is_released() {
            return Err(Error::Released {
                class: self.class(),
                action: action.to_string(),
            });
        }
        Ok(())
    }

    /// Fails unless a write is allowed: live, not claimed by a pending move, mutable.
    pub(crate) fn check_writable(&self, action: &str) -> Result<()> {
        self.check_live(action)?;
        if self.inner.lifecycle.is_claimed() {
            return Err(Error::Runtime(format!(
                "cannot {action}: the {} carrier is claimed by a pending move, so it is not \
                 mutable until the move ends",
                self.class()
            )));
        }
        if !self.inner.intrinsically_mutable {
            return Err(Error::Runtime(format!(
                "cannot {action}: the {} carrier is immutable",
                self.class()
            )));
        }
        if !self.is_mutable() {
            return Err(Error::Runtime(format!(
                "cannot {action}: the {} carrier is owned by another carrier",
                self.class()
            )));
        }
        Ok(())
    }

    fn check_index(&self, index: usize) -> Result<()> {
        let size = self.body().size();
        if index >= size {
            return Err(Error::SlotOutOfRange {
                class: self.class(),
                index,
                size,
            });
        }
        Ok(())
    }

    /// The value at slot `index`. Runtime error once released, Index error out of range.
    pub fn get(&self, index: usize) -> Result<Value> {
        self.check_live("read a slot")?;
        self.check_index(index)?;
        self.body().read(index, self.inner.dtype)
    }

    /// The values at slots `indices`, in order, read in bulk (one lock where the class
    /// allows): the same checks and errors as [`get`](Carrier::get) for each slot, all made
    /// before the first read.
    pub(crate) fn get_all(&self, indices: &[usize]) -> Result<Vec<Value>> {
        self.check_readable_slots(indices)?;
        self.body().read_all(indices, self.inner.dtype)
    }

    /// The checks of [`get_all`](Carrier::get_all): live, and every slot in range.
    pub(super) fn check_readable_slots(&self, indices: &[usize]) -> Result<()> {
        self.check_live("read slots")?;
        indices
            .iter()
            .try_for_each(|&index| self.check_index(index))
    }

    /// Writes `value` (normalized to the dtype) at slot `index` and bumps the version by 1.
    ///
    /// Checks, in order: released (Runtime), claimed or not mutable (Runtime), range
    /// (Index), then normalization (Type or Overflow); the slot is untouched on failure.
    pub fn set(&self, index: usize, value: Value) -> Result<()> {
        self.check_writable("write a slot")?;
        self.check_index(index)?;
        let value = self.inner.dtype.normalize(value)?;
        crate::operation::provider_scope::note_slots(self, [index]);
        self.counted_write(|body, dtype| body.write(index, value, dtype))
    }

    /// Writes many already-checked slots at once (scatter); bumps the version by 1.
    pub(crate) fn write_all(&self, writes: &[(usize, Value)]) -> Result<()> {
        crate::operation::provider_scope::note_slots(self, writes.iter().map(|w| w.0));
        self.counted_write(|body, dtype| body.write_all(writes, dtype))
    }

    /// Runs one body write and moves the version by 1: after it succeeds, or as it starts
    /// for a class that counts writes from their transfer start (a failed block-device
    /// write may have changed bytes).
    pub(super) fn counted_write(
        &self,
        write: impl FnOnce(&dyn ErasedCarrier, DType) -> Result<()>,
    ) -> Result<()> {
        let at_start = self.body().movement().versions_at_transfer_start();
        if at_start {
            self.bump_version();
        }
        write(self.body(), self.inner.dtype)?;
        if !at_start {
            self.bump_version();
        }
        Ok(())
    }

    /// Moves the version by one (journaled while provider work runs on this thread).
    pub(crate) fn bump_version(&self) {
        self.inner.version.fetch_add(1, Ordering::AcqRel);
        crate::operation::provider_scope::note_version(self);
    }

    /// Sets the version after a kernel's declared in-place writes: `version` is one past
    /// the version before the call, however many writes the kernel made.
    pub(crate) fn publish_version(&self, version: u64) {
        self.inner.version.store(version, Ordering::Release);
    }

    /// Takes back one version step that failed provider work made.
    pub(crate) fn unbump_version(&self) {
        self.inner.version.fetch_sub(1, Ordering::AcqRel);
    }

    /// The value at an in-range slot, with no state check: what the journal of provider
    /// work records before a write.
    pub(crate) fn read_unchecked(&self, index: usize) -> Result<Value> {
        self.body().read(index, self.inner.dtype)
    }

    /// The values at in-range `indices`, read in bulk where the class can (one call of a
    /// definition-backed provider's `read_all`), with no state check: what the journal of
    /// provider work records before a write of many slots.
    pub(crate) fn read_all_unchecked(&self, indices: &[usize]) -> Result<Vec<Value>> {
        self.body().read_all(indices, self.inner.dtype)
    }

    pub(crate) fn supports_scatter(&self) -> bool {
        self.body().movement().supports_scatter()
    }

    pub(crate) fn check_scatter_source(
        &self,
        source: CarrierClass,
        source_dtype: DType,
    ) -> Result<()> {
        self.body()
            .movement()
            .check_scatter_source(source, source_dtype, self.inner.dtype)
    }

    pub(crate) fn grows_as_destination(&self) -> bool {
        self.body().movement().grows_as_destination()
    }

    pub(crate) fn set_extent(&self, slots: usize) -> Result<()> {
        self.body().movement().set_extent(slots, self.inner.dtype)
    }

    /// Releases the storage (idempotent; the version does not move).
    ///
    /// Fails when the carrier is owned (outside its owner's access) or claimed by a pending
    /// move; the owner releases it inside its access scope.
    pub fn release(&self) -> Result<()> {
        if self.is_released() {
            return Ok(());
        }
        let lifecycle = &self.inner.lifecycle;
        if lifecycle.is_claimed() {
            return Err(Error::Runtime(format!(
                "cannot release the {} carrier: it is claimed by a pending move and owned by it \
                 until the move completes",
                self.class()
            )));
        }
        if lifecycle.is_owned() && !lifecycle.owner_access_here() {
            return Err(Error::Runtime(format!(
                "cannot release the {} carrier directly: it is owned by another carrier",
                self.class()
            )));
        }
        self.release_once()
    }

    /// Releases a carrier claimed by the caller (a committing move), bypassing the claim
    /// check the public [`release`](Carrier::release) makes.
    pub(crate) fn release_claimed(&self) -> Result<()> {
        self.release_once()
    }

    /// The single release transition: the first caller marks the carrier released and
    /// releases the storage; when the storage refuses, the mark is undone so the carrier
    /// stays live and the error propagates with nothing changed.
    fn release_once(&self) -> Result<()> {
        let lifecycle = &self.inner.lifecycle;
        if lifecycle.mark_released() {
            if let Err(error) = self.body().release() {
                lifecycle.unmark_released();
                return Err(error);
            }
        }
        Ok(())
    }

    /// Writes one slot without bumping the version: moves fill a claimed destination and
    /// commit once. The caller has checked the range and normalized the value.
    pub(crate) fn write_unversioned(&self, index: usize, value: Value) -> Result<()> {
        self.body().write(index, value, self.inner.dtype)
    }

    /// Dispatches the operation `name` through this carrier's hook: a fresh [`Operation`]
    /// tagged with `name` and this exact class. NotImplemented when the class does not
    /// execute it; a Type error when the hook returns an operation already dispatched.
    ///
    /// A definition-backed carrier answers from its definition: a released carrier is a
    /// Runtime error ([`Error::Released`]); a storage-only class, or a kernel-backed class
    /// with no pattern for the operation, is `UnsupportedOperationPlan` with the reason; an
    /// unknown name is NotImplemented. A dependent carrier (one with an instance reach) whose
    /// reach holds no plan of `name` is `UnsupportedOperationPlan` too. Otherwise the operation is bound to the central
    /// definition of `name`, and its [`forward`](Operation::forward) runs what
    /// [`call`](crate::operation::call) runs for the class (its kernel execution set or its
    /// composite provider) with the pipeline's capability gate and result validation.
    pub fn dispatch_op(&self, name: &str) -> Result<Operation> {
        self.dispatch_operation(&Arc::from(name))
    }

    /// [`dispatch_op`](Carrier::dispatch_op) with the name already shared (a definition's),
    /// so tagging the operation copies nothing.
    pub(crate) fn dispatch_operation(&self, name: &Arc<str>) -> Result<Operation> {
        // A definition-backed carrier reports its release before its definition answers.
        if self.class().is_definition_backed() {
            self.check_live("dispatch an operation")?;
        }
        let operation = self.body().dispatch_op(name)?;
        // A dependent instance executes only what its frozen reach holds, whatever its hook
        // would build: dispatching outside it is refused as the capability gate refuses it.
        if let Some(reach) = self.snapshot() {
            if !reach.iter().any(|c| c.operation() == &**name) {
                return Err(Error::UnsupportedOperationPlan(
                    UnsupportedOperationPlan::new(
                        &**name,
                        [format!(
                            "{} declares no operation-plan capability for '{name}'",
                            self.class()
                        )],
                    ),
                ));
            }
        }
        operation.mark_dispatched(Arc::clone(name), self.class())
    }

    /// The capabilities this carrier executes: its instance snapshot when it has one
    /// (dependent carriers such as Evictable, and definition-backed dependent carriers, whose
    /// construction froze their composite provider's answer), otherwise its class's declaration. Reports
    /// reach, not state.
    pub fn capabilities(&self) -> Arc<[OperationCapability]> {
        self.snapshot()
            .cloned()
            .unwrap_or_else(|| capabilities_for_carrier_class(self.class()))
    }

    /// Whether this carrier executes `plan`.
    pub fn supports_operation_plan(&self, plan: &OperationPlan) -> bool {
        match self.snapshot() {
            Some(snapshot) => snapshot.iter().any(|c| c.matches(plan)),
            None => supports_operation_plan(self.class(), plan),
        }
    }

    /// The capability authorizing `plan` on this carrier, if any.
    pub fn matching_capability(&self, plan: &OperationPlan) -> Option<OperationCapability> {
        match self.snapshot() {
            Some(snapshot) => snapshot.iter().find(|c| c.matches(plan)).cloned(),
            None => matching_capability(self.class(), plan),
        }
    }

    /// Why this carrier cannot execute `plan`, or `None` when it can.
    pub fn unsupported_plan_reason(&self, plan: &OperationPlan) -> Option<String> {
        match self.snapshot() {
            Some(snapshot) => (!snapshot.iter().any(|c| c.matches(plan)))
                .then(|| missing_plan_reason(self.class(), snapshot, plan)),
            None => unsupported_plan_reason(self.class(), plan),
        }
    }

    /// The dispatch gate: `UnsupportedOperationPlan` unless this carrier executes `plan`.
    /// The instance snapshot decides when there is one; otherwise the class-level fast path.
    #[inline]
    pub(crate) fn check_capability(&self, plan: &OperationPlan) -> Result<()> {
        let Some(snapshot) = self.snapshot() else {
            return check_capability(self.class(), plan);
        };
        if snapshot.iter().any(|c| c.matches(plan)) {
            return Ok(());
        }
        Err(Error::UnsupportedOperationPlan(
            UnsupportedOperationPlan::new(
                plan.operation(),
                Some(missing_plan_reason(self.class(), snapshot, plan)),
            ),
        ))
    }

    /// Takes ownership of this carrier on behalf of another (Evictable and its kin).
    pub fn claim_ownership(&self) -> Result<OwnershipToken> {
        OwnershipToken::claim(self)
    }

    fn resolve_dtype(&self, dtype: Option<DType>) -> Result<DType> {
        let dtype = dtype.unwrap_or(self.inner.dtype);
        if !self.supports_storage_dtype(dtype)? {
            return Err(Error::UnstorableDtype {
                class: self.class(),
                dtype,
            });
        }
        Ok(dtype)
    }

    /// A fresh carrier of the same exact class holding `values` (normalized to the dtype,
    /// which defaults to this carrier's). Works on a released carrier too.
    pub fn new_like(
        &self,
        values: &[Value],
        mutable: bool,
        dtype: Option<DType>,
    ) -> Result<Carrier> {
        let dtype = self.resolve_dtype(dtype)?;
        let normalized = values
            .iter()
            .map(|v| dtype.normalize(*v))
            .collect::<Result<Vec<_>>>()?;
        self.body().new_like(&normalized, dtype, mutable)
    }

    /// A fresh carrier of the same exact class with `size` slots, zeroed unless `empty`
    /// (the dtype defaults to this carrier's). Works on a released carrier too.
    pub fn allocate_like(
        &self,
        size: usize,
        mutable: bool,
        dtype: Option<DType>,
        empty: bool,
    ) -> Result<Carrier> {
        let dtype = self.resolve_dtype(dtype)?;
        // The factory returns the implementing type itself, so the exact class is kept.
        self.body().allocate_like(size, dtype, empty, mutable)
    }
}

impl fmt::Debug for Carrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Carrier")
            .field("class", &self.class())
            .field("dtype", &self.dtype())
            .field("size", &self.size())
            .field("version", &self.version())
            .field("released", &self.is_released())
            .finish()
    }
}
