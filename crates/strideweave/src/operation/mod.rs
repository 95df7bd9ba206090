//! Operations: what a carrier can execute, and (with later issues) definitions, dtype
//! planning and dispatch.

mod capability;

pub use capability::{
    Accumulation, Arithmetic, OperandCapability, OperandRole, OperationCapability,
};
