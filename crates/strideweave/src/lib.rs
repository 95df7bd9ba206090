//! StrideWeave: a tensor runtime whose tensors are `(carrier, offset, layout, dtype)`.
//!
//! Layouts are CuTe-style hierarchical shape/stride maps (re-exported from
//! [`strideweave_layout`]); carriers are the places a tensor's slots live and the authorities
//! that execute operations on them. This crate is built up issue by issue; at this stage it
//! provides the error model and the layout algebra.

pub mod autograd;
pub mod carrier;
pub mod carriers;
pub mod dtype;
pub mod error;
mod kernels;
pub mod movement;
pub mod operation;
pub mod ops;
pub mod tensor;

pub use carrier::{Carrier, CarrierClass};
pub use dtype::{DType, Value};
pub use error::{Error, ErrorKind, Result, UnsupportedOperationPlan};
pub use strideweave_layout as layout;
pub use strideweave_layout::{IntTuple, Layout, LayoutError, Shape, SliceKey, Stride};
pub use tensor::Tensor;

/// The README's examples run as doctests, so the front page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
