//! Custom operations: every advertised capability of an operation that is not a built-in is
//! run, through a call the factory declares ([`OperationCase`]), on dense, gapped, offset and
//! permuted operands, and compared with the case's reference or the definition's (design:
//! "difference-test values and gradients against the reference").

use std::fmt;
use std::sync::Arc;

use strideweave::operation::{
    operation_definition, Operand, OperationDefinition, OptionValue, ResolvedInvocation,
};
use strideweave::{DType, Error, Result, Tensor, Value};

use crate::cases::{self, dense, Arg, MakeTensor, Placement};
use crate::operations::{changed, operand_carriers, prototype, snapshots};
use crate::support::{close, Check, Context, Result2};

/// Computes an invocation's results with reference semantics, from operands on Generic
/// carriers (the same signature as a definition's `reference`).
type ReferenceFn = dyn Fn(&ResolvedInvocation) -> Result<Vec<Tensor>> + Send + Sync;
/// Maps a generated value of operand `position` into the operation's domain.
type DomainFn = dyn Fn(usize, Value) -> Value + Send + Sync;

/// A call of a custom operation the suite can build, declared by the factory
/// ([`Factory::with_operation_case`](crate::Factory::with_operation_case)): the suite knows
/// the shapes of the built-ins only, so an author whose carrier advertises a custom
/// operation says how to call it — its operands' dtypes and extents, weak scalars, options —
/// and, when the definition has none, how to compute the reference.
///
/// ```
/// use strideweave::DType;
/// use strideweave_conformance::OperationCase;
///
/// let case = OperationCase::new("mylib.scale2").tensor(DType::FLOAT32, &[3, 4]);
/// assert_eq!(case.operation(), "mylib.scale2");
/// ```
#[derive(Clone)]
pub struct OperationCase {
    operation: String,
    pub(crate) args: Vec<Arg>,
    /// The mode extents of each operand (a tensor's layouts are the suite's choice; a
    /// scalar's entry is unused).
    extents: Vec<Vec<usize>>,
    options: Vec<(String, OptionValue)>,
    reference: Option<Arc<ReferenceFn>>,
    domain: Option<Arc<DomainFn>>,
}

impl fmt::Debug for OperationCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperationCase")
            .field("operation", &self.operation)
            .field("args", &self.args)
            .field("extents", &self.extents)
            .field("options", &self.options)
            .field("reference", &self.reference.is_some())
            .finish_non_exhaustive()
    }
}

impl OperationCase {
    /// A call of the operation named `operation`, with no operands yet.
    pub fn new(operation: &str) -> OperationCase {
        OperationCase {
            operation: operation.to_string(),
            args: Vec::new(),
            extents: Vec::new(),
            options: Vec::new(),
            reference: None,
            domain: None,
        }
    }

    /// The operation's name.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// Appends a tensor operand of `dtype` with mode extents `extents`.
    pub fn tensor(mut self, dtype: DType, extents: &[usize]) -> OperationCase {
        self.args.push(Arg::Tensor(dtype));
        self.extents.push(extents.to_vec());
        self
    }

    /// Appends a weak-scalar operand.
    pub fn scalar(mut self, value: Value) -> OperationCase {
        self.args.push(Arg::Scalar(value));
        self.extents.push(vec![1]);
        self
    }

    /// Passes the option `name` = `value`.
    pub fn option(mut self, name: &str, value: OptionValue) -> OperationCase {
        self.options.push((name.to_string(), value));
        self
    }

    /// The reference the suite compares with, computed from the invocation resolved on
    /// Generic operands holding the same elements; without it the definition's own
    /// `reference` is used, and without either the case cannot be checked.
    pub fn reference(
        mut self,
        reference: impl Fn(&ResolvedInvocation) -> Result<Vec<Tensor>> + Send + Sync + 'static,
    ) -> OperationCase {
        self.reference = Some(Arc::new(reference));
        self
    }

    /// Maps each generated value of operand `position` into the operation's domain (a
    /// positive input for a logarithm); by default the suite's values are used as they are:
    /// multiples of 1/8 in [-4, 4], integers in [-9, 9], bools.
    pub fn domain(
        mut self,
        domain: impl Fn(usize, Value) -> Value + Send + Sync + 'static,
    ) -> OperationCase {
        self.domain = Some(Arc::new(domain));
        self
    }

    /// The value `value` generated for operand `position`, in the domain.
    pub(crate) fn in_domain(&self, position: usize, value: Value) -> Value {
        match &self.domain {
            Some(domain) => domain(position, value),
            None => value,
        }
    }

    /// The options, as a call takes them.
    pub(crate) fn options(&self) -> Vec<(&str, OptionValue)> {
        self.options.iter().map(|(n, v)| (n.as_str(), *v)).collect()
    }

    /// The placements the suite runs the case on: dense, then gapped at an offset, offset
    /// only, and (for operands of rank 2 or more) permuted.
    pub(crate) fn geometries(&self) -> Vec<Vec<Placement>> {
        let each = |f: &dyn Fn(usize, &[usize]) -> Placement| -> Vec<Placement> {
            self.extents
                .iter()
                .enumerate()
                .map(|(i, e)| f(i, e))
                .collect()
        };
        let identity = |e: &[usize]| (0..e.len()).collect::<Vec<_>>();
        let mut all = vec![
            each(&|_, e| Placement::dense(e)),
            each(&|i, e| Placement::strided(e, &identity(e), 2, 1 + i)),
            each(&|i, e| Placement::strided(e, &identity(e), 1, 3 + i)),
        ];
        if self
            .args
            .iter()
            .zip(&self.extents)
            .any(|(a, e)| matches!(a, Arg::Tensor(_)) && e.len() >= 2)
        {
            all.push(each(&|_, e| {
                let order: Vec<usize> = (0..e.len()).rev().collect();
                Placement::strided(e, &order, 1, 0)
            }));
        }
        all
    }

    /// The call's operands: tensors `make(dtype, slots, offset, layout)` builds, the
    /// scalars as they are.
    pub(crate) fn operands(
        &self,
        geometry: &[Placement],
        slots: &[Vec<Value>],
        make: &MakeTensor<'_>,
    ) -> Result<Vec<Operand>> {
        cases::operands(&self.args, geometry, slots, make)
    }

    /// The operands on Generic carriers.
    pub(crate) fn generic_operands(
        &self,
        geometry: &[Placement],
        slots: &[Vec<Value>],
    ) -> Result<Vec<Operand>> {
        self.operands(geometry, slots, &cases::generic_tensor)
    }

    /// The invocation the definition resolves for the case on Generic operands.
    pub(crate) fn resolve(
        &self,
        definition: &OperationDefinition,
        geometry: &[Placement],
        slots: &[Vec<Value>],
    ) -> Result<ResolvedInvocation> {
        let operands = self.generic_operands(geometry, slots)?;
        definition.resolve(&definition.bind(operands, &self.options())?)
    }

    /// `mylib.op(Float32 (3,4):(1,3)@0, scalar 2)`: the call as messages print it.
    pub(crate) fn describe(&self, geometry: &[Placement]) -> String {
        let args = cases::describe(&self.args, geometry);
        format!("{}({})", self.operation, args.join(", "))
    }

    /// Slot values for every operand under `geometry`, in the case's domain.
    pub(crate) fn slot_values(
        &self,
        cx: &mut Context<'_>,
        geometry: &[Placement],
    ) -> Result2<Vec<Vec<Value>>> {
        let mut all = Vec::new();
        for (i, arg) in self.args.iter().enumerate() {
            let values =
                cases::slot_values(*arg, &geometry[i], &mut cx.rng, |v| self.in_domain(i, v));
            all.push(cx.ok(values, || "laying out operands".into())?);
        }
        Ok(all)
    }
}

/// The cases the factory declares for `definition` whose call resolves to `plan`, with the
/// first geometry's invocation.
pub(crate) fn matching_cases(
    cx: &mut Context<'_>,
    definition: &OperationDefinition,
    plan: &strideweave::operation::OperationPlan,
) -> Result2<Vec<OperationCase>> {
    let mut matching = Vec::new();
    for case in cx.factory.operation_cases() {
        if case.operation != definition.name() {
            continue;
        }
        let geometry = case.geometries().remove(0);
        let slots = case.slot_values(cx, &geometry)?;
        let resolved = case.resolve(definition, &geometry, &slots);
        let what = case.describe(&geometry);
        let invocation = cx.ok(resolved, || {
            format!("resolving the declared case {what} on Generic operands")
        })?;
        if invocation.plan() == plan {
            matching.push(case);
        }
    }
    Ok(matching)
}

/// The custom operations promise.
pub(crate) fn custom_operations(cx: &mut Context<'_>) -> Check {
    let capabilities = prototype(cx)?.capabilities();
    let mut ran = 0;
    for capability in capabilities.iter() {
        let plan = capability.plan();
        let definition = cx.ok(operation_definition(plan.operation()), || {
            format!("looking up the definition of the advertised {capability}")
        })?;
        if definition.is_builtin() {
            continue;
        }
        let cases = matching_cases(cx, &definition, plan)?;
        if cases.is_empty() {
            return Err(cx.broken(format!(
                "advertises {capability}, a custom operation, but the factory declares no \
                 OperationCase whose call resolves to that plan (Factory::with_operation_case); \
                 the suite cannot build its operands"
            )));
        }
        for case in &cases {
            run_case(cx, &definition, case)?;
            ran += 1;
        }
        cx.notes.push(format!(
            "ran {capability} through {} declared case{}",
            cases.len(),
            if cases.len() == 1 { "" } else { "s" }
        ));
    }
    if ran == 0 {
        cx.not_applicable = Some("advertises no custom operation".into());
    }
    Ok(())
}

/// Runs one declared case on every geometry against its reference.
fn run_case(cx: &mut Context<'_>, definition: &OperationDefinition, case: &OperationCase) -> Check {
    let mut declined = Vec::new();
    for geometry in case.geometries() {
        let slots = case.slot_values(cx, &geometry)?;
        let what = case.describe(&geometry);
        let invocation = cx.ok(case.resolve(definition, &geometry, &slots), || {
            format!("resolving {what} on Generic operands")
        })?;
        let reference = match (&case.reference, definition.reference()) {
            (Some(reference), _) => reference(&invocation),
            (None, Some(reference)) => reference(&invocation),
            (None, None) => {
                return Err(cx.broken(format!(
                    "{what}: neither the declared case nor the definition of '{}' gives a \
                     reference to compare with (OperationCase::reference)",
                    definition.name()
                )))
            }
        };
        let reference = cx.ok(reference, || format!("the reference of {what}"))?;
        let factory = cx.factory;
        let operands = cx.ok(
            case.operands(&geometry, &slots, &|d, v, offset, layout| {
                factory.tensor(d, v, offset, layout)
            }),
            || format!("building the operands of {what}"),
        )?;
        let carriers = operand_carriers(&operands);
        let before = snapshots(cx, &carriers)?;
        let results = match definition.call(operands, &case.options()) {
            Err(Error::UnsupportedOperationPlan(_)) if !dense(&geometry) => {
                declined.push(what);
                continue;
            }
            other => cx.ok(other, || format!("{what}, an advertised custom operation,"))?,
        };
        compare(cx, &what, &invocation, &results, &reference)?;
        if invocation.mutated_operands().is_empty() {
            if let Some(change) = changed(cx, &carriers, &before)? {
                return Err(cx.broken(format!("{what} changed an operand: {change}")));
            }
        }
    }
    if !declined.is_empty() {
        cx.notes
            .push(format!("declined at run time: {}", declined.join(", ")));
    }
    Ok(())
}

/// Compares results with the reference: count, shape, dtype, every element within the
/// larger of the factory's tolerance for the operation and the result spec's.
fn compare(
    cx: &Context<'_>,
    what: &str,
    invocation: &ResolvedInvocation,
    results: &[Tensor],
    reference: &[Tensor],
) -> Check {
    cx.ensure(results.len() == reference.len(), || {
        format!(
            "{what} gave {} results, the reference {}",
            results.len(),
            reference.len()
        )
    })?;
    let (atol, rtol) = cx.factory.tolerance(invocation.plan().operation());
    for (k, (got, want)) in results.iter().zip(reference).enumerate() {
        let spec = invocation.results().get(k);
        let atol = spec.map_or(atol, |s| s.atol().max(atol));
        let rtol = spec.map_or(rtol, |s| s.rtol().max(rtol));
        cx.ensure(
            got.shape() == want.shape() && got.dtype() == want.dtype(),
            || {
                format!(
                    "{what} result {k} is {} {}, the reference {} {}",
                    got.dtype(),
                    got.shape(),
                    want.dtype(),
                    want.shape()
                )
            },
        )?;
        let got_values = cx.ok(got.to_values(), || format!("reading result {k} of {what}"))?;
        let want_values = cx.ok(want.to_values(), || "reading the reference".into())?;
        for (i, (g, w)) in got_values.iter().zip(&want_values).enumerate() {
            cx.ensure(close(w, g, atol, rtol), || {
                format!(
                    "{what} result {k} element {i} (colexicographic) is {g}, the declared \
                     reference {w} (tolerance {atol} + {rtol}·|reference|)"
                )
            })?;
        }
    }
    Ok(())
}

/// Distinct Float32 inputs away from zero and the integers: multiples of 1/8 with magnitude
/// at least 1/4, none an integer.
fn distinct_inputs(cx: &mut Context<'_>, count: usize) -> Vec<f64> {
    let mut pool: Vec<i64> = (-28i64..=28)
        .filter(|i| i.abs() >= 2 && i % 8 != 0)
        .collect();
    let mut chosen = Vec::with_capacity(count);
    for _ in 0..count {
        if pool.is_empty() {
            break;
        }
        let k = cx.rng.int(0, pool.len() as i64 - 1) as usize;
        chosen.push(pool.swap_remove(k) as f64 / 8.0);
    }
    chosen
}

/// The gradients of every advertised differentiable custom operation (Float32 output, a
/// backward rule, Float32 operands the schema marks differentiable), through each declared
/// case on dense operands, against central differences of the carrier's own forward.
/// Returns how many were checked.
pub(crate) fn custom_gradients(cx: &mut Context<'_>) -> Result2<usize> {
    let capabilities = prototype(cx)?.capabilities();
    let mut checked = 0;
    for capability in capabilities.iter() {
        let plan = capability.plan();
        if plan.output() != DType::FLOAT32 {
            continue;
        }
        let Ok(definition) = operation_definition(plan.operation()) else {
            continue;
        };
        if definition.is_builtin()
            || !matches!(definition.vjp(), Some(strideweave::operation::Vjp::Rule(_)))
        {
            continue;
        }
        for case in matching_cases(cx, &definition, plan)? {
            let differentiable: Vec<usize> = case
                .args
                .iter()
                .enumerate()
                .filter(|(i, a)| {
                    **a == Arg::Tensor(DType::FLOAT32)
                        && definition
                            .schema()
                            .operands()
                            .get(*i)
                            .is_some_and(|spec| spec.is_differentiable())
                })
                .map(|(i, _)| i)
                .collect();
            if differentiable.is_empty() {
                continue;
            }
            let geometry = case.geometries().remove(0);
            let mut base = case.slot_values(cx, &geometry)?;
            let count: usize = differentiable.iter().map(|&i| base[i].len()).sum();
            let mut pool = distinct_inputs(cx, count).into_iter();
            for &i in &differentiable {
                for slot in base[i].iter_mut() {
                    *slot = case.in_domain(i, Value::Float(pool.next().unwrap_or(0.375)));
                }
            }
            let what = case.describe(&geometry);
            let factory = cx.factory;
            let options = case.options();
            let make = |slots: &[Vec<Value>]| {
                case.operands(&geometry, slots, &|d, v, offset, layout| {
                    factory.tensor(d, v, offset, layout)
                })
            };
            let forward = |operands: Vec<Operand>| -> Result<Tensor> {
                definition
                    .call(operands, &options)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| {
                        Error::Runtime(format!("'{}' gave no result", definition.name()))
                    })
            };
            crate::differences::check_gradients(
                cx,
                &what,
                &geometry,
                &base,
                &differentiable,
                &make,
                &forward,
            )?;
            checked += 1;
            cx.notes
                .push(format!("gradient of {capability} through {what}"));
        }
    }
    Ok(checked)
}
