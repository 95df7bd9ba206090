//! The class-level capability declarations of definition-free carriers
//! (semantics-carriers.md §5, "Independent carriers").
//!
//! Invariants:
//! 1. A class declares its capabilities at most once, atomically; a rejected declaration
//!    leaves it open.
//! 2. Any class-level query of an undeclared class seals it as declaring nothing.
//! 3. Declarations are sorted in the deterministic capability order and never change.
//! 4. Shipped classes are declared by StrideWeave itself and closed to declarations.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use crate::carrier::class::{CarrierClass, ClassKind};
use crate::carriers::Generic;
use crate::error::{Error, Result};
use crate::operation::OperationCapability;

type Declarations = HashMap<CarrierClass, Arc<[OperationCapability]>>;

static DECLARED: LazyLock<RwLock<Declarations>> = LazyLock::new(|| {
    // Shipped classes declare exactly what they execute; the operations issue fills these.
    let shipped = [
        CarrierClass::of::<Generic>(),
        CarrierClass::of::<crate::carriers::Cpu>(),
        CarrierClass::of::<crate::carriers::FileBacked>(),
    ];
    RwLock::new(
        shipped
            .into_iter()
            .map(|class| (class, Arc::from([])))
            .collect(),
    )
});

/// Declares the complete capability set of the definition-free, independent `class`.
///
/// Fails with a Type error for a dependent or shipped class, or one already declared or
/// observed by a query; with a Value error for duplicate capabilities (the class stays
/// open). The declaration seals the class.
pub fn register_operation_capabilities(
    class: CarrierClass,
    capabilities: impl IntoIterator<Item = OperationCapability>,
) -> Result<()> {
    if class.kind() == ClassKind::Dependent {
        return Err(Error::Type(format!(
            "{class} is a dependent carrier class: its capabilities derive from its tiers, not a declaration"
        )));
    }
    if class.is_shipped() {
        return Err(Error::Type(format!(
            "{class} is a closed shipped carrier class; implement a sibling carrier to declare capabilities"
        )));
    }
    let mut sorted: Vec<OperationCapability> = capabilities.into_iter().collect();
    sorted.sort_by(OperationCapability::cmp_order);
    if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Value(format!(
            "duplicate capability for {class}: {}",
            pair[0]
        )));
    }
    let mut declared = DECLARED.write().unwrap_or_else(PoisonError::into_inner);
    if declared.contains_key(&class) {
        return Err(Error::Type(format!(
            "{class} has already declared (or been queried for) its capabilities"
        )));
    }
    declared.insert(class, sorted.into());
    Ok(())
}

/// The capabilities declared by `class`, in the deterministic order. Sealing: an undeclared
/// class is from now on declared as supporting nothing.
pub fn capabilities_for_carrier_class(class: CarrierClass) -> Arc<[OperationCapability]> {
    if let Some(found) = DECLARED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&class)
    {
        return found.clone();
    }
    DECLARED
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(class)
        .or_insert_with(|| Arc::from([]))
        .clone()
}
