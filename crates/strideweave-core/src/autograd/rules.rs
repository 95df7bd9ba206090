//! The backward rule of a recorded operation: a built-in's rule from its spec
//! (`operation::builtin`, docs/autograd-design.md "Rules"), or a custom operation's declared
//! VJP.

use crate::autograd::node::BackwardRule;
use crate::carriers::Generic;
use crate::dtype::Value;
use crate::error::{Error, Result};
use crate::operation::builtin::{BuiltinVjp, VjpRule};
use crate::operation::{Builtin, Operand, ResolvedInvocation, Vjp, VjpContext};
use crate::ops;
use crate::tensor::Tensor;

/// The rule of the operation `invocation` ran, for a node that saves the operands at
/// `saved` (operand indices, in order); `None` for an operation without gradients
/// (comparisons, or a custom operation declared non-differentiable).
pub(crate) fn rule_for(
    invocation: &ResolvedInvocation,
    outputs: &[Tensor],
    saved: &[usize],
) -> Result<Option<Box<dyn BackwardRule>>> {
    let definition = invocation.call().definition();
    if !definition.is_builtin() {
        return Ok(match definition.vjp() {
            Some(Vjp::Rule(_)) => Some(Box::new(CustomRule {
                invocation: invocation.clone(),
                // Detached, so the node does not own its outputs (no reference cycle).
                outputs: outputs.iter().map(Tensor::detach).collect(),
                inputs: saved.to_vec(),
            })),
            _ => None,
        });
    }
    let Some(builtin) = definition.builtin() else {
        return Err(Error::Value(format!(
            "'{}' is neither built-in nor custom",
            definition.name()
        )));
    };
    // A dependent class may stream its own backward of the operations it executed.
    let dispatcher = invocation
        .call()
        .operands()
        .iter()
        .find_map(Operand::as_tensor)
        .map(|t| t.carrier().clone());
    let own = dispatcher.as_ref().and_then(|carrier| {
        carrier
            .composite_provider()?
            .autograd()?
            .backward_rule(invocation)
    });
    if let Some(rule) = own {
        return Ok(Some(rule));
    }
    Ok(builtin_rule(builtin, invocation))
}

/// The rule `builtin`'s spec declares for `invocation` (`None` without gradients).
pub(crate) fn builtin_rule(
    builtin: Builtin,
    invocation: &ResolvedInvocation,
) -> Option<Box<dyn BackwardRule>> {
    builtin.spec().vjp.map(|rule| {
        Box::new(BuiltinRule {
            builtin,
            rule,
            invocation: invocation.clone(),
        }) as Box<dyn BackwardRule>
    })
}

/// The saved `inputs` made computable with the cotangent `g`: an input on another carrier
/// class than `g` is copied by its own carrier into a dense tensor (`x · 1`, an exact copy
/// dispatched on `x`'s carrier) when that lands on `g`'s class.
///
/// This is the case of a dependent carrier whose composite returns its results on another
/// class — raw TiledEvictable operands give dense results on their primary tier's class —
/// so the built-in rules, which combine the cotangent with the saved operands, would otherwise
/// mix two carrier classes (a Type error). Rules that use only the operands' shapes (their
/// spec says so) need no copy, nor `mul` by a scalar; an input whose carrier cannot make one
/// is kept as it is.
fn on_cotangent_class(builtin: Builtin, inputs: &[Tensor], g: &Tensor) -> Result<Vec<Tensor>> {
    let class = g.carrier().class();
    let shapes_only = builtin.spec().shapes_only || inputs.len() == 1 && builtin == Builtin::Mul;
    inputs
        .iter()
        .map(|input| {
            if shapes_only || input.carrier().class() == class {
                return Ok(input.clone());
            }
            let one = if input.dtype() == crate::dtype::DType::INT32 {
                Value::Int(1)
            } else {
                Value::Float(1.0)
            };
            Ok(match ops::mul(input, one) {
                Ok(dense) if dense.carrier().class() == class => dense,
                _ => input.clone(),
            })
        })
        .collect()
}

/// The rule of a built-in operation: the one its spec declares.
struct BuiltinRule {
    builtin: Builtin,
    rule: VjpRule,
    invocation: ResolvedInvocation,
}

impl BackwardRule for BuiltinRule {
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(Some(g)) = grad_outputs.first() else {
            return Ok(vec![None; inputs.len()]);
        };
        let lowered = on_cotangent_class(self.builtin, inputs, g)?;
        let grads = match (self.rule)(&BuiltinVjp::new(&self.invocation, &lowered, g)) {
            // The carrier runs the forward but not an operation the rule needs: the framework
            // evaluates the rule itself, on the reference kernels.
            Err(Error::UnsupportedOperationPlan(_)) => {
                on_reference(self.rule, &self.invocation, inputs, g)
            }
            outcome => outcome,
        }?;
        // A rule differentiates with respect to every tensor operand; an operand that is not
        // differentiable (an Int32 operand of a mixed-dtype call) takes no gradient.
        Ok(grads
            .into_iter()
            .enumerate()
            .map(|(i, grad)| grad.filter(|_| inputs.get(i).is_none_or(Tensor::is_differentiable)))
            .collect())
    }
}

/// Evaluates the gradient rule `rule` with the Generic reference kernels: the operands and
/// the cotangent are read through their carriers' storage into Generic tensors, the rule runs
/// there, and each gradient is returned in fresh storage of its operand's exact class (the
/// operand's own factory), so the autograd of a built-in never depends on the operations a
/// carrier executes beyond the forward.
fn on_reference(
    rule: VjpRule,
    invocation: &ResolvedInvocation,
    inputs: &[Tensor],
    g: &Tensor,
) -> Result<Vec<Option<Tensor>>> {
    let generic = |t: &Tensor| -> Result<Tensor> {
        let values = t.to_values()?;
        Tensor::compact(
            Generic::carrier(&values, t.dtype(), true)?,
            t.shape().clone(),
        )
    };
    let reference_inputs = inputs.iter().map(generic).collect::<Result<Vec<_>>>()?;
    let reference_g = generic(g)?;
    let grads = rule(&BuiltinVjp::new(
        invocation,
        &reference_inputs,
        &reference_g,
    ))?;
    grads
        .into_iter()
        .zip(inputs)
        .map(|(grad, input)| {
            let Some(grad) = grad else {
                return Ok(None);
            };
            let values = grad.to_values()?;
            let carrier = input
                .carrier()
                .new_like(&values, true, Some(grad.dtype()))?;
            Ok(Some(Tensor::compact(carrier, grad.shape().clone())?))
        })
        .collect()
}

/// A custom operation's declared rule, given its context.
struct CustomRule {
    invocation: ResolvedInvocation,
    outputs: Vec<Tensor>,
    /// The operand index of each node input.
    inputs: Vec<usize>,
}

impl BackwardRule for CustomRule {
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let definition = self.invocation.call().definition();
        let Some(Vjp::Rule(rule)) = definition.vjp() else {
            return Ok(vec![None; inputs.len()]);
        };
        let saved = self
            .invocation
            .saved_operands()
            .iter()
            .filter_map(|&i| {
                self.invocation
                    .call()
                    .operands()
                    .get(i)
                    .and_then(Operand::as_tensor)
                    .cloned()
            })
            .collect();
        let context = VjpContext::new(self.invocation.clone(), self.outputs.clone(), saved);
        let per_operand = rule(&context, grad_outputs)?;
        // The rule answers per differentiable operand; the node has one entry per saved input.
        let specs = definition.schema().operands();
        let differentiable: Vec<usize> = specs
            .iter()
            .enumerate()
            .filter(|(_, spec)| spec.is_differentiable())
            .map(|(index, _)| index)
            .collect();
        if per_operand.len() != differentiable.len() {
            return Err(Error::Value(format!(
                "the vjp of '{}' returned {} gradients for {} differentiable operands",
                definition.name(),
                per_operand.len(),
                differentiable.len()
            )));
        }
        let mut answers: Vec<Option<Tensor>> = vec![None; specs.len()];
        for (index, grad) in differentiable.into_iter().zip(per_operand) {
            answers[index] = grad;
        }
        Ok(self
            .inputs
            .iter()
            .map(|&index| answers.get_mut(index).and_then(Option::take))
            .collect())
    }
}
