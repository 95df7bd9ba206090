//! `StateLock`: the lock around a definition-backed carrier's provider state, which refuses
//! an access that re-enters the same carrier on the same thread instead of deadlocking.

use std::any::Any;
use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::carrier::CarrierClass;
use crate::error::{Error, Result};

/// How many nested shared holds per thread are remembered (deeper ones are not checked for
/// an upgrade to exclusive).
const REMEMBERED: usize = 8;

thread_local! {
    /// The state locks this thread holds shared (their addresses; 0 is a free entry). No
    /// destructor, so reaching it is a plain thread-local access; each hold clears its own
    /// entry when it ends.
    static SHARED: [Cell<usize>; REMEMBERED] = const { [const { Cell::new(0) }; REMEMBERED] };
    /// A marker whose address identifies the current thread while it lives.
    static THREAD: u8 = const { 0 };
}

/// An identity of the current thread, distinct from every other live thread's and from 0.
fn this_thread() -> usize {
    THREAD.with(|marker| marker as *const u8 as usize)
}

/// The provider-owned state of one definition-backed carrier behind a reader-writer lock.
///
/// A provider callback runs with the lock held (shared for reads, exclusive for writes). If
/// that callback — or a carrier it reaches, such as a tier calling back into the carrier
/// that composes it — accesses the same carrier again on the same thread while the lock is
/// held exclusively (or asks for it exclusively while it is held shared), waiting would
/// never end: that access is a Runtime error instead. Nested shared access is allowed.
///
/// The state `S` lives inline (the carrier's body holds the lock): constructing a carrier
/// allocates no box around its provider's state. Access hands the state out as `dyn Any`,
/// which is what the provider's callbacks take.
pub(crate) struct StateLock<S> {
    lock: RwLock<S>,
    /// The thread holding the lock exclusively ([`this_thread`]), or 0.
    writer: AtomicUsize,
}

/// Shared access to the state; released on drop.
pub(crate) struct SharedState<'a, S> {
    guard: RwLockReadGuard<'a, S>,
    /// This hold's entry in [`SHARED`] (`None` beyond the remembered depth).
    entry: Option<usize>,
}

/// Exclusive access to the state; released on drop.
pub(crate) struct ExclusiveState<'a, S> {
    guard: RwLockWriteGuard<'a, S>,
    writer: &'a AtomicUsize,
}

impl<S> StateLock<S> {
    pub(crate) fn new(state: S) -> StateLock<S> {
        StateLock {
            lock: RwLock::new(state),
            writer: AtomicUsize::new(0),
        }
    }

    fn key(&self) -> usize {
        self as *const StateLock<S> as usize
    }

    /// Shared access; a Runtime error naming `class` when this thread holds it exclusively.
    pub(crate) fn read(&self, class: CarrierClass) -> Result<SharedState<'_, S>> {
        if self.writer.load(Ordering::Acquire) == this_thread() {
            return Err(reentered(class, "writes"));
        }
        let guard = self.lock.read().unwrap_or_else(PoisonError::into_inner);
        let key = self.key();
        let entry = SHARED.with(|shared| {
            let free = shared.iter().position(|k| k.get() == 0)?;
            shared[free].set(key);
            Some(free)
        });
        Ok(SharedState { guard, entry })
    }

    /// Exclusive access; a Runtime error naming `class` when this thread holds it already.
    pub(crate) fn write(&self, class: CarrierClass) -> Result<ExclusiveState<'_, S>> {
        let me = this_thread();
        if self.writer.load(Ordering::Acquire) == me {
            return Err(reentered(class, "writes"));
        }
        let key = self.key();
        if SHARED.with(|shared| shared.iter().any(|k| k.get() == key)) {
            return Err(reentered(class, "reads"));
        }
        let guard = self.lock.write().unwrap_or_else(PoisonError::into_inner);
        self.writer.store(me, Ordering::Release);
        Ok(ExclusiveState {
            guard,
            writer: &self.writer,
        })
    }
}

/// The error of an access that would wait for a hold of this same thread.
fn reentered(class: CarrierClass, doing: &str) -> Error {
    Error::Runtime(format!(
        "the {class} carrier was accessed again on this thread while its storage provider \
         {doing} it (a provider callback, or a carrier it reached, called back into the same \
         carrier); the access is refused rather than waiting for itself"
    ))
}

impl<S> SharedState<'_, S> {
    /// The state as its own type.
    pub(crate) fn typed(&self) -> &S {
        &self.guard
    }
}

impl<S> Drop for SharedState<'_, S> {
    fn drop(&mut self) {
        let Some(entry) = self.entry else {
            return;
        };
        // A thread being torn down has no holds left to forget.
        let _ = SHARED.try_with(|shared| shared[entry].set(0));
    }
}

impl<S> Drop for ExclusiveState<'_, S> {
    fn drop(&mut self) {
        // Cleared before the guard (a later field) unlocks.
        self.writer.store(0, Ordering::Release);
    }
}

impl<S: Any + Send + Sync> Deref for SharedState<'_, S> {
    type Target = dyn Any + Send + Sync;
    fn deref(&self) -> &(dyn Any + Send + Sync) {
        &*self.guard
    }
}

impl<S: Any + Send + Sync> Deref for ExclusiveState<'_, S> {
    type Target = dyn Any + Send + Sync;
    fn deref(&self) -> &(dyn Any + Send + Sync) {
        &*self.guard
    }
}

impl<S: Any + Send + Sync> DerefMut for ExclusiveState<'_, S> {
    fn deref_mut(&mut self) -> &mut (dyn Any + Send + Sync) {
        &mut *self.guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carrier::ClassKind;
    use std::sync::OnceLock;

    /// The class the locks of these tests report in their messages.
    fn class() -> CarrierClass {
        static CLASS: OnceLock<CarrierClass> = OnceLock::new();
        *CLASS.get_or_init(|| CarrierClass::mint("StateLockProbe", ClassKind::Independent))
    }

    fn held_entries() -> usize {
        SHARED.with(|shared| shared.iter().filter(|k| k.get() != 0).count())
    }

    #[test]
    fn shared_holds_released_in_any_order_free_their_entries_and_let_a_write_through() {
        let lock = StateLock::new(7u32);
        let outer = lock.read(class()).unwrap();
        let inner = lock.read(class()).unwrap();
        assert_eq!(held_entries(), 2);
        let refused = lock.write(class()).err().unwrap();
        assert_eq!(refused.kind(), crate::ErrorKind::Runtime);
        assert!(refused
            .to_string()
            .contains("while its storage provider reads it"));
        drop(outer);
        assert_eq!(held_entries(), 1);
        assert!(lock.write(class()).is_err());
        assert_eq!(*inner.typed(), 7);
        drop(inner);
        assert_eq!(held_entries(), 0);
        let mut write = lock.write(class()).unwrap();
        let state: &mut (dyn Any + Send + Sync) = &mut *write;
        *state.downcast_mut::<u32>().unwrap() = 8;
        let refused = lock.read(class()).err().unwrap();
        assert!(refused
            .to_string()
            .contains("while its storage provider writes it"));
        drop(write);
        assert_eq!(*lock.read(class()).unwrap().typed(), 8);
    }

    #[test]
    fn holds_beyond_the_remembered_depth_are_allowed_and_leave_no_entry_behind() {
        let lock = StateLock::new(0u8);
        let holds: Vec<_> = (0..REMEMBERED + 3)
            .map(|_| lock.read(class()).unwrap())
            .collect();
        assert_eq!(held_entries(), REMEMBERED);
        assert!(lock.write(class()).is_err());
        drop(holds);
        assert_eq!(held_entries(), 0);
        assert!(lock.write(class()).is_ok());
    }
}
