//! Provider work is transactional: the journal of the carrier writes made while it runs.
//!
//! Dispatch runs every provider (a dispatch hook's operation, a kernel pattern, a composite)
//! inside a [`ProviderScope`]. While one is open on a thread, every write made through the
//! framework on that thread (`Carrier::set`, scatter, a move target's writes) first records
//! the slots' previous values, and every version it moves. When the scope ends without being
//! committed — the provider failed, panicked, or its results failed validation — the
//! journal is undone in reverse order: the slots get their values back and the versions move
//! back, so the failure changes nothing. A committed scope keeps its changes (inside an outer
//! scope they stay undoable by it).
//!
//! The journal is also the evidence that tells a provider's mutation of an operand (a
//! contract violation) from another thread's write to it while the operation ran. A write
//! that a provider makes from a thread of its own is not seen here (it is reported as a
//! concurrent change and cannot be undone), and neither is a write to memory the provider
//! owns outright, such as its own storage state: both are the provider's own business.

use std::cell::{Cell, RefCell};

use crate::carrier::Carrier;
use crate::dtype::Value;

/// One undoable change.
enum Change {
    /// The previous values of slots about to be written.
    Slots {
        carrier: Carrier,
        previous: Vec<(usize, Value)>,
    },
    /// One version step.
    Version(Carrier),
}

impl Change {
    fn carrier(&self) -> &Carrier {
        match self {
            Change::Slots { carrier, .. } | Change::Version(carrier) => carrier,
        }
    }

    /// Puts back what the change replaced. Restoring a slot cannot fail for a value the
    /// slot held; a body that refuses anyway leaves that slot as the provider left it.
    fn undo(self) {
        match self {
            Change::Slots { carrier, previous } => {
                for (slot, value) in previous.into_iter().rev() {
                    let _ = carrier.write_unversioned(slot, value);
                }
            }
            Change::Version(carrier) => carrier.unbump_version(),
        }
    }
}

thread_local! {
    /// How many provider scopes are open on this thread.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The changes made inside the open scopes, in order.
    static JOURNAL: RefCell<Vec<Change>> = const { RefCell::new(Vec::new()) };
}

/// Whether provider work is running on this thread (so writes are journaled).
#[inline]
pub(crate) fn journaling() -> bool {
    DEPTH.get() > 0
}

/// Records the current values of `slots` of `carrier` (each in range) before a write, when
/// provider work is running on this thread. A slot that cannot be read is not recorded:
/// the write that follows fails the same way.
pub(crate) fn note_slots(carrier: &Carrier, slots: impl IntoIterator<Item = usize>) {
    if !journaling() {
        return;
    }
    let previous: Vec<(usize, Value)> = slots
        .into_iter()
        .filter_map(|slot| carrier.read_unchecked(slot).ok().map(|v| (slot, v)))
        .collect();
    JOURNAL.with_borrow_mut(|journal| {
        journal.push(Change::Slots {
            carrier: carrier.clone(),
            previous,
        })
    });
}

/// Records one version step of `carrier`, when provider work is running on this thread.
pub(crate) fn note_version(carrier: &Carrier) {
    if journaling() {
        JOURNAL.with_borrow_mut(|journal| journal.push(Change::Version(carrier.clone())));
    }
}

/// An open provider scope. Dropping it uncommitted (an error, a panic, failed validation)
/// undoes every change journaled inside it.
pub(crate) struct ProviderScope {
    start: usize,
    committed: bool,
}

impl ProviderScope {
    /// Opens a scope: writes on this thread are journaled until it ends.
    pub(crate) fn open() -> ProviderScope {
        DEPTH.set(DEPTH.get() + 1);
        let start = JOURNAL.with_borrow(Vec::len);
        ProviderScope {
            start,
            committed: false,
        }
    }

    /// Whether provider work in this scope wrote the carrier `id`.
    pub(crate) fn wrote(&self, id: usize) -> bool {
        JOURNAL.with_borrow(|journal| {
            journal
                .get(self.start..)
                .is_some_and(|changes| changes.iter().any(|c| c.carrier().id() == id))
        })
    }

    /// Ends the scope keeping its changes.
    pub(crate) fn commit(mut self) {
        self.committed = true;
    }
}

impl Drop for ProviderScope {
    fn drop(&mut self) {
        if !self.committed {
            let undone: Vec<Change> = JOURNAL.with_borrow_mut(|journal| {
                let start = self.start.min(journal.len());
                journal.drain(start..).collect()
            });
            // Outside the borrow: restoring writes through the carriers, which journal nothing
            // (restores are unversioned and not noted).
            for change in undone.into_iter().rev() {
                change.undo();
            }
        }
        let depth = DEPTH.get().saturating_sub(1);
        DEPTH.set(depth);
        if depth == 0 {
            let kept: Vec<Change> = JOURNAL.with_borrow_mut(std::mem::take);
            // Dropping the kept changes drops carrier handles: outside the borrow.
            drop(kept);
        }
    }
}
