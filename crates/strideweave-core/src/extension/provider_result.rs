//! `ProviderResult`: the output tensors of one completed kernel or composite submission.

use std::fmt;

use crate::error::{Error, Result};
use crate::operation::dispatch::ProviderOutputs;
use crate::tensor::Tensor;

/// The outputs a kernel or composite submission hands back to the framework.
///
/// Seed rule: "ProviderResult(outputs) SHALL materialize a non-empty finite iterable of Tensor
/// values once, expose outputs: tuple[Tensor, ...], and remain immutable". The iterable is
/// collected once (a single output inline, with no allocation of its own) and exposed as a
/// slice; "a non-Tensor entry SHALL fail with TypeError" is enforced by the type system (the
/// items are `Tensor`), and an empty iterable is a Value error. Cloning is cheap: it shares the
/// same output tensors.
#[derive(Clone)]
pub struct ProviderResult {
    outputs: ProviderOutputs,
}

impl ProviderResult {
    /// Materializes `outputs` once.
    ///
    /// Seed rule: "an empty iterable SHALL fail with ValueError" — here a Value error naming
    /// `ProviderResult`.
    pub fn new(outputs: impl IntoIterator<Item = Tensor>) -> Result<ProviderResult> {
        let outputs: ProviderOutputs = outputs.into_iter().collect();
        if outputs.is_empty() {
            return Err(Error::Value(
                "ProviderResult outputs must not be empty: give a non-empty sequence of Tensor \
                 values"
                    .to_string(),
            ));
        }
        Ok(ProviderResult { outputs })
    }

    /// The output tensors in result order (seed: `outputs: tuple[Tensor, ...]`, never empty).
    pub fn outputs(&self) -> &[Tensor] {
        &self.outputs
    }

    /// The outputs, moved out of this result: what the dispatcher validates and publishes.
    pub(crate) fn into_outputs(self) -> ProviderOutputs {
        self.outputs
    }
}

impl fmt::Debug for ProviderResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderResult")
            .field("outputs", &self.outputs)
            .finish()
    }
}
