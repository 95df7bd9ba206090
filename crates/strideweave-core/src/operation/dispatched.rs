//! `Operation`: one dispatched computation, as a definition-free carrier's dispatch hook
//! returns it (docs/carriers.md, Dispatch).

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::carrier::CarrierClass;
use crate::error::{Error, Result};
use crate::operation::{Builtin, ResolvedInvocation};
use crate::tensor::Tensor;

type Forward = dyn Fn(&ResolvedInvocation) -> Result<Vec<Tensor>> + Send + Sync;

/// A definition-free class's built-in kernels as one plain function
/// ([`DefinitionFreeCarrier::builtin_kernel`](crate::carrier::DefinitionFreeCarrier::builtin_kernel)):
/// the dispatcher calls it with the built-in's identity and the resolved invocation, and it
/// returns the fresh result (every built-in has exactly one) exactly as a dispatched
/// [`Operation`] for that built-in would.
pub type BuiltinKernel = fn(Builtin, &ResolvedInvocation) -> Result<Tensor>;

struct State {
    /// Set once, by the framework, when the operation is dispatched.
    dispatched: OnceLock<(Arc<str>, CarrierClass)>,
    forward: Box<Forward>,
}

/// A fresh computation produced by a carrier's dispatch hook.
///
/// The framework tags it, once, with the operation name and the exact carrier class that
/// dispatched it; a hook that hands out an operation already dispatched (a cached one) is
/// refused with a Type error, so every dispatch is a distinct operation whose metadata never
/// changes. Clones share the operation.
#[derive(Clone)]
pub struct Operation {
    state: Arc<State>,
}

impl Operation {
    /// An undispatched operation computing `forward`: given a resolved invocation, it returns
    /// fresh result tensors matching the invocation's result specifications.
    pub fn new(
        forward: impl Fn(&ResolvedInvocation) -> Result<Vec<Tensor>> + Send + Sync + 'static,
    ) -> Operation {
        Operation {
            state: Arc::new(State {
                dispatched: OnceLock::new(),
                forward: Box::new(forward),
            }),
        }
    }

    /// Tags a fresh operation with its dispatch metadata; a Type error when it was already
    /// dispatched.
    pub(crate) fn mark_dispatched(self, name: Arc<str>, class: CarrierClass) -> Result<Operation> {
        let mut fresh = false;
        self.state.dispatched.get_or_init(|| {
            fresh = true;
            (name, class)
        });
        if fresh {
            return Ok(self);
        }
        let (first_name, first_class) = self
            .state
            .dispatched
            .get()
            .cloned()
            .unwrap_or_else(|| unreachable!("get_or_init has run"));
        Err(Error::Type(format!(
            "the {class} dispatch hook returned an operation already dispatched as '{first_name}' by {first_class}; each dispatch needs a fresh Operation"
        )))
    }

    /// The operation name it was dispatched under (`None` before dispatch).
    pub fn name(&self) -> Option<&str> {
        self.state.dispatched.get().map(|(name, _)| &**name)
    }

    /// The exact carrier class that dispatched it (`None` before dispatch).
    pub fn carrier_class(&self) -> Option<CarrierClass> {
        self.state.dispatched.get().map(|(_, class)| *class)
    }

    /// Whether `self` and `other` are the same operation.
    pub fn same_as(&self, other: &Operation) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// Runs the computation on `invocation` (a Runtime error before dispatch).
    ///
    /// The dispatcher calls it, then validates the results before publishing them and
    /// records autograd. Called directly, an operation from a definition-free hook returns
    /// its results unvalidated; the operation of a definition-backed carrier gates the plan
    /// and validates its results itself (docs/carriers.md, Dispatch). Nothing is recorded
    /// for gradients either way.
    pub fn forward(&self, invocation: &ResolvedInvocation) -> Result<Vec<Tensor>> {
        if self.state.dispatched.get().is_none() {
            return Err(Error::Runtime(
                "an operation runs only after a carrier dispatched it".into(),
            ));
        }
        (self.state.forward)(invocation)
    }
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operation")
            .field("name", &self.name())
            .field("carrier_class", &self.carrier_class())
            .finish()
    }
}
