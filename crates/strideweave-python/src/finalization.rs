//! Interpreter exit with work in flight: no thread is ever killed inside the binding.
//!
//! While CPython (before 3.14) finalizes, a thread other than the finalizing one that tries
//! to take the GIL is ended with `pthread_exit`, whose forced unwind runs through whatever
//! frames the thread has. Through the binding's Rust frames (a callback's attachment, a core
//! call that released the GIL, PyO3's `catch_unwind`) that aborts or crashes the process. So
//! every place the binding takes the GIL back goes through [`attach`] or [`detach`], and:
//!
//! - an `atexit` hook, which runs at the start of finalization while threads still run, marks
//!   the interpreter as finalizing and then lets go of the GIL until every thread that was
//!   taking it or running a Python callback for the binding is done with it (at most
//!   [`DRAIN_LIMIT`]);
//! - from then on, a thread that would take the GIL through the binding parks instead (for
//!   the few instants until the process ends): it touches no Python state, unwinds nothing,
//!   and the process exits with its own status. The finalizing thread itself is exempt.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// The longest the exit hook waits for the binding's threads to leave Python.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// Set by the exit hook: the interpreter is finalizing.
static FINALIZING: AtomicBool = AtomicBool::new(false);

/// The thread that runs the exit hook (and so the finalization).
static FINALIZER: OnceLock<ThreadId> = OnceLock::new();

/// How many (thread, nesting level) pairs are taking the GIL or running Python through the
/// binding right now: what the exit hook waits for.
static ENGAGED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's share of [`ENGAGED`].
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Whether this thread is inside [`detach`]'s work (so it does not hold the GIL).
    static RELEASED: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread certainly does not hold the GIL: it is inside [`detach`]'s work, or it
/// has no Python thread state at all (a thread of the core's that is not attached).
fn holds_no_gil() -> bool {
    // SAFETY: `PyGILState_GetThisThreadState` only reads this thread's entry in the
    // interpreter's thread-state table; it needs no GIL and has no preconditions.
    RELEASED.with(Cell::get) || unsafe { pyo3::ffi::PyGILState_GetThisThreadState() }.is_null()
}

/// Counts this thread in before it takes the GIL. When the interpreter is finalizing, a
/// thread that does not hold the GIL and is not the finalizing thread parks for good instead
/// (one holding it only nests: taking it again waits for nothing).
fn engage(holds_no_gil: bool) {
    ENGAGED.fetch_add(1, Ordering::SeqCst);
    DEPTH.with(|depth| depth.set(depth.get() + 1));
    if holds_no_gil
        && FINALIZING.load(Ordering::SeqCst)
        && FINALIZER.get() != Some(&thread::current().id())
    {
        park_for_good();
    }
}

/// Counts this thread out after it is done with Python.
fn disengage() {
    DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
    ENGAGED.fetch_sub(1, Ordering::SeqCst);
}

/// Withdraws this thread's whole share (so the exit hook does not wait for it) and parks it
/// until the process ends.
fn park_for_good() -> ! {
    let share = DEPTH.with(|depth| depth.replace(0));
    ENGAGED.fetch_sub(share, Ordering::SeqCst);
    loop {
        thread::park();
    }
}

/// Counts out on every exit from a region, a panic's included.
struct Engagement;

impl Drop for Engagement {
    fn drop(&mut self) {
        disengage();
    }
}

/// `Python::attach` for the binding's callbacks: runs `f` with the GIL, or parks the thread
/// for good when the interpreter is finalizing (see the module documentation).
pub fn attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> R {
    engage(holds_no_gil());
    let _engaged = Engagement;
    let released = RELEASED.with(|r| r.replace(false));
    let _restore = Restore(released);
    Python::attach(f)
}

/// Puts back this thread's [`RELEASED`] state on every exit from an [`attach`].
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        RELEASED.with(|r| r.set(self.0));
    }
}

/// `py.detach(work)` for the binding's calls into the core: runs `work` without the GIL and
/// takes the GIL back afterwards, or parks the thread for good instead when the interpreter
/// started finalizing meanwhile.
pub fn detach<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> T {
    let result = py.detach(|| {
        let released = RELEASED.with(|r| r.replace(true));
        let _restore = Restore(released);
        let result = work();
        // Counted in before the GIL is taken back, out once it is held again.
        engage(true);
        result
    });
    disengage();
    result
}

/// The exit hook: marks the interpreter as finalizing, then gives the GIL away until no
/// thread is taking it or running Python for the binding (or [`DRAIN_LIMIT`] has passed).
#[pyfunction]
fn _finalize(py: Python<'_>) {
    let here = thread::current().id();
    let _ = FINALIZER.set(here);
    FINALIZING.store(true, Ordering::SeqCst);
    let own = DEPTH.with(Cell::get);
    let deadline = Instant::now() + DRAIN_LIMIT;
    while ENGAGED.load(Ordering::SeqCst) > own && Instant::now() < deadline {
        py.detach(|| thread::sleep(Duration::from_millis(1)));
    }
}

/// Registers the exit hook with `atexit`.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let hook = wrap_pyfunction!(_finalize, module)?;
    module
        .py()
        .import("atexit")?
        .call_method1("register", (hook,))?;
    Ok(())
}
