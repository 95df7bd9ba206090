//! The fast CPU kernels of the built-in operations (docs/kernel-semantics.md,
//! docs/performance-targets.md, How the CPU path is built for it).
//!
//! They compute what the Generic reference computes, on native slices instead of per-element
//! `Value`s: operands are borrowed under their carriers' read locks, layouts are walked in
//! the longest runs their strides allow ([`strided`]), run loops are compiled for the
//! running CPU's vector units (`pulp`), work above [`parallel::THREADING_THRESHOLD`]
//! elements is split over the threads the [`parallelism`](crate::parallelism) setting allows,
//! and `matmul` runs on `faer` directly on the operands' strides. Each result is a fresh mutable CPU carrier of exactly the result layout's cosize
//! (version 0) under the canonical layout; operands are never written.

mod elementwise;
mod matmul;
mod parallel;
mod reduce;
mod select;
mod slots;
mod strided;

use std::fmt;

use slots::Stored;

use crate::carriers::cpu::INLINE_BOOL;
use crate::carriers::Cpu;
use crate::error::{Error, Result};
use crate::operation::builtin::kernel::KernelKind;
use crate::operation::{Builtin, ResolvedInvocation, ResultSpec};
use crate::tensor::Tensor;

/// Executes the built-in operation `builtin` on `invocation` and returns its single fresh
/// result, by the kernel kind of its entry.
///
/// # Errors
/// - NotImplemented for a plan the CPU kernels do not compute;
/// - Value when the invocation's plan names another operation or its operands do not fit
///   the operation;
/// - Overflow when an Int32 result leaves the Int32 range (naming the operation);
/// - the carriers' errors (a released operand, an allocation failure).
pub(crate) fn execute(builtin: Builtin, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let name = builtin.name();
    if invocation.plan().builtin() != Some(builtin) {
        let planned = invocation.plan().operation();
        return Err(Error::Value(format!(
            "the CPU kernel of '{name}' cannot execute a plan of '{planned}'"
        )));
    }
    crate::kernels::check_bounded_work(name, invocation)?;
    match builtin.spec().kernel {
        KernelKind::Map(function) => elementwise::map(name, function, invocation),
        KernelKind::Test(function) => elementwise::test(name, function, invocation),
        KernelKind::Fold(fold) => reduce::execute(name, fold, invocation),
        KernelKind::Contract => matmul::execute(name, invocation),
        KernelKind::Select => select::execute(name, invocation),
    }
}

/// The single result specification of `invocation`, which must store `O` under the canonical
/// column-major layout (NotImplemented otherwise).
fn result_spec<'a, O: Stored>(
    name: &str,
    invocation: &'a ResolvedInvocation,
) -> Result<&'a ResultSpec> {
    let spec = match invocation.results() {
        [spec] => spec,
        specs => {
            return Err(Error::Value(format!(
                "the CPU kernel of '{name}' makes one result, the invocation declares {}",
                specs.len()
            )))
        }
    };
    if spec.dtype() != O::DTYPE || spec.alias_of().is_some() || !is_canonical(spec) {
        return Err(Error::NotImplemented(format!(
            "the CPU kernel of '{name}' makes fresh canonical {} results, not {} under {}",
            O::DTYPE,
            spec.dtype(),
            spec.layout()
        )));
    }
    Ok(spec)
}

/// Whether the layout of `spec` maps ordinal `i` to slot `i` with no slot left over.
fn is_canonical(spec: &ResultSpec) -> bool {
    let layout = spec.layout();
    // A column-major layout (every stride the product of the extents before it) is one.
    if layout.is_column_major() {
        return true;
    }
    let mut expected = 1usize;
    for (extent, stride) in layout.leaf_pairs() {
        if extent != 1 && stride != expected {
            return false;
        }
        expected = expected.saturating_mul(extent);
    }
    layout.cosize() == layout.size()
}

/// A fresh CPU result of `spec` (canonical, see [`result_spec`]) whose slots `fill` writes in
/// ordinal order, before the new body is wrapped in a carrier (so no lock is needed).
fn fresh_result<O: Stored>(
    spec: &ResultSpec,
    fill: impl FnOnce(&mut [O]) -> Result<()>,
) -> Result<Tensor> {
    let layout = spec.layout();
    let slots = layout.cosize();
    if slots <= O::INLINE {
        // A tiny result: computed on the stack, then stored into the fresh carrier's inline
        // slots, with no fallible step after `fill`.
        let mut values = [O::default(); INLINE_BOOL];
        let values = &mut values[..slots];
        fill(values)?;
        return Ok(Tensor::fresh(
            O::inline(values),
            spec.shared_layout().clone(),
        ));
    }
    let mut cpu = Cpu::zeroed(slots, O::DTYPE)?;
    O::with_out(&mut cpu, fill)??;
    let carrier = Cpu::wrap(cpu, O::DTYPE, true)?;
    Tensor::with_shared_layout(carrier, 0, spec.shared_layout().clone())
}

/// The Overflow error of an Int32 result outside the range, worded as the Generic
/// reference words it: `'add' overflows Int32: 2147483647 + 1`.
fn overflow(name: &str, detail: impl fmt::Display) -> Error {
    Error::Overflow(format!("'{name}' overflows Int32: {detail}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::{operation_definition, Arithmetic, OperandPlan, OperationPlan};
    use crate::{DType, Shape, Value};

    /// A kernel reads the plan's typed identity: handed the resolved invocation of another
    /// built-in, the CPU and reference kernels refuse it, naming both operations.
    #[test]
    fn a_kernel_refuses_the_plan_of_another_builtin() -> Result<()> {
        let x = Tensor::compact(Cpu::from_f32(&[1.0, -2.0], true)?, Shape::new(2)?)?;
        let definition = operation_definition("neg")?;
        let invocation = definition.resolve(&definition.bind(vec![x.into()], &[])?)?;
        assert_eq!(invocation.plan().builtin(), Some(Builtin::Neg));
        let cpu = execute(Builtin::Abs, &invocation).expect_err("a plan of neg");
        assert_eq!(
            cpu.to_string(),
            "value error: the CPU kernel of 'abs' cannot execute a plan of 'neg'"
        );
        let reference =
            crate::kernels::reference::execute(Builtin::Abs, &invocation).expect_err("neg");
        assert_eq!(
            reference.to_string(),
            "value error: the reference kernel of 'abs' cannot execute a plan of 'neg'"
        );
        let values = execute(Builtin::Neg, &invocation)?.to_values()?;
        assert_eq!(values, [Value::Float(-1.0), Value::Float(2.0)]);
        Ok(())
    }

    /// A plan knows the built-in its operation names, and a custom operation is none.
    #[test]
    fn a_plan_carries_the_typed_identity_of_its_operation() -> Result<()> {
        let operand = || OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32);
        let plan = |name: &str| -> Result<OperationPlan> {
            OperationPlan::new(
                name,
                [operand()?],
                Arithmetic::Binary32,
                None,
                None,
                DType::FLOAT32,
            )
        };
        assert_eq!(plan("relu")?.builtin(), Some(Builtin::Relu));
        assert_eq!(plan("lab.relu")?.builtin(), None);
        Ok(())
    }
}
