//! Kernel execution on independent definition-backed carriers: [`KernelPattern`],
//! [`KernelProvider`], [`KernelPack`] and [`register_kernel_pack`], and the execution set a
//! class freezes on its first observation.

use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::carrier::{CarrierClass, ClassKind};
use crate::error::{guard, Error, Result, UnsupportedOperationPlan};
use crate::extension::registration::{self, ClassBinding};
use crate::extension::{
    carrier_definition, InterfaceHandle, PreparedKernel, ProviderResult, Unsupported,
};
use crate::operation::dispatch::ProviderOutputs;
use crate::operation::{
    OperationCapability, OperationDefinition, OperationPlan, ResolvedInvocation,
};
use crate::tensor::Tensor;

/// What a pattern's preparation returns: prepared work, or a rejection that lets the next
/// candidate prepare.
///
/// Seed rule: `prepare` "SHALL ... return PreparedKernel or Unsupported". The seed's
/// "Reject a malformed prepared result" (another return type fails with TypeError) is
/// enforced by the type system: a preparation can only produce one of these two variants.
#[derive(Debug)]
pub enum Preparation {
    /// The prepared work, submitted once by the framework.
    Kernel(PreparedKernel),
    /// The pattern declines this invocation; the next candidate prepares.
    Unsupported(Unsupported),
}

/// The preparation callback of a [`KernelPattern`]: it receives the resolved invocation and
/// the exact interface instance owned by the carrier's kernel provider.
pub type PrepareFn =
    dyn Fn(&ResolvedInvocation, &InterfaceHandle) -> Result<Preparation> + Send + Sync;

/// The body of a synchronous kernel ([`KernelPattern::synchronous`]): the results of one
/// invocation, computed at submission.
pub(crate) type SyncKernelFn =
    dyn Fn(&ResolvedInvocation, &InterfaceHandle) -> Result<Vec<Tensor>> + Send + Sync;

/// How a pattern turns an invocation into work.
pub(crate) enum PatternWork {
    /// The provider's own preparation: prepared work, or a decline.
    Prepare(Box<PrepareFn>),
    /// A synchronous kernel, which never declines: the framework runs it where the long
    /// form's prepared record would be submitted, on the invocation it holds (no prepared
    /// record, no copy of the invocation), and hands its results over as a ready result.
    Synchronous(Box<SyncKernelFn>),
}

struct PatternInner {
    operation: OperationDefinition,
    plans: Arc<[OperationCapability]>,
    kernel_id: Arc<str>,
    work: PatternWork,
    preference: i64,
}

/// One executable candidate: an operation, the exact plans it executes, a stable kernel id,
/// its preparation and its preference.
///
/// Seed rule: `KernelPattern(operation, plans, kernel_id, prepare, preference=0)`; "empty
/// plans or identifier, duplicate plans, or a plan whose operation string differs from
/// operation.name SHALL fail with ValueError". Field types are enforced by the type system.
/// Immutable; clones share the pattern.
#[derive(Clone)]
pub struct KernelPattern {
    inner: Arc<PatternInner>,
}

impl KernelPattern {
    /// The pattern executing `plans` of `operation` under `kernel_id` (plans materialized
    /// once, in the given order).
    pub fn new(
        operation: &OperationDefinition,
        plans: impl IntoIterator<Item = OperationCapability>,
        kernel_id: &str,
        prepare: impl Fn(&ResolvedInvocation, &InterfaceHandle) -> Result<Preparation>
            + Send
            + Sync
            + 'static,
        preference: i64,
    ) -> Result<KernelPattern> {
        let work = PatternWork::Prepare(Box::new(prepare));
        KernelPattern::build(operation, plans, kernel_id, work, preference)
    }

    /// The pattern of [`new`](Self::new) or [`synchronous`](Self::synchronous), validated
    /// (Value errors as `new` says).
    pub(crate) fn build(
        operation: &OperationDefinition,
        plans: impl IntoIterator<Item = OperationCapability>,
        kernel_id: &str,
        work: PatternWork,
        preference: i64,
    ) -> Result<KernelPattern> {
        if kernel_id.is_empty() {
            return Err(Error::Value(
                "KernelPattern kernel_id must be a non-empty string".to_string(),
            ));
        }
        let plans: Arc<[OperationCapability]> = plans.into_iter().collect();
        if plans.is_empty() {
            return Err(Error::Value(format!(
                "KernelPattern '{kernel_id}' needs at least one plan"
            )));
        }
        let name = operation.name();
        if let Some(other) = plans.iter().find(|p| p.operation() != name) {
            return Err(Error::Value(format!(
                "KernelPattern '{kernel_id}' of '{name}' has a plan of '{}': {other}",
                other.operation()
            )));
        }
        let mut seen = FxHashSet::default();
        if let Some(duplicate) = plans.iter().find(|p| !seen.insert(p.plan())) {
            return Err(Error::Value(format!(
                "KernelPattern '{kernel_id}' has a duplicate plan: {duplicate}"
            )));
        }
        Ok(KernelPattern {
            inner: Arc::new(PatternInner {
                operation: *operation,
                plans,
                kernel_id: Arc::from(kernel_id),
                work,
                preference,
            }),
        })
    }

    /// The operation the pattern executes.
    pub fn operation(&self) -> &OperationDefinition {
        &self.inner.operation
    }

    /// The exact plans the pattern executes, in construction order.
    pub fn plans(&self) -> &[OperationCapability] {
        &self.inner.plans
    }

    /// The stable kernel id (unique within its execution set).
    pub fn kernel_id(&self) -> &str {
        &self.inner.kernel_id
    }

    /// The preference: higher prepares first.
    pub fn preference(&self) -> i64 {
        self.inner.preference
    }

    /// The provider name a panic in this pattern's callbacks is reported under.
    fn provider_name(&self, class: CarrierClass) -> String {
        format!("kernel pattern '{}' of {class}", self.kernel_id())
    }

    /// How this pattern turns an invocation into work.
    fn work(&self) -> &PatternWork {
        &self.inner.work
    }
}

impl fmt::Debug for KernelPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelPattern")
            .field("operation", &self.operation().name())
            .field("kernel_id", &self.kernel_id())
            .field("plans", &self.plans().len())
            .field("preference", &self.preference())
            .finish()
    }
}

/// A duplicate kernel id among `patterns`, if any.
fn duplicate_kernel_id<'a>(
    patterns: impl IntoIterator<Item = &'a KernelPattern>,
) -> Option<&'a str> {
    let mut seen = FxHashSet::default();
    patterns
        .into_iter()
        .map(KernelPattern::kernel_id)
        .find(|id| !seen.insert(*id))
}

/// The execution part of an independent carrier definition: one execution interface and the
/// built-in kernel patterns.
///
/// Seed rule: "KernelProvider(interface, patterns=()) ... SHALL materialize and expose the
/// patterns as an immutable tuple ... duplicate kernel_id values SHALL fail with
/// ValueError." Cloning shares the provider.
#[derive(Clone)]
pub struct KernelProvider {
    interface: InterfaceHandle,
    patterns: Arc<[KernelPattern]>,
}

impl KernelProvider {
    /// The provider of `patterns` (materialized once, in order) executing through
    /// `interface`.
    pub fn new(
        interface: InterfaceHandle,
        patterns: impl IntoIterator<Item = KernelPattern>,
    ) -> Result<KernelProvider> {
        let patterns: Arc<[KernelPattern]> = patterns.into_iter().collect();
        if let Some(id) = duplicate_kernel_id(patterns.iter()) {
            return Err(Error::Value(format!(
                "KernelProvider has a duplicate kernel_id '{id}'"
            )));
        }
        Ok(KernelProvider {
            interface,
            patterns,
        })
    }

    /// The execution interface every pattern receives.
    pub fn interface(&self) -> &InterfaceHandle {
        &self.interface
    }

    /// The built-in patterns, in order.
    pub fn patterns(&self) -> &[KernelPattern] {
        &self.patterns
    }
}

impl fmt::Debug for KernelProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelProvider")
            .field("interface", &self.interface)
            .field("patterns", &self.patterns)
            .finish()
    }
}

/// One extension pack of kernel patterns for one exact independent carrier class.
///
/// Seed rule: `KernelPack(namespace, version, carrier_class, execution_interface,
/// patterns)`; "ValueError for an empty namespace, version, or collection or duplicate
/// kernel_id within the pack". Eligibility of the target and compatibility with its provider
/// are checked by [`register_kernel_pack`]. Cloning shares the pack.
#[derive(Clone)]
pub struct KernelPack {
    namespace: Arc<str>,
    version: Arc<str>,
    carrier_class: CarrierClass,
    interface: InterfaceHandle,
    patterns: Arc<[KernelPattern]>,
}

impl KernelPack {
    /// The pack `(namespace, version)` of `patterns` (materialized once) for exactly
    /// `carrier_class`, built against `interface`.
    pub fn new(
        namespace: &str,
        version: &str,
        carrier_class: CarrierClass,
        interface: InterfaceHandle,
        patterns: impl IntoIterator<Item = KernelPattern>,
    ) -> Result<KernelPack> {
        if namespace.is_empty() {
            return Err(Error::Value(
                "KernelPack namespace must be a non-empty string".to_string(),
            ));
        }
        if version.is_empty() {
            return Err(Error::Value(format!(
                "KernelPack '{namespace}' version must be a non-empty string"
            )));
        }
        let patterns: Arc<[KernelPattern]> = patterns.into_iter().collect();
        if patterns.is_empty() {
            return Err(Error::Value(format!(
                "KernelPack '{namespace}' {version} needs at least one pattern"
            )));
        }
        if let Some(id) = duplicate_kernel_id(patterns.iter()) {
            return Err(Error::Value(format!(
                "KernelPack '{namespace}' {version} has a duplicate kernel_id '{id}'"
            )));
        }
        Ok(KernelPack {
            namespace: Arc::from(namespace),
            version: Arc::from(version),
            carrier_class,
            interface,
            patterns,
        })
    }

    /// The pack namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The pack version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The exact target class.
    pub fn carrier_class(&self) -> CarrierClass {
        self.carrier_class
    }

    /// The execution interface the pack was built against.
    pub fn interface(&self) -> &InterfaceHandle {
        &self.interface
    }

    /// The patterns, in order.
    pub fn patterns(&self) -> &[KernelPattern] {
        &self.patterns
    }
}

impl fmt::Debug for KernelPack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelPack")
            .field("namespace", &self.namespace)
            .field("version", &self.version)
            .field("carrier_class", &self.carrier_class)
            .field("interface", &self.interface)
            .field("patterns", &self.patterns)
            .finish()
    }
}

/// The frozen execution set of one kernel-backed class: its provider's interface, every
/// pattern in base order (built-in, then packs by `(namespace, version)`), the capability
/// union, and the candidate order per plan.
pub(crate) struct ExecutionSet {
    class: CarrierClass,
    interface: InterfaceHandle,
    patterns: Vec<KernelPattern>,
    capabilities: Arc<[OperationCapability]>,
    candidates: FxHashMap<OperationPlan, Arc<[usize]>>,
    /// The candidate orders of the plans invocations brought last, by the plans' own
    /// addresses (see [`ExecutionSet::order`]).
    recent: [OnceLock<(OperationPlan, Arc<[usize]>)>; RECENT_PLANS],
}

/// How many invocation plans an execution set remembers by address.
const RECENT_PLANS: usize = 8;

impl ExecutionSet {
    fn build(class: CarrierClass, provider: &KernelProvider, mut packs: Vec<KernelPack>) -> Self {
        packs.sort_by(|a, b| (a.namespace(), a.version()).cmp(&(b.namespace(), b.version())));
        let patterns: Vec<KernelPattern> = provider
            .patterns()
            .iter()
            .chain(packs.iter().flat_map(|p| p.patterns().iter()))
            .cloned()
            .collect();
        let mut candidates: FxHashMap<OperationPlan, Vec<usize>> = FxHashMap::default();
        let mut capabilities: Vec<OperationCapability> = Vec::new();
        for (i, pattern) in patterns.iter().enumerate() {
            for plan in pattern.plans() {
                let entry = candidates.entry(plan.plan().clone()).or_default();
                if entry.is_empty() {
                    capabilities.push(plan.clone());
                }
                entry.push(i);
            }
        }
        let candidates = candidates
            .into_iter()
            .map(|(plan, mut order)| {
                // Stable: equal preferences keep the base order.
                order.sort_by_key(|&i| std::cmp::Reverse(patterns[i].preference()));
                (plan, order.into())
            })
            .collect();
        capabilities.sort_by(OperationCapability::cmp_order);
        ExecutionSet {
            class,
            interface: provider.interface().clone().into_static(),
            patterns,
            capabilities: capabilities.into(),
            candidates,
            recent: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The candidate order of `plan`. A built-in's resolver hands out one shared plan per
    /// operand key for the life of the process, so the order is first looked for by the
    /// plan's address among the few plans remembered (each kept alive by its entry, so an
    /// address is never reused), and hashed only when it is not there. The slots fill in
    /// order and are never emptied: a look-up reads them without a lock.
    fn order(&self, plan: &OperationPlan) -> &[usize] {
        for slot in &self.recent {
            match slot.get() {
                Some((known, order)) if known.same_as(plan) => return order,
                Some(_) => {}
                None => {
                    let Some(order) = self.candidates.get(plan) else {
                        return &[];
                    };
                    let (known, kept) = slot.get_or_init(|| (plan.clone(), Arc::clone(order)));
                    // Another thread may have filled the slot first, with another plan.
                    return if known.same_as(plan) { kept } else { order };
                }
            }
        }
        self.candidates.get(plan).map_or(&[], |order| order)
    }

    /// The capabilities: the duplicate-free union of every pattern's plans, sorted.
    pub(crate) fn capabilities(&self) -> Arc<[OperationCapability]> {
        Arc::clone(&self.capabilities)
    }

    /// Prepares the matching candidates in order until one returns prepared work, submits
    /// it once and waits for its outputs. `UnsupportedOperationPlan` with the ordered
    /// reasons when every candidate declines; any other preparation error is terminal.
    pub(crate) fn execute(&self, invocation: &ResolvedInvocation) -> Result<ProviderOutputs> {
        let definition = invocation.call().definition();
        let order = self.order(invocation.plan());
        let mut reasons = Vec::new();
        for pattern in order.iter().map(|&i| &self.patterns[i]) {
            if !pattern.operation().same_as(definition) {
                continue;
            }
            let name = || pattern.provider_name(self.class);
            let prepare = match pattern.work() {
                PatternWork::Prepare(prepare) => prepare,
                PatternWork::Synchronous(kernel) => {
                    let results = guard(name, "submit", || kernel(invocation, &self.interface))?;
                    return Ok(ProviderResult::new(results)?.into_outputs());
                }
            };
            let preparation = guard(name, "prepare", || prepare(invocation, &self.interface))?;
            let kernel = match preparation {
                Preparation::Unsupported(rejection) => {
                    reasons.push(format!("{}: {}", pattern.kernel_id(), rejection.reason()));
                    continue;
                }
                Preparation::Kernel(kernel) => kernel,
            };
            // The provider's own instance (the usual case) needs no identity comparison.
            let interface = kernel.interface();
            if !interface.same_instance(&self.interface)
                && interface.identity() != self.interface.identity()
            {
                return Err(Error::Type(format!(
                    "kernel '{}' of {} prepared work for interface {}, but the provider's \
                     interface is {}",
                    pattern.kernel_id(),
                    self.class,
                    interface.identity(),
                    self.interface.identity()
                )));
            }
            let submitted = kernel.submit_for(name)?;
            let result = guard(name, "wait", || submitted.into_value())?;
            return Ok(result.into_outputs());
        }
        if reasons.is_empty() {
            reasons.push(format!(
                "{} has no kernel pattern for this '{}' plan: {}",
                self.class,
                definition.name(),
                invocation.plan()
            ));
        }
        Err(Error::UnsupportedOperationPlan(
            UnsupportedOperationPlan::new(definition.name(), reasons),
        ))
    }
}

/// The pack registry of one kernel-backed class: open (packs may still attach) or frozen.
enum KernelState {
    Open(Vec<KernelPack>),
    /// Frozen for the life of the process, like the class binding that records it.
    Frozen(&'static ExecutionSet),
}

static KERNELS: LazyLock<Mutex<FxHashMap<CarrierClass, KernelState>>> =
    LazyLock::new(|| Mutex::new(FxHashMap::default()));

/// Freezes (on the first call) and returns the execution set of the kernel-backed `class`
/// with `provider`: the observation that seals its packs.
pub(crate) fn freeze_execution_set(
    class: CarrierClass,
    provider: &KernelProvider,
) -> &'static ExecutionSet {
    let bound = registration::binding(class);
    if let Some(set) = bound.and_then(ClassBinding::frozen_execution_set) {
        return set;
    }
    let mut kernels = KERNELS.lock().unwrap_or_else(PoisonError::into_inner);
    let state = kernels
        .entry(class)
        .or_insert_with(|| KernelState::Open(Vec::new()));
    match state {
        KernelState::Frozen(set) => set,
        KernelState::Open(packs) => {
            // A class is registered for the life of the process, so its frozen set is too:
            // every carrier of the class refers to it without a reference count.
            let set: &'static ExecutionSet = Box::leak(Box::new(ExecutionSet::build(
                class,
                provider,
                std::mem::take(packs),
            )));
            *state = KernelState::Frozen(set);
            if let Some(bound) = bound {
                bound.record_execution_set(set);
            }
            set
        }
    }
}

/// The capabilities of `class` when it is a kernel-backed definition-backed class (freezing
/// its execution set: a capability query observes the class); `None` otherwise.
pub(crate) fn kernel_capabilities(class: CarrierClass) -> Option<Arc<[OperationCapability]>> {
    let definition = carrier_definition(class)?;
    let provider = definition.kernels()?;
    Some(freeze_execution_set(class, provider).capabilities())
}

/// Validates `pack` and attaches it to its exact target class.
///
/// Type errors: a shipped, dependent or undefined target class; a storage-only target (no
/// kernel provider); an execution interface whose identity (exact type and version) differs
/// from the provider's; a target already observed (constructed or capability-queried), whose
/// execution set is frozen. Value errors: a `(namespace, version)` already registered on the
/// class, or a kernel id already in the class's complete execution set. A rejected pack
/// contributes nothing.
pub fn register_kernel_pack(pack: KernelPack) -> Result<()> {
    let class = pack.carrier_class();
    let label = format!("KernelPack '{}' {}", pack.namespace(), pack.version());
    // Dependent first: the shipped dependent classes (Evictable, and TiledEvictable, which
    // is definition-backed) are refused for what they are.
    if class.kind() == ClassKind::Dependent {
        return Err(Error::Type(format!(
            "{label}: {class} is a dependent carrier class; it derives execution from its \
             dependencies and owns no kernel packs"
        )));
    }
    if class.is_shipped() {
        return Err(Error::Type(format!(
            "{label}: {class} is a shipped definition-free carrier class and takes no kernel packs \
             (a pack needs an exact CarrierDefinition)"
        )));
    }
    let definition = carrier_definition(class).ok_or_else(|| {
        Error::Type(format!(
            "{label}: {class} has no carrier definition; a pack needs an exact CarrierDefinition \
             with a kernel provider"
        ))
    })?;
    let provider = definition.kernels().ok_or_else(|| {
        Error::Type(format!(
            "{label}: {class} is a storage-only carrier class (no kernel provider)"
        ))
    })?;
    let mut kernels = KERNELS.lock().unwrap_or_else(PoisonError::into_inner);
    let state = kernels
        .entry(class)
        .or_insert_with(|| KernelState::Open(Vec::new()));
    let packs = match state {
        KernelState::Frozen(_) => {
            return Err(Error::Type(format!(
                "{label}: {class} was already observed (constructed or queried); its kernel \
                 set is sealed"
            )))
        }
        KernelState::Open(packs) => packs,
    };
    if pack.interface().identity() != provider.interface().identity() {
        return Err(Error::Type(format!(
            "{label}: execution interface {} does not match the {class} provider's {}",
            pack.interface().identity(),
            provider.interface().identity()
        )));
    }
    if packs
        .iter()
        .any(|p| p.namespace() == pack.namespace() && p.version() == pack.version())
    {
        return Err(Error::Value(format!(
            "{label} is already registered on {class}"
        )));
    }
    let existing = provider
        .patterns()
        .iter()
        .chain(packs.iter().flat_map(|p| p.patterns().iter()));
    let taken: FxHashSet<&str> = existing.map(KernelPattern::kernel_id).collect();
    if let Some(id) = pack
        .patterns()
        .iter()
        .map(KernelPattern::kernel_id)
        .find(|id| taken.contains(id))
    {
        return Err(Error::Value(format!(
            "{label}: kernel_id '{id}' is already in the execution set of {class}"
        )));
    }
    packs.push(pack);
    Ok(())
}
