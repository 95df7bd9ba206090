//! [`AwaitScatter`]: the completion handle of `TiledEvictable::scatter`.

use strideweave_core::error::Result;
use strideweave_core::extension::{CompletionCell, ProviderCompletion};
use strideweave_core::tensor::Tensor;

/// The completion handle of [`TiledEvictable::scatter`](crate::TiledEvictable::scatter)
/// (docs/tiers.md, project and scatter; a move-like handle, as docs/movement.md, Completion,
/// describes).
///
/// A blocking [`ProviderCompletion`], never a `Future`, with the contract of
/// [`MoveHandle`](strideweave_core::movement::MoveHandle): `done()` is true exactly once the scatter is
/// terminal; `wait()` blocks until then and returns the tensor over the fresh TiledEvictable —
/// the same tensor object on every call and from every thread — or the scatter's error, equal
/// on every call. Cloning shares the outcome; dropping every handle cancels nothing.
///
/// Today the scatter runs at submission, so the handle is terminal when `scatter` returns.
#[derive(Clone, Debug)]
pub struct AwaitScatter {
    outcome: CompletionCell<Tensor>,
}

impl AwaitScatter {
    /// The handle of a scatter that finished with `outcome`.
    pub(crate) fn finished(outcome: Result<Tensor>) -> AwaitScatter {
        AwaitScatter {
            outcome: CompletionCell::ready(outcome),
        }
    }

    /// Whether the scatter is terminal.
    pub fn done(&self) -> bool {
        self.outcome.done()
    }

    /// Blocks until the scatter is terminal and returns its tensor or its error.
    pub fn wait(&self) -> Result<Tensor> {
        self.outcome.wait()
    }
}

impl ProviderCompletion<Tensor> for AwaitScatter {
    fn done(&self) -> bool {
        AwaitScatter::done(self)
    }

    fn wait(&self) -> Result<Tensor> {
        AwaitScatter::wait(self)
    }
}
