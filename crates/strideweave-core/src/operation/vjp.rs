//! The backward rule of a custom operation (docs/autograd.md, Custom operations).

use std::sync::Arc;

use crate::error::Result;
use crate::operation::ResolvedInvocation;
use crate::tensor::Tensor;

/// What a custom operation's backward rule sees: the invocation it ran, its outputs and the
/// operands it saved.
#[derive(Debug, Clone)]
pub struct VjpContext {
    invocation: ResolvedInvocation,
    outputs: Arc<[Tensor]>,
    saved_operands: Arc<[Tensor]>,
}

impl VjpContext {
    /// The context of one recorded call.
    pub fn new(
        invocation: ResolvedInvocation,
        outputs: Vec<Tensor>,
        saved_operands: Vec<Tensor>,
    ) -> Self {
        VjpContext {
            invocation,
            outputs: outputs.into(),
            saved_operands: saved_operands.into(),
        }
    }

    /// The invocation that ran.
    pub fn invocation(&self) -> &ResolvedInvocation {
        &self.invocation
    }

    /// The outputs it produced.
    pub fn outputs(&self) -> &[Tensor] {
        &self.outputs
    }

    /// The operands it saved, in `saved_operands` order.
    pub fn saved_operands(&self) -> &[Tensor] {
        &self.saved_operands
    }
}

/// A backward rule: given the context and one cotangent (or none) per result, one gradient
/// (or none) per differentiable operand.
pub type VjpFn =
    dyn Fn(&VjpContext, &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> + Send + Sync;

/// The backward behaviour a custom operation declares: a rule, or the explicit statement
/// that it has none (the seed's `NON_DIFFERENTIABLE` marker).
pub enum Vjp {
    /// Gradients flow through this rule.
    Rule(Box<VjpFn>),
    /// The operation is not differentiable.
    NonDifferentiable,
}

impl Vjp {
    /// A backward rule from a closure.
    pub fn rule(
        f: impl Fn(&VjpContext, &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>
            + Send
            + Sync
            + 'static,
    ) -> Vjp {
        Vjp::Rule(Box::new(f))
    }
}
