//! The `matmul` reference kernel: `(N,K)·(M,K) → (N,M)` contracting mode 1 of both
//! operands, `out(i, j) = Σ_k lhs(i, k) · rhs(j, k)`.
//!
//! Float32: binary32 products accumulated in the plan's accumulator dtype in ascending `k`,
//! rounded to Float32 once. Int32: exact products and sum, only the final narrowing checked.
//! Result ordinal `i + N·j` holds `out(i, j)`.

use strideweave_layout::Layout;

use super::{add_index, buffer, compute_matches, unsupported, Context, Element, Reader, Sum};
use crate::error::{Error, Result};
use crate::operation::ResolvedInvocation;
use crate::tensor::Tensor;

/// A two-mode operand split into its kept mode 0 and contracted mode 1.
struct Matrix<'a> {
    reader: Reader<'a>,
    kept: Layout,
    contracted: Layout,
}

impl<'a> Matrix<'a> {
    /// Operand `i` of `ctx`, which must have exactly two top-level modes (Value error).
    fn new(ctx: &Context<'a>, i: usize, side: &str) -> Result<Matrix<'a>> {
        let reader = ctx.reader(i)?;
        let layout = reader.tensor().layout();
        if layout.rank() != 2 {
            return Err(Error::Value(format!(
                "'{}' contracts two-mode tensors; {side} Layout {layout} has {} modes",
                ctx.name(),
                layout.rank()
            )));
        }
        let (kept, contracted) = (layout.mode(0)?, layout.mode(1)?);
        Ok(Matrix {
            reader,
            kept,
            contracted,
        })
    }

    /// The converted element at (mode-0 ordinal `row`, mode-1 ordinal `k`).
    fn at(&self, name: &str, row: usize, k: usize) -> Result<Element> {
        let index = add_index(name, self.kept.index_of(row)?, self.contracted.index_of(k)?)?;
        self.reader.at_index(index)
    }
}

/// `matmul` on two tensors.
pub(super) fn execute(name: &str, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let ctx = Context::new(name, invocation)?;
    if ctx.operand_count() != 2 {
        return Err(Error::Value(format!(
            "'{name}' takes two tensor operands, the invocation has {}",
            ctx.operand_count()
        )));
    }
    let (lhs, rhs) = (Matrix::new(&ctx, 0, "lhs")?, Matrix::new(&ctx, 1, "rhs")?);
    let depth = lhs.contracted.size();
    if rhs.contracted.size() != depth {
        return Err(Error::Value(format!(
            "'{name}' contracts mode 1 of both operands: (N,K)·(M,K); lhs has K = {depth} but rhs has K = {}",
            rhs.contracted.size()
        )));
    }
    let (n, m) = (lhs.kept.size(), rhs.kept.size());
    let size = ctx.spec().layout().size();
    if n.checked_mul(m) != Some(size) {
        return Err(Error::Value(format!(
            "'{name}': an ({n},{m}) product does not fill a result of {size} elements"
        )));
    }
    let (_, lhs_plan) = ctx.operand(0)?;
    let (_, rhs_plan) = ctx.operand(1)?;
    let element = lhs_plan.convert_to();
    let plan = invocation.plan();
    if rhs_plan.convert_to() != element || !compute_matches(plan.compute(), element) {
        return Err(Error::NotImplemented(format!(
            "the Generic reference of '{name}' does not execute the plan {plan}"
        )));
    }
    let empty = Sum::for_plan(name, invocation, element)?;
    let mut values = buffer(name, size)?;
    for j in 0..m {
        for i in 0..n {
            let mut sum = empty;
            for k in 0..depth {
                match (lhs.at(name, i, k)?, rhs.at(name, j, k)?) {
                    (Element::Float32(a), Element::Float32(b)) => sum.add_float(name, a * b)?,
                    (Element::Int32(a), Element::Int32(b)) => {
                        sum.add_integer(name, i64::from(a) * i64::from(b))?
                    }
                    (a, b) => return Err(unsupported(name, &[a, b], invocation)),
                }
            }
            let result = sum.finish(name, || format!("out({i}, {j})"))?;
            values.push(result.to_value());
        }
    }
    ctx.publish(values)
}
