//! Short forms for the kernel side of a definition: a synchronous kernel pattern, a provider
//! with a default interface, and built-in capabilities by name and dtypes.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::extension::kernels::PatternWork;
use crate::extension::{InterfaceHandle, KernelExecutionInterface, KernelPattern, KernelProvider};
use crate::operation::{
    operation_definition, resolve_operation_plan, OperationCapability, PlanOperand,
    ResolvedInvocation,
};
use crate::tensor::Tensor;

impl KernelPattern {
    /// A pattern whose kernel runs synchronously: `kernel(invocation, interface)` computes
    /// the results at submission, and they are handed over as a ready
    /// [`ProviderResult`](crate::extension::ProviderResult).
    ///
    /// The long form it stands for: `prepare` returns
    /// `Preparation::Kernel(PreparedKernel::new(interface, submit))` whose `submit` returns
    /// `ProviderResult::new(results).map(Submitted::Ready)`; it never declines (a pattern that
    /// declines some invocations uses [`KernelPattern::new`]). The framework runs it as that
    /// long form would run — a panic in `kernel` is reported as the pattern's `submit` — but
    /// builds no prepared record: `kernel` gets the invocation the framework holds, not a
    /// copy. The operation is the plans'
    /// (all must name one), the preference 0. The framework validates the results, publishes
    /// them and records the autograd node as for any kernel; an error from `kernel` fails the
    /// call with nothing published.
    ///
    /// Value errors: no plan, plans of different operations, an empty `kernel_id`; NotImplemented:
    /// an operation that is not registered.
    pub fn synchronous(
        plans: impl IntoIterator<Item = OperationCapability>,
        kernel_id: &str,
        kernel: impl Fn(&ResolvedInvocation, &InterfaceHandle) -> Result<Vec<Tensor>>
            + Send
            + Sync
            + 'static,
    ) -> Result<KernelPattern> {
        let plans: Vec<OperationCapability> = plans.into_iter().collect();
        let name = plans
            .first()
            .map(|p| p.operation().to_string())
            .ok_or_else(|| {
                Error::Value(format!(
                    "KernelPattern '{kernel_id}' needs at least one plan"
                ))
            })?;
        KernelPattern::build(
            &operation_definition(&name)?,
            plans,
            kernel_id,
            PatternWork::Synchronous(Box::new(kernel)),
            0,
        )
    }
}

impl KernelProvider {
    /// A kernel provider over `patterns` with the plain execution interface
    /// `KernelExecutionInterface::new("1")`: for a class whose kernels need no device
    /// context. Kernel packs for the class must then name that same interface.
    pub fn with_default_interface(
        patterns: impl IntoIterator<Item = KernelPattern>,
    ) -> Result<KernelProvider> {
        KernelProvider::new(
            InterfaceHandle::new(KernelExecutionInterface::new("1")?)?,
            patterns,
        )
    }
}

impl OperationCapability {
    /// The capability of the built-in `operation` on tensor operands of `dtypes`, in operand
    /// order: the plan central planning resolves for them, with no accumulator request
    /// (`builtin("add", &[DType::FLOAT32, DType::FLOAT32])`). Errors as
    /// [`resolve_operation_plan`]; a plan with weak scalars or an accumulator is built with
    /// it and [`OperationCapability::from_plan`].
    pub fn builtin(operation: &str, dtypes: &[DType]) -> Result<OperationCapability> {
        let operands: Vec<PlanOperand> = dtypes.iter().map(|d| PlanOperand::Tensor(*d)).collect();
        Ok(OperationCapability::from_plan(resolve_operation_plan(
            operation, &operands, None,
        )?))
    }
}
