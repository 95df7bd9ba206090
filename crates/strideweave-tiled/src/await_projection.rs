//! [`AwaitProjection`]: the completion handle of `TiledEvictable::project`.

use strideweave_core::error::Result;
use strideweave_core::extension::{CompletionCell, ProviderCompletion};
use strideweave_core::tensor::Tensor;

/// The completion handle of [`TiledEvictable::project`](crate::TiledEvictable::project).
///
/// `project` returns `AwaitProjection` (docs/tiers.md, project and scatter). Like every completion
/// of the carrier extension it is a blocking [`ProviderCompletion`], never a `Future`: `done()` is
/// true exactly once the projection is terminal, and `wait()` blocks until then and returns the
/// compact tensor — the same tensor object ([`Tensor::same_as`]) on every call and from every
/// thread — or the projection's error, equal on every call. Cloning shares the outcome; dropping
/// every handle cancels nothing.
///
/// Today the gather runs at submission, so the handle is terminal when `project` returns;
/// the handle is the contract that lets a later out-of-core gather finish asynchronously.
#[derive(Clone, Debug)]
pub struct AwaitProjection {
    outcome: CompletionCell<Tensor>,
}

impl AwaitProjection {
    /// The handle of a projection that finished with `outcome`.
    pub(crate) fn finished(outcome: Result<Tensor>) -> AwaitProjection {
        AwaitProjection {
            outcome: CompletionCell::ready(outcome),
        }
    }

    /// Whether the projection is terminal.
    pub fn done(&self) -> bool {
        self.outcome.done()
    }

    /// Blocks until the projection is terminal and returns the compact tensor or its error.
    pub fn wait(&self) -> Result<Tensor> {
        self.outcome.wait()
    }
}

impl ProviderCompletion<Tensor> for AwaitProjection {
    fn done(&self) -> bool {
        AwaitProjection::done(self)
    }

    fn wait(&self) -> Result<Tensor> {
        AwaitProjection::wait(self)
    }
}
