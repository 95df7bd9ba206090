//! A count of carrier constructions on the current thread: how a caller (the conformance
//! suite) observes that a refused call built no storage first — seed: a capability miss is
//! refused "before allocation", and a kernel pattern returning `Unsupported` "SHALL perform no
//! provider submission, public mutation, result publication, or version change".

use std::cell::Cell;

thread_local! {
    static CONSTRUCTED: Cell<u64> = const { Cell::new(0) };
}

/// How many carriers of any class — definition-free or definition-backed, built by a
/// constructor, a factory (`new_like`, `allocate_like`) or a kernel's result allocation — were
/// constructed on this thread so far. The difference across a call that ran on this thread
/// counts the carriers it constructed (work a provider continues on another thread is not
/// counted here).
pub fn constructed_on_this_thread() -> u64 {
    CONSTRUCTED.with(Cell::get)
}

/// Counts one construction on this thread.
#[inline]
pub(crate) fn count_construction() {
    CONSTRUCTED.with(|count| count.set(count.get().wrapping_add(1)));
}
