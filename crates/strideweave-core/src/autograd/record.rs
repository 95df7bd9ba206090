//! Recording: the node a differentiating call attaches to its outputs.

use crate::autograd::grad_mode::is_grad_enabled;
use crate::autograd::node::{BackwardRule, Node};
use crate::autograd::rules::rule_for;
use crate::error::Result;
use crate::operation::{Operand, OperandKind, OperationDefinition, ResolvedInvocation, Vjp};
use crate::tensor::Tensor;

/// Whether a call with these operands would record a node now: recording is on, the
/// operation has a gradient rule, and an operand that can receive a gradient is a tensor
/// that requires one.
pub(crate) fn would_record(invocation: &ResolvedInvocation) -> bool {
    let operands = invocation.call().operands();
    // The operands' flags first: while none is tracked, nothing else is read.
    if !operands
        .iter()
        .filter_map(Operand::as_tensor)
        .any(|t| t.requires_grad() && t.is_differentiable())
    {
        return false;
    }
    let definition = invocation.call().definition();
    has_rule(definition)
        && operands.iter().enumerate().any(|(index, operand)| {
            operand
                .as_tensor()
                .is_some_and(|t| t.requires_grad() && t.is_differentiable())
                && takes_gradient(definition, index)
        })
        && is_grad_enabled()
}

/// Whether `definition` declares a gradient rule (a built-in's spec, or a custom
/// operation's `Vjp::Rule`; `Vjp::NonDifferentiable` and comparisons have none).
fn has_rule(definition: &OperationDefinition) -> bool {
    match definition.builtin() {
        Some(builtin) => builtin.spec().vjp.is_some(),
        None => matches!(definition.vjp(), Some(Vjp::Rule(_))),
    }
}

/// Whether operand `index` of a call to `definition` can receive a gradient: one its schema
/// declares differentiable, and for a built-in also a tensor passed where a tensor or a
/// scalar is accepted (`mul`'s operands, `where`'s branches).
fn takes_gradient(definition: &OperationDefinition, index: usize) -> bool {
    definition
        .schema()
        .operands()
        .get(index)
        .is_some_and(|spec| {
            spec.is_differentiable()
                || definition.is_builtin() && spec.kind() == OperandKind::Structural
        })
}

/// The operand indices a node of `invocation` saves, in operand order: for a built-in every
/// tensor operand (its rule may read any of them); for a custom operation the tensor
/// operands that can receive a gradient and those its resolver saved for the rule. A
/// non-differentiable operand the rule does not need is neither saved nor version-checked.
pub(crate) fn saved_indices(invocation: &ResolvedInvocation) -> Vec<usize> {
    let definition = invocation.call().definition();
    invocation
        .call()
        .operands()
        .iter()
        .enumerate()
        .filter(|(index, operand)| {
            operand.as_tensor().is_some()
                && (definition.is_builtin()
                    || takes_gradient(definition, *index)
                    || invocation.saved_operands().contains(index))
        })
        .map(|(index, _)| index)
        .collect()
}

/// Attaches a node to the differentiable `outputs` of a validated call when
/// [`would_record`] says so. The node saves the operands [`saved_indices`] names (per
/// occurrence) with their carrier versions.
pub(crate) fn record(invocation: &ResolvedInvocation, outputs: &[Tensor]) -> Result<()> {
    if !would_record(invocation) || !outputs.iter().any(Tensor::is_differentiable) {
        return Ok(());
    }
    let saved = saved_indices(invocation);
    let Some(rule) = rule_for(invocation, outputs, &saved)? else {
        return Ok(());
    };
    let operands = invocation.call().operands();
    let inputs: Vec<Tensor> = saved
        .iter()
        .filter_map(|&index| operands[index].as_tensor().cloned())
        .collect();
    let name = invocation.call().definition().name().into();
    let node = Node::new(name, inputs, outputs.len(), rule);
    for (i, output) in outputs.iter().enumerate() {
        if output.is_differentiable() {
            output.mark_tracked();
            output.autograd().lock().grad_fn = Some((node.clone(), i));
        }
    }
    Ok(())
}

/// Attaches one node named `name` with the framework-owned `rule` to the differentiable
/// `outputs` when recording is on and some of `inputs` requires gradients; whether it did.
///
/// For framework operations outside the operation registry (TiledEvictable's `project` and
/// `scatter`): every input is saved with its carrier version, as for a recorded call.
pub fn record_rule(
    name: &str,
    inputs: Vec<Tensor>,
    outputs: &[Tensor],
    rule: Box<dyn BackwardRule>,
) -> bool {
    let requires = inputs
        .iter()
        .any(|t| t.is_differentiable() && t.requires_grad());
    if !is_grad_enabled() || !requires || !outputs.iter().any(Tensor::is_differentiable) {
        return false;
    }
    let node = Node::new(name.into(), inputs, outputs.len(), rule);
    for (i, output) in outputs.iter().enumerate() {
        if output.is_differentiable() {
            output.mark_tracked();
            output.autograd().lock().grad_fn = Some((node.clone(), i));
        }
    }
    true
}
