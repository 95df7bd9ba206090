//! Bound calls, result specifications and resolved invocations (docs/operations.md, Operation
//! definitions): what a definition's `resolve` produces and what kernels execute.

use std::fmt;
use std::sync::Arc;

use smallvec::{smallvec, SmallVec};
use strideweave_layout::{Layout, Shape};

use crate::carrier::Carrier;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::definition::OperationDefinition;
use crate::operation::plan::{OperandRole, OperationPlan};
use crate::operation::schema::OptionValue;
use crate::operation::Operand;
use crate::tensor::shared_layout::SharedLayout;
use crate::tensor::Tensor;

/// The operands of a bound call: inline for the usual one, two or three, so binding a
/// built-in call allocates nothing for them, and reading them is one branch.
#[derive(Debug, Clone)]
pub(crate) struct OperandList(SmallVec<[Operand; 3]>);

impl OperandList {
    /// One operand.
    pub(crate) fn one(a: Operand) -> OperandList {
        OperandList(smallvec![a])
    }

    /// Two operands.
    pub(crate) fn two(a: Operand, b: Operand) -> OperandList {
        OperandList(smallvec![a, b])
    }

    /// Three operands.
    pub(crate) fn three(a: Operand, b: Operand, c: Operand) -> OperandList {
        OperandList(smallvec![a, b, c])
    }

    /// The operands of an iterator, inline when there are at most three.
    pub(crate) fn collect(operands: impl IntoIterator<Item = Operand>) -> OperandList {
        OperandList(operands.into_iter().collect())
    }

    /// The operands, in order.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[Operand] {
        &self.0
    }
}

impl From<Vec<Operand>> for OperandList {
    fn from(operands: Vec<Operand>) -> Self {
        OperandList(SmallVec::from_vec(operands))
    }
}

/// One bound option: its name and value.
pub(crate) type BoundOption = (Arc<str>, OptionValue);

/// The bound options of a call: a definition's defaults are bound once and shared.
#[derive(Clone)]
pub(crate) enum BoundOptions {
    /// Every option at its default: the definition's own list, bound once.
    Defaults(&'static [BoundOption]),
    /// Options the caller gave, with defaults filled in.
    Given(Arc<[BoundOption]>),
}

impl BoundOptions {
    /// The bound options, in schema order.
    fn as_slice(&self) -> &[BoundOption] {
        match self {
            BoundOptions::Defaults(options) => options,
            BoundOptions::Given(options) => options,
        }
    }
}

/// A call bound against its definition's schema: operands in order and every option (defaults
/// filled). Built by the framework only. It holds its operands inline (the usual one to three
/// of a built-in need no allocation of their own), so binding and dispatching a call moves
/// them rather than sharing them through another allocation.
#[derive(Clone)]
pub struct BoundOperationCall {
    definition: OperationDefinition,
    operands: OperandList,
    options: BoundOptions,
}

impl BoundOperationCall {
    pub(crate) fn new(
        definition: OperationDefinition,
        operands: OperandList,
        options: BoundOptions,
    ) -> Self {
        BoundOperationCall {
            definition,
            operands,
            options,
        }
    }

    /// The operation being called.
    pub fn definition(&self) -> &OperationDefinition {
        &self.definition
    }

    /// The operands, in schema order.
    pub fn operands(&self) -> &[Operand] {
        self.operands.as_slice()
    }

    /// Operand `i` as a tensor (a Type error naming the position otherwise).
    pub fn tensor(&self, i: usize) -> Result<&Tensor> {
        self.operands()
            .get(i)
            .and_then(Operand::as_tensor)
            .ok_or_else(|| {
                Error::Type(format!(
                    "operand {i} of '{}' is not a tensor",
                    self.definition.name()
                ))
            })
    }

    /// The value of option `name` (defaults filled in).
    pub fn option(&self, name: &str) -> Option<OptionValue> {
        self.options
            .as_slice()
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| *v)
    }
}

impl fmt::Debug for BoundOperationCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundOperationCall")
            .field("definition", &self.definition)
            .field("operands", &self.operands())
            .field("options", &self.options.as_slice())
            .finish()
    }
}

/// The dtype, shape and exact layout one result must have; `alias_of` names an operand whose
/// storage the result shares (the operand itself, or a view of it with this dtype and
/// layout); tolerances bound differences from the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSpec {
    dtype: DType,
    /// Shared with the result tensor a kernel builds (and often with an operand).
    layout: SharedLayout,
    alias_of: Option<usize>,
    atol: f64,
    rtol: f64,
}

impl ResultSpec {
    /// A fresh result of `dtype` with exactly `layout` (its shape is the layout's).
    pub fn new(dtype: DType, layout: Layout) -> ResultSpec {
        ResultSpec::shared(dtype, SharedLayout::counted(layout))
    }

    /// [`ResultSpec::new`] with a layout already shared (an operand's).
    pub(crate) fn shared(dtype: DType, layout: SharedLayout) -> ResultSpec {
        ResultSpec {
            dtype,
            layout,
            alias_of: None,
            atol: 0.0,
            rtol: 0.0,
        }
    }

    /// A fresh result of `dtype` with the canonical column-major layout of `shape`.
    pub fn canonical(dtype: DType, shape: Shape) -> ResultSpec {
        ResultSpec::shared(
            dtype,
            crate::tensor::canonical_layouts::canonical_layout(shape),
        )
    }

    /// Declares that this result shares the storage of operand `index`: it is that operand
    /// itself or a view of it. An undeclared result over an operand's storage is the
    /// provider's contract violation.
    pub fn aliasing(mut self, index: usize) -> ResultSpec {
        self.alias_of = Some(index);
        self
    }

    /// Sets the tolerances against the reference; both must be finite and ≥ 0.
    pub fn with_tolerance(mut self, atol: f64, rtol: f64) -> Result<ResultSpec> {
        for (name, t) in [("atol", atol), ("rtol", rtol)] {
            if !t.is_finite() || t < 0.0 {
                return Err(Error::Value(format!(
                    "ResultSpec {name} must be finite and >= 0, got {t}"
                )));
            }
        }
        self.atol = atol;
        self.rtol = rtol;
        Ok(self)
    }

    /// The result dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The result shape.
    pub fn shape(&self) -> &Shape {
        self.layout.shape()
    }

    /// The exact result layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The result this spec describes over `carrier`: offset 0 and exactly this layout,
    /// shared with the spec rather than copied. This is how a kernel publishes a fresh
    /// result; the dispatcher still validates it (dtype, class, size) before publication.
    ///
    /// # Errors
    /// As [`Tensor::new`]: a Value error when the layout's slots do not fit in `carrier`.
    ///
    /// ```
    /// use strideweave::carriers::Cpu;
    /// use strideweave::operation::ResultSpec;
    /// use strideweave::{DType, Shape};
    /// let spec = ResultSpec::canonical(DType::FLOAT32, Shape::new((2, 3))?);
    /// let result = spec.tensor(Cpu::carrier(6, DType::FLOAT32, true, false)?)?;
    /// assert_eq!(result.layout(), spec.layout());
    /// assert!(spec.tensor(Cpu::carrier(5, DType::FLOAT32, true, false)?).is_err());
    /// # Ok::<(), strideweave::Error>(())
    /// ```
    pub fn tensor(&self, carrier: Carrier) -> Result<Tensor> {
        Tensor::with_shared_layout(carrier, 0, self.layout.clone())
    }

    /// The exact result layout as the shared handle a result tensor can hold.
    pub(crate) fn shared_layout(&self) -> &SharedLayout {
        &self.layout
    }

    /// The operand this result aliases, if any.
    pub fn alias_of(&self) -> Option<usize> {
        self.alias_of
    }

    /// Absolute tolerance against the reference.
    pub fn atol(&self) -> f64 {
        self.atol
    }

    /// Relative tolerance against the reference.
    pub fn rtol(&self) -> f64 {
        self.rtol
    }
}

/// The result specifications of an invocation: inline for the usual single result.
// The single result is kept inline on purpose: boxing it would cost an allocation per call.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum ResultList {
    One([ResultSpec; 1]),
    Many(Arc<[ResultSpec]>),
}

impl ResultList {
    fn collect(results: impl IntoIterator<Item = ResultSpec>) -> ResultList {
        let mut results = results.into_iter();
        let Some(first) = results.next() else {
            return ResultList::Many(Arc::from([]));
        };
        match results.next() {
            None => ResultList::One([first]),
            Some(second) => ResultList::Many([first, second].into_iter().chain(results).collect()),
        }
    }

    fn as_slice(&self) -> &[ResultSpec] {
        match self {
            ResultList::One(results) => results,
            ResultList::Many(results) => results,
        }
    }
}

/// How many saved operand indices an invocation keeps inline.
const INLINE_SAVED: usize = 4;

/// The saved operand indices of an invocation: inline for the usual few.
#[derive(Clone)]
enum SavedList {
    Inline(u8, [usize; INLINE_SAVED]),
    Many(Arc<[usize]>),
}

impl SavedList {
    fn collect(saved: impl IntoIterator<Item = usize>) -> SavedList {
        let mut items = [0usize; INLINE_SAVED];
        let mut len = 0usize;
        let mut saved = saved.into_iter();
        for index in saved.by_ref() {
            if len == INLINE_SAVED {
                let all: Arc<[usize]> = items.into_iter().chain([index]).chain(saved).collect();
                return SavedList::Many(all);
            }
            items[len] = index;
            len += 1;
        }
        // `len <= INLINE_SAVED`, which fits a u8.
        SavedList::Inline(len as u8, items)
    }

    fn as_slice(&self) -> &[usize] {
        match self {
            SavedList::Inline(len, items) => &items[..usize::from(*len)],
            SavedList::Many(items) => items,
        }
    }
}

/// A call with its dtype plan and result specifications: what a kernel executes.
#[derive(Clone)]
pub struct ResolvedInvocation {
    call: BoundOperationCall,
    plan: OperationPlan,
    results: ResultList,
    saved_operands: SavedList,
    /// The operands a kernel may write in place (empty for every built-in).
    mutated_operands: SavedList,
    /// The kernel id when it is not the operation name.
    kernel_id: Option<Arc<str>>,
}

impl ResolvedInvocation {
    /// Validates and builds an invocation (Value errors): the plan names the call's
    /// operation and has one operand plan per operand with the matching role; there is at
    /// least one result; aliases and saved operands name distinct tensor operands; the kernel
    /// id (default: the operation name) is non-empty.
    pub fn new(
        call: BoundOperationCall,
        plan: OperationPlan,
        results: impl IntoIterator<Item = ResultSpec>,
        saved_operands: impl IntoIterator<Item = usize>,
        kernel_id: Option<&str>,
    ) -> Result<ResolvedInvocation> {
        let definition = call.definition();
        let name = definition.name();
        if plan.operation() != name {
            return Err(Error::Value(format!(
                "the plan of '{}' cannot resolve a call of '{name}'",
                plan.operation()
            )));
        }
        let roles_match = plan.operands().len() == call.operands().len()
            && plan.operands().iter().zip(call.operands()).all(|(p, o)| {
                matches!(
                    (p.role(), o),
                    (OperandRole::Tensor, Operand::Tensor(_))
                        | (OperandRole::WeakScalar, Operand::Scalar(_))
                )
            });
        if !roles_match {
            return Err(Error::Value(format!(
                "the plan of '{name}' does not match the roles of the call's operands"
            )));
        }
        let results = ResultList::collect(results);
        if results.as_slice().is_empty() {
            return Err(Error::Value(format!(
                "'{name}' must declare at least one result"
            )));
        }
        let saved = SavedList::collect(saved_operands);
        let saved_indices = saved.as_slice();
        let indices = results
            .as_slice()
            .iter()
            .filter_map(ResultSpec::alias_of)
            .map(|i| ("alias_of", i, None));
        let saved_positions = saved_indices
            .iter()
            .enumerate()
            .map(|(k, &i)| ("saved_operands", i, Some(k)));
        for (what, i, position) in indices.chain(saved_positions) {
            if call
                .operands()
                .get(i)
                .and_then(Operand::as_tensor)
                .is_none()
            {
                return Err(Error::Value(format!(
                    "{what} index {i} of '{name}' is not a tensor operand"
                )));
            }
            if let Some(k) = position {
                if saved_indices[..k].contains(&i) {
                    return Err(Error::Value(format!("'{name}' saves operand {i} twice")));
                }
            }
        }
        // `None` stands for the operation name (the default), which the call already holds.
        let kernel_id = match kernel_id.unwrap_or(name) {
            "" => return Err(Error::Value(format!("the kernel id of '{name}' is empty"))),
            id if id == name => None,
            id => Some(Arc::from(id)),
        };
        Ok(ResolvedInvocation {
            call,
            plan,
            results,
            saved_operands: saved,
            mutated_operands: SavedList::collect([]),
            kernel_id,
        })
    }

    /// Declares that the kernel writes the tensor operands `operands` in place (design:
    /// `mutated_operands`): on success each of them moves its version by exactly one, however
    /// many writes the kernel made, and a write to any other operand stays a
    /// `ProviderContract` error that is undone. A call that would record gradients refuses
    /// such an invocation before any kernel runs. Value errors: an index that is not a tensor
    /// operand, or one named twice.
    pub fn with_mutated_operands(
        mut self,
        operands: impl IntoIterator<Item = usize>,
    ) -> Result<ResolvedInvocation> {
        let name = self.call.definition().name();
        let mutated = SavedList::collect(operands);
        for (k, &i) in mutated.as_slice().iter().enumerate() {
            if self
                .call
                .operands()
                .get(i)
                .and_then(Operand::as_tensor)
                .is_none()
            {
                return Err(Error::Value(format!(
                    "mutated_operands index {i} of '{name}' is not a tensor operand"
                )));
            }
            if mutated.as_slice()[..k].contains(&i) {
                return Err(Error::Value(format!(
                    "'{name}' declares operand {i} mutated twice"
                )));
            }
        }
        self.mutated_operands = mutated;
        Ok(self)
    }

    /// The operands the kernel writes in place, by operand index.
    pub fn mutated_operands(&self) -> &[usize] {
        self.mutated_operands.as_slice()
    }

    /// A built-in's invocation, which its resolver builds consistent by construction (the
    /// plan is the built-in's own, one result, saved positions from its spec): the checks of
    /// [`new`](Self::new) run in debug builds only.
    pub(crate) fn of_builtin(
        call: BoundOperationCall,
        plan: OperationPlan,
        result: ResultSpec,
        saved_operands: impl IntoIterator<Item = usize>,
    ) -> ResolvedInvocation {
        let saved = SavedList::collect(saved_operands);
        let invocation = ResolvedInvocation {
            call,
            plan,
            results: ResultList::One([result]),
            saved_operands: saved,
            mutated_operands: SavedList::collect([]),
            kernel_id: None,
        };
        debug_assert!(
            ResolvedInvocation::new(
                invocation.call.clone(),
                invocation.plan.clone(),
                invocation.results().iter().cloned(),
                invocation.saved_operands().iter().copied(),
                None,
            )
            .is_ok(),
            "a built-in resolved an inconsistent invocation: {invocation:?}"
        );
        invocation
    }

    /// The bound call.
    pub fn call(&self) -> &BoundOperationCall {
        &self.call
    }

    /// The dtype plan.
    pub fn plan(&self) -> &OperationPlan {
        &self.plan
    }

    /// The result specifications, in result order.
    pub fn results(&self) -> &[ResultSpec] {
        self.results.as_slice()
    }

    /// The operands saved for the backward pass.
    pub fn saved_operands(&self) -> &[usize] {
        self.saved_operands.as_slice()
    }

    /// The kernel id (the operation name unless the resolver chose one).
    pub fn kernel_id(&self) -> &str {
        match &self.kernel_id {
            Some(id) => id,
            None => self.call.definition().name(),
        }
    }
}

impl fmt::Debug for ResolvedInvocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedInvocation")
            .field("call", &self.call)
            .field("plan", &self.plan)
            .field("results", &self.results())
            .field("saved_operands", &self.saved_operands())
            .field("mutated_operands", &self.mutated_operands())
            .field("kernel_id", &self.kernel_id())
            .finish()
    }
}
