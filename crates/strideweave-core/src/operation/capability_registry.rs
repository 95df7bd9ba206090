//! The class-level capability declarations of definition-free carriers
//! (docs/carriers.md, Capabilities).
//!
//! Invariants:
//! 1. A class declares its capabilities at most once, atomically; a rejected declaration
//!    leaves it open.
//! 2. Any class-level query of an undeclared class seals it as declaring nothing.
//! 3. Declarations are sorted in the deterministic capability order and never change.
//! 4. Shipped classes declare themselves (their `declare_class` hook, through
//!    [`declare_shipped_capabilities`]) and are closed to declarations.
//! 5. A class's own declaration hook runs before the registry answers anything about it.

use std::cell::RefCell;
use std::sync::{Arc, LazyLock, OnceLock, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use crate::carrier::{CarrierClass, ClassKind};
use crate::dtype::{DType, Value};
use crate::error::{Error, Result, UnsupportedOperationPlan};
use crate::operation::{
    resolve_operation_plan, OperationCapability, OperationPlan, PlanOperand, BUILTIN_OPERATIONS,
};

/// One class's sealed declaration: the sorted capabilities and an index from plan to
/// position, so the capability gate on the dispatch path is one hash lookup.
struct Declaration {
    sorted: Arc<[OperationCapability]>,
    index: FxHashMap<OperationPlan, usize>,
    /// Whether the class was sealed by its first observation (a query or a construction)
    /// rather than by a declaration: what a refused later declaration is told.
    observed: bool,
}

impl Declaration {
    fn new(sorted: Arc<[OperationCapability]>) -> Arc<Declaration> {
        Declaration::sealed(sorted, false)
    }

    /// A declaration sealed by the class's first observation rather than declared.
    fn observed(sorted: Arc<[OperationCapability]>) -> Arc<Declaration> {
        Declaration::sealed(sorted, true)
    }

    fn sealed(sorted: Arc<[OperationCapability]>, observed: bool) -> Arc<Declaration> {
        let index = sorted
            .iter()
            .enumerate()
            .map(|(i, c)| (c.plan().clone(), i))
            .collect();
        Arc::new(Declaration {
            sorted,
            index,
            observed,
        })
    }

    fn matching(&self, plan: &OperationPlan) -> Option<&OperationCapability> {
        self.index.get(plan).and_then(|&i| self.sorted.get(i))
    }
}

type Declarations = FxHashMap<CarrierClass, Arc<Declaration>>;

static DECLARED: LazyLock<RwLock<Declarations>> =
    LazyLock::new(|| RwLock::new(Declarations::default()));

/// Every plan the planner produces for the built-in operations on Float32, Int32 and Bool
/// tensors, integer, floating and boolean weak scalars, and each accumulator choice: the
/// set the Generic and CPU kernels execute, which those shipped classes declare of
/// themselves. The operand lists are unary (a tensor), binary (a tensor with a tensor or a
/// scalar, in either order) and ternary (a Bool tensor, then every tensor or scalar for each
/// of the other two: `select`). Computed once.
pub(crate) fn builtin_capabilities() -> Arc<[OperationCapability]> {
    static ALL: OnceLock<Arc<[OperationCapability]>> = OnceLock::new();
    Arc::clone(ALL.get_or_init(plan_builtin_capabilities))
}

fn plan_builtin_capabilities() -> Arc<[OperationCapability]> {
    let tensors = [DType::FLOAT32, DType::INT32, DType::BOOL].map(PlanOperand::Tensor);
    let scalars = [Value::Int(1), Value::Float(1.0), Value::Bool(true)].map(PlanOperand::Scalar);
    let mut shapes: Vec<Vec<PlanOperand>> = tensors.iter().map(|t| vec![*t]).collect();
    for a in tensors {
        for b in tensors.iter().chain(&scalars) {
            shapes.push(vec![a, *b]);
            shapes.push(vec![*b, a]);
        }
    }
    let condition = PlanOperand::Tensor(DType::BOOL);
    for a in tensors.iter().chain(&scalars) {
        for b in tensors.iter().chain(&scalars) {
            shapes.push(vec![condition, *a, *b]);
        }
    }
    let accumulators = [None, Some(DType::FLOAT32), Some(DType::FLOAT64)];
    let mut plans: Vec<OperationCapability> = Vec::new();
    for op in BUILTIN_OPERATIONS {
        for operands in &shapes {
            for accumulator in accumulators {
                if let Ok(plan) = resolve_operation_plan(op, operands, accumulator) {
                    plans.push(OperationCapability::from_plan(plan));
                }
            }
        }
    }
    plans.sort_by(OperationCapability::cmp_order);
    plans.dedup();
    plans.into()
}

/// Declares the complete capability set of the definition-free, independent `class`.
///
/// Fails with a Type error for a dependent or shipped class, or one already declared,
/// observed by a query, or constructed (a definition-free carrier of it exists: "already
/// observed"); with a Value error for duplicate capabilities (the class stays open). The
/// declaration seals the class.
pub fn register_operation_capabilities(
    class: CarrierClass,
    capabilities: impl IntoIterator<Item = OperationCapability>,
) -> Result<()> {
    class.declare_once();
    if class.kind() == ClassKind::Dependent {
        return Err(Error::Type(format!(
            "{class} is a DependentCarrier implementation (a dependent carrier class): its \
             capabilities derive from each instance's dependencies, not a class declaration"
        )));
    }
    if class.is_shipped() {
        return Err(Error::Type(format!(
            "{class} is a closed shipped carrier class; implement a sibling carrier to declare capabilities"
        )));
    }
    if class.is_definition_backed() {
        return Err(Error::Type(format!(
            "{class} is a definition-backed carrier class: its capabilities derive from its \
             CarrierDefinition and cannot be declared manually"
        )));
    }
    seal_declaration(class, capabilities, true)
}

/// Seals `class` with `capabilities`, sorted: a Value error for duplicates (the class stays
/// open), a Type error when the class is already sealed (declared, or observed as declaring
/// nothing) or, with `before_construction`, when a carrier of it was constructed.
fn seal_declaration(
    class: CarrierClass,
    capabilities: impl IntoIterator<Item = OperationCapability>,
    before_construction: bool,
) -> Result<()> {
    let mut sorted: Vec<OperationCapability> = capabilities.into_iter().collect();
    sorted.sort_by(OperationCapability::cmp_order);
    if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Value(format!(
            "duplicate capability for {class}: {}",
            pair[0]
        )));
    }
    let mut declared = DECLARED.write().unwrap_or_else(PoisonError::into_inner);
    // Checked under the registry lock: a construction racing this declaration either
    // happened before (refused here) or its class-level queries wait for the declaration.
    if before_construction && class.was_constructed() {
        return Err(Error::Type(format!(
            "{class} was already observed (constructed); its capabilities must be declared \
             before the first carrier of the class is constructed"
        )));
    }
    if let Some(existing) = declared.get(&class) {
        return Err(already_sealed(class, existing));
    }
    class.observe_definition_free("declare operation capabilities")?;
    declared.insert(class, Declaration::new(sorted.into()));
    Ok(())
}

/// The refusal of a second declaration: the class declared already, or its first
/// observation (a capability query or a construction) sealed it as declaring nothing.
fn already_sealed(class: CarrierClass, existing: &Declaration) -> Error {
    if existing.observed {
        Error::Type(format!(
            "{class} was already observed: it was first observed without a declaration (a \
             capability query or a construction sealed its capabilities as none), so it \
             cannot declare any now"
        ))
    } else {
        Error::Type(format!(
            "{class} has already declared its capabilities; a class declares them once"
        ))
    }
}

/// Declares the capabilities of the shipped `class` from its own declaration hook: a Type
/// error for a class that is not shipped or already sealed (declared or observed), a Value
/// error for duplicates. Like a declaration, it seals the class.
pub(crate) fn declare_shipped_capabilities(
    class: CarrierClass,
    capabilities: impl IntoIterator<Item = OperationCapability>,
) -> Result<()> {
    if !class.is_shipped() {
        return Err(Error::Type(format!(
            "{class} is not a shipped carrier class: declare its capabilities with \
             register_operation_capabilities"
        )));
    }
    // A shipped class declares from its own hook, which may run after its first carrier
    // was constructed (construction does not ask the registry).
    seal_declaration(class, capabilities, false)
}

/// Seals the storage-only definition-backed `class`: it declares no capability. Called by
/// definition registration after it won the class (a kernel-backed class is sealed by its
/// first observation instead).
pub(crate) fn seal_definition_capabilities(class: CarrierClass) {
    DECLARED
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(class)
        .or_insert_with(|| Declaration::new(Arc::from([])));
}

/// The sealed declaration of `class`; an undeclared class is sealed as declaring nothing.
fn declaration(class: CarrierClass) -> Arc<Declaration> {
    if let Some(found) = DECLARED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&class)
    {
        return Arc::clone(found);
    }
    // What the class declares of itself comes first.
    class.declare_once();
    loop {
        // A kernel-backed definition's capabilities are its frozen execution set's (the
        // query observes the class and freezes it), computed before the registry lock is
        // taken (definition registration takes the definition lock, then this one).
        let kernels = crate::extension::kernel_capabilities(class);
        let mut declared = DECLARED.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = declared.get(&class) {
            return Arc::clone(found);
        }
        if kernels.is_none() && class.observe_definition_free("query capabilities").is_err() {
            // The class became definition-backed after `kernels` was computed: ask again
            // (its registration seals a storage-only class and makes a kernel-backed one
            // answer from its execution set).
            drop(declared);
            continue;
        }
        let found = match kernels {
            Some(kernels) => Declaration::new(kernels),
            None => Declaration::observed(Arc::from([])),
        };
        declared.insert(class, Arc::clone(&found));
        return found;
    }
}

/// The capabilities declared by `class`, in the deterministic order. Sealing: an undeclared
/// class is from now on declared as supporting nothing.
pub fn capabilities_for_carrier_class(class: CarrierClass) -> Arc<[OperationCapability]> {
    Arc::clone(&declaration(class).sorted)
}

/// The capability of `class` that authorizes `plan` exactly, if any (seals like every
/// class-level query).
pub fn matching_capability(
    class: CarrierClass,
    plan: &OperationPlan,
) -> Option<OperationCapability> {
    declaration(class).matching(plan).cloned()
}

/// Whether `class` declares a capability matching `plan`.
pub fn supports_operation_plan(class: CarrierClass, plan: &OperationPlan) -> bool {
    matching_capability(class, plan).is_some()
}

/// Why `class` cannot execute `plan`, or `None` when it can.
///
/// Two forms (docs/carriers.md, Capabilities): "C declares no operation-plan capability for
/// 'op'" when the class declares nothing for the operation, and "C declares no operation-plan
/// capability for this 'op' plan: `<plan>`" when it declares other plans of it.
pub fn unsupported_plan_reason(class: CarrierClass, plan: &OperationPlan) -> Option<String> {
    let declaration = declaration(class);
    if declaration.matching(plan).is_some() {
        return None;
    }
    Some(missing_plan_reason(class, &declaration.sorted, plan))
}

/// The reason `plan` is missing from `declared` (the capabilities of `class`, or of an
/// instance snapshot of it), in the two forms of [`unsupported_plan_reason`]: what a binding
/// answers for an instance snapshot it keeps itself.
pub fn missing_plan_reason(
    class: CarrierClass,
    declared: &[OperationCapability],
    plan: &OperationPlan,
) -> String {
    let operation = plan.operation();
    if declared.iter().any(|c| c.operation() == operation) {
        format!("{class} declares no operation-plan capability for this '{operation}' plan: {plan}")
    } else {
        format!("{class} declares no operation-plan capability for '{operation}'")
    }
}

/// The capability authorizing `plan`, or `UnsupportedOperationPlan` with the reason.
pub fn require_capability(
    class: CarrierClass,
    plan: &OperationPlan,
) -> Result<OperationCapability> {
    match matching_capability(class, plan) {
        Some(capability) => Ok(capability),
        None => Err(Error::UnsupportedOperationPlan(
            UnsupportedOperationPlan::new(plan.operation(), unsupported_plan_reason(class, plan)),
        )),
    }
}

thread_local! {
    /// The last (class, plan) [`check_capability`] authorized on this thread.
    static LAST_AUTHORIZED: RefCell<Option<(CarrierClass, OperationPlan)>> =
        const { RefCell::new(None) };
}

/// [`require_capability`] for the dispatch path: the same answer and error, without cloning
/// the authorizing capability.
pub(crate) fn check_capability(class: CarrierClass, plan: &OperationPlan) -> Result<()> {
    // Declarations never change once sealed, so an answer of yes stays true: a plan in
    // static memory the class authorized before, and the last other plan authorized on this
    // thread (kept alive here, so its identity cannot be reused), are let through without a
    // look-up.
    let address = plan.static_address();
    if address.is_some_and(|address| class.authorized_before(address)) {
        return Ok(());
    }
    let repeated = address.is_none()
        && LAST_AUTHORIZED.with_borrow(|last| {
            last.as_ref()
                .is_some_and(|(c, p)| *c == class && p.same_as(plan))
        });
    if repeated {
        return Ok(());
    }
    let authorized = DECLARED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&class)
        .map(|declared| declared.matching(plan).is_some());
    // An undeclared class is sealed (as declaring nothing) by the full query below.
    if authorized.unwrap_or_else(|| declaration(class).matching(plan).is_some()) {
        match address {
            Some(address) => class.remember_authorized(address),
            None => LAST_AUTHORIZED.set(Some((class, plan.clone()))),
        }
        return Ok(());
    }
    Err(Error::UnsupportedOperationPlan(
        UnsupportedOperationPlan::new(plan.operation(), unsupported_plan_reason(class, plan)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carrier::ClassKind;
    use crate::dtype::DType;
    use crate::operation::planning::{plan_builtin, PlanOperand};
    use crate::operation::Builtin;

    fn static_plan(builtin: Builtin, dtype: DType) -> OperationPlan {
        let operands = [PlanOperand::Tensor(dtype); 2];
        plan_builtin(builtin, &operands, None)
            .unwrap()
            .into_static()
    }

    #[test]
    fn a_class_lets_through_only_the_static_plans_its_capabilities_authorized() {
        let class = CarrierClass::mint("AuthorizingAccel", ClassKind::Independent);
        let plans: Vec<OperationPlan> = [Builtin::Add, Builtin::Sub, Builtin::Mul]
            .iter()
            .flat_map(|&b| [DType::FLOAT32, DType::INT32].map(|d| static_plan(b, d)))
            .collect();
        // Declares every plan but the Int32 `mul`.
        let declared = plans[..5]
            .iter()
            .cloned()
            .map(OperationCapability::from_plan);
        register_operation_capabilities(class, declared).unwrap();
        for _ in 0..2 {
            for plan in &plans[..5] {
                check_capability(class, plan).unwrap();
                assert!(class.authorized_before(plan.static_address().unwrap()));
            }
            let error = check_capability(class, &plans[5]).unwrap_err();
            assert!(
                matches!(error, Error::UnsupportedOperationPlan(_)),
                "{error}"
            );
            assert!(
                error
                    .to_string()
                    .contains("AuthorizingAccel declares no operation-plan capability"),
                "{error}"
            );
            assert!(!class.authorized_before(plans[5].static_address().unwrap()));
        }
        // Another class does not see what this one authorized.
        let other = CarrierClass::mint("OtherAccel", ClassKind::Independent);
        register_operation_capabilities(other, []).unwrap();
        assert!(check_capability(other, &plans[0]).is_err());
    }
}
