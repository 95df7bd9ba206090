//! `maximum` and `minimum`: specs and gradient rules. Ties go to the left operand.

use crate::operation::builtin::kernel::{KernelKind, MapFn};
use crate::operation::builtin::spec::{Accuracy, Arity, BuiltinSpec, Domain, ShapeRule};
use crate::operation::builtin::vjp::{BuiltinVjp, Grads};
use crate::operation::planning::Family;
use crate::operation::Operand;
use crate::ops;

/// `maximum`: the cotangent goes to the larger operand, to the left one on a tie.
pub(super) const MAXIMUM: BuiltinSpec = BuiltinSpec {
    name: "maximum",
    arity: Arity::TensorAndStructural,
    rule: ShapeRule::Broadcast,
    family: Family::Extremum,
    kernel: KernelKind::Map(MapFn::Maximum),
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: false,
    saved: &[0],
    vjp: Some(maximum_vjp),
    shapes_only: false,
};

/// `minimum`: the cotangent goes to the smaller operand, to the left one on a tie.
pub(super) const MINIMUM: BuiltinSpec = BuiltinSpec {
    name: "minimum",
    kernel: KernelKind::Map(MapFn::Minimum),
    vjp: Some(minimum_vjp),
    ..MAXIMUM
};

/// The right operand of the step: its second tensor, or the call's weak scalar.
fn other(step: &BuiltinVjp<'_>) -> Operand {
    match step.y() {
        Some(t) => Operand::Tensor(t.clone()),
        None => Operand::Scalar(step.scalar_or(0.0)),
    }
}

fn maximum_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let g = step.g();
    // The left operand loses only strictly.
    let left_loses = ops::lt(step.x()?, other(step))?;
    step.pair_or_one(ops::select(&left_loses, 0.0, g)?, || {
        ops::select(&left_loses, g, 0.0)
    })
}

fn minimum_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let g = step.g();
    // The left operand wins when it is at most the right one.
    let wins = ops::le(step.x()?, other(step))?;
    step.pair_or_one(ops::select(&wins, g, 0.0)?, || ops::select(&wins, 0.0, g))
}
