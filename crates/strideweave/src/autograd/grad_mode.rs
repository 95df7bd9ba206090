//! Thread-local gradient recording mode (docs/autograd.md, Recording mode).

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether operations on this thread record autograd nodes (on by default).
pub fn is_grad_enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// A scope that sets the recording mode of this thread and restores the previous mode when
/// it ends — also when it ends by an early return, an error or a panic. Scopes nest.
///
/// ```
/// use strideweave::autograd::{is_grad_enabled, no_grad, set_grad_enabled};
/// assert!(is_grad_enabled());
/// {
///     let _off = no_grad();
///     assert!(!is_grad_enabled());
///     {
///         let _on = set_grad_enabled(true);
///         assert!(is_grad_enabled());
///     }
///     assert!(!is_grad_enabled());
/// }
/// assert!(is_grad_enabled());
/// ```
#[must_use = "the mode is restored as soon as the guard is dropped"]
#[derive(Debug)]
pub struct GradModeGuard {
    previous: bool,
    /// The guard restores this thread's mode, so it must stay on this thread.
    _thread_bound: PhantomData<*const ()>,
}

/// Sets this thread's recording mode until the returned guard drops.
pub fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let previous = ENABLED.with(|cell| cell.replace(enabled));
    GradModeGuard {
        previous,
        _thread_bound: PhantomData,
    }
}

/// Turns recording off on this thread until the returned guard drops.
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        ENABLED.with(|cell| cell.set(self.previous));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_is_restored_after_a_panic() {
        assert!(is_grad_enabled());
        let outcome = std::panic::catch_unwind(|| {
            let _off = no_grad();
            assert!(!is_grad_enabled());
            panic!("inside the scope");
        });
        assert!(outcome.is_err());
        assert!(is_grad_enabled());
    }

    #[test]
    fn each_thread_has_its_own_mode() {
        let _off = no_grad();
        let other = std::thread::spawn(is_grad_enabled).join().unwrap_or(false);
        assert!(other, "a new thread starts with recording on");
        assert!(!is_grad_enabled());
    }

    #[test]
    fn scopes_nest_and_restore_in_order() {
        let outer = set_grad_enabled(false);
        let inner = set_grad_enabled(true);
        assert!(is_grad_enabled());
        drop(inner);
        assert!(!is_grad_enabled());
        drop(outer);
        assert!(is_grad_enabled());
    }
}
