//! `Operand`: a tensor or a Rust scalar passed to an operation.

use crate::dtype::Value;
use crate::tensor::Tensor;

/// One operand of an operation call.
#[derive(Debug, Clone)]
pub enum Operand {
    /// A tensor.
    Tensor(Tensor),
    /// A Rust scalar; it adopts the kind of the tensor it meets (a weak scalar).
    Scalar(Value),
}

impl Operand {
    /// The tensor, when this operand is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Operand::Tensor(tensor) => Some(tensor),
            Operand::Scalar(_) => None,
        }
    }

    /// The scalar, when this operand is one.
    pub fn as_scalar(&self) -> Option<Value> {
        match self {
            Operand::Tensor(_) => None,
            Operand::Scalar(value) => Some(*value),
        }
    }
}

impl From<Tensor> for Operand {
    fn from(tensor: Tensor) -> Self {
        Operand::Tensor(tensor)
    }
}

impl From<&Tensor> for Operand {
    fn from(tensor: &Tensor) -> Self {
        Operand::Tensor(tensor.clone())
    }
}

impl From<Value> for Operand {
    fn from(value: Value) -> Self {
        Operand::Scalar(value)
    }
}

impl From<f64> for Operand {
    fn from(value: f64) -> Self {
        Operand::Scalar(Value::Float(value))
    }
}

impl From<i64> for Operand {
    fn from(value: i64) -> Self {
        Operand::Scalar(Value::Int(value))
    }
}

impl From<bool> for Operand {
    fn from(value: bool) -> Self {
        Operand::Scalar(Value::Bool(value))
    }
}
