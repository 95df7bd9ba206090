//! The carrier-authoring and kernel-extension surface (carrier-extension spec): the value
//! records providers exchange with the framework, carrier definitions with their storage
//! providers and facets, and their registration.
//!
//! Seed rule: these values "SHALL be importable from strideweave.carriers.extension"; here
//! that is `strideweave::carriers::extension`. Registries and dispatch build on them.

mod bulk;
mod completion;
pub(crate) mod composite;
mod defined_body;
mod definition;
mod execution_interface;
mod kernels;
mod prepared;
mod provider_result;
mod registration;
mod result_allocation;
mod slot_storage;
mod state_lock;
mod storage_provider;
mod synchronous_kernel;
mod transfer;
mod unsupported;

pub use crate::carrier::CarrierFacet;
pub use crate::operation::provider_scope::ProviderWork;
pub use bulk::{read_f32s, read_i32s};
pub use completion::{CompletionCell, ProviderCompletion};
pub use composite::{CompositePreparation, CompositeProvider};
pub use definition::CarrierDefinition;
pub use execution_interface::{
    ExecutionInterface, InterfaceHandle, InterfaceIdentity, KernelExecutionInterface,
};
pub(crate) use kernels::{freeze_execution_set, kernel_capabilities, ExecutionSet};
pub use kernels::{
    register_kernel_pack, KernelPack, KernelPattern, KernelProvider, Preparation, PrepareFn,
};
pub use prepared::{PreparedComposite, PreparedKernel, PreparedTransfer, Submitted};
pub use provider_result::ProviderResult;
pub(crate) use registration::registered_definition;
pub use registration::{carrier_definition, register_carrier_definition};
pub use slot_storage::SlotStorage;
pub use storage_provider::{AllocationContents, FreshRequest, StorageProvider};
pub(crate) use transfer::provider_name as transfer_provider_name;
pub use transfer::{TransferPreparation, TransferProvider, TransferRequest, TransferRoute};
pub use unsupported::Unsupported;
