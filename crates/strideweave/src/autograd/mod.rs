//! Reverse-mode automatic differentiation. Graph construction is framework-owned: carriers
//! and providers never build nodes.
//!
//! Today this module holds the thread-local recording mode; recording, `backward` and `grad`
//! build on it (see docs/autograd-design.md).

mod grad_mode;

pub use grad_mode::{is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard};
