//! The carrier-authoring and kernel-extension surface (carrier-extension spec): the value
//! records providers exchange with the framework.
//!
//! Seed rule: these values "SHALL be importable from strideweave.carriers.extension"; here
//! that is `strideweave::carriers::extension`. Registries and dispatch build on them.

mod completion;
mod execution_interface;
mod prepared;
mod provider_result;
mod unsupported;

pub use completion::{CompletionCell, ProviderCompletion};
pub use execution_interface::{
    ExecutionInterface, InterfaceHandle, InterfaceIdentity, KernelExecutionInterface,
};
pub use prepared::{PreparedComposite, PreparedKernel, PreparedTransfer, Submitted};
pub use provider_result::ProviderResult;
pub use unsupported::Unsupported;
