//! [`BuiltinSpec`]: the one table a built-in's name, schema, planning, result shape, kernel
//! kind, saved operands and gradient rule are derived from (docs/operations.md, The table of
//! built-ins).

use crate::error::Result;
use crate::operation::builtin::kernel::KernelKind;
use crate::operation::builtin::vjp::BuiltinVjp;
use crate::operation::builtin::{
    arithmetic, comparison, extremum, matmul, reduction, select, unary, Builtin,
};
use crate::operation::planning::Family;
use crate::tensor::Tensor;

/// How the result shape of a built-in follows from its operands.
///
/// ```
/// use strideweave::operation::{Builtin, ShapeRule};
/// assert_eq!(Builtin::Add.shape_rule(), ShapeRule::Broadcast);
/// assert_eq!(Builtin::Matmul.shape_rule(), ShapeRule::Contract);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShapeRule {
    /// Elementwise: the broadcast of the tensor operands' shapes.
    Broadcast,
    /// `reduce_*`: a two-mode input reduced over mode 1, giving mode 0's shape.
    ReduceMode1,
    /// `matmul`: (N,K)·(M,K) → (N,M).
    Contract,
}

/// The operand kinds of a built-in's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arity {
    /// One differentiable tensor `x`.
    Unary,
    /// Two differentiable tensors `lhs`, `rhs`.
    Tensors,
    /// A differentiable tensor `lhs` and a tensor-or-scalar `rhs`.
    TensorAndStructural,
    /// Two tensor-or-scalar operands (`mul`).
    Structural,
    /// A non-differentiable tensor `lhs` and a tensor-or-scalar `rhs` (comparisons).
    Compare,
    /// A non-differentiable Bool tensor `cond`, then two tensor-or-scalar operands `a`, `b`
    /// (`select`).
    Select,
}

/// A built-in's gradient rule: the gradients of its tensor operands (one entry each, in
/// operand order) from the cotangent of its result.
pub(crate) type VjpRule = fn(&BuiltinVjp<'_>) -> Result<Vec<Option<Tensor>>>;

/// Where a built-in's values are defined: the operand values its kernels are checked on (the
/// conformance suite draws its operands inside it).
///
/// ```
/// use strideweave::operation::{Builtin, Domain};
/// assert_eq!(Builtin::Log.domain(), Domain::Positive);
/// assert_eq!(Builtin::Div.domain(), Domain::NonZeroDivisor);
/// assert_eq!(Builtin::Add.domain(), Domain::Everywhere);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Domain {
    /// Every value.
    Everywhere,
    /// Positive operands (`log`, `sqrt`).
    Positive,
    /// Any dividend, a non-zero divisor (`div`).
    NonZeroDivisor,
}

/// How closely another carrier's result of a built-in must match the Generic reference
/// (the conformance suite's default tolerances).
///
/// ```
/// use strideweave::operation::{Accuracy, Builtin};
/// assert_eq!(Builtin::Add.accuracy(), Accuracy::Exact);
/// assert_eq!(Builtin::Exp.accuracy(), Accuracy::Approximate);
/// assert_eq!(Builtin::Matmul.accuracy(), Accuracy::OrderDependent);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Accuracy {
    /// Correctly rounded (or exact): equal bit for bit.
    Exact,
    /// Transcendental functions and `div`, which a carrier may compute in fewer steps:
    /// within a few units in the last place.
    Approximate,
    /// Sums whose order is the carrier's business: within a tolerance scaled by the number
    /// of terms.
    OrderDependent,
}

/// Everything that defines one built-in apart from its kernels: its entry in the table.
#[derive(Clone, Copy)]
pub(crate) struct BuiltinSpec {
    /// Its registered name.
    pub(crate) name: &'static str,
    /// The operand kinds of its schema.
    pub(crate) arity: Arity,
    /// How the result shape follows from the operands.
    pub(crate) rule: ShapeRule,
    /// Its dtype-planning family (which also says whether it takes `accumulator_dtype`).
    pub(crate) family: Family,
    /// What its kernels compute: the CPU and reference kernels dispatch on it.
    pub(crate) kernel: KernelKind,
    /// Where its values are defined.
    pub(crate) domain: Domain,
    /// How closely other carriers must match its reference.
    pub(crate) accuracy: Accuracy,
    /// Whether it is one of the central operations (docs/operations.md): those the raw
    /// tiled operands of a TiledEvictable compute.
    pub(crate) central: bool,
    /// The operand positions saved for the gradient (those holding tensors).
    pub(crate) saved: &'static [usize],
    /// Its gradient rule; `None` for an operation without gradients (comparisons).
    pub(crate) vjp: Option<VjpRule>,
    /// Whether the rule reads only the saved operands' shapes, never their values, so an
    /// operand on another carrier class than the cotangent needs no dense copy.
    pub(crate) shapes_only: bool,
}

impl Builtin {
    /// The spec of this built-in: its entry in the table.
    pub(crate) const fn spec(self) -> &'static BuiltinSpec {
        match self {
            Builtin::Add => &arithmetic::ADD,
            Builtin::Sub => &arithmetic::SUB,
            Builtin::Mul => &arithmetic::MUL,
            Builtin::ElementwiseMul => &arithmetic::ELEMENTWISE_MUL,
            Builtin::Div => &arithmetic::DIV,
            Builtin::Neg => &unary::NEG,
            Builtin::Abs => &unary::ABS,
            Builtin::Exp => &unary::EXP,
            Builtin::Log => &unary::LOG,
            Builtin::Sqrt => &unary::SQRT,
            Builtin::Tanh => &unary::TANH,
            Builtin::Sigmoid => &unary::SIGMOID,
            Builtin::Relu => &unary::RELU,
            Builtin::Maximum => &extremum::MAXIMUM,
            Builtin::Minimum => &extremum::MINIMUM,
            Builtin::Eq => &comparison::EQ,
            Builtin::Lt => &comparison::LT,
            Builtin::Le => &comparison::LE,
            Builtin::ReduceSum => &reduction::REDUCE_SUM,
            Builtin::ReduceMax => &reduction::REDUCE_MAX,
            Builtin::Matmul => &matmul::MATMUL,
            Builtin::Select => &select::SELECT,
        }
    }
}

/// What the entry of a built-in says, for the code outside the core that derives its own
/// lists from the table (the conformance probes, the tiled work kinds, the Python binding).
impl Builtin {
    /// The number of operands its schema takes.
    pub const fn operand_count(self) -> usize {
        match self.spec().arity {
            Arity::Unary => 1,
            Arity::Tensors | Arity::TensorAndStructural | Arity::Structural | Arity::Compare => 2,
            Arity::Select => 3,
        }
    }

    /// How its result shape follows from its operands.
    pub const fn shape_rule(self) -> ShapeRule {
        self.spec().rule
    }

    /// Whether it takes the `accumulator_dtype` option (the operations that sum products or
    /// elements: `reduce_sum`, `matmul`).
    pub fn takes_accumulator(self) -> bool {
        self.spec().family.takes_accumulator()
    }

    /// Whether its first operand is a Bool condition choosing between the others
    /// (`select`).
    pub fn selects(self) -> bool {
        matches!(self.spec().kernel, KernelKind::Select)
    }

    /// Where its values are defined.
    pub const fn domain(self) -> Domain {
        self.spec().domain
    }

    /// How closely another carrier's result must match the Generic reference.
    pub const fn accuracy(self) -> Accuracy {
        self.spec().accuracy
    }

    /// Whether it has a gradient rule.
    pub const fn is_differentiable(self) -> bool {
        self.spec().vjp.is_some()
    }

    /// Whether it is one of the central operations (docs/operations.md, The central
    /// operations): those the raw tiled operands of a TiledEvictable compute.
    pub const fn is_central(self) -> bool {
        self.spec().central
    }
}
