//! Dispatch of an operation call (docs/operations.md, How a call flows): bind, resolve, let the
//! first tensor's carrier decide, gate on its capabilities before anything is allocated, run
//! the class's built-in kernel function or a freshly dispatched operation (definition-free
//! carriers), the first accepting kernel pattern of a kernel-backed definition or the composite
//! provider of a dependent definition, and validate its results before publishing them.

use crate::carrier::{Carrier, CarrierClass};
use crate::error::{Error, Result, UnsupportedOperationPlan};
use crate::operation::definition::{operation_definition, OperationDefinition};
use crate::operation::invocation::{OperandList, ResolvedInvocation};
use crate::operation::provider_scope::ProviderScope;
use crate::operation::schema::OptionValue;
use crate::operation::{Authority, Operand};
use crate::tensor::Tensor;

/// Calls the registered operation `name` on `operands` with `options`.
///
/// ```
/// use strideweave::carriers::Cpu;
/// use strideweave::operation::call;
/// use strideweave::{Shape, Tensor, Value};
/// let x = Tensor::compact(Cpu::from_f32(&[-1.0, 2.0], true)?, Shape::new(2)?)?;
/// let y = call("relu", [x.into()], &[])?;
/// assert_eq!(y[0].to_values()?, [Value::Float(0.0), Value::Float(2.0)]);
/// # Ok::<(), strideweave::Error>(())
/// ```
pub fn call(
    name: &str,
    operands: impl IntoIterator<Item = Operand>,
    options: &[(&str, OptionValue)],
) -> Result<Vec<Tensor>> {
    let definition = operation_definition(name)?;
    let operands = OperandList::collect(operands);
    Ok(definition.call_list(operands, options)?.into_vec())
}

/// The outputs of one provider submission, inline for the usual single result.
pub(crate) type ProviderOutputs = smallvec::SmallVec<[Tensor; 1]>;

/// The published results of one call: the single result of a built-in kernel without a
/// vector around it, or what a provider or dispatched operation returned.
pub(crate) enum Outputs {
    /// One result.
    One([Tensor; 1]),
    /// Any number of results.
    Many(Vec<Tensor>),
    /// The results a provider published, moved out of its `ProviderResult`.
    Provided(ProviderOutputs),
}

impl Outputs {
    /// The results, in order.
    fn as_slice(&self) -> &[Tensor] {
        match self {
            Outputs::One(one) => one,
            Outputs::Many(many) => many,
            Outputs::Provided(provided) => provided,
        }
    }

    /// The results as a vector.
    pub(crate) fn into_vec(self) -> Vec<Tensor> {
        match self {
            Outputs::One([one]) => vec![one],
            Outputs::Many(many) => many,
            Outputs::Provided(provided) => provided.into_vec(),
        }
    }

    /// The only result (validation has checked the count against the definition).
    #[inline]
    pub(crate) fn into_single(self, name: &str) -> Result<Tensor> {
        match self {
            Outputs::One([one]) => Ok(one),
            Outputs::Many(mut many) if many.len() == 1 => Ok(many.remove(0)),
            Outputs::Provided(mut provided) if provided.len() == 1 => provided
                .pop()
                .ok_or_else(|| Error::Value(format!("'{name}' returned no result"))),
            other => Err(Error::Value(format!(
                "'{name}' returned {} results where one was expected",
                other.as_slice().len()
            ))),
        }
    }
}

impl OperationDefinition {
    /// Binds, resolves and dispatches a call of this operation; see [`call`].
    pub fn call(
        &self,
        operands: Vec<Operand>,
        options: &[(&str, OptionValue)],
    ) -> Result<Vec<Tensor>> {
        Ok(self.call_list(operands.into(), options)?.into_vec())
    }

    /// The pipeline of every call on every carrier: bind, let the first tensor's carrier
    /// decide, resolve, gate, execute, validate, publish.
    pub(crate) fn call_list(
        &self,
        operands: OperandList,
        options: &[(&str, OptionValue)],
    ) -> Result<Outputs> {
        let bound = self.bind_list(operands, options)?;
        check_one_class(self.name(), bound.operands())?;
        let invocation = self.resolve_owned(bound)?;
        let Some(first) = invocation
            .call()
            .operands()
            .iter()
            .find_map(Operand::as_tensor)
        else {
            return Err(Error::Value(format!(
                "the resolver of '{}' dropped the call's tensor operands",
                self.name()
            )));
        };
        // An operation a provider runs inside its own work (prepare, submit, a completion's
        // wait) records nothing: the node, if any, is the outer call's.
        // (The operands' flags are read first: the thread's provider state only when they
        // ask for gradients.)
        let recording = crate::autograd::would_record(&invocation)
            && !crate::operation::provider_scope::journaling();
        if recording && !invocation.mutated_operands().is_empty() {
            return Err(Error::Value(format!(
                "'{}' writes operands {:?} in place, which cannot be recorded for gradients; call it under no_grad",
                self.name(),
                invocation.mutated_operands()
            )));
        }
        let outputs = self.run_resolved(first.carrier(), &invocation)?;
        if recording {
            // A declared view of an operand is a new tensor and records like any result; the
            // operand object itself cannot take a node without rewriting its history. Nothing
            // was written (mutations were refused above), so refusing here changes nothing.
            if let Some(position) = exact_alias(&invocation, outputs.as_slice()) {
                return Err(Error::Value(format!(
                    "'{}' returns its operand {position} itself as a result, which cannot be \
                     recorded for gradients; call it under no_grad",
                    self.name()
                )));
            }
            crate::autograd::record(&invocation, outputs.as_slice())?;
        }
        Ok(outputs)
    }

    /// Gate, execute, validate: what every resolved invocation goes through on the carrier
    /// `carrier` that decides it, whether it came from a call or from a dispatched
    /// operation's forward. The gate and the execution read the same execution authority;
    /// nothing is published unless the results pass validation.
    pub(crate) fn run_resolved(
        &self,
        carrier: &Carrier,
        invocation: &ResolvedInvocation,
    ) -> Result<Outputs> {
        carrier.check_capability(invocation.plan())?;
        let versions = Versions::of(invocation);
        // A shipped definition-free class runs the framework's own kernels, which build every
        // result from its specification (`carriers::cpu::kernels::fresh_result` and the Generic
        // reference).
        let own_kernels =
            carrier.class().is_shipped() && matches!(carrier.authority(), Authority::Hook { .. });
        // The provider scope journals the writes of provider work so that a failure undoes
        // them. A built-in computed by such a class's built-in kernel function (the CPU's,
        // the Generic reference) with no operand declared mutated writes nothing but its
        // fresh results, which a failure drops unpublished: it needs none.
        let needs_no_scope = own_kernels
            && self.builtin().is_some()
            && matches!(carrier.authority(), Authority::Hook { builtin: Some(_) })
            && invocation.mutated_operands().is_empty();
        let scope = (!needs_no_scope).then(ProviderScope::open);
        let (outputs, result_classes) = self.execute(carrier, invocation)?;
        // The publication check guards what code outside the framework returns.
        let results = if own_kernels {
            Check::OperandVersions
        } else {
            Check::ResultsAndOperandVersions
        };
        validate(
            invocation,
            carrier.class(),
            result_classes.as_deref(),
            outputs.as_slice(),
            &versions,
            scope.as_ref(),
            results,
        )?;
        if let Some(scope) = scope {
            scope.commit();
        }
        publish_mutations(invocation, &versions);
        Ok(outputs)
    }

    /// Runs `invocation` on the execution authority of `carrier` — the source the gate in
    /// [`run_resolved`](Self::run_resolved) read its reach from: the composite provider of a
    /// dependent definition (which also declares its results' classes), the frozen kernel
    /// patterns of a kernel-backed definition in candidate order, or a definition-free
    /// class's built-in kernel function or dispatch hook. A storage-only class never gets
    /// here (it has no capability the gate could match), and answers as the gate would.
    fn execute(
        &self,
        carrier: &Carrier,
        invocation: &ResolvedInvocation,
    ) -> Result<(Outputs, Option<Vec<CarrierClass>>)> {
        let outputs = match carrier.authority() {
            Authority::Composite(composite) => {
                let (outputs, classes) = composite.execute(carrier, invocation)?;
                return Ok((Outputs::Provided(outputs), Some(classes)));
            }
            Authority::Kernels(kernels) => Outputs::Provided(kernels.execute(invocation)?),
            Authority::Hook { builtin } => match (self.builtin(), builtin) {
                (Some(operation), Some(kernel)) => Outputs::One([kernel(operation, invocation)?]),
                _ => Outputs::Many(
                    carrier
                        .dispatch_operation(self.shared_name())?
                        .forward(invocation)?,
                ),
            },
            Authority::StorageOnly => {
                return Err(Error::UnsupportedOperationPlan(
                    UnsupportedOperationPlan::new(
                        invocation.plan().operation(),
                        Some(format!(
                            "{} is storage-only and executes no operations",
                            carrier.class()
                        )),
                    ),
                ))
            }
        };
        Ok((outputs, None))
    }
}

/// The position of the first operand a declared alias result is, as the same tensor object.
fn exact_alias(invocation: &ResolvedInvocation, outputs: &[Tensor]) -> Option<usize> {
    let operands = invocation.call().operands();
    invocation
        .results()
        .iter()
        .zip(outputs)
        .find_map(|(spec, output)| {
            let alias = spec.alias_of()?;
            let operand = operands.get(alias)?.as_tensor()?;
            operand.same_as(output).then_some(alias)
        })
}

/// The class check of a call: it needs a tensor operand, and every tensor operand lives on
/// the first one's exact class (a Type error naming both classes otherwise).
#[inline]
fn check_one_class(name: &str, operands: &[Operand]) -> Result<()> {
    let mut tensors = operands.iter().filter_map(Operand::as_tensor);
    let Some(first) = tensors.next() else {
        return Err(Error::Type(format!(
            "'{name}' needs at least one tensor operand"
        )));
    };
    let class = first.carrier().class();
    if let Some(other) = tensors.find(|t| t.carrier().class() != class) {
        return Err(Error::Type(format!(
            "Tensor backing carriers must match: '{name}' got {class} and {} operands",
            other.carrier().class()
        )));
    }
    Ok(())
}

/// How many operand versions are kept inline (more spill to the heap).
const INLINE_VERSIONS: usize = 4;

/// The versions of an invocation's tensor operands, in operand order.
pub(crate) enum Versions {
    Inline(usize, [u64; INLINE_VERSIONS]),
    Heap(Vec<u64>),
}

impl Versions {
    #[inline]
    pub(crate) fn of(invocation: &ResolvedInvocation) -> Versions {
        let mut items = [0u64; INLINE_VERSIONS];
        let mut len = 0;
        let mut versions = operand_versions(invocation);
        for version in versions.by_ref() {
            if len == INLINE_VERSIONS {
                let all = items.into_iter().chain([version]).chain(versions).collect();
                return Versions::Heap(all);
            }
            items[len] = version;
            len += 1;
        }
        Versions::Inline(len, items)
    }

    fn as_slice(&self) -> &[u64] {
        match self {
            Versions::Inline(len, items) => &items[..*len],
            Versions::Heap(items) => items,
        }
    }
}

fn operand_versions(invocation: &ResolvedInvocation) -> impl Iterator<Item = u64> + '_ {
    invocation
        .call()
        .operands()
        .iter()
        .filter_map(Operand::as_tensor)
        .map(Tensor::version)
}

/// Moves the version of every operand the invocation declares mutated to exactly one past
/// its version before the call: the kernel's writes are one publication.
#[inline]
fn publish_mutations(invocation: &ResolvedInvocation, versions: &Versions) {
    let mutated = invocation.mutated_operands();
    if mutated.is_empty() {
        return;
    }
    let tensors = invocation
        .call()
        .operands()
        .iter()
        .enumerate()
        .filter_map(|(index, operand)| Some((index, operand.as_tensor()?)));
    for ((index, tensor), &before) in tensors.zip(versions.as_slice()) {
        if mutated.contains(&index) {
            tensor.carrier().publish_version(before + 1);
        }
    }
}

/// What the publication check covers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Every result against its specification, and the operands' versions.
    ResultsAndOperandVersions,
    /// The result count and the operands' versions only: for results the framework's own
    /// kernels built.
    OperandVersions,
}

/// The publication check: results match their specifications exactly (on `class`, or on
/// the declared `result_classes` of a composite provider), none shares an operand's storage
/// unless declared to alias that operand (as the operand or a view of it), and no operand was
/// mutated (a `ProviderContract` error otherwise). An operand whose version moved with no
/// write by the provider on record was written by another thread meanwhile: a Runtime error
/// saying so.
pub(crate) fn validate(
    invocation: &ResolvedInvocation,
    class: CarrierClass,
    result_classes: Option<&[CarrierClass]>,
    outputs: &[Tensor],
    versions: &Versions,
    scope: Option<&ProviderScope>,
    check: Check,
) -> Result<()> {
    let specs = invocation.results();
    if outputs.len() != specs.len() {
        return Err(contract(
            invocation,
            class,
            format!(
                "returned {} results, expected {}",
                outputs.len(),
                specs.len()
            ),
        ));
    }
    if check == Check::ResultsAndOperandVersions {
        check_results(invocation, class, result_classes, outputs)?;
    }
    check_operand_versions(invocation, class, versions, scope)
}

/// A `ProviderContract` error of `invocation` on `class`.
#[cold]
fn contract(invocation: &ResolvedInvocation, class: CarrierClass, what: String) -> Error {
    Error::ProviderContract(format!(
        "'{}' on {class}: {what}",
        invocation.call().definition().name()
    ))
}

/// Every result against its specification (see [`validate`]).
fn check_results(
    invocation: &ResolvedInvocation,
    class: CarrierClass,
    result_classes: Option<&[CarrierClass]>,
    outputs: &[Tensor],
) -> Result<()> {
    let contract = |what: String| Err(contract(invocation, class, what));
    let operands = invocation.call().operands();
    for (i, (output, spec)) in outputs.iter().zip(invocation.results()).enumerate() {
        if let Some(alias) = spec.alias_of() {
            // A declared alias is the operand itself or a view over its storage.
            let operand = operands.get(alias).and_then(Operand::as_tensor);
            let Some(operand) = operand.filter(|t| t.carrier().same_as(output.carrier())) else {
                return contract(format!(
                    "result {i} must be operand {alias} or a view of its storage"
                ));
            };
            if !operand.same_as(output)
                && (output.dtype() != spec.dtype() || output.layout() != spec.layout())
            {
                return contract(format!(
                    "result {i}, a view of operand {alias}, is a {} tensor with layout {}, \
                     expected {} with layout {}",
                    output.dtype(),
                    output.layout(),
                    spec.dtype(),
                    spec.layout()
                ));
            }
            continue;
        }
        let expected = result_classes
            .and_then(|c| c.get(i))
            .copied()
            .unwrap_or(class);
        if output.carrier().class() != expected {
            return contract(format!(
                "result {i} lives on {}, expected {expected}",
                output.carrier().class()
            ));
        }
        if output.dtype() != spec.dtype() {
            return contract(format!(
                "result {i} has dtype {}, expected {}",
                output.dtype(),
                spec.dtype()
            ));
        }
        if output.layout() != spec.layout() || output.offset() != 0 {
            return contract(format!(
                "result {i} has layout {} at offset {}, expected {} at offset 0",
                output.layout(),
                output.offset(),
                spec.layout()
            ));
        }
        if output.carrier().size() != spec.layout().cosize() {
            return contract(format!(
                "result {i} has {} slots, expected exactly {}",
                output.carrier().size(),
                spec.layout().cosize()
            ));
        }
        // A result over an operand's storage (the operand itself or any view of it) is a
        // fresh result only in name: it is the provider's violation unless declared with
        // `alias_of`.
        if let Some(position) = operands
            .iter()
            .filter_map(Operand::as_tensor)
            .position(|t| t.carrier().same_as(output.carrier()))
        {
            return contract(format!(
                "result {i} shares storage with operand {position}, which its spec does not \
                 declare with alias_of"
            ));
        }
    }
    Ok(())
}

/// No tensor operand's version moved during the call unless the invocation declares it
/// mutated (see [`validate`]).
#[inline]
fn check_operand_versions(
    invocation: &ResolvedInvocation,
    class: CarrierClass,
    versions: &Versions,
    scope: Option<&ProviderScope>,
) -> Result<()> {
    let mut before = versions.as_slice().iter();
    for (index, operand) in invocation.call().operands().iter().enumerate() {
        let Some(tensor) = operand.as_tensor() else {
            continue;
        };
        let Some(&version) = before.next() else {
            break;
        };
        if tensor.version() != version && !invocation.mutated_operands().contains(&index) {
            let position = versions.as_slice().len() - before.len() - 1;
            return Err(changed_operand(invocation, class, tensor, position, scope));
        }
    }
    Ok(())
}

/// The error for tensor operand `position` whose version moved undeclared: the provider's
/// contract violation when its own work wrote it, another thread's write otherwise (always,
/// for the framework's own kernels, which run without a provider scope).
#[cold]
fn changed_operand(
    invocation: &ResolvedInvocation,
    class: CarrierClass,
    tensor: &Tensor,
    position: usize,
    scope: Option<&ProviderScope>,
) -> Error {
    if scope.is_some_and(|scope| scope.wrote(tensor.carrier().id())) {
        return contract(
            invocation,
            class,
            format!("tensor operand {position} was mutated by the provider"),
        );
    }
    Error::Runtime(format!(
        "'{}' on {class}: tensor operand {position} was written by another thread while \
         the operation ran; its results were discarded",
        invocation.call().definition().name()
    ))
}
