//! `StateLock`: the lock around a definition-backed carrier's provider state, which refuses
//! an access that re-enters the same carrier on the same thread instead of deadlocking.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::carrier::CarrierClass;
use crate::carriers::extension::ErasedState;
use crate::error::{Error, Result};

thread_local! {
    /// The state locks this thread holds: (lock address, exclusive).
    static HELD: RefCell<Vec<(usize, bool)>> = const { RefCell::new(Vec::new()) };
}

/// The provider-owned state of one definition-backed carrier behind a reader-writer lock.
///
/// A provider callback runs with the lock held (shared for reads, exclusive for writes). If
/// that callback — or a carrier it reaches, such as a tier calling back into the carrier
/// that composes it — accesses the same carrier again on the same thread while the lock is
/// held exclusively (or asks for it exclusively while it is held shared), waiting would
/// never end: that access is a Runtime error instead. Nested shared access is allowed.
pub(crate) struct StateLock {
    lock: RwLock<ErasedState>,
}

/// Shared access to the state; released on drop.
pub(crate) struct SharedState<'a> {
    guard: RwLockReadGuard<'a, ErasedState>,
    key: usize,
}

/// Exclusive access to the state; released on drop.
pub(crate) struct ExclusiveState<'a> {
    guard: RwLockWriteGuard<'a, ErasedState>,
    key: usize,
}

impl StateLock {
    pub(crate) fn new(state: ErasedState) -> StateLock {
        StateLock {
            lock: RwLock::new(state),
        }
    }

    /// Shared access; a Runtime error naming `class` when this thread holds it exclusively.
    pub(crate) fn read(&self, class: CarrierClass) -> Result<SharedState<'_>> {
        let key = self.enter(class, false)?;
        let guard = self.lock.read().unwrap_or_else(PoisonError::into_inner);
        Ok(SharedState { guard, key })
    }

    /// Exclusive access; a Runtime error naming `class` when this thread holds it already.
    pub(crate) fn write(&self, class: CarrierClass) -> Result<ExclusiveState<'_>> {
        let key = self.enter(class, true)?;
        let guard = self.lock.write().unwrap_or_else(PoisonError::into_inner);
        Ok(ExclusiveState { guard, key })
    }

    /// Records that this thread is about to hold the lock, unless that would wait for itself.
    fn enter(&self, class: CarrierClass, exclusive: bool) -> Result<usize> {
        let key = self as *const StateLock as usize;
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(&(_, holding_exclusive)) = held.iter().find(|(k, _)| *k == key) {
                if holding_exclusive || exclusive {
                    let doing = if holding_exclusive { "writes" } else { "reads" };
                    return Err(Error::Runtime(format!(
                        "the {class} carrier was accessed again on this thread while its \
                         storage provider {doing} it (a provider callback, or a carrier it \
                         reached, called back into the same carrier); the access is refused \
                         rather than waiting for itself"
                    )));
                }
            }
            held.push((key, exclusive));
            Ok(key)
        })
    }
}

/// Forgets one hold of the lock at `key` by this thread.
fn leave(key: usize) {
    // A thread being torn down has no holds left to forget.
    let _ = HELD.try_with(|held| {
        let mut held = held.borrow_mut();
        if let Some(position) = held.iter().rposition(|(k, _)| *k == key) {
            held.remove(position);
        }
    });
}

impl Drop for SharedState<'_> {
    fn drop(&mut self) {
        leave(self.key);
    }
}

impl Drop for ExclusiveState<'_> {
    fn drop(&mut self) {
        leave(self.key);
    }
}

impl Deref for SharedState<'_> {
    type Target = ErasedState;
    fn deref(&self) -> &ErasedState {
        &self.guard
    }
}

impl Deref for ExclusiveState<'_> {
    type Target = ErasedState;
    fn deref(&self) -> &ErasedState {
        &self.guard
    }
}

impl DerefMut for ExclusiveState<'_> {
    fn deref_mut(&mut self) -> &mut ErasedState {
        &mut self.guard
    }
}
