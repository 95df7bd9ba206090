//! Reverse-mode automatic differentiation (docs/autograd.md). Graph construction
//! is framework-owned: carriers and providers never build nodes.
//!
//! Operations record a [`Node`] per call while recording is on ([`is_grad_enabled`]) and an
//! operand requires gradients; [`Tensor::backward`](crate::Tensor::backward) and [`grad`]
//! walk the graph back with one iterative engine.

mod batched;
mod engine;
mod grad_mode;
mod materialize;
pub(crate) mod node;
pub(crate) mod record;
mod rules;
mod state;
mod tensor_api;
mod view_rule;

pub use batched::grad_batched;
pub(crate) use grad_mode::provider_callback;
pub use grad_mode::{is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard};
pub(crate) use node::BackwardRule;
pub use node::Node;
pub(crate) use record::{record, would_record};
pub(crate) use state::AutogradState;
pub use tensor_api::grad;
pub(crate) use view_rule::{record_move, record_view};
