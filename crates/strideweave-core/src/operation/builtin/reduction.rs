//! `reduce_sum` and `reduce_max` over mode 1: specs and gradient rules.

use crate::operation::builtin::kernel::{Fold, KernelKind};
use crate::operation::builtin::spec::{Accuracy, Arity, BuiltinSpec, Domain, ShapeRule};
use crate::operation::builtin::vjp::{spread_over_mode1, BuiltinVjp, Grads};
use crate::operation::planning::Family;
use crate::ops;

/// `reduce_sum`: the cotangent spread back over mode 1.
pub(super) const REDUCE_SUM: BuiltinSpec = BuiltinSpec {
    name: "reduce_sum",
    arity: Arity::Unary,
    rule: ShapeRule::ReduceMode1,
    family: Family::ReduceSum,
    kernel: KernelKind::Fold(Fold::Sum),
    domain: Domain::Everywhere,
    accuracy: Accuracy::OrderDependent,
    central: true,
    saved: &[],
    vjp: Some(reduce_sum_vjp),
    shapes_only: true,
};

fn reduce_sum_vjp(step: &BuiltinVjp<'_>) -> Grads {
    Ok(vec![Some(spread_over_mode1(step.g(), step.x()?.shape())?)])
}

/// `reduce_max`: the cotangent to every element equal to its row's maximum.
pub(super) const REDUCE_MAX: BuiltinSpec = BuiltinSpec {
    name: "reduce_max",
    arity: Arity::Unary,
    rule: ShapeRule::ReduceMode1,
    family: Family::ReduceMax,
    kernel: KernelKind::Fold(Fold::Max),
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: false,
    saved: &[0],
    vjp: Some(reduce_max_vjp),
    shapes_only: false,
};

fn reduce_max_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let x = step.x()?;
    let maxima = spread_over_mode1(&ops::reduce_max(x)?, x.shape())?;
    let winners = ops::eq(x, &maxima)?;
    Ok(vec![Some(ops::select(
        &winners,
        &spread_over_mode1(step.g(), x.shape())?,
        0.0,
    )?)])
}
