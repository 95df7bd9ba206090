//! Kernels: the Generic reference implementations of the built-in operations (the CPU's fast
//! kernels live beside the CPU carrier, in `carriers/cpu/kernels`).

pub(crate) mod reference;

use crate::error::Result;
use crate::limits;
use crate::operation::ResolvedInvocation;

/// Refuses an invocation whose operands would make the element-by-element kernels work far
/// beyond what is stored: an operand view that repeats slots with more than
/// [`limits::MAX_REPEATED_ELEMENTS`] elements (a Value error naming the operand).
pub(crate) fn check_bounded_work(name: &str, invocation: &ResolvedInvocation) -> Result<()> {
    for (position, operand) in invocation.call().operands().iter().enumerate() {
        if let Some(tensor) = operand.as_tensor() {
            limits::check_repeated_work(tensor.layout(), || {
                format!("operand {position} of '{name}'")
            })?;
        }
    }
    Ok(())
}
