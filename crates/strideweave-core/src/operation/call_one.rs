//! `call_one`: a call of an operation that has exactly one result.

use crate::error::Result;
use crate::operation::schema::OptionValue;
use crate::operation::{operation_definition, Operand, OperandList};
use crate::tensor::Tensor;

/// [`call`](crate::operation::call) of an operation with one result, returning that result:
/// the same binding, planning, gate, execution and validation. Value error when the
/// operation returned another number of results (nothing else is different).
///
/// ```
/// use strideweave::operation::call_one;
/// use strideweave::{Shape, Tensor};
/// let x = Tensor::from_f32(&[-1.0, 2.0], Shape::new(2)?)?;
/// assert_eq!(call_one("neg", [x.into()], &[])?.to_f32_vec()?, [1.0, -2.0]);
/// # Ok::<(), strideweave::Error>(())
/// ```
pub fn call_one(
    name: &str,
    operands: impl IntoIterator<Item = Operand>,
    options: &[(&str, OptionValue)],
) -> Result<Tensor> {
    operation_definition(name)?
        .call_list(OperandList::collect(operands), options)?
        .into_single(name)
}
