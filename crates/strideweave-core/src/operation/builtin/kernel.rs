//! [`KernelKind`]: what a built-in's kernels compute, as its entry states it. The CPU and
//! reference kernels dispatch on it and never name a built-in.
//!
//! An elementwise built-in names its scalar function: a zero-sized type implementing [`Map`]
//! (the result has the operands' computed dtype) or [`Test`] (a Bool result), one method per
//! dtype it computes on. A kernel implements [`MapVisitor`] / [`TestVisitor`] once, generic
//! over the function, and [`MapFn::visit`] / [`TestFn::visit`] select the function's type
//! once per call, so every run loop is compiled (and vectorized) for its one function.

use super::extrema::{maximum_f32, minimum_f32};

/// What a built-in's kernels compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelKind {
    /// Elementwise over the broadcast operands, the result in their computed dtype.
    Map(MapFn),
    /// Elementwise comparison over the broadcast operands, a Bool result.
    Test(TestFn),
    /// A fold over mode 1 of a two-mode operand.
    Fold(Fold),
    /// The contraction of mode 1 of two two-mode operands, (N,K)·(M,K) → (N,M).
    Contract,
    /// `cond ? a : b` per element.
    Select,
}

/// How a fold over mode 1 combines the elements of one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fold {
    /// The sum, in the plan's accumulator.
    Sum,
    /// The maximum (NaN when any element is NaN).
    Max,
}

/// An elementwise function whose result has its operands' computed dtype. Float32 is plain
/// IEEE binary32 (no fused operations); Int32 is computed exactly and narrowed, reporting
/// whether the exact result left the Int32 range. A unary function ignores `b`.
pub(crate) trait Map: 'static {
    /// Its operand count: 1 or 2.
    const OPERANDS: usize;
    /// Whether it computes on Int32 operands ([`Map::int32`] is called only then).
    const INT32: bool;
    /// The result on Float32 operands.
    fn float32(a: f32, b: f32) -> f32;
    /// The Int32 result and whether the exact result left the range (never left, for a
    /// function without Int32).
    #[inline(always)]
    fn int32(a: i32, _b: i32) -> (i32, bool) {
        (a, false)
    }
    /// The overflowing operation as an Overflow message shows it (`2147483647 + 1`).
    fn describe(a: i32, b: i32) -> String {
        format!("{a}, {b}")
    }
}

/// An elementwise comparison: a Bool result on Float32 or Int32 operands (NaN compares
/// false), and on Bool operands where [`Test::BOOL`] says so.
pub(crate) trait Test: 'static {
    /// Whether it compares Bool operands ([`Test::bool`] is called only then).
    const BOOL: bool;
    /// The result on Float32 operands.
    fn float32(a: f32, b: f32) -> bool;
    /// The result on Int32 operands.
    fn int32(a: i32, b: i32) -> bool;
    /// The result on Bool operands (false for a comparison without Bool).
    #[inline(always)]
    fn bool(_a: bool, _b: bool) -> bool {
        false
    }
}

/// A kernel generic over a [`Map`] function.
pub(crate) trait MapVisitor {
    /// What the kernel returns.
    type Output;
    /// The kernel compiled for `F`.
    fn visit<F: Map>(self) -> Self::Output;
}

/// A kernel generic over a [`Test`] function.
pub(crate) trait TestVisitor {
    /// What the kernel returns.
    type Output;
    /// The kernel compiled for `F`.
    fn visit<F: Test>(self) -> Self::Output;
}

/// An Int32 result narrowed from its exact i64 value, and whether it left the range.
#[inline(always)]
pub(crate) fn narrow(exact: i64) -> (i32, bool) {
    let narrowed = exact as i32;
    (narrowed, i64::from(narrowed) != exact)
}

/// Declares the elementwise functions: a zero-sized type each, and the enum an entry names
/// one of them by, whose `visit` selects the type.
macro_rules! functions {
    ($enum:ident, $visitor:ident: $($(#[$doc:meta])* $name:ident,)*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
            pub(crate) struct $name;
        )*

        /// The elementwise function a built-in's entry names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum $enum {
            $($(#[$doc])* $name,)*
        }

        impl $enum {
            /// Runs `visitor` compiled for this function.
            #[inline(always)]
            pub(crate) fn visit<V: $visitor>(self, visitor: V) -> V::Output {
                match self {
                    $($enum::$name => visitor.visit::<$name>(),)*
                }
            }
        }
    };
}

functions! {
    MapFn, MapVisitor:
    /// `a + b`.
    Sum,
    /// `a - b`.
    Difference,
    /// `a * b`.
    Product,
    /// `a / b` (Float32 only).
    Quotient,
    /// The larger operand (docs/kernel-semantics.md: NaN propagates, +0.0 over −0.0).
    Maximum,
    /// The smaller operand.
    Minimum,
    /// `-a`.
    Negation,
    /// `|a|`.
    Magnitude,
    /// `e^a` (Float32 only).
    Exponential,
    /// The natural logarithm (Float32 only).
    Logarithm,
    /// The square root (Float32 only).
    SquareRoot,
    /// The hyperbolic tangent (Float32 only).
    HyperbolicTangent,
    /// `1 / (1 + e^-a)` (Float32 only).
    Logistic,
    /// `a > 0 ? a : 0`, NaN staying NaN.
    Rectifier,
}

functions! {
    TestFn, TestVisitor:
    /// `a == b`.
    Equal,
    /// `a < b`.
    Less,
    /// `a <= b`.
    LessOrEqual,
}

impl Map for Sum {
    const OPERANDS: usize = 2;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> (i32, bool) {
        narrow(i64::from(a) + i64::from(b))
    }
    fn describe(a: i32, b: i32) -> String {
        format!("{a} + {b}")
    }
}

impl Map for Difference {
    const OPERANDS: usize = 2;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> (i32, bool) {
        narrow(i64::from(a) - i64::from(b))
    }
    fn describe(a: i32, b: i32) -> String {
        format!("{a} - {b}")
    }
}

impl Map for Product {
    const OPERANDS: usize = 2;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> (i32, bool) {
        narrow(i64::from(a) * i64::from(b))
    }
    fn describe(a: i32, b: i32) -> String {
        format!("{a} * {b}")
    }
}

impl Map for Quotient {
    const OPERANDS: usize = 2;
    const INT32: bool = false;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> f32 {
        a / b
    }
}

impl Map for Maximum {
    const OPERANDS: usize = 2;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> f32 {
        maximum_f32(a, b)
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> (i32, bool) {
        (a.max(b), false)
    }
}

impl Map for Minimum {
    const OPERANDS: usize = 2;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> f32 {
        minimum_f32(a, b)
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> (i32, bool) {
        (a.min(b), false)
    }
}

impl Map for Negation {
    const OPERANDS: usize = 1;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        -a
    }
    #[inline(always)]
    fn int32(a: i32, _: i32) -> (i32, bool) {
        narrow(-i64::from(a))
    }
    fn describe(a: i32, _: i32) -> String {
        format!("-({a})")
    }
}

impl Map for Magnitude {
    const OPERANDS: usize = 1;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        a.abs()
    }
    #[inline(always)]
    fn int32(a: i32, _: i32) -> (i32, bool) {
        narrow(i64::from(a).abs())
    }
    fn describe(a: i32, _: i32) -> String {
        format!("|{a}|")
    }
}

impl Map for Exponential {
    const OPERANDS: usize = 1;
    const INT32: bool = false;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        a.exp()
    }
}

impl Map for Logarithm {
    const OPERANDS: usize = 1;
    const INT32: bool = false;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        a.ln()
    }
}

impl Map for SquareRoot {
    const OPERANDS: usize = 1;
    const INT32: bool = false;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        a.sqrt()
    }
}

impl Map for HyperbolicTangent {
    const OPERANDS: usize = 1;
    const INT32: bool = false;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        a.tanh()
    }
}

impl Map for Logistic {
    const OPERANDS: usize = 1;
    const INT32: bool = false;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        1.0 / (1.0 + (-a).exp())
    }
}

impl Map for Rectifier {
    const OPERANDS: usize = 1;
    const INT32: bool = true;
    #[inline(always)]
    fn float32(a: f32, _: f32) -> f32 {
        if a > 0.0 || a.is_nan() {
            a
        } else {
            0.0
        }
    }
    #[inline(always)]
    fn int32(a: i32, _: i32) -> (i32, bool) {
        (a.max(0), false)
    }
}

impl Test for Equal {
    const BOOL: bool = true;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> bool {
        a == b
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> bool {
        a == b
    }
    #[inline(always)]
    fn bool(a: bool, b: bool) -> bool {
        a == b
    }
}

impl Test for Less {
    const BOOL: bool = false;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> bool {
        a < b
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> bool {
        a < b
    }
}

impl Test for LessOrEqual {
    const BOOL: bool = false;
    #[inline(always)]
    fn float32(a: f32, b: f32) -> bool {
        a <= b
    }
    #[inline(always)]
    fn int32(a: i32, b: i32) -> bool {
        a <= b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relu_keeps_nan_and_zeroes_negative_zero() {
        assert!(Rectifier::float32(f32::NAN, 0.0).is_nan());
        assert_eq!(Rectifier::float32(-0.0, 0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(Rectifier::float32(-2.0, 0.0), 0.0);
        assert_eq!(Rectifier::float32(3.5, 0.0), 3.5);
    }

    #[test]
    fn narrowing_flags_results_outside_int32() {
        assert_eq!(narrow(i64::from(i32::MAX)), (i32::MAX, false));
        assert!(narrow(i64::from(i32::MAX) + 1).1);
        assert!(narrow(-i64::from(i32::MIN)).1);
        assert_eq!(Sum::int32(i32::MAX, 1), (i32::MIN, true));
        assert_eq!(Sum::describe(i32::MAX, 1), "2147483647 + 1");
        assert_eq!(Negation::int32(i32::MIN, 0), (i32::MIN, true));
        assert_eq!(Magnitude::describe(-3, 0), "|-3|");
    }

    /// A visitor sees the type its function names.
    #[test]
    fn visit_selects_the_named_function() {
        struct Apply(f32, f32);
        impl MapVisitor for Apply {
            type Output = f32;
            fn visit<F: Map>(self) -> f32 {
                F::float32(self.0, self.1)
            }
        }
        assert_eq!(MapFn::Sum.visit(Apply(2.0, 3.0)), 5.0);
        assert_eq!(MapFn::Quotient.visit(Apply(3.0, 2.0)), 1.5);
        assert_eq!(MapFn::Negation.visit(Apply(3.0, 2.0)), -3.0);
        struct Compare(i32, i32);
        impl TestVisitor for Compare {
            type Output = (bool, bool);
            fn visit<F: Test>(self) -> (bool, bool) {
                (F::int32(self.0, self.1), F::BOOL)
            }
        }
        assert_eq!(TestFn::LessOrEqual.visit(Compare(2, 2)), (true, false));
        assert_eq!(TestFn::Equal.visit(Compare(2, 3)), (false, true));
    }
}
