//! StrideWeave's core: a tensor runtime whose tensors are `(carrier, offset, layout, dtype)`.
//! Users reach it through the `strideweave` crate, which re-exports every public path of this
//! one.
//!
//! - [`layout`]: CuTe-style hierarchical shape/stride maps and their algebra (the
//!   dependency-free `strideweave_layout` crate);
//! - [`dtype`]: identity-compared element types and scalar [`Value`]s;
//! - [`carrier`] and [`carriers`]: the places a tensor's slots live (Generic, CPU, FileBacked)
//!   and the authorities that execute operations on them;
//! - [`tensor`]: tensors, element access and zero-copy views;
//! - [`operation`] and [`ops`]: definitions, dtype planning, capabilities and dispatch of the
//!   built-in and custom operations;
//! - [`movement`]: moving a tensor to another carrier;
//! - [`autograd`]: reverse-mode differentiation (in progress).
//!
//! Every failure is an [`Error`] whose [`ErrorKind`] mirrors the exception classes of the
//! seed contract and whose message names what is at fault.

pub mod autograd;
pub mod carrier;
pub mod carriers;
pub mod dtype;
pub mod error;
pub mod extension;
pub mod internal;
mod kernels;
pub mod limits;
pub mod movement;
pub mod operation;
pub mod ops;
pub mod parallelism;
pub mod tensor;

pub use carrier::{Carrier, CarrierClass};
pub use dtype::{DType, Value};
pub use error::{Error, ErrorKind, Result, UnsupportedOperationPlan};
pub use extension::{
    register_carrier_definition, register_kernel_pack, CarrierDefinition, CarrierFacet,
    CompositeProvider, KernelExecutionInterface, KernelPack, KernelPattern, KernelProvider,
    StorageProvider, TransferRoute, Unsupported,
};
pub use parallelism::Parallelism;
pub use strideweave_layout as layout;
pub use strideweave_layout::{IntTuple, Layout, LayoutError, Shape, SliceKey, Stride};
pub use tensor::Tensor;
