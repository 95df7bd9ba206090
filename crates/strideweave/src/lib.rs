//! StrideWeave: a tensor runtime whose tensors are `(carrier, offset, layout, dtype)`.
//!
//! This crate is the front door: it re-exports the runtime's crates under the public paths
//! users and the seed name, so where a part is implemented never shows in a user's imports.
//!
//! - [`layout`]: CuTe-style hierarchical shape/stride maps and their algebra (the
//!   dependency-free `strideweave_layout` crate);
//! - [`dtype`]: identity-compared element types and scalar [`Value`]s;
//! - [`carrier`] and [`carriers`]: the places a tensor's slots live (Generic, CPU,
//!   FileBacked, Evictable, BlockDevice, Metal, TiledEvictable), the carrier extension, and
//!   the authorities that execute operations on them;
//! - [`tensor`]: tensors, element access and zero-copy views;
//! - [`operation`] and [`ops`]: definitions, dtype planning, capabilities and dispatch of the
//!   built-in and custom operations;
//! - [`movement`]: moving a tensor to another carrier;
//! - [`autograd`]: reverse-mode differentiation.
//!
//! Every failure is an [`Error`] whose [`ErrorKind`] mirrors the exception classes of the
//! seed contract and whose message names what is at fault.

pub use strideweave_core::{
    autograd, carrier, dtype, error, limits, movement, operation, ops, parallelism, tensor,
};

/// The shipped carriers, the carrier extension (`carriers::extension`) and TiledEvictable's
/// residency vocabulary, under one path whichever crate implements them.
pub mod carriers {
    pub use strideweave_core::carriers::*;
    pub use strideweave_core::extension;
    pub use strideweave_tiled::{
        AwaitProjection, AwaitResidency, AwaitScatter, CapacityPolicy, ResidencyPlan,
        ResidencyPolicy, ResidencyPurpose, ScatterReduction, TileLocation, TileProgress,
        TileResidency, TileSelection, TileSet, TileState, TiledEvictable, WhenPinned,
    };
}

pub use strideweave_core::{
    register_carrier_definition, register_kernel_pack, Carrier, CarrierClass, CarrierDefinition,
    CarrierFacet, CompositeProvider, DType, Error, ErrorKind, IntTuple, KernelExecutionInterface,
    KernelPack, KernelPattern, KernelProvider, Layout, LayoutError, Parallelism, Result, Shape,
    SliceKey, StorageProvider, Stride, Tensor, TransferRoute, Unsupported,
    UnsupportedOperationPlan, Value,
};
pub use strideweave_layout as layout;

/// The README's examples run as doctests, so the front page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
