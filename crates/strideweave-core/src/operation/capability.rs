//! Capability records: the exact operation plans a carrier class can execute
//! (docs/carriers.md, Capabilities).

use std::cmp::Ordering;
use std::fmt;

use crate::dtype::DType;
use crate::error::Result;
use crate::operation::plan::{Accumulation, Arithmetic, OperandPlan, OperationPlan};

/// One operand of a capability (the seed's name for an [`OperandPlan`]).
pub type OperandCapability = OperandPlan;

/// An operation plan a carrier executes, matched field by field — including whether an
/// accumulation is present — never by similarity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperationCapability {
    plan: OperationPlan,
}

impl OperationCapability {
    /// Builds a capability from its fields (see [`OperationPlan::new`]).
    pub fn new(
        operation: &str,
        operands: impl IntoIterator<Item = OperandPlan>,
        compute: Arithmetic,
        accumulation: Option<Accumulation>,
        accumulator_dtype: Option<DType>,
        output: DType,
    ) -> Result<OperationCapability> {
        OperationPlan::new(
            operation,
            operands,
            compute,
            accumulation,
            accumulator_dtype,
            output,
        )
        .map(OperationCapability::from_plan)
    }

    /// The capability of executing exactly `plan`.
    pub fn from_plan(plan: OperationPlan) -> OperationCapability {
        OperationCapability { plan }
    }

    /// Whether this capability authorizes `plan`: equality on every field.
    pub fn matches(&self, plan: &OperationPlan) -> bool {
        self.plan == *plan
    }

    /// The plan this capability executes.
    pub fn plan(&self) -> &OperationPlan {
        &self.plan
    }

    /// The operation name.
    pub fn operation(&self) -> &str {
        self.plan.operation()
    }

    /// Compares two capabilities in the deterministic capability order.
    pub fn cmp_order(&self, other: &OperationCapability) -> Ordering {
        self.plan.cmp_order(&other.plan)
    }
}

impl fmt::Display for OperationCapability {
    /// The plan's description, as unsupported-plan reasons quote it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.plan)
    }
}
