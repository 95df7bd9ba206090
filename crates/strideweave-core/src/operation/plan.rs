//! Dtype plans: how an operation computes on given operand dtypes
//! (docs/operations.md, Dtype planning). A plan is value-independent, immutable and hashable; a
//! carrier's capabilities are the plans it executes.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::Builtin;

/// How an operand enters an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperandRole {
    /// A tensor operand.
    Tensor,
    /// A Rust scalar that adopts the tensor's kind (a "weak" scalar).
    WeakScalar,
}

impl OperandRole {
    /// The role's name in capability order and messages.
    pub fn name(self) -> &'static str {
        match self {
            OperandRole::Tensor => "tensor",
            OperandRole::WeakScalar => "weak_scalar",
        }
    }
}

/// The arithmetic an operation computes in (docs/operations.md, Dtype planning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arithmetic {
    /// IEEE binary32, round to nearest even, no FMA or reassociation.
    Binary32,
    /// Exact 32-bit integer arithmetic; leaving the Int32 range is an Overflow error.
    Int32ExactChecked,
    /// Exact 32-bit integer arithmetic that cannot leave the range.
    Int32Exact,
}

impl Arithmetic {
    /// The name used in capability order and messages.
    pub fn name(self) -> &'static str {
        match self {
            Arithmetic::Binary32 => "binary32",
            Arithmetic::Int32ExactChecked => "int32_exact_checked",
            Arithmetic::Int32Exact => "int32_exact",
        }
    }
}

/// How a reduction accumulates (docs/operations.md, Dtype planning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Accumulation {
    /// In the accumulator dtype, any order.
    Floating,
    /// Ascending order, rounding to binary32 at each step (sums).
    SequentialBinary32,
    /// Ascending order, rounding to binary32 at each step (products).
    SequentialBinary32Product,
    /// The largest value.
    Maximum,
    /// The smallest value.
    Minimum,
    /// The position of the first largest value.
    Argmax,
    /// The position of the first smallest value.
    Argmin,
    /// Exact integers; only the final narrowing is checked.
    ExactInteger,
}

impl Accumulation {
    /// The name used in capability order and messages.
    pub fn name(self) -> &'static str {
        match self {
            Accumulation::Floating => "floating",
            Accumulation::SequentialBinary32 => "sequential_binary32",
            Accumulation::SequentialBinary32Product => "sequential_binary32_product",
            Accumulation::Maximum => "maximum",
            Accumulation::Minimum => "minimum",
            Accumulation::Argmax => "argmax",
            Accumulation::Argmin => "argmin",
            Accumulation::ExactInteger => "exact_integer",
        }
    }
}

/// One operand of an [`OperationPlan`]: its role, its dtype (none for a weak scalar) and the
/// dtype it is converted to for computing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OperandPlan {
    role: OperandRole,
    dtype: Option<DType>,
    convert_to: DType,
}

impl OperandPlan {
    /// A tensor operand of the simple `dtype`, converted to `convert_to`.
    pub fn tensor(dtype: DType, convert_to: DType) -> Result<OperandPlan> {
        for (field, d) in [("dtype", dtype), ("convert_to", convert_to)] {
            if !d.is_simple() {
                return Err(Error::Type(format!(
                    "a tensor operand plan needs a simple {field}, got {d}"
                )));
            }
        }
        Ok(OperandPlan {
            role: OperandRole::Tensor,
            dtype: Some(dtype),
            convert_to,
        })
    }

    /// A weak scalar operand converted to `convert_to`.
    pub fn weak_scalar(convert_to: DType) -> Result<OperandPlan> {
        if !convert_to.is_simple() {
            return Err(Error::Type(format!(
                "a weak scalar operand plan needs a simple convert_to, got {convert_to}"
            )));
        }
        Ok(OperandPlan {
            role: OperandRole::WeakScalar,
            dtype: None,
            convert_to,
        })
    }

    /// The role.
    pub fn role(&self) -> OperandRole {
        self.role
    }

    /// The operand's dtype (`None` for a weak scalar).
    pub fn dtype(&self) -> Option<DType> {
        self.dtype
    }

    /// The dtype it is converted to.
    pub fn convert_to(&self) -> DType {
        self.convert_to
    }

    fn order_key(&self) -> String {
        format!(
            "{}:{}:{}",
            self.role.name(),
            self.dtype.map_or("", |d| d.name()),
            self.convert_to.name()
        )
    }
}

/// How one operation computes on given operand dtypes: operand roles and conversions, the
/// compute arithmetic, the accumulation of a reduction and the output dtype.
///
/// Immutable, hashable and cheap to clone. Plans sort by the string tuple `(operation,
/// operands, compute, accumulation, accumulator dtype, output)` (docs/carriers.md, Capabilities),
/// the deterministic order of every capability list.
#[derive(Clone)]
pub struct OperationPlan {
    inner: Fields,
}

/// Where a plan's fields live: shared by reference count, or in static memory for a plan
/// kept for the life of the process (a built-in definition's plan cache), whose clones and
/// drops then cost no atomic operation.
#[derive(Clone)]
enum Fields {
    Shared(Arc<PlanFields>),
    Static(&'static PlanFields),
}

impl std::ops::Deref for Fields {
    type Target = PlanFields;

    #[inline]
    fn deref(&self) -> &PlanFields {
        match self {
            Fields::Shared(fields) => fields,
            Fields::Static(fields) => fields,
        }
    }
}

/// The fields of an [`OperationPlan`], shared by its clones.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PlanFields {
    operation: Arc<str>,
    /// The built-in `operation` names, if any: its typed identity, read by kernels.
    builtin: Option<Builtin>,
    operands: Box<[OperandPlan]>,
    compute: Arithmetic,
    accumulation: Option<Accumulation>,
    accumulator_dtype: Option<DType>,
    output: DType,
}

impl PartialEq for OperationPlan {
    fn eq(&self, other: &Self) -> bool {
        self.same_as(other) || *self.inner == *other.inner
    }
}

impl Eq for OperationPlan {}

impl Hash for OperationPlan {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (*self.inner).hash(state);
    }
}

impl fmt::Debug for OperationPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &*self.inner;
        f.debug_struct("OperationPlan")
            .field("operation", &p.operation)
            .field("operands", &p.operands)
            .field("compute", &p.compute)
            .field("accumulation", &p.accumulation)
            .field("accumulator_dtype", &p.accumulator_dtype)
            .field("output", &p.output)
            .finish()
    }
}

impl OperationPlan {
    /// Builds a plan; fails with a Value error on an empty operand list or name, and a Type
    /// error on a non-simple output or accumulator dtype.
    pub fn new(
        operation: &str,
        operands: impl IntoIterator<Item = OperandPlan>,
        compute: Arithmetic,
        accumulation: Option<Accumulation>,
        accumulator_dtype: Option<DType>,
        output: DType,
    ) -> Result<OperationPlan> {
        let operands: Box<[OperandPlan]> = operands.into_iter().collect();
        if operation.is_empty() {
            return Err(Error::Value(
                "an operation plan needs an operation name".into(),
            ));
        }
        if operands.is_empty() {
            return Err(Error::Value(format!(
                "the plan for '{operation}' needs at least one operand"
            )));
        }
        if !output.is_simple() {
            return Err(Error::Type(format!(
                "the plan for '{operation}' needs a simple output dtype, got {output}"
            )));
        }
        if let Some(acc) = accumulator_dtype.filter(|d| !d.is_simple()) {
            return Err(Error::Type(format!(
                "the plan for '{operation}' needs a simple accumulator dtype, got {acc}"
            )));
        }
        Ok(OperationPlan {
            inner: Fields::Shared(Arc::new(PlanFields {
                operation: operation.into(),
                builtin: Builtin::from_name(operation),
                operands,
                compute,
                accumulation,
                accumulator_dtype,
                output,
            })),
        })
    }

    /// This plan with its fields moved to static memory for the rest of the process, so
    /// that its clones cost no reference count. Only for plans kept that long anyway (each
    /// call leaks one copy of the fields): a built-in definition's bounded plan cache.
    pub(crate) fn into_static(self) -> OperationPlan {
        match self.inner {
            Fields::Static(_) => self,
            Fields::Shared(fields) => OperationPlan {
                inner: Fields::Static(Box::leak(Box::new(
                    Arc::try_unwrap(fields).unwrap_or_else(|shared| (*shared).clone()),
                ))),
            },
        }
    }

    /// The address of the fields when they are in static memory (never freed, so the
    /// address names the plan for the life of the process).
    #[inline]
    pub(crate) fn static_address(&self) -> Option<usize> {
        match self.inner {
            Fields::Static(fields) => Some(std::ptr::from_ref(fields).addr()),
            Fields::Shared(_) => None,
        }
    }

    /// Whether the fields are in static memory.
    #[cfg(test)]
    pub(crate) fn is_static(&self) -> bool {
        matches!(self.inner, Fields::Static(_))
    }

    /// Whether `self` and `other` are clones of one plan (equal plans built apart are not).
    pub(crate) fn same_as(&self, other: &OperationPlan) -> bool {
        std::ptr::eq::<PlanFields>(&*self.inner, &*other.inner)
    }

    /// The operation name.
    pub fn operation(&self) -> &str {
        &self.inner.operation
    }

    /// The built-in operation this plan is for, if its operation is one.
    #[inline]
    pub(crate) fn builtin(&self) -> Option<Builtin> {
        self.inner.builtin
    }

    /// The operands, in order.
    pub fn operands(&self) -> &[OperandPlan] {
        &self.inner.operands
    }

    /// The compute arithmetic.
    pub fn compute(&self) -> Arithmetic {
        self.inner.compute
    }

    /// The accumulation, for reductions.
    pub fn accumulation(&self) -> Option<Accumulation> {
        self.inner.accumulation
    }

    /// The accumulator dtype, for reductions.
    pub fn accumulator_dtype(&self) -> Option<DType> {
        self.inner.accumulator_dtype
    }

    /// The output dtype.
    pub fn output(&self) -> DType {
        self.inner.output
    }

    /// The deterministic sort key (docs/carriers.md, Capabilities).
    fn order_key(&self) -> [String; 6] {
        [
            self.inner.operation.to_string(),
            self.inner
                .operands
                .iter()
                .map(OperandPlan::order_key)
                .collect::<Vec<_>>()
                .join("|"),
            self.inner.compute.name().to_string(),
            self.inner.accumulation.map_or("", |a| a.name()).to_string(),
            self.inner
                .accumulator_dtype
                .map_or("", |d| d.name())
                .to_string(),
            self.inner.output.name().to_string(),
        ]
    }

    /// Compares two plans in the deterministic capability order.
    pub fn cmp_order(&self, other: &OperationPlan) -> Ordering {
        self.order_key().cmp(&other.order_key())
    }
}

impl fmt::Display for OperationPlan {
    /// `relu with operands (tensor Int32->Int32), int32_exact compute, no accumulation, Int32
    /// output` — the form used in unsupported-plan reasons.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operands: Vec<String> = self
            .inner
            .operands
            .iter()
            .map(|o| match o.dtype {
                Some(d) => format!("{} {}->{}", o.role.name(), d, o.convert_to),
                None => format!("{}->{}", o.role.name(), o.convert_to),
            })
            .collect();
        write!(
            f,
            "{} with operands ({}), {} compute, ",
            self.inner.operation,
            operands.join(", "),
            self.inner.compute.name()
        )?;
        match (self.inner.accumulation, self.inner.accumulator_dtype) {
            (Some(a), Some(d)) => write!(f, "{} accumulation in {d}", a.name())?,
            (Some(a), None) => write!(f, "{} accumulation", a.name())?,
            (None, _) => f.write_str("no accumulation")?,
        }
        write!(f, ", {} output", self.inner.output)
    }
}
