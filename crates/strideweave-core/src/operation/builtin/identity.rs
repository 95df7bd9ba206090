//! [`Builtin`]: the typed identity of a built-in operation.

use std::fmt;

/// One built-in operation. Its entry in the table of built-ins (its name, operand kinds,
/// shape rule, planning family, kernel kind, saved operands and gradient rule) is
/// `Builtin::spec` (crate-internal; what code outside the core derives from it is public:
/// [`Builtin::operand_count`], [`Builtin::shape_rule`], …). The kernels dispatch on the
/// entry's kernel kind; nothing else lists the built-ins (docs/operations.md, The table of
/// built-ins).
///
/// ```
/// use strideweave::operation::Builtin;
/// assert_eq!(Builtin::from_name("reduce_sum"), Some(Builtin::ReduceSum));
/// assert_eq!(Builtin::ReduceSum.name(), "reduce_sum");
/// assert_eq!(Builtin::from_name("mylib.scale"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Builtin {
    /// `add(lhs, rhs)`: elementwise sum.
    Add,
    /// `sub(lhs, rhs)`: elementwise difference.
    Sub,
    /// `mul(lhs, rhs)`: elementwise product, either operand possibly a weak scalar.
    Mul,
    /// `elementwise_mul(lhs, rhs)`: elementwise product of two tensors.
    ElementwiseMul,
    /// `div(lhs, rhs)`: elementwise Float32 quotient.
    Div,
    /// `neg(x)`.
    Neg,
    /// `abs(x)`.
    Abs,
    /// `exp(x)`.
    Exp,
    /// `log(x)`.
    Log,
    /// `sqrt(x)`.
    Sqrt,
    /// `tanh(x)`.
    Tanh,
    /// `sigmoid(x)`.
    Sigmoid,
    /// `relu(x)`.
    Relu,
    /// `maximum(lhs, rhs)`.
    Maximum,
    /// `minimum(lhs, rhs)`.
    Minimum,
    /// `eq(lhs, rhs)`: a Bool result.
    Eq,
    /// `lt(lhs, rhs)`: a Bool result.
    Lt,
    /// `le(lhs, rhs)`: a Bool result.
    Le,
    /// `reduce_sum(x)`: the sum over mode 1 of a two-mode tensor.
    ReduceSum,
    /// `reduce_max(x)`: the maximum over mode 1 of a two-mode tensor.
    ReduceMax,
    /// `matmul(lhs, rhs)`: (N,K)·(M,K) → (N,M).
    Matmul,
    /// `select(cond, a, b)`: `a` where the Bool `cond` holds, else `b`.
    Select,
}

impl Builtin {
    /// Every built-in, in the documented order.
    pub const ALL: [Builtin; 22] = [
        Builtin::Add,
        Builtin::Sub,
        Builtin::Mul,
        Builtin::ElementwiseMul,
        Builtin::Div,
        Builtin::Neg,
        Builtin::Abs,
        Builtin::Exp,
        Builtin::Log,
        Builtin::Sqrt,
        Builtin::Tanh,
        Builtin::Sigmoid,
        Builtin::Relu,
        Builtin::Maximum,
        Builtin::Minimum,
        Builtin::Eq,
        Builtin::Lt,
        Builtin::Le,
        Builtin::ReduceSum,
        Builtin::ReduceMax,
        Builtin::Matmul,
        Builtin::Select,
    ];

    /// The operation's registered name (its entry's).
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// The built-in named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl fmt::Display for Builtin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The names of the built-in operations, in their documented order.
pub const BUILTIN_OPERATIONS: [&str; 22] = {
    let mut names = [""; 22];
    let mut i = 0;
    while i < names.len() {
        names[i] = Builtin::ALL[i].name();
        i += 1;
    }
    names
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_positions_round_trip() {
        for (position, builtin) in Builtin::ALL.into_iter().enumerate() {
            // Tables indexed by `builtin as usize` rely on the declaration order.
            assert_eq!(builtin as usize, position);
            assert_eq!(Builtin::from_name(builtin.name()), Some(builtin));
            assert_eq!(BUILTIN_OPERATIONS[position], builtin.name());
            assert_eq!(builtin.to_string(), builtin.name());
        }
        assert_eq!(Builtin::from_name("Add"), None);
    }
}
