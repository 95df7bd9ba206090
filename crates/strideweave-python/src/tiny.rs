//! Which calls into the core keep the GIL: tiny work on CPU tensors.
//!
//! Releasing the GIL and taking it back costs more than a tiny CPU operation itself, so a
//! call whose operands are all CPU tensors of at most [`INLINE_ELEMENTS`] elements runs with
//! the GIL held. That is sound because such a call runs only the CPU carrier's Rust kernels:
//! no Python callback (the operation dispatches on the CPU carrier, and mixed carrier classes
//! are refused before any provider runs), no wait on another thread, and no lock that a
//! thread running Python code could hold (the core's registries are locked only briefly and
//! never across a provider callback). Its work is bounded by the operand sizes, so other
//! Python threads wait at most that long. Every other call releases the GIL.

use pyo3::prelude::*;
use strideweave::carriers::Cpu;
use strideweave::Tensor;

/// The most elements an operand of a call that keeps the GIL may have.
pub const INLINE_ELEMENTS: usize = 64;

/// Whether an operation on `operands` keeps the GIL: every one a CPU tensor of at most
/// [`INLINE_ELEMENTS`] elements.
#[inline]
pub fn inline(operands: &[&Tensor]) -> bool {
    operands
        .iter()
        .all(|t| t.size() <= INLINE_ELEMENTS && t.carrier().downcast_ref::<Cpu>().is_some())
}

/// Runs `work` on the calling thread, with the GIL released unless `keep_gil`.
#[inline]
pub fn run<T: Send>(py: Python<'_>, keep_gil: bool, work: impl FnOnce() -> T + Send) -> T {
    if keep_gil {
        work()
    } else {
        crate::finalization::detach(py, work)
    }
}
