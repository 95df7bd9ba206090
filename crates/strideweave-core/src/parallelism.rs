//! How many threads the CPU kernels may use: a process-wide [`Parallelism`] setting, read
//! with [`get`] and changed with [`set`], and a scoped override for the calling thread,
//! [`with_parallelism`].
//!
//! # What it controls
//!
//! The fast CPU kernels of the elementwise operations, the reductions and `matmul` split
//! large work into parallel tasks on the current [rayon] thread pool. The setting bounds how
//! many: a kernel splits work into `min(threads allowed, work / smallest useful share)` tasks
//! (the share is 50 000 elements, or 64³/2 multiply-adds for a product), so small work —
//! elementwise and reduction work of at most 100 000 elements, products of fewer than 64³
//! multiply-adds — always runs on the calling thread, whatever the setting, without reading it
//! or touching the pool. A product hands `faer` the matching `faer::Par` (`Par::Seq` for one
//! thread). `select` follows the setting too but splits in at most two. The Generic reference
//! kernels and third-party kernel packs do not read the setting.
//!
//! # Default
//!
//! [`Parallelism::Machine`]: as many tasks as the current rayon pool has threads, which is
//! the global pool outside [`rayon::ThreadPool::install`] (sized by `RAYON_NUM_THREADS`, or
//! by [`std::thread::available_parallelism`] when that is unset) and the installed pool
//! inside it.
//!
//! # What it changes in the results
//!
//! Elementwise and reduction results are bitwise the same under every setting. Elementwise
//! results are computed element by element, and a reduction result always accumulates its
//! elements in the same order wherever the results are cut. When a reduction has few results
//! (under 64) over a long reduced mode, it cuts that mode into pieces whose number depends on
//! the size of the work alone (one per 50 000 elements), reduces each piece and merges the
//! partial results in piece order; the setting only decides how many threads compute the
//! pieces. `matmul` results are bitwise the same too (`faer` shares a product's output tiles
//! between threads, each tile summed in one fixed order), except for matrix–vector products
//! (a result of one row or one column): there `faer` cuts the contraction into one partial
//! sum per thread, so the last bits may change with the thread count, within the `matmul`
//! tolerance of docs/kernel-semantics.md. Int32 results are exact under every setting, and an
//! Overflow error names the same element under every setting.
//!
//! # Threads, tasks and the pool
//!
//! Like `faer::Par::Rayon`, [`Parallelism::Threads`] is a number of tasks on the current rayon
//! pool, not a pool of its own: more tasks than the pool has threads share its threads. To run
//! on a pool of a given size, install it ([`rayon::ThreadPool::install`]) around the call, and
//! set any scoped override inside `install`, since the installed closure runs on one of the
//! pool's threads.
//!
//! ```
//! use std::num::NonZeroUsize;
//! use strideweave::parallelism::{self, with_parallelism, Parallelism};
//!
//! assert_eq!(Parallelism::default(), Parallelism::Machine);
//! let two = Parallelism::threads(2)?;
//! assert_eq!(two, Parallelism::Threads(NonZeroUsize::new(2).unwrap()));
//! // Only this thread, only inside the closure:
//! let inside = with_parallelism(Parallelism::Sequential, parallelism::current);
//! assert_eq!(inside, Parallelism::Sequential);
//! assert_eq!(Parallelism::Sequential.thread_count(), 1);
//! assert_eq!(two.thread_count(), 2);
//! assert_eq!(
//!     Parallelism::threads(0).unwrap_err().kind(),
//!     strideweave::ErrorKind::Value
//! );
//! # Ok::<(), strideweave::Error>(())
//! ```

use std::cell::Cell;
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// How many threads the CPU kernels may split large work over (the [module](self) says what
/// it controls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Parallelism {
    /// Every kernel runs on the calling thread and never touches a rayon pool.
    Sequential,
    /// Large work is split into at most this many tasks on the current rayon pool.
    /// `Threads(1)` computes what `Sequential` computes, on the calling thread.
    Threads(NonZeroUsize),
    /// As many tasks as the current rayon pool has threads (`rayon::current_num_threads()`);
    /// the default.
    #[default]
    Machine,
}

impl Parallelism {
    /// `Threads(count)`, or a Value error naming the count when it is 0.
    ///
    /// # Errors
    /// Value when `count` is 0.
    pub fn threads(count: usize) -> Result<Parallelism> {
        NonZeroUsize::new(count)
            .map(Parallelism::Threads)
            .ok_or_else(|| {
                Error::Value(format!(
                    "Parallelism::threads needs at least one thread, got {count}"
                ))
            })
    }

    /// The most tasks this setting lets a kernel use, here and now: 1 for `Sequential`, `n`
    /// for `Threads(n)`, and the current rayon pool's thread count for `Machine` (which
    /// starts rayon's global pool if nothing has yet).
    pub fn thread_count(self) -> usize {
        match self {
            Parallelism::Sequential => 1,
            Parallelism::Threads(count) => count.get(),
            Parallelism::Machine => rayon::current_num_threads().max(1),
        }
    }

    /// The setting as the process-wide atomic stores it: 0 is `Machine`, 1 `Sequential` and
    /// `n + 1` is `Threads(n)` (saturating, so `Threads(usize::MAX)` is stored as
    /// `Threads(usize::MAX - 1)`, a difference no machine can observe).
    fn encode(self) -> usize {
        match self {
            Parallelism::Machine => 0,
            Parallelism::Sequential => 1,
            Parallelism::Threads(count) => count.get().saturating_add(1),
        }
    }

    /// The inverse of [`Parallelism::encode`].
    fn decode(stored: usize) -> Parallelism {
        match stored {
            0 => Parallelism::Machine,
            1 => Parallelism::Sequential,
            n => NonZeroUsize::new(n - 1).map_or(Parallelism::Sequential, Parallelism::Threads),
        }
    }
}

impl fmt::Display for Parallelism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Parallelism::Sequential => f.write_str("Sequential"),
            Parallelism::Threads(count) => write!(f, "Threads({count})"),
            Parallelism::Machine => f.write_str("Machine"),
        }
    }
}

/// The process-wide setting, encoded ([`Parallelism::encode`]); `Machine` until set.
static PROCESS_WIDE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The calling thread's scoped override, if [`with_parallelism`] is running on it.
    static SCOPED: Cell<Option<Parallelism>> = const { Cell::new(None) };
}

/// Sets the process-wide setting (safe from any thread; the last call wins). Kernels already
/// running keep the setting they read when they started.
pub fn set(parallelism: Parallelism) {
    PROCESS_WIDE.store(parallelism.encode(), Ordering::Relaxed);
}

/// The process-wide setting: [`Parallelism::Machine`] until [`set`] changes it. A scoped
/// override does not change it (see [`current`]).
pub fn get() -> Parallelism {
    Parallelism::decode(PROCESS_WIDE.load(Ordering::Relaxed))
}

/// The setting the kernels called on this thread use: the innermost [`with_parallelism`]
/// override running on it, or else the process-wide setting ([`get`]).
pub fn current() -> Parallelism {
    // `try_with`: a kernel run from a thread-local destructor sees the process-wide setting.
    SCOPED
        .try_with(Cell::get)
        .ok()
        .flatten()
        .unwrap_or_else(get)
}

/// Runs `f` with `parallelism` as the setting of the kernels it calls on this thread, then
/// restores the previous override (also when `f` panics). Overrides nest; they apply to the
/// calling thread only, so work `f` hands to other threads (rayon tasks included) follows
/// those threads' settings.
pub fn with_parallelism<R>(parallelism: Parallelism, f: impl FnOnce() -> R) -> R {
    /// Restores the previous override when dropped.
    struct Restore(Option<Parallelism>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPED.with(|scoped| scoped.set(self.0));
        }
    }
    let _restore = Restore(SCOPED.with(|scoped| scoped.replace(Some(parallelism))));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoding_round_trips() {
        let counts = [1, 2, 3, 64, usize::MAX - 1];
        let mut settings = vec![Parallelism::Machine, Parallelism::Sequential];
        settings.extend(counts.map(|n| Parallelism::threads(n).unwrap()));
        for p in settings {
            assert_eq!(Parallelism::decode(p.encode()), p);
        }
        let most = Parallelism::Threads(NonZeroUsize::MAX);
        assert_eq!(
            Parallelism::decode(most.encode()),
            Parallelism::threads(usize::MAX - 1).unwrap()
        );
    }

    #[test]
    fn overrides_nest_and_restore() {
        let two = Parallelism::threads(2).unwrap();
        let outer = current();
        with_parallelism(two, || {
            assert_eq!(current(), two);
            with_parallelism(Parallelism::Sequential, || {
                assert_eq!(current(), Parallelism::Sequential)
            });
            assert_eq!(current(), two);
        });
        assert_eq!(current(), outer);
        let caught = std::panic::catch_unwind(|| {
            with_parallelism(two, || panic!("inside"));
        });
        assert!(caught.is_err());
        assert_eq!(current(), outer);
    }
}
