//! Calling an operation on tensors: the first tensor's carrier decides.

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Dispatches `name` on the carrier of the first operand and runs it on `operands`.
///
/// Every operand must live on the same exact carrier class (separate instances are fine);
/// mixed classes are a Type error raised before dispatch, and no automatic move happens
/// (semantics-carriers.md §4, "Mixed carriers").
pub fn call(name: &str, operands: &[Tensor]) -> Result<Vec<Tensor>> {
    let Some(first) = operands.first() else {
        return Err(Error::Type(format!(
            "'{name}' needs at least one tensor operand"
        )));
    };
    let class = first.carrier().class();
    if let Some(other) = operands.iter().find(|t| t.carrier().class() != class) {
        return Err(Error::Type(format!(
            "Tensor backing carriers must match: '{name}' got {class} and {} operands",
            other.carrier().class()
        )));
    }
    first.carrier().dispatch_op(name)?.forward(operands)
}
