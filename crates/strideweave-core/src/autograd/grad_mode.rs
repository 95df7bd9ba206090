//! Thread-local gradient recording mode (docs/autograd.md, Recording mode).

use std::cell::Cell;
use std::marker::PhantomData;

/// A thread's recording state: the mode its scopes set, and how many provider callbacks are
/// running on it (autograd-node construction is framework-owned, so nothing records inside one).
struct Recording {
    enabled: Cell<bool>,
    provider_callbacks: Cell<usize>,
}

thread_local! {
    static RECORDING: Recording = const {
        Recording {
            enabled: Cell::new(true),
            provider_callbacks: Cell::new(0),
        }
    };
}

/// Whether operations on this thread record autograd nodes: on by default, off inside a
/// [`no_grad`] scope, and always off while a provider callback (a storage hook, a kernel's or
/// composite's `prepare`, `submit` or `wait`, a transfer's) runs on this thread, whatever
/// mode that callback sets.
pub fn is_grad_enabled() -> bool {
    RECORDING
        .try_with(|r| r.enabled.get() && r.provider_callbacks.get() == 0)
        .unwrap_or(false)
}

/// Marks a provider callback as running on this thread until the returned scope drops:
/// operations the provider calls meanwhile record nothing (seed: autograd-node construction
/// stays framework-owned).
pub(crate) fn provider_callback() -> ProviderCallback {
    let _ = RECORDING.try_with(|r| r.provider_callbacks.set(r.provider_callbacks.get() + 1));
    ProviderCallback {
        _thread_bound: PhantomData,
    }
}

/// The scope of [`provider_callback`].
pub(crate) struct ProviderCallback {
    /// The scope counts on this thread, so it must end on this thread.
    _thread_bound: PhantomData<*const ()>,
}

impl Drop for ProviderCallback {
    fn drop(&mut self) {
        let _ = RECORDING.try_with(|r| {
            r.provider_callbacks
                .set(r.provider_callbacks.get().saturating_sub(1));
        });
    }
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
    let previous = RECORDING
        .try_with(|r| r.enabled.replace(enabled))
        .unwrap_or(true);
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
        let _ = RECORDING.try_with(|r| r.enabled.set(self.previous));
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
    fn nothing_records_inside_a_provider_callback_whatever_mode_it_sets() {
        let callback = provider_callback();
        assert!(!is_grad_enabled());
        {
            let _on = set_grad_enabled(true);
            assert!(
                !is_grad_enabled(),
                "a callback cannot turn recording back on"
            );
        }
        let nested = provider_callback();
        drop(nested);
        assert!(!is_grad_enabled(), "the outer callback is still running");
        drop(callback);
        assert!(is_grad_enabled());
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
