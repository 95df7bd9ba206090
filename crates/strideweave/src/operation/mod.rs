//! Operations: what a carrier can execute ([`OperationCapability`]) and the computations a
//! carrier dispatches ([`Operation`]); definitions, dtype planning and the shipped kernels
//! build on these.

mod call;
mod capability;
mod dispatched;

pub use call::call;
pub use capability::{
    Accumulation, Arithmetic, OperandCapability, OperandRole, OperationCapability,
};
pub use dispatched::Operation;
