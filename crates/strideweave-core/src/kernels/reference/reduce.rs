//! Reduction reference kernels: `reduce_sum` and `reduce_max` over mode 1 of a two-mode
//! tensor.
//!
//! Result ordinal `i` is an ordinal of mode 0; the reduced elements are `x(i, j)` for the
//! ordinals `j` of mode 1, visited in ascending order. Because a layout's index is the sum
//! of its modes' indices, `x(i, j)` lives at `offset + mode0.index_of(i) + mode1.index_of(j)`.

use super::{add_index, buffer, compute_matches, unsupported, Context, Element, Sum};
use crate::error::{Error, Result};
use crate::operation::builtin::extrema::maximum_f32;
use crate::operation::builtin::kernel::Fold;
use crate::operation::{Accumulation, ResolvedInvocation};
use crate::tensor::Tensor;

/// How the elements of one result are combined.
#[derive(Clone, Copy)]
enum Running {
    /// A sum in the plan's accumulator.
    Sum(Sum),
    /// The running maximum (none before the first element).
    Maximum(Option<Element>),
}

/// `reduce_sum` (Float32 in the plan's accumulator dtype, rounded once; Int32 exact with a
/// checked final narrowing) or `reduce_max` (Float32: NaN when any element is NaN).
pub(super) fn execute(name: &str, fold: Fold, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let ctx = Context::new(name, invocation)?;
    if ctx.operand_count() != 1 {
        return Err(Error::Value(format!(
            "'{name}' takes one tensor operand, the invocation has {}",
            ctx.operand_count()
        )));
    }
    let x = ctx.reader(0)?;
    let (_, operand_plan) = ctx.operand(0)?;
    let element = operand_plan.convert_to();
    let plan = invocation.plan();
    if !compute_matches(plan.compute(), element) {
        return Err(Error::NotImplemented(format!(
            "the Generic reference of '{name}' does not reduce {element} in {} arithmetic",
            plan.compute().name()
        )));
    }
    let layout = x.tensor().layout();
    if layout.rank() != 2 {
        return Err(Error::Value(format!(
            "'{name}' reduces mode 1 of a two-mode tensor; Layout {layout} has {} modes",
            layout.rank()
        )));
    }
    let (rows, columns) = (layout.mode(0)?, layout.mode(1)?);
    let size = ctx.spec().layout().size();
    if rows.size() != size {
        return Err(Error::Value(format!(
            "'{name}': mode 0 of Layout {layout} has {} elements but the result has {size}",
            rows.size()
        )));
    }
    let maximum = match (fold, plan.accumulation()) {
        (Fold::Sum, _) => false,
        (Fold::Max, Some(Accumulation::Maximum) | None) => true,
        _ => {
            return Err(Error::NotImplemented(format!(
                "the Generic reference of '{name}' does not execute the plan {plan}"
            )))
        }
    };
    let empty = if maximum {
        Running::Maximum(None)
    } else {
        Running::Sum(Sum::for_plan(name, invocation, element)?)
    };
    let mut values = buffer(name, size)?;
    for i in 0..size {
        let base = rows.index_of(i)?;
        let mut fold = empty;
        for j in 0..columns.size() {
            let value = x.at_index(add_index(name, base, columns.index_of(j)?)?)?;
            match &mut fold {
                Running::Sum(sum) => sum.add(name, value)?,
                Running::Maximum(best) => *best = Some(larger(name, invocation, *best, value)?),
            }
        }
        let result = match fold {
            Running::Sum(sum) => sum.finish(name, || {
                format!("the sum over mode 1 at result ordinal {i}")
            })?,
            Running::Maximum(best) => {
                best.ok_or_else(|| Error::Value(format!("'{name}' cannot reduce an empty mode 1")))?
            }
        };
        values.push(result.to_value());
    }
    ctx.publish(values)
}

/// The running maximum after `value`: Float32 NaN-propagating (a NaN, once seen, stays),
/// Int32 exact.
fn larger(
    name: &str,
    invocation: &ResolvedInvocation,
    best: Option<Element>,
    value: Element,
) -> Result<Element> {
    match (best, value) {
        (None, Element::Float32(_) | Element::Int32(_)) => Ok(value),
        (Some(Element::Float32(a)), Element::Float32(b)) => Ok(Element::Float32(maximum_f32(a, b))),
        (Some(Element::Int32(a)), Element::Int32(b)) => Ok(Element::Int32(a.max(b))),
        (Some(best), _) => Err(unsupported(name, &[best, value], invocation)),
        (None, _) => Err(unsupported(name, &[value], invocation)),
    }
}
