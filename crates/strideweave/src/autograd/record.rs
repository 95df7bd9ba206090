//! Recording: the node a differentiating call attaches to its outputs.

use crate::autograd::grad_mode::is_grad_enabled;
use crate::autograd::node::{BackwardRule, Node};
use crate::autograd::rules::rule_for;
use crate::error::Result;
use crate::operation::{Operand, ResolvedInvocation};
use crate::tensor::Tensor;

/// Whether a call with these operands would record a node now.
pub(crate) fn would_record(invocation: &ResolvedInvocation) -> bool {
    // The operands' flags first: while none is tracked, the thread-local mode is not read.
    invocation
        .call()
        .operands()
        .iter()
        .filter_map(Operand::as_tensor)
        .any(|t| t.requires_grad() && t.is_differentiable())
        && is_grad_enabled()
}

/// Attaches a node to the differentiable `outputs` of a validated call when recording is on
/// and some tensor operand requires gradients. Every tensor operand is saved (per
/// occurrence) with its carrier version.
pub(crate) fn record(invocation: &ResolvedInvocation, outputs: &[Tensor]) -> Result<()> {
    if !would_record(invocation) {
        return Ok(());
    }
    let Some(rule) = rule_for(invocation, outputs)? else {
        return Ok(());
    };
    let inputs: Vec<Tensor> = invocation
        .call()
        .operands()
        .iter()
        .filter_map(Operand::as_tensor)
        .cloned()
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
pub(crate) fn record_rule(
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
