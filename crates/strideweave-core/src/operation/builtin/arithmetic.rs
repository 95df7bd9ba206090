//! `add`, `sub`, `mul`, `elementwise_mul` and `div`: specs and gradient rules.

use crate::operation::builtin::kernel::{KernelKind, MapFn};
use crate::operation::builtin::spec::{Accuracy, Arity, BuiltinSpec, Domain, ShapeRule};
use crate::operation::builtin::vjp::{BuiltinVjp, Grads};
use crate::operation::planning::Family;
use crate::ops;

/// `add`: both operands receive the cotangent.
pub(super) const ADD: BuiltinSpec = BuiltinSpec {
    name: "add",
    arity: Arity::Tensors,
    rule: ShapeRule::Broadcast,
    family: Family::Additive,
    kernel: KernelKind::Map(MapFn::Sum),
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: true,
    saved: &[],
    vjp: Some(add_vjp),
    shapes_only: true,
};

fn add_vjp(step: &BuiltinVjp<'_>) -> Grads {
    step.pair(step.g().clone(), step.g().clone())
}

/// `sub`: the right operand receives the negated cotangent.
pub(super) const SUB: BuiltinSpec = BuiltinSpec {
    name: "sub",
    arity: Arity::Tensors,
    rule: ShapeRule::Broadcast,
    family: Family::Additive,
    kernel: KernelKind::Map(MapFn::Difference),
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: false,
    saved: &[],
    vjp: Some(sub_vjp),
    shapes_only: true,
};

fn sub_vjp(step: &BuiltinVjp<'_>) -> Grads {
    step.pair(step.g().clone(), ops::neg(step.g())?)
}

/// `mul`: each tensor operand receives the cotangent times the other operand.
pub(super) const MUL: BuiltinSpec = BuiltinSpec {
    name: "mul",
    arity: Arity::Structural,
    rule: ShapeRule::Broadcast,
    family: Family::Mul,
    kernel: KernelKind::Map(MapFn::Product),
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: true,
    saved: &[],
    vjp: Some(mul_vjp),
    shapes_only: false,
};

fn mul_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let (g, x) = (step.g(), step.x()?);
    match step.y() {
        Some(rhs) => step.pair(ops::mul(g, rhs)?, ops::mul(g, x)?),
        None => step.one(ops::mul(g, step.scalar_or(1.0))?),
    }
}

/// `elementwise_mul`: as `mul`, on two tensors.
pub(super) const ELEMENTWISE_MUL: BuiltinSpec = BuiltinSpec {
    name: "elementwise_mul",
    arity: Arity::Tensors,
    rule: ShapeRule::Broadcast,
    family: Family::Additive,
    kernel: KernelKind::Map(MapFn::Product),
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: true,
    saved: &[0, 1],
    vjp: Some(mul_vjp),
    shapes_only: false,
};

/// `div`: `g / y` to the left, `-g·x / y²` to the right.
pub(super) const DIV: BuiltinSpec = BuiltinSpec {
    name: "div",
    arity: Arity::TensorAndStructural,
    rule: ShapeRule::Broadcast,
    family: Family::Div,
    kernel: KernelKind::Map(MapFn::Quotient),
    domain: Domain::NonZeroDivisor,
    accuracy: Accuracy::Approximate,
    central: false,
    saved: &[0],
    vjp: Some(div_vjp),
    shapes_only: false,
};

fn div_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let (g, x) = (step.g(), step.x()?);
    match step.y() {
        Some(rhs) => {
            let quotient = ops::div(&ops::mul(g, x)?, &ops::elementwise_mul(rhs, rhs)?)?;
            step.pair(ops::div(g, rhs)?, ops::neg(&quotient)?)
        }
        None => step.one(ops::div(g, step.scalar_or(1.0))?),
    }
}
