//! `Evictable`: a definition-free dependent carrier over a primary and a secondary tier
//! (docs/tiers.md, Evictable).
//!
//! Invariants:
//! 1. The Evictable owns both tiers (two [`OwnershipToken`]s) from construction until it is
//!    dropped; aliases of a tier can read it but never write it.
//! 2. Size, dtype, mutability and the capability snapshot are fixed at construction.
//! 3. Element access, scatter and dispatch need the promoted state.
//! 4. Transitions (`evict`, `promote`) are failure-atomic, retryable and never move the
//!    Evictable's version; a write through the Evictable moves it by exactly 1.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::autograd::no_grad;
use crate::carrier::check_tier_pair;
use crate::carrier::{
    Carrier, CarrierClass, ClassKind, ClassOrigin, DefinitionFreeCarrier, OwnershipToken,
};
use crate::carriers::BlockDeviceCarrier;
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::movement::move_to_scratch;
use crate::operation::{
    operation_definition, Operand, Operation, OperationCapability, ResolvedInvocation,
};
use crate::tensor::Tensor;
use crate::Layout;

/// The tiers and residency of an Evictable.
struct Tiers {
    primary: OwnershipToken,
    secondary: OwnershipToken,
    evicted: bool,
    released: bool,
}

/// A carrier whose slots live in a primary tier and can be evicted to a secondary tier and
/// promoted back.
///
/// ```
/// use strideweave::carriers::{Evictable, Generic};
/// use strideweave::{DType, Value};
/// let primary = Generic::carrier(&[1.0.into(), 2.0.into()], DType::FLOAT32, true)?;
/// let secondary = Generic::carrier(&[], DType::FLOAT32, true)?;
/// let carrier = Evictable::carrier(&primary, &secondary)?;
/// Evictable::evict(&carrier)?;
/// assert!(carrier.get(0).is_err());
/// Evictable::promote(&carrier)?;
/// assert_eq!(carrier.get(1)?, Value::Float(2.0));
/// # Ok::<(), strideweave::Error>(())
/// ```
pub struct Evictable {
    size: usize,
    primary_class: CarrierClass,
    secondary_class: CarrierClass,
    snapshot: Arc<[OperationCapability]>,
    tiers: Mutex<Tiers>,
}

impl Evictable {
    /// A promoted Evictable owning `primary` and `secondary`.
    ///
    /// Checks, in order: the same carrier twice (Value); a released tier (Runtime); an owned
    /// tier (Runtime); different dtypes (Type); an immutable secondary (Runtime); an empty
    /// primary (Value); a tier no move can reach, a BlockDeviceCarrier (Type). Then both
    /// tiers are claimed (a failed claim gives back the first) and the capability snapshot
    /// is frozen: the primary's capabilities whose output dtype both tiers store. The size
    /// and dtype are the primary's; the mutability is the primary's.
    pub fn carrier(primary: &Carrier, secondary: &Carrier) -> Result<Carrier> {
        check_tier_pair(primary, secondary, "an Evictable")?;
        if primary.size() == 0 {
            return Err(Error::Value(format!(
                "the primary {} tier of an Evictable is empty",
                primary.class()
            )));
        }
        check_move_route(primary.class(), secondary.class())?;
        check_move_route(secondary.class(), primary.class())?;
        let snapshot = snapshot(primary, secondary)?;
        let body = Evictable::assemble(primary, secondary, snapshot)?;
        Carrier::new(body, primary.dtype(), primary.is_intrinsically_mutable())
    }

    /// Claims both tiers (rolling back on failure) and builds the body.
    fn assemble(
        primary: &Carrier,
        secondary: &Carrier,
        snapshot: Arc<[OperationCapability]>,
    ) -> Result<Evictable> {
        let primary_token = primary.claim_ownership()?;
        // A failed second claim drops the first token, which gives the primary back.
        let secondary_token = secondary.claim_ownership()?;
        Ok(Evictable {
            size: primary.size(),
            primary_class: primary.class(),
            secondary_class: secondary.class(),
            snapshot,
            tiers: Mutex::new(Tiers {
                primary: primary_token,
                secondary: secondary_token,
                evicted: false,
                released: false,
            }),
        })
    }

    fn of(carrier: &Carrier) -> Result<&Evictable> {
        carrier.downcast_ref::<Evictable>().ok_or_else(|| {
            Error::Type(format!(
                "expected an Evictable carrier, got {}",
                carrier.class()
            ))
        })
    }

    fn tiers(&self) -> MutexGuard<'_, Tiers> {
        self.tiers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live promoted tiers, or Runtime while evicted.
    fn promoted(&self, action: &str) -> Result<MutexGuard<'_, Tiers>> {
        let tiers = self.tiers();
        if tiers.evicted {
            return Err(Error::Runtime(format!(
                "cannot {action}: the Evictable is evicted; call promote() first"
            )));
        }
        Ok(tiers)
    }

    /// Checks that a transition may run on `carrier`: an Evictable, live, and not owned by
    /// another carrier unless inside its access scope.
    fn transition_target<'a>(carrier: &'a Carrier, action: &str) -> Result<&'a Evictable> {
        let body = Evictable::of(carrier)?;
        if carrier.is_released() {
            return Err(Error::Runtime(format!(
                "cannot {action} a released Evictable"
            )));
        }
        if carrier.is_owned() && !carrier.lifecycle().owner_access_here() {
            return Err(Error::Runtime(format!(
                "cannot {action} an Evictable owned by another carrier outside its access scope"
            )));
        }
        Ok(body)
    }

    /// Moves the primary's slots to the secondary tier (a no-op when already evicted).
    ///
    /// The destination is the secondary when it is live and big enough, otherwise a fresh
    /// `secondary.allocate_like(size)` that replaces (and releases) it. Runtime for a
    /// released Evictable or one owned by another carrier outside its access; on any failure
    /// nothing changes and the call can be retried.
    pub fn evict(carrier: &Carrier) -> Result<()> {
        Evictable::transition_target(carrier, "evict")?.evict_now()
    }

    /// Moves the slots back into fresh primary storage (a no-op when already promoted);
    /// the mirror of [`evict`](Evictable::evict).
    pub fn promote(carrier: &Carrier) -> Result<()> {
        Evictable::transition_target(carrier, "promote")?.promote_now()
    }

    /// Whether the Evictable `carrier` is evicted (Type for another class, Runtime once
    /// released: a released hierarchy is neither evicted nor promoted).
    pub fn is_evicted(carrier: &Carrier) -> Result<bool> {
        let evictable = Evictable::of(carrier)?;
        carrier.check_live("ask whether an Evictable is evicted")?;
        Ok(evictable.tiers().evicted)
    }

    /// The live primary tier of the Evictable `carrier` (transitions may replace it).
    pub fn primary(carrier: &Carrier) -> Result<Carrier> {
        Ok(Evictable::of(carrier)?.tiers().primary.carrier().clone())
    }

    /// The live secondary tier of the Evictable `carrier` (transitions may replace it).
    pub fn secondary(carrier: &Carrier) -> Result<Carrier> {
        Ok(Evictable::of(carrier)?.tiers().secondary.carrier().clone())
    }

    pub(crate) fn evict_now(&self) -> Result<()> {
        let mut tiers = self.tiers();
        if tiers.released {
            return Err(Error::Runtime("cannot evict a released Evictable".into()));
        }
        if tiers.evicted {
            return Ok(());
        }
        let secondary = tiers.secondary.carrier().clone();
        let reuse = !secondary.is_released() && secondary.size() >= self.size;
        let fresh = if reuse {
            None
        } else {
            Some(secondary.allocate_like(self.size, true, None, false)?)
        };
        let replacement = transfer(&tiers.primary, &tiers.secondary, fresh.as_ref(), self.size)?;
        if let Some(token) = replacement {
            {
                let _access = tiers.secondary.access();
                // The move has committed; a failure to dispose of the old tier is not the
                // caller's to handle.
                let _ = tiers.secondary.carrier().release();
            }
            tiers.secondary = token;
        }
        tiers.evicted = true;
        Ok(())
    }

    pub(crate) fn promote_now(&self) -> Result<()> {
        let mut tiers = self.tiers();
        if tiers.released {
            return Err(Error::Runtime("cannot promote a released Evictable".into()));
        }
        if !tiers.evicted {
            return Ok(());
        }
        let fresh = tiers
            .primary
            .carrier()
            .allocate_like(self.size, true, None, false)?;
        let replacement = transfer(&tiers.secondary, &tiers.primary, Some(&fresh), self.size)?;
        if let Some(token) = replacement {
            tiers.primary = token;
        }
        tiers.evicted = false;
        Ok(())
    }

    /// Wraps a result tensor of a lowered operation: a new Evictable over the result's
    /// carrier and an empty secondary allocated from `secondary`.
    fn wrap(&self, result: &Tensor, secondary: &Carrier) -> Result<Tensor> {
        let carrier = result.carrier();
        let fresh_secondary = secondary.allocate_like(0, true, Some(carrier.dtype()), false)?;
        let body = Evictable::assemble(carrier, &fresh_secondary, Arc::clone(&self.snapshot))?;
        let wrapped = Carrier::new(body, carrier.dtype(), true)?;
        Tensor::new(wrapped, result.offset(), result.layout().clone())
    }

    /// A new Evictable body over a fresh `primary` and an empty secondary of this one's
    /// secondary class.
    fn sibling(&self, primary: Carrier, dtype: DType) -> Result<Evictable> {
        let secondary =
            self.tiers()
                .secondary
                .carrier()
                .allocate_like(0, true, Some(dtype), false)?;
        Evictable::assemble(&primary, &secondary, Arc::clone(&self.snapshot))
    }
}

/// Refuses a tier pair no move can join: any registered route or the elementwise default
/// resolves, except for a BlockDeviceCarrier, which cannot be a tier.
fn check_move_route(source: CarrierClass, destination: CarrierClass) -> Result<()> {
    let block = CarrierClass::of::<BlockDeviceCarrier>();
    for class in [source, destination] {
        if class == block {
            return Err(Error::Type(format!(
                "a {block} cannot be an Evictable tier (moves from {source} to {destination} do not resolve)"
            )));
        }
    }
    // Every other pair resolves: a registered route or the elementwise default.
    Ok(())
}

/// The primary's capabilities keeping only plans whose output dtype both tiers store.
/// A tier's failing dtype answer propagates (it never reads as "not stored").
fn snapshot(primary: &Carrier, secondary: &Carrier) -> Result<Arc<[OperationCapability]>> {
    let mut kept = Vec::new();
    for capability in primary.capabilities().iter() {
        let output = capability.plan().output();
        if primary.supports_storage_dtype(output)? && secondary.supports_storage_dtype(output)? {
            kept.push(capability.clone());
        }
    }
    Ok(kept.into())
}

/// Moves the full slot range `0..size` of the `source` tier into the `to` tier, or into
/// `fresh` when given, inside the owner's access scopes and with recording off.
///
/// On success `fresh` (when given) is returned claimed by a new token; on failure `fresh`
/// is released and nothing else changes.
fn transfer(
    source: &OwnershipToken,
    to: &OwnershipToken,
    fresh: Option<&Carrier>,
    size: usize,
) -> Result<Option<OwnershipToken>> {
    let fresh_token = fresh.map(Carrier::claim_ownership).transpose();
    let fresh_token = match fresh_token {
        Ok(token) => token,
        Err(error) => {
            if let Some(fresh) = fresh {
                let _ = fresh.release();
            }
            return Err(error);
        }
    };
    let moved = (|| {
        let destination = fresh.unwrap_or(to.carrier());
        let _grad = no_grad();
        let _source_access = source.access()?;
        let _to_access = to.access()?;
        let _fresh_access = fresh_token
            .as_ref()
            .map(OwnershipToken::access)
            .transpose()?;
        if size == 0 {
            // Nothing to copy: the transition only retires the source.
            return source.carrier().release();
        }
        let layout = Layout::from_flat(&[size], &[1])?;
        let tensor = Tensor::new(source.carrier().clone(), 0, layout)?;
        let moved = move_to_scratch(&tensor, destination)?;
        if !moved.carrier().same_as(destination) {
            return Err(Error::Runtime(format!(
                "the move returned a {} carrier instead of the {} destination",
                moved.carrier().class(),
                destination.class()
            )));
        }
        Ok(())
    })();
    match moved {
        Ok(()) => Ok(fresh_token),
        Err(error) => {
            if let Some(token) = &fresh_token {
                if let Ok(_access) = token.access() {
                    let _ = token.carrier().release();
                }
            }
            Err(error)
        }
    }
}

impl DefinitionFreeCarrier for Evictable {
    const NAME: &'static str = "Evictable";
    const ORIGIN: ClassOrigin = ClassOrigin::SHIPPED;
    const KIND: ClassKind = ClassKind::Dependent;

    /// The framework asks [`try_supports_storage_dtype`](Self::try_supports_storage_dtype);
    /// this plain answer reads a tier's failing answer as "not supported".
    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        self.try_supports_storage_dtype(dtype).unwrap_or(false)
    }

    /// A tier's failing answer propagates.
    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        let tiers = self.tiers();
        Ok(tiers.primary.carrier().supports_storage_dtype(dtype)?
            && tiers.secondary.carrier().supports_storage_dtype(dtype)?)
    }

    fn size(&self) -> usize {
        self.size
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        let tiers = self.promoted("read a slot")?;
        tiers.primary.carrier().get(index)
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        let tiers = self.promoted("write a slot")?;
        let _access = tiers.primary.access()?;
        tiers.primary.carrier().set(index, value)
    }

    fn write_all(&self, writes: &[(usize, Value)], _dtype: DType) -> Result<()> {
        let tiers = self.promoted("scatter")?;
        let _access = tiers.primary.access()?;
        let primary = tiers.primary.carrier();
        primary.check_writable("scatter")?;
        primary.write_all(writes)
    }

    /// Releases the secondary tier, then the primary; the hierarchy is released only when
    /// both are. A secondary that refuses leaves everything as it was (the framework keeps
    /// the wrapper live); a primary that refuses after the secondary went leaves the
    /// hierarchy live on its primary, which still holds the values while promoted (a later
    /// evict allocates a fresh secondary from the released one).
    fn release(&self) -> Result<()> {
        let mut tiers = self.tiers();
        {
            let _access = tiers.secondary.access()?;
            tiers.secondary.carrier().release()?;
        }
        {
            let _access = tiers.primary.access()?;
            tiers.primary.carrier().release()?;
        }
        tiers.released = true;
        Ok(())
    }

    fn new_like(&self, values: &[Value], dtype: DType) -> Result<Self> {
        let primary = self
            .tiers()
            .primary
            .carrier()
            .new_like(values, true, Some(dtype))?;
        self.sibling(primary, dtype)
    }

    fn allocate_like(&self, size: usize, dtype: DType, empty: bool) -> Result<Self> {
        let primary =
            self.tiers()
                .primary
                .carrier()
                .allocate_like(size, true, Some(dtype), empty)?;
        self.sibling(primary, dtype)
    }

    fn supports_scatter(&self) -> bool {
        self.tiers().primary.carrier().supports_scatter()
    }

    fn check_scatter_source(
        &self,
        source: CarrierClass,
        source_dtype: DType,
        _dtype: DType,
    ) -> Result<()> {
        let tiers = self.promoted("scatter")?;
        tiers
            .primary
            .carrier()
            .check_scatter_source(source, source_dtype)
    }

    fn instance_capabilities(&self) -> Option<Arc<[OperationCapability]>> {
        Some(Arc::clone(&self.snapshot))
    }

    /// A fresh `EvictableOperation`: it runs `name` lowered on the operands' primary tiers
    /// (recording off) and wraps each result into a new Evictable.
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        operation_definition(name).map_err(|_| {
            Error::NotImplemented(format!("Evictable carriers dispatch no operation '{name}'"))
        })?;
        let classes = (self.primary_class, self.secondary_class);
        let used = AtomicBool::new(false);
        Ok(Operation::new(move |invocation| {
            if used.swap(true, Ordering::AcqRel) {
                return Err(Error::Runtime(
                    "an EvictableOperation runs its forward only once".into(),
                ));
            }
            forward_lowered(invocation, classes)
        }))
    }
}

/// The forward of an `EvictableOperation`.
fn forward_lowered(
    invocation: &ResolvedInvocation,
    (primary_class, secondary_class): (CarrierClass, CarrierClass),
) -> Result<Vec<Tensor>> {
    let call = invocation.call();
    let definition = call.definition();
    let name = definition.name();
    let mut lowered: Vec<Operand> = Vec::with_capacity(call.operands().len());
    let mut wrapper: Option<(&Evictable, Carrier)> = None;
    for operand in call.operands() {
        let Some(tensor) = operand.as_tensor() else {
            lowered.push(operand.clone());
            continue;
        };
        let carrier = tensor.carrier();
        let body = carrier.downcast_ref::<Evictable>().ok_or_else(|| {
            Error::Type(format!(
                "'{name}' on Evictable needs Evictable operands, got a {} tensor",
                carrier.class()
            ))
        })?;
        if body.primary_class != primary_class || body.secondary_class != secondary_class {
            return Err(Error::Type(format!(
                "'{name}' on Evictable needs operands over the same tier classes: ({primary_class}, {secondary_class}) and ({}, {})",
                body.primary_class, body.secondary_class
            )));
        }
        let tiers = body.promoted(&format!("run '{name}'"))?;
        let primary = tiers.primary.carrier().clone();
        if wrapper.is_none() {
            wrapper = Some((body, tiers.secondary.carrier().clone()));
        }
        drop(tiers);
        lowered.push(Operand::Tensor(Tensor::new(
            primary,
            tensor.offset(),
            tensor.layout().clone(),
        )?));
    }
    let option_names: Vec<&str> = definition
        .schema()
        .options()
        .iter()
        .map(|spec| spec.name())
        .collect();
    let options: Vec<(&str, _)> = option_names
        .iter()
        .filter_map(|n| call.option(n).map(|v| (*n, v)))
        .collect();
    let results = {
        let _grad = no_grad();
        definition.call(lowered, &options)?
    };
    let Some((body, secondary)) = wrapper else {
        return Err(Error::Type(format!(
            "'{name}' on Evictable needs a tensor operand"
        )));
    };
    results
        .iter()
        .zip(invocation.results())
        .map(|(result, spec)| match spec.alias_of() {
            Some(index) => call.tensor(index).cloned(),
            None => body.wrap(result, &secondary),
        })
        .collect()
}
