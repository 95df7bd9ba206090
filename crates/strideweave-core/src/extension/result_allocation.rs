//! Allocating a kernel's results from its invocation.

use crate::error::{Error, Result};
use crate::operation::{Operand, ResolvedInvocation};
use crate::tensor::Tensor;

impl ResolvedInvocation {
    /// A fresh result tensor for result spec `index`: zeroed storage of the spec's dtype and
    /// extent from the first tensor operand's carrier factory (`allocate_like`, so the result
    /// has the exact class the kernel's carrier dispatched on), laid out as the spec says.
    ///
    /// Index error for a result index the invocation does not have; Value error for a call
    /// without tensor operands; otherwise the factory's errors.
    pub fn allocate_result(&self, index: usize) -> Result<Tensor> {
        let spec = self.results().get(index).ok_or_else(|| {
            Error::Index(format!(
                "'{}' has {} results, no result {index}",
                self.call().definition().name(),
                self.results().len()
            ))
        })?;
        let prototype = self
            .call()
            .operands()
            .iter()
            .find_map(Operand::as_tensor)
            .ok_or_else(|| {
                Error::Value(format!(
                    "'{}' has no tensor operand to allocate a result like",
                    self.call().definition().name()
                ))
            })?;
        let carrier = prototype.carrier().allocate_like(
            spec.layout().cosize(),
            true,
            Some(spec.dtype()),
            false,
        )?;
        spec.tensor(carrier)
    }

    /// [`allocate_result`](ResolvedInvocation::allocate_result) holding `values`, one per
    /// element in colexicographic order (see [`Tensor::write_f32`]).
    pub fn result_from_f32(&self, index: usize, values: &[f32]) -> Result<Tensor> {
        let result = self.allocate_result(index)?;
        result.write_f32(values)?;
        Ok(result)
    }
}
