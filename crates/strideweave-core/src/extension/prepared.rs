//! Prepared-work records: [`PreparedKernel`], [`PreparedTransfer`], [`PreparedComposite`], and
//! the [`Submitted`] outcome of their submission.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use super::completion::ProviderCompletion;
use super::execution_interface::InterfaceHandle;
use super::provider_result::ProviderResult;
use crate::error::{guard, Result};

/// What a submission returned: the finished value, or a completion to wait on.
///
/// Seed rule: "Kernel and composite submission SHALL return either ProviderResult or
/// ProviderCompletion[ProviderResult]; transfer submission SHALL return either None or
/// ProviderCompletion[None]." `Ready(T)` is the immediate value and `Pending` the completion.
/// The seed's "another return type SHALL fail with TypeError" is enforced by the type system:
/// a submit closure can only produce a `Submitted` of its record's value type. The completion
/// is an ordinary value, never a Tensor or autograd object (seed: "these completion objects
/// SHALL not themselves become Tensor or autograd objects").
pub enum Submitted<T: Clone + Send + Sync> {
    /// The work finished during submission with this value.
    Ready(T),
    /// The work finishes later; its terminal outcome is the completion's.
    Pending(Arc<dyn ProviderCompletion<T>>),
}

impl<T: Clone + Send + Sync> Submitted<T> {
    /// Wraps a completion (seed: submission may return `ProviderCompletion[T]`).
    pub fn pending(completion: impl ProviderCompletion<T> + 'static) -> Submitted<T> {
        Submitted::Pending(Arc::new(completion))
    }

    /// Whether the terminal outcome is available without blocking (seed: `done` is true
    /// exactly at the terminal outcome; a `Ready` value is terminal).
    pub fn is_done(&self) -> bool {
        match self {
            Submitted::Ready(_) => true,
            Submitted::Pending(completion) => completion.done(),
        }
    }

    /// The terminal outcome, blocking on a pending completion (seed: "blocking wait() -> T").
    pub fn wait(&self) -> Result<T> {
        match self {
            Submitted::Ready(value) => Ok(value.clone()),
            Submitted::Pending(completion) => completion.wait(),
        }
    }

    /// [`wait`](Self::wait), consuming the submission: a ready value moves out uncopied.
    pub(crate) fn into_value(self) -> Result<T> {
        match self {
            Submitted::Ready(value) => Ok(value),
            Submitted::Pending(completion) => completion.wait(),
        }
    }
}

impl<T: Clone + Send + Sync> Clone for Submitted<T> {
    fn clone(&self) -> Self {
        match self {
            Submitted::Ready(value) => Submitted::Ready(value.clone()),
            Submitted::Pending(completion) => Submitted::Pending(Arc::clone(completion)),
        }
    }
}

impl<T: Clone + Send + Sync + fmt::Debug> fmt::Debug for Submitted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Submitted::Ready(value) => f.debug_tuple("Ready").field(value).finish(),
            Submitted::Pending(completion) => f
                .debug_struct("Pending")
                .field("done", &completion.done())
                .finish(),
        }
    }
}

/// A boxed zero-argument submit callback. The `Mutex` only makes the record `Sync` without
/// requiring the author's closure to be; the callback is still taken exactly once, by value.
type SubmitFn<T> = Mutex<Box<dyn FnOnce() -> Result<Submitted<T>> + Send>>;

fn boxed<T: Clone + Send + Sync>(
    submit: impl FnOnce() -> Result<Submitted<T>> + Send + 'static,
) -> SubmitFn<T> {
    Mutex::new(Box::new(submit))
}

/// Runs a submit callback once under the provider guard, a panic reported as the panic of
/// `provider`'s submit (never unwound).
fn run<T: Clone + Send + Sync>(
    submit: SubmitFn<T>,
    provider: impl FnOnce() -> String,
) -> Result<Submitted<T>> {
    guard(provider, "submit", submit.into_inner())
}

/// Kernel work prepared by a pattern for one invocation, bound to its execution interface.
///
/// Seed rules: "PreparedKernel(interface, submit) ... SHALL be immutable prepared-work
/// records. The kernel record SHALL require a KernelExecutionInterface instance; every submit
/// SHALL be a zero-argument callable, or construction SHALL fail with TypeError" — both
/// enforced by the type system ([`InterfaceHandle`] and `FnOnce()`). "The framework SHALL
/// invoke a prepared record at most once" — [`PreparedKernel::submit`] consumes the record.
/// The record's interface identity is what the framework compares with the provider's.
pub struct PreparedKernel {
    interface: InterfaceHandle,
    submit: SubmitFn<ProviderResult>,
}

impl PreparedKernel {
    /// The prepared kernel submitting through `interface` with the zero-argument `submit`
    /// (seed: `PreparedKernel(interface, submit)`).
    pub fn new(
        interface: InterfaceHandle,
        submit: impl FnOnce() -> Result<Submitted<ProviderResult>> + Send + 'static,
    ) -> PreparedKernel {
        PreparedKernel {
            interface,
            submit: boxed(submit),
        }
    }

    /// The execution interface the work submits through (seed: its identity "SHALL equal the
    /// provider interface identity or execution SHALL fail with TypeError before submission").
    pub fn interface(&self) -> &InterfaceHandle {
        &self.interface
    }

    /// Submits the work, once (seed: "The framework SHALL invoke a prepared record at most
    /// once"; the result is a `ProviderResult` or a completion of one). A panic in the
    /// callback becomes [`Error::ProviderPanicked`](crate::Error::ProviderPanicked).
    pub fn submit(self) -> Result<Submitted<ProviderResult>> {
        self.submit_for(|| "a PreparedKernel".to_string())
    }

    /// [`submit`](Self::submit), a panic reported as `provider`'s.
    pub(crate) fn submit_for(
        self,
        provider: impl FnOnce() -> String,
    ) -> Result<Submitted<ProviderResult>> {
        run(self.submit, provider)
    }
}

impl fmt::Debug for PreparedKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedKernel")
            .field("interface", &self.interface)
            .finish_non_exhaustive()
    }
}

/// Transfer work prepared by a route for one transfer request.
///
/// Seed rules: "PreparedTransfer(submit)" is an immutable prepared-work record whose submit
/// "SHALL be a zero-argument callable" (enforced by the type system), invoked "at most once"
/// ([`PreparedTransfer::submit`] consumes the record), and "transfer submission SHALL return
/// either None or ProviderCompletion[None]" — here `Submitted<()>`.
pub struct PreparedTransfer {
    submit: SubmitFn<()>,
}

impl PreparedTransfer {
    /// The prepared transfer with the zero-argument `submit` (seed: `PreparedTransfer(submit)`).
    pub fn new(
        submit: impl FnOnce() -> Result<Submitted<()>> + Send + 'static,
    ) -> PreparedTransfer {
        PreparedTransfer {
            submit: boxed(submit),
        }
    }

    /// Submits the transfer, once (seed: its terminal `None` "means destination contents are
    /// ready for framework validation and transactional publication"). A panic in the callback
    /// becomes [`Error::ProviderPanicked`](crate::Error::ProviderPanicked).
    pub fn submit(self) -> Result<Submitted<()>> {
        self.submit_for(|| "a PreparedTransfer".to_string())
    }

    /// [`submit`](Self::submit), a panic reported as `provider`'s.
    pub(crate) fn submit_for(self, provider: impl FnOnce() -> String) -> Result<Submitted<()>> {
        run(self.submit, provider)
    }
}

impl fmt::Debug for PreparedTransfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedTransfer").finish_non_exhaustive()
    }
}

/// Composite work prepared by a dependent carrier's composite provider for one invocation.
///
/// Seed rules: "PreparedComposite(submit)" is an immutable prepared-work record whose submit
/// "SHALL be a zero-argument callable" (enforced by the type system), invoked "at most once"
/// ([`PreparedComposite::submit`] consumes the record), returning "either ProviderResult or
/// ProviderCompletion[ProviderResult]".
pub struct PreparedComposite {
    submit: SubmitFn<ProviderResult>,
}

impl PreparedComposite {
    /// The prepared composite work with the zero-argument `submit` (seed:
    /// `PreparedComposite(submit)`).
    pub fn new(
        submit: impl FnOnce() -> Result<Submitted<ProviderResult>> + Send + 'static,
    ) -> PreparedComposite {
        PreparedComposite {
            submit: boxed(submit),
        }
    }

    /// Submits the work, once (seed: "The framework SHALL invoke a prepared record at most
    /// once"). A panic in the callback becomes
    /// [`Error::ProviderPanicked`](crate::Error::ProviderPanicked).
    pub fn submit(self) -> Result<Submitted<ProviderResult>> {
        self.submit_for(|| "a PreparedComposite".to_string())
    }

    /// [`submit`](Self::submit), a panic reported as `provider`'s.
    pub(crate) fn submit_for(
        self,
        provider: impl FnOnce() -> String,
    ) -> Result<Submitted<ProviderResult>> {
        run(self.submit, provider)
    }
}

impl fmt::Debug for PreparedComposite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedComposite").finish_non_exhaustive()
    }
}
