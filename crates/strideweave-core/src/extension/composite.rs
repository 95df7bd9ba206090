//! [`CompositeProvider`]: the execution part of a dependent carrier definition, deriving its
//! reach and preparing its work through the instance's dependency carriers.

use std::fmt;
use std::sync::Arc;

use crate::carrier::{Carrier, CarrierClass};
use crate::error::{guard, Error, Result, UnsupportedOperationPlan};
use crate::extension::{PreparedComposite, Unsupported};
use crate::operation::dispatch::ProviderOutputs;
use crate::operation::{OperationCapability, ResolvedInvocation};
use crate::tensor::Tensor;

/// What a composite preparation returns: prepared work, or a rejection before submission.
///
/// Seed rule: `prepare(carrier, invocation) -> PreparedComposite | Unsupported`. Another
/// return type (TypeError in the seed) cannot be produced: these are the only variants.
#[derive(Debug)]
pub enum CompositePreparation {
    /// The prepared work, submitted once by the framework.
    Composite(PreparedComposite),
    /// The invocation is rejected before submission and public state change; dispatch fails
    /// with `UnsupportedOperationPlan` carrying the reason.
    Unsupported(Unsupported),
}

type CapabilitiesFn = dyn Fn(&Carrier) -> Result<Vec<OperationCapability>> + Send + Sync;
type ResultCarriersFn =
    dyn Fn(&Carrier, &ResolvedInvocation) -> Result<Vec<CarrierClass>> + Send + Sync;
type CompositePrepareFn =
    dyn Fn(&Carrier, &ResolvedInvocation) -> Result<CompositePreparation> + Send + Sync;

struct CompositeInner {
    capabilities: Box<CapabilitiesFn>,
    result_carriers: Box<ResultCarriersFn>,
    prepare: Box<CompositePrepareFn>,
}

/// The execution part of a dependent carrier definition.
///
/// Seed rule: `CompositeProvider(capabilities, result_carriers, prepare)` with three callables
/// (enforced by the type system):
///
/// - `capabilities(carrier)`: the complete executable set of the constructed dependent
///   `carrier`, called once at construction; a duplicate capability is a Value error; the
///   set is sorted in the deterministic capability order and frozen for the instance;
/// - `result_carriers(carrier, invocation)`: one exact result carrier class per
///   `ResultSpec`, in result order; another count is a Value error, checked before `prepare`;
/// - `prepare(carrier, invocation)`: prepared work preserving the invocation's semantics, or
///   an [`Unsupported`] rejection (dispatch then fails with `UnsupportedOperationPlan`).
///
/// Other callback errors propagate; a panic becomes a Runtime error. The callbacks use the
/// dependencies' public capability, dispatch, allocation and movement behavior (the
/// dependencies are typically kept in the carrier's provider state, read with
/// [`Carrier::with_provider_state`]); a dependent carrier never owns its dependencies'
/// kernel packs. Cloning shares the provider.
#[derive(Clone)]
pub struct CompositeProvider {
    inner: Arc<CompositeInner>,
    autograd: Option<Arc<dyn CompositeAutograd>>,
}

/// The framework-internal autograd of a shipped dependent class (TiledEvictable): its own
/// backward rules for the operations it executes, and the gradients it may hand to the
/// engine without a copy.
pub trait CompositeAutograd: Send + Sync {
    /// The backward rule of `invocation` (a built-in this class executed), or `None` for the
    /// built-in rule.
    fn backward_rule(
        &self,
        invocation: &ResolvedInvocation,
    ) -> Option<Box<dyn crate::autograd::BackwardRule>>;

    /// Whether `grad`, on this class, is a fresh gradient the engine may keep as it is
    /// (asked once per buffer: a second ask answers `false`).
    fn adopt_gradient(&self, grad: &Tensor) -> bool;

    /// The sum of two gradients `a` and `b` of one tensor, both on this class, when the class
    /// sums them itself (a streamed sum that never makes a dense copy); `None` lets the
    /// engine add them with the `add` operation.
    fn add_gradients(&self, a: &Tensor, b: &Tensor) -> Option<crate::Result<Tensor>> {
        let _ = (a, b);
        None
    }

    /// The backward pass holding `grad` (on this class) failed and publishes nothing:
    /// releases `grad` when it is storage this class built for the engine that nobody
    /// adopted (so no tensor outside the pass holds it); leaves it alone by default.
    fn discard_gradient(&self, grad: &Tensor) {
        let _ = grad;
    }
}

/// Runs the composite provider's `callback` for `carrier` under the provider guard.
fn guarded<T>(
    carrier: &Carrier,
    callback: &'static str,
    run: impl FnOnce() -> Result<T>,
) -> Result<T> {
    guard(|| provider_name(carrier), callback, run)
}

/// The provider name a panic in `carrier`'s composite callbacks is reported under.
fn provider_name(carrier: &Carrier) -> String {
    format!("the composite provider of {}", carrier.class())
}

impl CompositeProvider {
    /// The provider with the three callbacks, in the seed's order.
    pub fn new<Capabilities, ResultCarriers, Prepare>(
        capabilities: Capabilities,
        result_carriers: ResultCarriers,
        prepare: Prepare,
    ) -> CompositeProvider
    where
        Capabilities: Fn(&Carrier) -> Result<Vec<OperationCapability>> + Send + Sync + 'static,
        ResultCarriers:
            Fn(&Carrier, &ResolvedInvocation) -> Result<Vec<CarrierClass>> + Send + Sync + 'static,
        Prepare: Fn(&Carrier, &ResolvedInvocation) -> Result<CompositePreparation>
            + Send
            + Sync
            + 'static,
    {
        CompositeProvider {
            inner: Arc::new(CompositeInner {
                capabilities: Box::new(capabilities),
                result_carriers: Box::new(result_carriers),
                prepare: Box::new(prepare),
            }),
            autograd: None,
        }
    }

    /// This provider with the framework-internal autograd `hooks`.
    pub(crate) fn with_autograd(self, hooks: Arc<dyn CompositeAutograd>) -> CompositeProvider {
        CompositeProvider {
            autograd: Some(hooks),
            ..self
        }
    }

    /// The framework-internal autograd hooks, if any.
    pub(crate) fn autograd(&self) -> Option<&Arc<dyn CompositeAutograd>> {
        self.autograd.as_ref()
    }

    /// The frozen capability snapshot of the constructed dependent `carrier`: the callback's
    /// answer, sorted; a duplicate is a Value error.
    pub(crate) fn instance_capabilities(
        &self,
        carrier: &Carrier,
    ) -> Result<Arc<[OperationCapability]>> {
        let mut sorted = guarded(carrier, "capabilities", || {
            (self.inner.capabilities)(carrier)
        })?;
        sorted.sort_by(OperationCapability::cmp_order);
        if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Value(format!(
                "the composite provider of {} reported a duplicate capability: {}",
                carrier.class(),
                pair[0]
            )));
        }
        Ok(sorted.into())
    }

    /// Executes `invocation` on the dependent `carrier`: validated result classes (one per
    /// result), then preparation and one submission, waited. Returns the outputs and the
    /// declared result classes.
    pub(crate) fn execute(
        &self,
        carrier: &Carrier,
        invocation: &ResolvedInvocation,
    ) -> Result<(ProviderOutputs, Vec<CarrierClass>)> {
        let name = invocation.call().definition().name();
        let classes = guarded(carrier, "result_carriers", || {
            (self.inner.result_carriers)(carrier, invocation)
        })?;
        let expected = invocation.results().len();
        if classes.len() != expected {
            return Err(Error::Value(format!(
                "the composite provider of {} named {} result carrier classes for '{name}', \
                 expected {expected}",
                carrier.class(),
                classes.len()
            )));
        }
        let prepared = match guarded(carrier, "prepare", || {
            (self.inner.prepare)(carrier, invocation)
        })? {
            CompositePreparation::Unsupported(rejection) => {
                return Err(Error::UnsupportedOperationPlan(
                    UnsupportedOperationPlan::new(
                        name,
                        [format!("{}: {}", carrier.class(), rejection.reason())],
                    ),
                ))
            }
            CompositePreparation::Composite(prepared) => prepared,
        };
        let submitted = prepared.submit_for(|| provider_name(carrier))?;
        let result = guarded(carrier, "wait", || submitted.into_value())?;
        Ok((result.into_outputs(), classes))
    }
}

impl fmt::Debug for CompositeProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompositeProvider").finish_non_exhaustive()
    }
}
