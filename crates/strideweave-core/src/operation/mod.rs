//! Operations: definitions and schemas, dtype planning, capabilities, and dispatch of a
//! call to the carrier that executes it (docs/operations.md;
//! docs/carriers.md, Dispatch and Capabilities).

mod authority;
pub(crate) mod builtin;
mod call_one;
mod capability;
pub(crate) mod capability_registry;
mod definition;
pub(crate) mod dispatch;
mod dispatched;
mod invocation;
mod operand;
mod plan;
mod planning;
pub(crate) mod provider_scope;
mod schema;
mod vjp;

pub(crate) use authority::Authority;
pub use builtin::{Accuracy, Builtin, Domain, ShapeRule, BUILTIN_OPERATIONS};
pub use call_one::call_one;
pub use capability::{OperandCapability, OperationCapability};
pub use capability_registry::{
    capabilities_for_carrier_class, matching_capability, missing_plan_reason,
    register_operation_capabilities, require_capability, supports_operation_plan,
    unsupported_plan_reason,
};
pub(crate) use capability_registry::{check_capability, seal_definition_capabilities};
pub use definition::{
    define_operation, operation_definition, operation_definitions, OperationDefinition,
    ReferenceFn, ResolveFn,
};
pub use dispatch::call;
pub use dispatched::{BuiltinKernel, Operation};
pub(crate) use invocation::OperandList;
pub use invocation::{BoundOperationCall, ResolvedInvocation, ResultSpec};
pub use operand::Operand;
pub use plan::{Accumulation, Arithmetic, OperandPlan, OperandRole, OperationPlan};
pub use planning::{resolve_operation_plan, PlanOperand};
pub use schema::{OperandKind, OperandSpec, OperationSchema, OptionSpec, OptionValue};
pub use vjp::{Vjp, VjpContext, VjpFn};
