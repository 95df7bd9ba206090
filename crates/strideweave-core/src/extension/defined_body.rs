//! The definition-backed carrier body: provider-owned state driven by the sealed
//! `CarrierDefinition` of its exact class, and `Carrier::create`.

use std::any::{Any, TypeId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::carrier::Carrier;
use crate::carrier::CarrierClass;
use crate::carrier::{ErasedCarrier, MovementHooks};
use crate::dtype::{DType, Value};
use crate::error::{Error, Result, UnsupportedOperationPlan};
use crate::extension::state_lock::{ExclusiveState, SharedState, StateLock};
use crate::extension::{
    carrier_definition, freeze_execution_set, registered_definition, AllocationContents,
    CarrierDefinition, CarrierFacet, CompositeProvider, FreshRequest,
};
use crate::operation::dispatch::Outputs;
use crate::operation::{
    operation_definition, Authority, Operand, Operation, OperationDefinition, ResolvedInvocation,
};
use crate::tensor::Tensor;

/// A definition-backed body holding its provider's state `S` inline. The handle checks
/// liveness, mutability and index range before calling in; this body validates every
/// provider answer.
pub(crate) struct DefinedBody<S> {
    class: CarrierClass,
    definition: &'static CarrierDefinition,
    /// The extent `allocate` established and `physical_size` confirmed (it changes only when
    /// an empty carrier grows as a move destination).
    extent: AtomicUsize,
    state: StateLock<S>,
}

impl Carrier {
    /// A carrier of the definition-backed `class` whose provider-owned state starts as `state`:
    /// the provider's `supports_dtype` (false → Value), `allocate(slots)`, then
    /// `physical_size`, which must equal `slots` (negative → Value; another size → a
    /// ProviderContract error naming the provider; either way the provider's `release` runs
    /// once on the state, best effort). Nothing is returned on failure.
    ///
    /// `release` on the returned carrier calls the provider's `release` exactly once. The
    /// factories (`new_like`, `allocate_like`) never copy this carrier's state: they build
    /// fresh state (`S::default()`, or the provider's `fresh` callback given this state; see
    /// [`StorageProvider`](crate::extension::StorageProvider)) and `allocate` it.
    ///
    /// A dependent class (a definition with a [`CompositeProvider`]) then calls the provider's
    /// `capabilities` once on the constructed carrier; a duplicate capability is a Value
    /// error, other failures propagate. The answer is sorted and frozen as this instance's
    /// snapshot (what [`capabilities`](Carrier::capabilities) reports and the dispatch gate
    /// consults); two instances may derive different reach from different dependencies. On
    /// failure the carrier is released (the provider's `release` runs once, best effort) and
    /// no instance is returned.
    ///
    /// Type errors: `class` has no carrier definition (a definition-free class is constructed
    /// with [`Carrier::new`]), or `S` is not the provider's state type.
    pub fn create<S: Send + Sync + 'static>(
        class: CarrierClass,
        state: S,
        slots: usize,
        dtype: DType,
        mutable: bool,
    ) -> Result<Carrier> {
        let definition = registered_definition(class).ok_or_else(|| {
            Error::Type(format!(
                "{class} has no carrier definition; construct a definition-free carrier with \
                 Carrier::new"
            ))
        })?;
        let storage = definition.storage();
        if storage.state_type() != TypeId::of::<S>() {
            return Err(Error::Type(format!(
                "the storage provider of {class} keeps {} state, not {}",
                storage.state_type_name(),
                std::any::type_name::<S>()
            )));
        }
        DefinedBody::construct(class, definition, state, slots, dtype, mutable)
    }

    /// Calls `read` with this definition-backed carrier's provider-owned state (for example
    /// the dependency carriers a composite provider composes).
    ///
    /// The state is read-locked while `read` runs: it must not write this carrier. Type
    /// errors: a definition-free carrier, or `S` is not the provider's state type.
    pub fn with_provider_state<S: 'static, R>(&self, read: impl FnOnce(&S) -> R) -> Result<R> {
        let Some(body) = self.defined_body::<S>() else {
            let class = self.class();
            return Err(Error::Type(match carrier_definition(class) {
                Some(definition) => format!(
                    "the storage provider of {class} keeps {} state, not {}",
                    definition.storage().state_type_name(),
                    std::any::type_name::<S>()
                ),
                None => format!("the {class} carrier is definition-free: it has no provider state"),
            }));
        };
        let state = body.state.read(body.class)?;
        Ok(read(state.typed()))
    }

    /// This carrier's body, when it is definition-backed with provider state `S`.
    fn defined_body<S: 'static>(&self) -> Option<&DefinedBody<S>> {
        self.body().as_any().downcast_ref::<DefinedBody<S>>()
    }

    /// The composite provider of this carrier's definition, when its class is a
    /// definition-backed dependent class.
    pub(crate) fn composite_provider(&self) -> Option<&CompositeProvider> {
        match self.authority() {
            Authority::Composite(composite) => Some(composite),
            _ => None,
        }
    }
}

impl<S: Send + Sync + 'static> DefinedBody<S> {
    fn construct(
        class: CarrierClass,
        definition: &'static CarrierDefinition,
        mut state: S,
        slots: usize,
        dtype: DType,
        mutable: bool,
    ) -> Result<Carrier> {
        let storage = definition.storage();
        if !storage.call_supports_dtype(class, &state, dtype)? {
            return Err(Error::UnstorableDtype { class, dtype });
        }
        storage.call_allocate(class, &mut state, slots, dtype)?;
        let checked = storage.call_physical_size(class, &state).and_then(|size| {
            if size == slots {
                return Ok(());
            }
            Err(Error::ProviderContract(format!(
                "the storage provider of {class} was asked to allocate {slots} slots but its \
                 physical_size reports {size}"
            )))
        });
        if let Err(error) = checked {
            // No carrier exists: hand the allocated storage back (best effort) and report
            // the contract failure.
            let _ = storage.call_release(class, &mut state);
            return Err(error);
        }
        // The construction can no longer be refused by the storage provider: it observes the
        // class, and a kernel-backed definition freezes its provider's patterns and the
        // registered packs as one execution set. (A refused construction freezes nothing: a
        // pack may still be registered after it.)
        let kernels = definition
            .kernels()
            .map(|provider| freeze_execution_set(class, provider));
        let definition_composite = definition.composite().cloned();
        let body = DefinedBody {
            class,
            definition,
            extent: AtomicUsize::new(slots),
            state: StateLock::new(state),
        };
        let authority = match (kernels, definition_composite) {
            (Some(set), _) => Authority::Kernels(set),
            (None, Some(composite)) => Authority::Composite(composite),
            (None, None) => Authority::StorageOnly,
        };
        let carrier = Carrier::from_erased_body(body, class, authority, dtype, mutable);
        let Some(composite) = carrier.composite_provider() else {
            return Ok(carrier);
        };
        // A dependent class: the complete capabilities of this exact instance, obtained
        // once before it is exposed.
        match composite.instance_capabilities(&carrier) {
            Ok(snapshot) => {
                carrier.fix_reach(snapshot);
                Ok(carrier)
            }
            Err(error) => {
                let _ = carrier.release();
                Err(error)
            }
        }
    }

    fn state(&self) -> Result<SharedState<'_, S>> {
        self.state.read(self.class)
    }

    fn state_mut(&self) -> Result<ExclusiveState<'_, S>> {
        self.state.write(self.class)
    }

    /// A fresh carrier of this class with `slots` slots: fresh state built by the provider
    /// (never a copy of this carrier's), then `allocate`.
    fn fresh(&self, slots: usize, dtype: DType, mutable: bool) -> Result<Carrier> {
        let fresh = self.definition.storage().call_fresh(
            self.class,
            &*self.state()?,
            FreshRequest::new(slots, dtype, mutable),
        )?;
        let state = *fresh.downcast::<S>().map_err(|_| {
            Error::ProviderContract(format!(
                "the storage provider of {} built fresh state that is not its {} state",
                self.class,
                std::any::type_name::<S>()
            ))
        })?;
        DefinedBody::construct(self.class, self.definition, state, slots, dtype, mutable)
    }
}

impl<S: Send + Sync + 'static> DefinedBody<S> {
    /// The dispatch hook of a definition-backed class, checked in this order (after
    /// liveness, which the handle checks):
    ///
    /// 1. a storage-only class executes nothing: `UnsupportedOperationPlan` saying so;
    /// 2. an unknown operation name: NotImplemented;
    /// 3. a kernel-backed class none of whose frozen patterns executes the operation:
    ///    `UnsupportedOperationPlan` naming the class and the operation.
    ///
    /// Otherwise a fresh [`Operation`] (the handle tags it with `name` and the exact class)
    /// whose forward is [`forward_defined`]. A dependent class's reach is per instance, so
    /// its plans are gated when the forward runs, on the executing instance.
    fn dispatch(&self, name: &str) -> Result<Operation> {
        let class = self.class;
        let kernels = self
            .definition
            .kernels()
            .map(|provider| freeze_execution_set(class, provider));
        if kernels.is_none() && self.definition.composite().is_none() {
            return Err(Error::UnsupportedOperationPlan(
                UnsupportedOperationPlan::new(
                    name,
                    [format!(
                        "{class} is a storage-only definition-backed carrier class: it \
                         executes no operation"
                    )],
                ),
            ));
        }
        let definition = operation_definition(name).map_err(|_| {
            Error::NotImplemented(format!(
                "{class} dispatches no operation '{name}': no operation of that name is defined"
            ))
        })?;
        if let Some(kernels) = &kernels {
            let name = definition.name();
            if !kernels.capabilities().iter().any(|c| c.operation() == name) {
                return Err(Error::UnsupportedOperationPlan(
                    UnsupportedOperationPlan::new(
                        name,
                        [format!("{class} has no kernel pattern for '{name}'")],
                    ),
                ));
            }
        }
        Ok(Operation::new(move |invocation| {
            forward_defined(class, definition, invocation)
        }))
    }
}

/// The forward of an operation dispatched by a definition-backed `class`: the path
/// [`OperationDefinition::call`] takes for that class, with the same checks.
///
/// 1. The invocation must be of the dispatched operation (Type otherwise).
/// 2. Its first tensor operand's carrier executes, and every tensor operand must be on
///    exactly `class` (Type, "Tensor backing carriers must match").
/// 3. The pipeline's own gate, execution and publication check
///    ([`OperationDefinition::run_resolved`]). Nothing is recorded for autograd: recording is
///    the pipeline's, after its own validation.
fn forward_defined(
    class: CarrierClass,
    definition: OperationDefinition,
    invocation: &ResolvedInvocation,
) -> Result<Vec<Tensor>> {
    let name = definition.name();
    let call = invocation.call();
    if !call.definition().same_as(&definition) {
        return Err(Error::Type(format!(
            "an operation dispatched as '{name}' by {class} cannot run a '{}' invocation",
            call.definition().name()
        )));
    }
    let mut tensors = call.operands().iter().filter_map(Operand::as_tensor);
    let Some(first) = tensors.next() else {
        return Err(Error::Type(format!(
            "'{name}' needs at least one tensor operand"
        )));
    };
    if let Some(other) = std::iter::once(first)
        .chain(tensors)
        .find(|t| t.carrier().class() != class)
    {
        return Err(Error::Type(format!(
            "Tensor backing carriers must match: '{name}' was dispatched by {class} and got a \
             {} operand",
            other.carrier().class()
        )));
    }
    definition
        .run_resolved(first.carrier(), invocation)
        .map(Outputs::into_vec)
}

impl<S: Send + Sync + 'static> ErasedCarrier for DefinedBody<S> {
    /// The provider's answer. A failing provider has no answer, and a failure must never
    /// read as "not supported": this panics with the provider's error. Every framework path
    /// asks [`try_supports_storage_dtype`](ErasedCarrier::try_supports_storage_dtype)
    /// instead, which propagates it.
    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        self.definition
            .storage()
            .call_supports_dtype(self.class, &*self.state()?, dtype)
    }

    fn size(&self) -> usize {
        self.extent.load(Ordering::Acquire)
    }

    fn read(&self, index: usize, dtype: DType) -> Result<Value> {
        self.definition
            .storage()
            .call_read(self.class, &*self.state()?, index, dtype)
    }

    /// The provider's `read_all` when it has one (one call for every slot), else `read`
    /// per slot.
    fn read_all(&self, indices: &[usize], dtype: DType) -> Result<Vec<Value>> {
        self.definition
            .storage()
            .call_read_all(self.class, &*self.state()?, indices, dtype)
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.definition
            .storage()
            .call_write(self.class, &mut *self.state_mut()?, index, value)
    }

    /// All or nothing: on a failing write the slots already written get their previous
    /// values back (best effort) and the error is reported.
    fn write_all(&self, writes: &[(usize, Value)], dtype: DType) -> Result<()> {
        let storage = self.definition.storage();
        let mut state = self.state_mut()?;
        let indices: Vec<usize> = writes.iter().map(|&(index, _)| index).collect();
        let previous = storage.call_read_all(self.class, &*state, &indices, dtype)?;
        for (done, &(index, value)) in writes.iter().enumerate() {
            if let Err(error) = storage.call_write(self.class, &mut *state, index, value) {
                for (&(index, _), old) in writes.iter().zip(&previous).take(done).rev() {
                    let _ = storage.call_write(self.class, &mut *state, index, *old);
                }
                return Err(error);
            }
        }
        Ok(())
    }

    /// The provider's slot copy, for a source of this same class (the carrier itself
    /// included): `None` — the framework copies slot by slot — when the provider has none,
    /// declines, or the source is of another class.
    fn copy_slots_from(
        &self,
        source: &Carrier,
        sources: &[usize],
        targets: &[usize],
    ) -> Option<Result<()>> {
        let storage = self.definition.storage();
        if !storage.copies_slots() {
            return None;
        }
        let from = source
            .defined_body::<S>()
            .filter(|from| from.class == self.class)?;
        match storage.call_slot_copy(
            self.class,
            || from.state(),
            || self.state(),
            sources,
            targets,
        ) {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(error) => Some(Err(error)),
        }
    }

    fn release(&self) -> Result<()> {
        self.definition
            .storage()
            .call_release(self.class, &mut *self.state_mut()?)
    }

    fn new_like(&self, values: &[Value], dtype: DType, mutable: bool) -> Result<Carrier> {
        let carrier = self.fresh(values.len(), dtype, mutable)?;
        for (index, value) in values.iter().enumerate() {
            carrier.write_unversioned(index, *value)?;
        }
        Ok(carrier)
    }

    fn allocate_like(
        &self,
        size: usize,
        dtype: DType,
        empty: bool,
        mutable: bool,
    ) -> Result<Carrier> {
        let carrier = self.fresh(size, dtype, mutable)?;
        let storage = self.definition.storage();
        if storage.sets_allocation_contents() {
            // The provider establishes the fresh contents itself (zeroed or unspecified).
            let contents = AllocationContents::from_empty(empty);
            let set = carrier.defined_body::<S>().map_or(Ok(()), |body| {
                storage.call_allocation_contents(self.class, &mut *body.state_mut()?, contents)
            });
            if let Err(error) = set {
                let _ = carrier.release();
                return Err(error);
            }
            return Ok(carrier);
        }
        if let (false, Some(zero)) = (empty, dtype.zero()) {
            for index in 0..size {
                carrier.write_unversioned(index, zero)?;
            }
        }
        Ok(carrier)
    }

    /// The definition's hook: [`Carrier::dispatch_op`] has checked liveness first.
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        self.dispatch(name)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn movement(&self) -> &dyn MovementHooks {
        self
    }

    fn facets(&self) -> &[Arc<dyn CarrierFacet>] {
        self.definition.facets()
    }
}

impl<S: Send + Sync + 'static> MovementHooks for DefinedBody<S> {
    /// An empty definition-backed carrier grows to a moved tensor's cosize, as FileBacked
    /// does: the provider's `allocate` establishes the new extent.
    fn grows_as_destination(&self) -> bool {
        true
    }

    /// `allocate(slots)` on this carrier's state, then `physical_size`, which must equal
    /// `slots` (a ProviderContract error naming the provider otherwise; the extent is unchanged
    /// on any failure).
    fn set_extent(&self, slots: usize, dtype: DType) -> Result<()> {
        let storage = self.definition.storage();
        let mut state = self.state_mut()?;
        storage.call_allocate(self.class, &mut *state, slots, dtype)?;
        let size = storage.call_physical_size(self.class, &*state)?;
        if size != slots {
            return Err(Error::ProviderContract(format!(
                "the storage provider of {} was asked to allocate {slots} slots but its \
                 physical_size reports {size}",
                self.class
            )));
        }
        self.extent.store(slots, Ordering::Release);
        Ok(())
    }

    fn supports_scatter(&self) -> bool {
        true
    }

    fn check_scatter_source(
        &self,
        _source: CarrierClass,
        _source_dtype: DType,
        _dtype: DType,
    ) -> Result<()> {
        Ok(())
    }

    fn versions_at_transfer_start(&self) -> bool {
        false
    }
}
