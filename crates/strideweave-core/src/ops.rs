//! The built-in operations as functions: `ops::add(&a, &b)`.
//!
//! Each function calls its built-in definition (looked up once per process, not per call)
//! through the same binding, planning, capability gate, dispatch and publication check as
//! [`operation::call`](crate::operation::call), and returns the single result: there is one
//! pipeline, for every carrier and every size.
//!
//! ```
//! use strideweave::carriers::Cpu;
//! use strideweave::{ops, Shape, Tensor, Value};
//! let a = Tensor::compact(Cpu::from_f32(&[1.0, -2.0], true)?, Shape::new(2)?)?;
//! let b = Tensor::compact(Cpu::from_f32(&[0.5, 0.5], true)?, Shape::new(2)?)?;
//! let y = ops::relu(&ops::add(&a, &b)?)?;
//! assert_eq!(y.to_values()?, [Value::Float(1.5), Value::Float(0.0)]);
//! # Ok::<(), strideweave::Error>(())
//! ```

use std::sync::LazyLock;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::{
    operation_definition, Builtin, Operand, OperandList, OperationDefinition, OptionValue,
};
use crate::tensor::Tensor;

/// The built-in definitions, in [`Builtin::ALL`] order, resolved once.
static DEFINITIONS: LazyLock<Vec<Result<OperationDefinition>>> = LazyLock::new(|| {
    Builtin::ALL
        .iter()
        .map(|builtin| operation_definition(builtin.name()))
        .collect()
});

/// Calls `builtin` through its cached definition and returns its single result.
fn run(builtin: Builtin, operands: OperandList, options: &[(&str, OptionValue)]) -> Result<Tensor> {
    let definition = match DEFINITIONS.get(builtin as usize) {
        Some(Ok(definition)) => definition,
        Some(Err(error)) => return Err(error.clone()),
        None => {
            return Err(Error::NotImplemented(format!(
                "'{builtin}' has no registered definition"
            )))
        }
    };
    definition
        .call_list(operands, options)?
        .into_single(builtin.name())
}

macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident ($variant:ident);)*) => {$(
        $(#[$doc])*
        pub fn $name(x: &Tensor) -> Result<Tensor> {
            run(Builtin::$variant, OperandList::one(Operand::Tensor(x.clone())), &[])
        }
    )*};
}

macro_rules! binary {
    ($($(#[$doc:meta])* $name:ident ($variant:ident);)*) => {$(
        $(#[$doc])*
        pub fn $name(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
            run(Builtin::$variant, OperandList::two(Operand::Tensor(lhs.clone()), Operand::Tensor(rhs.clone())), &[])
        }
    )*};
}

macro_rules! tensor_and_operand {
    ($($(#[$doc:meta])* $name:ident ($variant:ident);)*) => {$(
        $(#[$doc])*
        pub fn $name(lhs: &Tensor, rhs: impl Into<Operand>) -> Result<Tensor> {
            run(Builtin::$variant, OperandList::two(Operand::Tensor(lhs.clone()), rhs.into()), &[])
        }
    )*};
}

unary! {
    /// `-x` (Int32 checked).
    neg(Neg);
    /// `|x|` (Int32 checked).
    abs(Abs);
    /// `e^x`, in Float32.
    exp(Exp);
    /// The natural logarithm, in Float32.
    log(Log);
    /// The square root, in Float32.
    sqrt(Sqrt);
    /// The hyperbolic tangent, in Float32.
    tanh(Tanh);
    /// `1 / (1 + e^-x)`, in Float32.
    sigmoid(Sigmoid);
    /// `max(x, 0)`.
    relu(Relu);
    /// The maximum over mode 1 of a two-mode tensor.
    reduce_max(ReduceMax);
}

binary! {
    /// `lhs + rhs`, broadcasting extent-1 leaves of the same tree.
    add(Add);
    /// `lhs - rhs`, broadcasting.
    sub(Sub);
    /// `lhs · rhs` elementwise, broadcasting.
    elementwise_mul(ElementwiseMul);
}

tensor_and_operand! {
    /// `lhs / rhs` in Float32; `rhs` is a tensor or a scalar.
    div(Div);
    /// The elementwise maximum; `rhs` is a tensor or a scalar.
    maximum(Maximum);
    /// The elementwise minimum; `rhs` is a tensor or a scalar.
    minimum(Minimum);
    /// `lhs == rhs` as Bool; `rhs` is a tensor or a scalar.
    eq(Eq);
    /// `lhs < rhs` as Bool; `rhs` is a tensor or a scalar.
    lt(Lt);
    /// `lhs <= rhs` as Bool; `rhs` is a tensor or a scalar.
    le(Le);
}

/// `lhs · rhs` where either may be a scalar: tensor×tensor, tensor×scalar or scalar×tensor.
pub fn mul(lhs: impl Into<Operand>, rhs: impl Into<Operand>) -> Result<Tensor> {
    run(Builtin::Mul, OperandList::two(lhs.into(), rhs.into()), &[])
}

/// `cond ? a : b` elementwise: `cond` is a Bool tensor, `a` and `b` are each a tensor or a
/// scalar, and all three shapes broadcast. The branches promote like [`maximum`]: Int32 with
/// Int32 (or integer scalars) gives Int32, anything with Float32 or a float or bool scalar
/// gives Float32, Bool with Bool gives Bool.
///
/// # Errors
/// A Type error when `cond` is not a Bool tensor or a Bool tensor branch meets a non-Bool
/// one; a Value error when the shapes do not broadcast; an Overflow error for an integer
/// scalar outside Int32 in an Int32 selection.
///
/// ```
/// use strideweave::carriers::Cpu;
/// use strideweave::{ops, Shape, Tensor, Value};
/// let x = Tensor::compact(Cpu::from_f32(&[-1.0, 2.0, -3.0], true)?, Shape::new(3)?)?;
/// let negative = ops::lt(&x, 0.0)?;
/// // The mask [x >= 0] as Float32, and x with its negative elements zeroed.
/// let mask = ops::select(&negative, 0.0, 1.0)?;
/// assert_eq!(mask.to_values()?, [Value::Float(0.0), Value::Float(1.0), Value::Float(0.0)]);
/// let y = ops::select(&negative, 0.0, &x)?;
/// assert_eq!(y.to_values()?, [Value::Float(0.0), Value::Float(2.0), Value::Float(0.0)]);
/// # Ok::<(), strideweave::Error>(())
/// ```
pub fn select(cond: &Tensor, a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Tensor> {
    run(
        Builtin::Select,
        OperandList::three(Operand::Tensor(cond.clone()), a.into(), b.into()),
        &[],
    )
}

/// The sum over mode 1 of a two-mode tensor (Float32 accumulates in Float32).
pub fn reduce_sum(x: &Tensor) -> Result<Tensor> {
    run(
        Builtin::ReduceSum,
        OperandList::one(Operand::Tensor(x.clone())),
        &[],
    )
}

/// [`reduce_sum`] accumulating in `accumulator` (Float32 or Float64).
pub fn reduce_sum_with(x: &Tensor, accumulator: DType) -> Result<Tensor> {
    let options = [("accumulator_dtype", OptionValue::DType(accumulator))];
    run(
        Builtin::ReduceSum,
        OperandList::one(Operand::Tensor(x.clone())),
        &options,
    )
}

/// `(N,K)·(M,K) → (N,M)`: mode 1 of both operands is contracted (a conventional `A·B` is
/// `matmul(A, B.permute([1, 0]))`, which costs no copy).
pub fn matmul(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    run(
        Builtin::Matmul,
        OperandList::two(Operand::Tensor(lhs.clone()), Operand::Tensor(rhs.clone())),
        &[],
    )
}

/// [`matmul`] accumulating in `accumulator` (Float32 or Float64).
pub fn matmul_with(lhs: &Tensor, rhs: &Tensor, accumulator: DType) -> Result<Tensor> {
    let options = [("accumulator_dtype", OptionValue::DType(accumulator))];
    run(
        Builtin::Matmul,
        OperandList::two(Operand::Tensor(lhs.clone()), Operand::Tensor(rhs.clone())),
        &options,
    )
}
