//! `neg`, `abs`, `exp`, `log`, `sqrt`, `tanh`, `sigmoid` and `relu`: specs and gradient
//! rules.

use crate::operation::builtin::kernel::{KernelKind, MapFn};
use crate::operation::builtin::spec::{Accuracy, Arity, BuiltinSpec, Domain, ShapeRule};
use crate::operation::builtin::vjp::{BuiltinVjp, Grads};
use crate::operation::planning::Family;
use crate::ops;

/// The entry of the unary elementwise built-in `name` of `family`, computing `function`,
/// with gradient rule `vjp` (approximate: the exact ones say so).
const fn unary(
    name: &'static str,
    family: Family,
    function: MapFn,
    saved: &'static [usize],
    vjp: super::spec::VjpRule,
) -> BuiltinSpec {
    BuiltinSpec {
        name,
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        family,
        kernel: KernelKind::Map(function),
        domain: Domain::Everywhere,
        accuracy: Accuracy::Approximate,
        central: false,
        saved,
        vjp: Some(vjp),
        shapes_only: false,
    }
}

/// `neg`: the negated cotangent.
pub(super) const NEG: BuiltinSpec = BuiltinSpec {
    accuracy: Accuracy::Exact,
    ..unary("neg", Family::SignChange, MapFn::Negation, &[], neg_vjp)
};

fn neg_vjp(step: &BuiltinVjp<'_>) -> Grads {
    step.one(ops::neg(step.g())?)
}

/// `abs`: the cotangent signed like `x`, and 0 where `x` is 0.
pub(super) const ABS: BuiltinSpec = BuiltinSpec {
    accuracy: Accuracy::Exact,
    ..unary("abs", Family::SignChange, MapFn::Magnitude, &[0], abs_vjp)
};

fn abs_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let (g, x) = (step.g(), step.x()?);
    let signed = ops::select(&ops::lt(x, 0.0)?, ops::neg(g)?, g)?;
    step.one(ops::select(&ops::eq(x, 0.0)?, 0.0, &signed)?)
}

/// `exp`: `g · exp(x)`.
pub(super) const EXP: BuiltinSpec = unary(
    "exp",
    Family::Transcendental,
    MapFn::Exponential,
    &[0],
    exp_vjp,
);

fn exp_vjp(step: &BuiltinVjp<'_>) -> Grads {
    step.one(ops::mul(step.g(), &ops::exp(step.x()?)?)?)
}

/// `log`: `g / x`.
pub(super) const LOG: BuiltinSpec = BuiltinSpec {
    domain: Domain::Positive,
    ..unary(
        "log",
        Family::Transcendental,
        MapFn::Logarithm,
        &[0],
        log_vjp,
    )
};

fn log_vjp(step: &BuiltinVjp<'_>) -> Grads {
    step.one(ops::div(step.g(), step.x()?)?)
}

/// `sqrt`: `g / (2·sqrt(x))`.
pub(super) const SQRT: BuiltinSpec = BuiltinSpec {
    domain: Domain::Positive,
    ..unary(
        "sqrt",
        Family::Transcendental,
        MapFn::SquareRoot,
        &[0],
        sqrt_vjp,
    )
};

fn sqrt_vjp(step: &BuiltinVjp<'_>) -> Grads {
    step.one(ops::div(step.g(), &ops::mul(&ops::sqrt(step.x()?)?, 2.0)?)?)
}

/// `tanh`: `g · (1 − tanh²(x))`.
pub(super) const TANH: BuiltinSpec = unary(
    "tanh",
    Family::Transcendental,
    MapFn::HyperbolicTangent,
    &[0],
    tanh_vjp,
);

fn tanh_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let x = step.x()?;
    // 1 − tanh² = 4 / (eˣ + e⁻ˣ)², which needs no tensor-scalar addition.
    let twice_cosh = ops::add(&ops::exp(x)?, &ops::exp(&ops::neg(x)?)?)?;
    step.one(ops::div(
        &ops::mul(step.g(), 4.0)?,
        &ops::elementwise_mul(&twice_cosh, &twice_cosh)?,
    )?)
}

/// `sigmoid`: `g · s · (1 − s)` with `s = sigmoid(x)`.
pub(super) const SIGMOID: BuiltinSpec = unary(
    "sigmoid",
    Family::Transcendental,
    MapFn::Logistic,
    &[0],
    sigmoid_vjp,
);

fn sigmoid_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let s = ops::sigmoid(step.x()?)?;
    step.one(ops::mul(
        step.g(),
        &ops::sub(&s, &ops::elementwise_mul(&s, &s)?)?,
    )?)
}

/// `relu`: the cotangent where `x > 0`, else 0.
pub(super) const RELU: BuiltinSpec = BuiltinSpec {
    central: true,
    accuracy: Accuracy::Exact,
    ..unary("relu", Family::Relu, MapFn::Rectifier, &[0], relu_vjp)
};

fn relu_vjp(step: &BuiltinVjp<'_>) -> Grads {
    step.one(ops::select(&ops::le(step.x()?, 0.0)?, 0.0, step.g())?)
}
