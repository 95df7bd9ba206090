//! `matmul`, (N,K)·(M,K) → (N,M): spec and gradient rule.

use crate::operation::builtin::kernel::KernelKind;
use crate::operation::builtin::spec::{Accuracy, Arity, BuiltinSpec, Domain, ShapeRule};
use crate::operation::builtin::vjp::{BuiltinVjp, Grads};
use crate::operation::planning::Family;
use crate::ops;
use crate::tensor::Tensor;

/// `matmul`: `g·rhs` to the left, `gᵀ·lhs` (as (M,K)) to the right, accumulated as the
/// forward plan was.
pub(super) const MATMUL: BuiltinSpec = BuiltinSpec {
    name: "matmul",
    arity: Arity::Tensors,
    rule: ShapeRule::Contract,
    family: Family::Matmul,
    kernel: KernelKind::Contract,
    domain: Domain::Everywhere,
    accuracy: Accuracy::OrderDependent,
    central: true,
    saved: &[0, 1],
    vjp: Some(matmul_vjp),
    shapes_only: false,
};

fn matmul_vjp(step: &BuiltinVjp<'_>) -> Grads {
    let (g, x) = (step.g(), step.x()?);
    let Some(rhs) = step.y() else {
        return Err(crate::Error::Value("'matmul' needs two inputs".into()));
    };
    let accumulator = step.accumulator();
    let product = |a: &Tensor, b: &Tensor| match accumulator {
        Some(acc) => ops::matmul_with(a, b, acc),
        None => ops::matmul(a, b),
    };
    let d_lhs = product(g, &rhs.permute(&[1, 0])?)?;
    let d_rhs = product(&g.permute(&[1, 0])?, &x.permute(&[1, 0])?)?;
    Ok(vec![Some(d_lhs), Some(d_rhs)])
}
