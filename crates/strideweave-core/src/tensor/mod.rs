//! Tensors: `(carrier, offset, layout, dtype)`, their element access and zero-copy views.

mod access;
pub(crate) mod canonical_layouts;
mod f32_values;
mod representation;
pub(crate) mod shared_layout;
mod views;

pub use representation::Tensor;
