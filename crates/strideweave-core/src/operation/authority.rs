//! `Authority`: who executes the operations on a carrier's tensors, fixed when the carrier
//! is built (docs/carriers.md, Dispatch).

use crate::extension::{CompositeProvider, ExecutionSet};
use crate::operation::BuiltinKernel;

/// The execution authority of one carrier: the one source both the dispatch gate's reach and
/// the execution of a call read, decided once at construction from the carrier's class.
#[derive(Clone)]
pub(crate) enum Authority {
    /// A definition-free class: its dispatch hook, and for a built-in the kernel function the
    /// class hands over (CPU and Generic do), which computes what the hook would.
    Hook {
        /// The built-in kernel function, when the class has one.
        builtin: Option<BuiltinKernel>,
    },
    /// A kernel-backed definition: its frozen kernel execution set (frozen for the life of
    /// the process).
    Kernels(&'static ExecutionSet),
    /// A dependent definition: its composite provider.
    Composite(CompositeProvider),
    /// A storage-only definition: no operation runs on it.
    StorageOnly,
}
