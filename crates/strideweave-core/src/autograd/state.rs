//! The gradient bookkeeping every tensor object carries.

use crate::autograd::node::Node;
use crate::tensor::Tensor;

/// Whether a tensor takes part in differentiation, its accumulated gradient, and the node
/// that produced it.
#[derive(Default)]
pub(crate) struct AutogradState {
    /// Set by the user on a leaf.
    pub(crate) requires_grad: bool,
    /// The accumulated gradient (leaves, and non-leaves that retain theirs).
    pub(crate) grad: Option<Tensor>,
    /// Whether a non-leaf keeps its gradient.
    pub(crate) retain_grad: bool,
    /// The node that produced this tensor, and which of its outputs it is.
    pub(crate) grad_fn: Option<(Node, usize)>,
}
