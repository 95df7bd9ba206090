//! `select(cond, a, b)`: spec and gradient rule.

use crate::error::Error;
use crate::operation::builtin::kernel::KernelKind;
use crate::operation::builtin::spec::{Accuracy, Arity, BuiltinSpec, Domain, ShapeRule};
use crate::operation::builtin::vjp::{sum_to, BuiltinVjp, Grads};
use crate::operation::planning::Family;
use crate::ops;

/// `select`: the condition is saved; a branch's gradient is the cotangent where it was
/// chosen, and the condition gets none.
pub(super) const SELECT: BuiltinSpec = BuiltinSpec {
    name: "select",
    arity: Arity::Select,
    rule: ShapeRule::Broadcast,
    family: Family::Select,
    kernel: KernelKind::Select,
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: false,
    saved: &[0],
    vjp: Some(select_vjp),
    shapes_only: false,
};

fn select_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let (g, cond) = (step.g(), step.x()?);
    let (a, b) = (ops::select(cond, g, 0.0)?, ops::select(cond, 0.0, g)?);
    let mut grads = vec![None];
    let mut next = 1;
    for (operand, grad) in step.operands().iter().skip(1).zip([a, b]) {
        if operand.as_tensor().is_some() {
            let target = step
                .inputs()
                .get(next)
                .ok_or_else(|| Error::Value("'select' saved too few inputs".into()))?;
            grads.push(Some(sum_to(&grad, target.shape())?));
            next += 1;
        }
    }
    Ok(grads)
}
