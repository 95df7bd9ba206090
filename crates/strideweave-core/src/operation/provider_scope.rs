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
//! A provider that continues its work on a thread of its own takes the work along with
//! [`ProviderWork`]: writes made inside [`ProviderWork::run`] on that thread go into the same
//! journal. The journal is also the evidence that tells a provider's mutation of an operand (a
//! contract violation) from another thread's write to it while the operation ran. A write
//! from a thread the provider did not enter into its work is reported as a concurrent change
//! and cannot be undone, and a write to memory the provider owns outright, such as its own
//! storage state, is not seen at all: both are the provider's own business.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use parking_lot::Mutex;

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

/// The changes of one outermost piece of provider work, in order, from every thread that
/// works for it.
#[derive(Default)]
struct Journal {
    changes: Mutex<Vec<Change>>,
}

/// A thread's provider work: one thread-local, so opening and ending a scope reach it once.
struct ThreadWork {
    /// How many provider scopes (or entered pieces of work) are open on this thread.
    depth: Cell<usize>,
    /// The journal of the work this thread runs for, while `depth > 0`.
    current: RefCell<Option<Arc<Journal>>>,
}

thread_local! {
    static WORK: ThreadWork = const {
        ThreadWork {
            depth: Cell::new(0),
            current: RefCell::new(None),
        }
    };
}

/// Whether provider work is running on this thread (so writes are journaled). None is
/// while the thread's locals are being destroyed (a write from another local's destructor).
#[inline]
pub(crate) fn journaling() -> bool {
    WORK.try_with(|work| work.depth.get() > 0).unwrap_or(false)
}

/// The journal of the work running on this thread, if anything was journaled or shared yet.
fn current() -> Option<Arc<Journal>> {
    WORK.with(|work| work.current.borrow().clone())
}

/// The journal of the work running on this thread, made on first use (so provider work that
/// writes nothing allocates nothing).
fn current_or_new() -> Arc<Journal> {
    WORK.with(|work| Arc::clone(work.current.borrow_mut().get_or_insert_with(Arc::default)))
}

/// Records the current values of `slots` of `carrier` (each in range) before a write, when
/// provider work is running on this thread: read in bulk (one provider call for a
/// definition-backed class with a bulk read, where a read per slot may be a device round
/// trip each), or slot by slot when the bulk read fails. A slot that cannot be read is not
/// recorded: the write that follows fails the same way.
pub fn note_slots(carrier: &Carrier, slots: impl IntoIterator<Item = usize>) {
    if !journaling() {
        return;
    }
    let slots: Vec<usize> = slots.into_iter().collect();
    let previous: Vec<(usize, Value)> = match carrier.read_all_unchecked(&slots) {
        Ok(values) => slots.into_iter().zip(values).collect(),
        Err(_) => slots
            .into_iter()
            .filter_map(|slot| carrier.read_unchecked(slot).ok().map(|v| (slot, v)))
            .collect(),
    };
    current_or_new().changes.lock().push(Change::Slots {
        carrier: carrier.clone(),
        previous,
    });
}

/// Records one version step of `carrier`, when provider work is running on this thread.
pub(crate) fn note_version(carrier: &Carrier) {
    if journaling() {
        current_or_new()
            .changes
            .lock()
            .push(Change::Version(carrier.clone()));
    }
}

/// An open provider scope. Dropping it uncommitted (an error, a panic, failed validation)
/// undoes every change journaled inside it.
pub(crate) struct ProviderScope {
    start: usize,
    committed: bool,
}

impl ProviderScope {
    /// Opens a scope: writes on this thread (and on threads entered into its work) are
    /// journaled until it ends. Inside open provider work it continues that work's journal.
    pub(crate) fn open() -> ProviderScope {
        let start = WORK.with(|work| {
            work.depth.set(work.depth.get() + 1);
            work.current
                .borrow()
                .as_ref()
                .map_or(0, |journal| journal.changes.lock().len())
        });
        ProviderScope {
            start,
            committed: false,
        }
    }

    /// Whether provider work in this scope wrote the carrier `id`.
    pub(crate) fn wrote(&self, id: usize) -> bool {
        current().is_some_and(|journal| {
            journal
                .changes
                .lock()
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
            if let Some(journal) = current() {
                let undone: Vec<Change> = {
                    let mut changes = journal.changes.lock();
                    let start = self.start.min(changes.len());
                    changes.drain(start..).collect()
                };
                // Outside the lock: restoring writes through the carriers, which journal
                // nothing (restores are unversioned and not noted).
                for change in undone.into_iter().rev() {
                    change.undo();
                }
            }
        }
        let ended = WORK.with(|work| {
            let depth = work.depth.get().saturating_sub(1);
            work.depth.set(depth);
            // The outermost work ended: its journal goes with it.
            if depth == 0 {
                work.current.borrow_mut().take()
            } else {
                None
            }
        });
        // Dropped outside the borrow: the kept changes hold carrier handles.
        drop(ended);
    }
}

/// The provider work running on the current thread, to be continued on a thread of the
/// provider's own.
///
/// The framework runs a kernel's, composite's or dispatch hook's work inside a transaction
/// (docs/carrier-extension.md, "Provider work is transactional"): writes made
/// through the framework while it runs are journaled, undone if the work fails, and published
/// once if it succeeds. That covers the thread the framework called the provider on. A
/// provider that hands part of its work to another thread takes [`ProviderWork::current`]
/// with it and runs that part inside [`run`](ProviderWork::run): its writes then belong to the
/// same transaction — undone on failure, and an undeclared write to an operand is reported as
/// the provider's contract violation rather than as a concurrent change. Work done after the
/// operation has ended (its result published or its failure reported) is outside any
/// transaction.
#[derive(Clone)]
pub struct ProviderWork {
    journal: Arc<Journal>,
}

impl ProviderWork {
    /// The work running on this thread: `Some` inside a provider's `prepare`, `submit`, or a
    /// completion's `wait` that the framework called, `None` elsewhere.
    pub fn current() -> Option<ProviderWork> {
        if !journaling() {
            return None;
        }
        Some(ProviderWork {
            journal: current_or_new(),
        })
    }

    /// Runs `work` on this thread as part of the provider work: its writes through the
    /// framework are journaled into the same transaction.
    pub fn run<R>(&self, work: impl FnOnce() -> R) -> R {
        /// Gives this thread back its own journal and depth, on unwind too.
        struct Left {
            previous: Option<Arc<Journal>>,
            depth: usize,
        }
        impl Drop for Left {
            fn drop(&mut self) {
                let replaced = WORK.with(|work| {
                    work.depth.set(self.depth);
                    std::mem::replace(&mut *work.current.borrow_mut(), self.previous.take())
                });
                drop(replaced);
            }
        }
        let (previous, depth) = WORK.with(|work| {
            let depth = work.depth.get();
            work.depth.set(depth + 1);
            (
                work.current.borrow_mut().replace(Arc::clone(&self.journal)),
                depth,
            )
        });
        let _left = Left { previous, depth };
        work()
    }
}

impl std::fmt::Debug for ProviderWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderWork").finish_non_exhaustive()
    }
}
