//! Which carriers provider work wrote: the evidence that tells a provider's mutation of an
//! operand (a contract violation) from another thread's write to it while the operation ran
//! (a Runtime error, not the provider's fault).
//!
//! Dispatch runs every provider (a dispatch hook's operation, a kernel pattern, a composite)
//! inside a [`ProviderScope`]; while one is open on a thread, every public carrier write on
//! that thread is noted. A write that a provider makes from a thread of its own is not seen
//! here, so a changed operand with no noted write is reported as a concurrent change.

use std::cell::{Cell, RefCell};

thread_local! {
    /// How many provider scopes are open on this thread.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The ids of the carriers written inside the open scopes, in write order.
    static WRITTEN: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Notes a write to the carrier `id` when provider work is running on this thread.
pub(crate) fn note_write(id: usize) {
    if DEPTH.get() > 0 {
        WRITTEN.with_borrow_mut(|written| written.push(id));
    }
}

/// An open provider scope; dropping it closes the scope (also when provider work panics).
pub(crate) struct ProviderScope {
    start: usize,
}

impl ProviderScope {
    /// Opens a scope: writes on this thread are noted until it is dropped.
    pub(crate) fn open() -> ProviderScope {
        DEPTH.set(DEPTH.get() + 1);
        let start = WRITTEN.with_borrow(Vec::len);
        ProviderScope { start }
    }

    /// Whether provider work in this scope wrote the carrier `id`.
    pub(crate) fn wrote(&self, id: usize) -> bool {
        WRITTEN.with_borrow(|written| written.get(self.start..).is_some_and(|w| w.contains(&id)))
    }
}

impl Drop for ProviderScope {
    fn drop(&mut self) {
        let depth = DEPTH.get().saturating_sub(1);
        DEPTH.set(depth);
        if depth == 0 {
            WRITTEN.with_borrow_mut(Vec::clear);
        }
    }
}
