//! [`BuiltinSpec`]: the one table a built-in's schema, planning, result shape, saved
//! operands and gradient rule are derived from.

use crate::error::Result;
use crate::operation::builtin::vjp::BuiltinVjp;
use crate::operation::builtin::{
    arithmetic, comparison, extremum, matmul, reduction, select, unary, Builtin,
};
use crate::operation::planning::Family;
use crate::tensor::Tensor;

/// How the result shape of a built-in follows from its operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShapeRule {
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

/// Everything that defines one built-in apart from its kernels.
#[derive(Clone, Copy)]
pub(crate) struct BuiltinSpec {
    /// The operand kinds of its schema.
    pub(crate) arity: Arity,
    /// How the result shape follows from the operands.
    pub(crate) rule: ShapeRule,
    /// Its dtype-planning family (which also says whether it takes `accumulator_dtype`).
    pub(crate) family: Family,
    /// The operand positions saved for the gradient (those holding tensors).
    pub(crate) saved: &'static [usize],
    /// Its gradient rule; `None` for an operation without gradients (comparisons).
    pub(crate) vjp: Option<VjpRule>,
    /// Whether the rule reads only the saved operands' shapes, never their values, so an
    /// operand on another carrier class than the cotangent needs no dense copy.
    pub(crate) shapes_only: bool,
}

impl Builtin {
    /// The spec of this built-in.
    pub(crate) fn spec(self) -> &'static BuiltinSpec {
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
