//! `StateLock`: the lock around a definition-backed carrier's provider state, which refuses
//! an access that re-enters the same carrier on the same thread instead of deadlocking.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::carrier::CarrierClass;
use crate::carriers::extension::storage_provider::ErasedState;
use crate::error::{Error, Result};

/// How many nested shared holds per thread are remembered (deeper ones are not checked for
/// an upgrade to exclusive).
const REMEMBERED: usize = 8;

thread_local! {
    /// The state locks this thread holds shared (their addresses; 0 is a free entry). No
    /// destructor, so reaching it is a plain thread-local access.
    static SHARED: Cell<[usize; REMEMBERED]> = const { Cell::new([0; REMEMBERED]) };
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
pub(crate) struct StateLock {
    lock: RwLock<ErasedState>,
    /// The thread holding the lock exclusively ([`this_thread`]), or 0.
    writer: AtomicUsize,
}

/// Shared access to the state; released on drop.
pub(crate) struct SharedState<'a> {
    guard: RwLockReadGuard<'a, ErasedState>,
    key: usize,
}

/// Exclusive access to the state; released on drop.
pub(crate) struct ExclusiveState<'a> {
    guard: RwLockWriteGuard<'a, ErasedState>,
    writer: &'a AtomicUsize,
}

impl StateLock {
    pub(crate) fn new(state: ErasedState) -> StateLock {
        StateLock {
            lock: RwLock::new(state),
            writer: AtomicUsize::new(0),
        }
    }

    fn key(&self) -> usize {
        self as *const StateLock as usize
    }

    /// Shared access; a Runtime error naming `class` when this thread holds it exclusively.
    pub(crate) fn read(&self, class: CarrierClass) -> Result<SharedState<'_>> {
        if self.writer.load(Ordering::Acquire) == this_thread() {
            return Err(reentered(class, "writes"));
        }
        let guard = self.lock.read().unwrap_or_else(PoisonError::into_inner);
        let key = self.key();
        SHARED.with(|shared| {
            let mut held = shared.get();
            if let Some(free) = held.iter_mut().find(|k| **k == 0) {
                *free = key;
                shared.set(held);
            }
        });
        Ok(SharedState { guard, key })
    }

    /// Exclusive access; a Runtime error naming `class` when this thread holds it already.
    pub(crate) fn write(&self, class: CarrierClass) -> Result<ExclusiveState<'_>> {
        let me = this_thread();
        if self.writer.load(Ordering::Acquire) == me {
            return Err(reentered(class, "writes"));
        }
        let key = self.key();
        if SHARED.with(|shared| shared.get().contains(&key)) {
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

impl Drop for SharedState<'_> {
    fn drop(&mut self) {
        let key = self.key;
        // A thread being torn down has no holds left to forget.
        let _ = SHARED.try_with(|shared| {
            let mut held = shared.get();
            if let Some(entry) = held.iter_mut().rev().find(|k| **k == key) {
                *entry = 0;
                shared.set(held);
            }
        });
    }
}

impl Drop for ExclusiveState<'_> {
    fn drop(&mut self) {
        // Cleared before the guard (a later field) unlocks.
        self.writer.store(0, Ordering::Release);
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
