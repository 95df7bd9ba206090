//! `register_carrier_definition`: binding one definition to one exact carrier class.

use std::sync::{Mutex, OnceLock, PoisonError};

use crate::carrier::{CarrierClass, ClassKind};
use crate::error::{Error, Result};
use crate::extension::{CarrierDefinition, ExecutionSet};
use crate::operation::seal_definition_capabilities;

/// Serializes registrations: offering a definition to a class and winning its arbiter are
/// one step. (The definition itself lives on the class, read without a lock.)
static REGISTRATION: Mutex<()> = Mutex::new(());

/// Binds `definition` to exactly `class` (no other class, base or sibling, acquires it).
///
/// Type errors, leaving every registry unchanged: a shipped class; a dependent class whose
/// definition has a kernel provider or no composite provider; an independent class whose
/// definition has a composite provider;
/// a class that already has a definition (the first stays); a class already observed on the
/// definition-free path (constructed, capability-queried or declared, or given a move
/// route); a transfer route whose source class is not exactly `class`. Registration is atomic: under a race exactly one registration wins. A storage-only
/// definition is sealed at once: it declares no capability, so every plan of the class is an
/// `UnsupportedOperationPlan` with a reason. A dependent (composite) class is sealed at once
/// too at the class level (it declares nothing there); each instance answers from the
/// capability snapshot its construction froze. A definition with a kernel provider stays open
/// to kernel packs until the class's first observation (construction or capability query),
/// which freezes the provider's patterns and the packs as one execution set.
pub fn register_carrier_definition(
    class: CarrierClass,
    definition: CarrierDefinition,
) -> Result<()> {
    if class.is_shipped() {
        return Err(Error::Type(format!(
            "{class} is a shipped definition-free carrier class; it cannot take a carrier definition"
        )));
    }
    match class.kind() {
        ClassKind::Dependent if definition.kernels().is_some() => {
            return Err(Error::Type(format!(
                "{class} is a dependent carrier class: it derives execution from its \
                 dependencies, so its definition forbids kernels and must not supply a kernel \
                 provider"
            )));
        }
        ClassKind::Dependent if definition.composite().is_none() => {
            return Err(Error::Type(format!(
                "{class} is a dependent carrier class: its definition requires composite (a \
                 CompositeProvider)"
            )));
        }
        ClassKind::Independent if definition.composite().is_some() => {
            return Err(Error::Type(format!(
                "{class} is an independent carrier class: its definition must not supply a \
                 composite provider"
            )));
        }
        _ => {}
    }
    if let Some(route) = definition
        .transfers()
        .iter()
        .find(|route| route.source_class() != class)
    {
        return Err(Error::Type(format!(
            "the transfer route {} starts at {}, but the definition is registered for {class}: \
             every route's exact source_class must be the registered class",
            route.route_id(),
            route.source_class()
        )));
    }
    let _registration = REGISTRATION.lock().unwrap_or_else(PoisonError::into_inner);
    class.offer_binding(Box::new(ClassBinding {
        definition: definition.clone(),
        execution: OnceLock::new(),
    }));
    class.mark_defined()?;
    // Storage-only and composite classes declare nothing at the class level.
    if definition.kernels().is_none() {
        seal_definition_capabilities(class);
    }
    Ok(())
}

/// The definition registered for exactly `class`, if any (a lookup; it observes nothing).
pub fn carrier_definition(class: CarrierClass) -> Option<CarrierDefinition> {
    registered_definition(class).cloned()
}

/// The definition registered for exactly `class`, borrowed from its binding, which lives as
/// long as the process: what every construction of a carrier of the class keeps, so that
/// neither the construction nor the carrier's drop touches a reference count.
pub(crate) fn registered_definition(class: CarrierClass) -> Option<&'static CarrierDefinition> {
    binding(class).map(|binding| &binding.definition)
}

/// What registration binds to a definition-backed class's record: its definition, and the
/// kernel execution set frozen when a kernel-backed class is first observed. Both are read
/// without a lock by every construction of a carrier of the class.
pub(crate) struct ClassBinding {
    definition: CarrierDefinition,
    execution: OnceLock<&'static ExecutionSet>,
}

impl ClassBinding {
    /// The execution set frozen for the class, if it has been frozen.
    pub(crate) fn frozen_execution_set(&self) -> Option<&'static ExecutionSet> {
        self.execution.get().copied()
    }

    /// Records the execution set frozen for the class (once; later calls keep the first).
    pub(crate) fn record_execution_set(&self, set: &'static ExecutionSet) {
        let _ = self.execution.set(set);
    }
}

/// The binding of the definition-backed `class` (`None` for any other class).
pub(crate) fn binding(class: CarrierClass) -> Option<&'static ClassBinding> {
    class.binding()?.downcast_ref::<ClassBinding>()
}
