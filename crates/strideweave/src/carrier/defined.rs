//! The definition-backed carrier body: provider-owned state driven by the sealed
//! `CarrierDefinition` of its exact class, and `Carrier::create`.

use std::any::{Any, TypeId};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::carrier::class::CarrierClass;
use crate::carrier::definition_free::ErasedCarrier;
use crate::carrier::Carrier;
use crate::carriers::extension::{
    carrier_definition, freeze_execution_set, CarrierDefinition, CarrierFacet, CompositeProvider,
    ErasedState, ExecutionSet,
};
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::operation::{Operation, OperationCapability};

/// A definition-backed body. The handle checks liveness, mutability and index range before
/// calling in; this body checks the state type and validates every provider answer.
pub(crate) struct DefinedBody {
    class: CarrierClass,
    definition: CarrierDefinition,
    /// The extent `allocate` established and `physical_size` confirmed.
    extent: usize,
    state: RwLock<ErasedState>,
    /// The frozen execution set of a kernel-backed definition (`None` when storage-only).
    kernels: Option<Arc<ExecutionSet>>,
    /// The frozen capability snapshot of a dependent (composite) instance, set once by its
    /// construction before the instance is exposed.
    capabilities: OnceLock<Arc<[OperationCapability]>>,
}

impl Carrier {
    /// A carrier of the definition-backed `class` whose provider-owned state starts as `state`:
    /// the provider's `supports_dtype` (false → Value), `allocate(slots)`, then
    /// `physical_size`, which must equal `slots` (negative → Value; another size → a
    /// ProviderContract error naming the provider; either way the provider's `release` runs
    /// once on the state, best effort). Nothing is returned on failure.
    ///
    /// `release` on the returned carrier calls the provider's `release` exactly once. The
    /// factories (`new_like`, `allocate_like`) clone this carrier's state (the provider's
    /// `S: Clone`) and `allocate` the clone.
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
        let definition = carrier_definition(class).ok_or_else(|| {
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
        DefinedBody::construct(class, definition, Box::new(state), slots, dtype, mutable)
    }

    /// Calls `read` with this definition-backed carrier's provider-owned state (for example
    /// the dependency carriers a composite provider composes).
    ///
    /// The state is read-locked while `read` runs: it must not write this carrier. Type
    /// errors: a definition-free carrier, or `S` is not the provider's state type.
    pub fn with_provider_state<S: 'static, R>(&self, read: impl FnOnce(&S) -> R) -> Result<R> {
        let body = self.defined_body().ok_or_else(|| {
            Error::Type(format!(
                "the {} carrier is definition-free: it has no provider state",
                self.class()
            ))
        })?;
        let state = body.state();
        let typed = (**state).downcast_ref::<S>().ok_or_else(|| {
            Error::Type(format!(
                "the storage provider of {} keeps {} state, not {}",
                self.class(),
                body.definition.storage().state_type_name(),
                std::any::type_name::<S>()
            ))
        })?;
        Ok(read(typed))
    }

    fn defined_body(&self) -> Option<&DefinedBody> {
        self.body().as_any().downcast_ref::<DefinedBody>()
    }

    /// The composite provider of this carrier's definition, when its class is a
    /// definition-backed dependent class.
    pub(crate) fn composite_provider(&self) -> Option<&CompositeProvider> {
        self.defined_body()?.definition.composite()
    }
}

impl DefinedBody {
    fn construct(
        class: CarrierClass,
        definition: CarrierDefinition,
        mut state: ErasedState,
        slots: usize,
        dtype: DType,
        mutable: bool,
    ) -> Result<Carrier> {
        let storage = definition.storage();
        if !storage.call_supports_dtype(class, state.as_ref(), dtype)? {
            return Err(Error::UnstorableDtype { class, dtype });
        }
        storage.call_allocate(class, state.as_mut(), slots, dtype)?;
        let checked = storage
            .call_physical_size(class, state.as_ref())
            .and_then(|size| {
                if size == slots {
                    return Ok(());
                }
                Err(Error::ProviderContract(format!(
                    "the storage provider of {class} ({}) allocated {slots} slots but reports a \
                     physical_size of {size}",
                    storage.state_type_name()
                )))
            });
        if let Err(error) = checked {
            // No carrier exists: hand the allocated storage back (best effort) and report
            // the contract failure.
            let _ = storage.call_release(class, state.as_mut());
            return Err(error);
        }
        // The construction can no longer be refused by the storage provider: it observes the
        // class, and a kernel-backed definition freezes its provider's patterns and the
        // registered packs as one execution set. (A refused construction freezes nothing: a
        // pack may still be registered after it.)
        let kernels = definition
            .kernels()
            .map(|provider| freeze_execution_set(class, provider));
        let body = DefinedBody {
            class,
            definition,
            extent: slots,
            state: RwLock::new(state),
            kernels,
            capabilities: OnceLock::new(),
        };
        let carrier = Carrier::from_erased_body(body, class, dtype, mutable);
        let Some(composite) = carrier.composite_provider() else {
            return Ok(carrier);
        };
        // A dependent class: the complete capabilities of this exact instance, obtained
        // once before it is exposed.
        match composite.instance_capabilities(&carrier) {
            Ok(snapshot) => {
                if let Some(body) = carrier.defined_body() {
                    let _ = body.capabilities.set(snapshot);
                }
                Ok(carrier)
            }
            Err(error) => {
                let _ = carrier.release();
                Err(error)
            }
        }
    }

    fn state(&self) -> RwLockReadGuard<'_, ErasedState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn state_mut(&self) -> RwLockWriteGuard<'_, ErasedState> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh carrier of this class with `slots` slots: cloned state, then `allocate`.
    fn fresh(&self, slots: usize, dtype: DType, mutable: bool) -> Result<Carrier> {
        let state = self
            .definition
            .storage()
            .call_fresh(self.class, self.state().as_ref())?;
        DefinedBody::construct(
            self.class,
            self.definition.clone(),
            state,
            slots,
            dtype,
            mutable,
        )
    }
}

impl ErasedCarrier for DefinedBody {
    /// The provider's answer; a provider failure answers false.
    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        self.definition
            .storage()
            .call_supports_dtype(self.class, self.state().as_ref(), dtype)
            .unwrap_or(false)
    }

    fn size(&self) -> usize {
        self.extent
    }

    fn read(&self, index: usize, dtype: DType) -> Result<Value> {
        self.definition
            .storage()
            .call_read(self.class, self.state().as_ref(), index, dtype)
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.definition
            .storage()
            .call_write(self.class, self.state_mut().as_mut(), index, value)
    }

    /// All or nothing: on a failing write the slots already written get their previous
    /// values back (best effort) and the error is reported.
    fn write_all(&self, writes: &[(usize, Value)], dtype: DType) -> Result<()> {
        let storage = self.definition.storage();
        let mut state = self.state_mut();
        let previous = writes
            .iter()
            .map(|&(index, _)| storage.call_read(self.class, state.as_ref(), index, dtype))
            .collect::<Result<Vec<_>>>()?;
        for (done, &(index, value)) in writes.iter().enumerate() {
            if let Err(error) = storage.call_write(self.class, state.as_mut(), index, value) {
                for (&(index, _), old) in writes.iter().zip(&previous).take(done).rev() {
                    let _ = storage.call_write(self.class, state.as_mut(), index, *old);
                }
                return Err(error);
            }
        }
        Ok(())
    }

    fn release(&self) -> Result<()> {
        self.definition
            .storage()
            .call_release(self.class, self.state_mut().as_mut())
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
        if let (false, Some(zero)) = (empty, dtype.zero()) {
            for index in 0..size {
                carrier.write_unversioned(index, zero)?;
            }
        }
        Ok(carrier)
    }

    fn grows_as_destination(&self) -> bool {
        false
    }

    fn set_extent(&self, _slots: usize, _dtype: DType) -> Result<()> {
        Err(Error::NotImplemented(format!(
            "{} carriers do not grow as move destinations",
            self.class
        )))
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

    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        if self.definition.composite().is_some() {
            return Err(Error::NotImplemented(format!(
                "{} executes '{name}' through its composite provider, not a dispatched operation",
                self.class
            )));
        }
        if self.kernels.is_some() {
            return Err(Error::NotImplemented(format!(
                "{} executes '{name}' through its kernel patterns, not a dispatched operation",
                self.class
            )));
        }
        Err(Error::NotImplemented(format!(
            "{} is a storage-only definition-backed carrier class: it dispatches no operation \
             '{name}'",
            self.class
        )))
    }

    fn instance_capabilities(&self) -> Option<Arc<[OperationCapability]>> {
        self.capabilities.get().cloned()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn facets(&self) -> &[Arc<dyn CarrierFacet>] {
        self.definition.facets()
    }

    fn kernels(&self) -> Option<&Arc<ExecutionSet>> {
        self.kernels.as_ref()
    }
}
