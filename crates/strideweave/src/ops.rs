//! The built-in operations as functions: `ops::add(&a, &b)`.
//!
//! Each function calls its built-in definition (looked up once per process, not per call)
//! through the same binding, planning, capability gate, dispatch and publication check as
//! [`operation::call`](crate::operation::call), and returns the single result. The Float32
//! elementwise functions first try the direct path for tiny CPU operands of one canonical
//! layout (at most 256 elements, nothing to record), which computes the identical result
//! without the pipeline's fixed cost and otherwise defers to it.
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
use crate::kernels::cpu::direct;
use crate::operation::{
    operation_definition, Operand, OperandList, OperationDefinition, OptionValue,
    BUILTIN_OPERATIONS,
};
use crate::tensor::Tensor;

/// The built-in definitions, in `BUILTIN_OPERATIONS` order, resolved once.
static DEFINITIONS: LazyLock<Vec<Result<OperationDefinition>>> = LazyLock::new(|| {
    BUILTIN_OPERATIONS
        .iter()
        .map(|name| operation_definition(name))
        .collect()
});

/// Calls the built-in `name` through its cached definition and returns its single result.
fn run(name: &str, operands: OperandList, options: &[(&str, OptionValue)]) -> Result<Tensor> {
    let position = BUILTIN_OPERATIONS.iter().position(|n| *n == name);
    let definition = match position.and_then(|i| DEFINITIONS.get(i)) {
        Some(Ok(definition)) => definition,
        Some(Err(error)) => return Err(error.clone()),
        None => {
            return Err(Error::NotImplemented(format!(
                "'{name}' is not a built-in operation"
            )))
        }
    };
    let mut results = definition.call_list(operands, options)?;
    results
        .pop()
        .ok_or_else(|| Error::ProviderContract(format!("'{name}' returned no result")))
}

macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident $(=> $direct:expr)?;)*) => {$(
        $(#[$doc])*
        pub fn $name(x: &Tensor) -> Result<Tensor> {
            $(if let Some(result) = direct::unary(x, $direct) {
                return Ok(result);
            })?
            run(stringify!($name), OperandList::One([Operand::Tensor(x.clone())]), &[])
        }
    )*};
}

macro_rules! binary {
    ($($(#[$doc:meta])* $name:ident => $direct:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
            if let Some(result) = direct::binary(lhs, rhs, $direct) {
                return Ok(result);
            }
            run(stringify!($name), OperandList::Two([Operand::Tensor(lhs.clone()), Operand::Tensor(rhs.clone())]), &[])
        }
    )*};
}

macro_rules! tensor_and_operand {
    ($($(#[$doc:meta])* $name:ident $(=> $direct:expr)?;)*) => {$(
        $(#[$doc])*
        pub fn $name(lhs: &Tensor, rhs: impl Into<Operand>) -> Result<Tensor> {
            let rhs = rhs.into();
            $(if let Operand::Tensor(rhs) = &rhs {
                if let Some(result) = direct::binary(lhs, rhs, $direct) {
                    return Ok(result);
                }
            })?
            run(stringify!($name), OperandList::Two([Operand::Tensor(lhs.clone()), rhs]), &[])
        }
    )*};
}

unary! {
    /// `-x` (Int32 checked).
    neg => direct::neg;
    /// `|x|` (Int32 checked).
    abs => f32::abs;
    /// `e^x`, in Float32.
    exp => f32::exp;
    /// The natural logarithm, in Float32.
    log => f32::ln;
    /// The square root, in Float32.
    sqrt => f32::sqrt;
    /// The hyperbolic tangent, in Float32.
    tanh => f32::tanh;
    /// `1 / (1 + e^-x)`, in Float32.
    sigmoid => direct::sigmoid;
    /// `max(x, 0)`.
    relu => direct::relu_f32;
    /// The maximum over mode 1 of a two-mode tensor.
    reduce_max;
}

binary! {
    /// `lhs + rhs`, broadcasting extent-1 leaves of the same tree.
    add => direct::add;
    /// `lhs - rhs`, broadcasting.
    sub => direct::sub;
    /// `lhs · rhs` elementwise, broadcasting.
    elementwise_mul => direct::mul;
}

tensor_and_operand! {
    /// `lhs / rhs` in Float32; `rhs` is a tensor or a scalar.
    div => direct::div;
    /// The elementwise maximum; `rhs` is a tensor or a scalar.
    maximum => direct::maximum_f32;
    /// The elementwise minimum; `rhs` is a tensor or a scalar.
    minimum => direct::minimum_f32;
    /// `lhs == rhs` as Bool; `rhs` is a tensor or a scalar.
    eq;
    /// `lhs < rhs` as Bool; `rhs` is a tensor or a scalar.
    lt;
    /// `lhs <= rhs` as Bool; `rhs` is a tensor or a scalar.
    le;
}

/// `lhs · rhs` where either may be a scalar: tensor×tensor, tensor×scalar or scalar×tensor.
pub fn mul(lhs: impl Into<Operand>, rhs: impl Into<Operand>) -> Result<Tensor> {
    let (lhs, rhs) = (lhs.into(), rhs.into());
    if let (Operand::Tensor(l), Operand::Tensor(r)) = (&lhs, &rhs) {
        if let Some(result) = direct::binary(l, r, direct::mul) {
            return Ok(result);
        }
    }
    run("mul", OperandList::Two([lhs, rhs]), &[])
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
        "select",
        OperandList::Three([Operand::Tensor(cond.clone()), a.into(), b.into()]),
        &[],
    )
}

/// The sum over mode 1 of a two-mode tensor (Float32 accumulates in Float32).
pub fn reduce_sum(x: &Tensor) -> Result<Tensor> {
    run(
        "reduce_sum",
        OperandList::One([Operand::Tensor(x.clone())]),
        &[],
    )
}

/// [`reduce_sum`] accumulating in `accumulator` (Float32 or Float64).
pub fn reduce_sum_with(x: &Tensor, accumulator: DType) -> Result<Tensor> {
    let options = [("accumulator_dtype", OptionValue::DType(accumulator))];
    run(
        "reduce_sum",
        OperandList::One([Operand::Tensor(x.clone())]),
        &options,
    )
}

/// `(N,K)·(M,K) → (N,M)`: mode 1 of both operands is contracted (a conventional `A·B` is
/// `matmul(A, B.permute([1, 0]))`, which costs no copy).
pub fn matmul(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    run(
        "matmul",
        OperandList::Two([Operand::Tensor(lhs.clone()), Operand::Tensor(rhs.clone())]),
        &[],
    )
}

/// [`matmul`] accumulating in `accumulator` (Float32 or Float64).
pub fn matmul_with(lhs: &Tensor, rhs: &Tensor, accumulator: DType) -> Result<Tensor> {
    let options = [("accumulator_dtype", OptionValue::DType(accumulator))];
    run(
        "matmul",
        OperandList::Two([Operand::Tensor(lhs.clone()), Operand::Tensor(rhs.clone())]),
        &options,
    )
}
