//! Kernels: the Generic reference and the fast CPU implementations of the built-in operations.

pub(crate) mod cpu;
mod extrema;
pub(crate) mod reference;
