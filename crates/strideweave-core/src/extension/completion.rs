//! `ProviderCompletion<T>`: the blocking completion protocol of prepared work, and
//! [`CompletionCell`], the framework-provided implementation.

use std::fmt;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::Result;

/// The terminal outcome of provider work that finishes after submission returns.
///
/// Seed rule: "ProviderCompletion\[T\] SHALL be a ... protocol with the done: bool property and
/// blocking wait() -> T method. It SHALL expose no __await__ method or other ... coroutine
/// protocol" — so this is a plain trait, not a `Future`. The seed's "a non-boolean done value
/// or an object missing any protocol member SHALL fail ... with TypeError" is enforced by the
/// type system: every implementation has both methods and `done` returns a `bool`.
///
/// Implementations must honour the seed's rule that "completion SHALL be thread-safe and
/// idempotent: repeated or concurrent waits SHALL observe the same terminal value identity or
/// the same terminal exception, and done SHALL become true exactly at that terminal outcome";
/// [`CompletionCell`] does, and is the recommended implementation.
pub trait ProviderCompletion<T: Clone + Send + Sync>: Send + Sync {
    /// Whether the terminal outcome has been reached (seed: `done` becomes true exactly at the
    /// terminal outcome, and never reverts).
    fn done(&self) -> bool;

    /// Blocks until the terminal outcome and returns it (seed: every repeated or concurrent
    /// wait observes the same terminal value or the same terminal error).
    fn wait(&self) -> Result<T>;
}

struct Shared<T> {
    outcome: Mutex<Option<Result<T>>>,
    finished: Condvar,
}

/// A thread-safe, write-once completion: the framework-provided [`ProviderCompletion`].
///
/// Seed rule: "repeated or concurrent waits SHALL observe the same terminal value identity or
/// the same terminal exception, and done SHALL become true exactly at that terminal outcome".
/// The first [`CompletionCell::complete`] fixes the outcome; later ones are ignored. Every
/// [`wait`](ProviderCompletion::wait) returns a clone of that one stored value (so an
/// `Arc`-backed `T` keeps its identity) or a clone of that one stored error. Cloning the cell
/// is cheap and yields a handle to the same completion.
///
/// ```
/// use strideweave::carriers::extension::{CompletionCell, ProviderCompletion};
/// let cell = CompletionCell::new();
/// let provider_side = cell.clone();
/// let worker = std::thread::spawn(move || provider_side.complete(Ok(7)));
/// assert_eq!(cell.wait()?, 7);
/// assert!(cell.done());
/// assert!(worker.join().unwrap());
/// # Ok::<(), strideweave::Error>(())
/// ```
pub struct CompletionCell<T> {
    shared: Arc<Shared<T>>,
}

impl<T> CompletionCell<T> {
    /// A completion with no outcome yet: `done()` is false until the first
    /// [`complete`](CompletionCell::complete).
    pub fn new() -> CompletionCell<T> {
        CompletionCell {
            shared: Arc::new(Shared {
                outcome: Mutex::new(None),
                finished: Condvar::new(),
            }),
        }
    }

    /// A completion that is already terminal with `outcome` (seed: `done` is true exactly at
    /// the terminal outcome, here from the start).
    pub fn ready(outcome: Result<T>) -> CompletionCell<T> {
        CompletionCell {
            shared: Arc::new(Shared {
                outcome: Mutex::new(Some(outcome)),
                finished: Condvar::new(),
            }),
        }
    }

    /// Records the terminal `outcome` and wakes every waiter.
    ///
    /// Seed rule: the terminal outcome is unique, so only the first call takes effect and
    /// returns `true`; every later call is ignored and returns `false`.
    pub fn complete(&self, outcome: Result<T>) -> bool {
        let mut slot = self.shared.outcome.lock();
        if slot.is_some() {
            return false;
        }
        *slot = Some(outcome);
        drop(slot);
        self.shared.finished.notify_all();
        true
    }
}

impl<T> Default for CompletionCell<T> {
    fn default() -> Self {
        CompletionCell::new()
    }
}

impl<T> Clone for CompletionCell<T> {
    fn clone(&self) -> Self {
        CompletionCell {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Clone + Send + Sync> ProviderCompletion<T> for CompletionCell<T> {
    fn done(&self) -> bool {
        self.shared.outcome.lock().is_some()
    }

    fn wait(&self) -> Result<T> {
        let mut slot = self.shared.outcome.lock();
        loop {
            if let Some(outcome) = slot.as_ref() {
                return outcome.clone();
            }
            self.shared.finished.wait(&mut slot);
        }
    }
}

impl<T> fmt::Debug for CompletionCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.shared.outcome.lock().as_ref() {
            None => "pending",
            Some(Ok(_)) => "completed",
            Some(Err(_)) => "failed",
        };
        f.debug_struct("CompletionCell")
            .field("state", &state)
            .finish()
    }
}
