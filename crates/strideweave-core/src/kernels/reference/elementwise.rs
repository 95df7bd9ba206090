//! Unary, binary and ternary (`select`) elementwise reference kernels, comparisons
//! included.
//!
//! The result shape is already the broadcast of the tensor operands' shapes; each tensor
//! operand is read at result ordinal `i` through its layout broadcast to that shape (extent-1
//! leaves widened with stride 0), and a weak scalar is converted once.

use strideweave_layout::Layout;

use super::{buffer, compute_matches, overflow, unsupported, Context, Element, Reader};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::builtin::kernel::{Map, MapFn, MapVisitor, Test, TestFn, TestVisitor};
use crate::operation::{Operand, ResolvedInvocation};
use crate::tensor::Tensor;

/// One operand of an elementwise operation, ready to be read by result ordinal.
enum Side<'a> {
    /// A tensor read through its layout broadcast to the result shape (boxed: a layout is
    /// large next to a scalar).
    Tensor(Reader<'a>, Box<Layout>),
    /// A weak scalar, converted once.
    Scalar(Element),
}

impl Side<'_> {
    /// The converted element at result ordinal `ordinal`.
    fn at(&self, ordinal: usize) -> Result<Element> {
        match self {
            Side::Tensor(reader, layout) => reader.at_ordinal(layout, ordinal),
            Side::Scalar(element) => Ok(*element),
        }
    }
}

/// Prepares operand `i` of `ctx` for reading by result ordinal.
fn side<'a>(ctx: &Context<'a>, i: usize) -> Result<Side<'a>> {
    let (operand, plan) = ctx.operand(i)?;
    Ok(match operand {
        Operand::Tensor(_) => {
            let reader = ctx.reader(i)?;
            let layout = reader.tensor().layout().broadcast_to(ctx.spec().shape())?;
            Side::Tensor(reader, Box::new(layout))
        }
        Operand::Scalar(value) => {
            Side::Scalar(Element::convert(ctx.name(), *value, plan.convert_to())?)
        }
    })
}

/// Checks that `ctx` has exactly `count` operands and that every operand plan converts to a
/// dtype the plan's arithmetic computes on.
fn check_operands(ctx: &Context<'_>, count: usize) -> Result<()> {
    let name = ctx.name();
    if ctx.operand_count() != count {
        return Err(Error::Value(format!(
            "'{name}' takes {count} operand(s), the invocation has {}",
            ctx.operand_count()
        )));
    }
    let plan = ctx.invocation().plan();
    for operand in plan.operands() {
        if !compute_matches(plan.compute(), operand.convert_to()) {
            return Err(Error::NotImplemented(format!(
                "the Generic reference of '{name}' does not compute {} in {} arithmetic",
                operand.convert_to(),
                plan.compute().name()
            )));
        }
    }
    Ok(())
}

/// An elementwise built-in whose result has its operands' computed dtype (`neg abs exp log
/// sqrt tanh sigmoid relu` on one tensor, `add sub mul elementwise_mul div maximum minimum`
/// on two operands), computing `function`, its entry's.
pub(super) fn map(name: &str, function: MapFn, invocation: &ResolvedInvocation) -> Result<Tensor> {
    function.visit(MapElements { name, invocation })
}

/// A comparison (`eq lt le`) on two operands, computing `function`, its entry's.
pub(super) fn test(
    name: &str,
    function: TestFn,
    invocation: &ResolvedInvocation,
) -> Result<Tensor> {
    function.visit(TestElements { name, invocation })
}

/// Computes `element` at every result ordinal of `invocation`'s `count` operands (the
/// second one absent for one operand).
fn elementwise(
    name: &str,
    invocation: &ResolvedInvocation,
    count: usize,
    element: impl Fn(Element, Option<Element>) -> Result<Element>,
) -> Result<Tensor> {
    let ctx = Context::new(name, invocation)?;
    check_operands(&ctx, count)?;
    let lhs = side(&ctx, 0)?;
    let rhs = if count == 2 {
        Some(side(&ctx, 1)?)
    } else {
        None
    };
    let size = ctx.spec().layout().size();
    let mut values = buffer(name, size)?;
    for ordinal in 0..size {
        let b = rhs.as_ref().map(|rhs| rhs.at(ordinal)).transpose()?;
        values.push(element(lhs.at(ordinal)?, b)?.to_value());
    }
    ctx.publish(values)
}

/// The reference of one [`Map`] function: Float32 in IEEE binary32 (no fused operations),
/// Int32 where the function computes on it, leaving the range an Overflow error naming the
/// operation and the operands.
struct MapElements<'a> {
    name: &'a str,
    invocation: &'a ResolvedInvocation,
}

impl MapVisitor for MapElements<'_> {
    type Output = Result<Tensor>;

    fn visit<F: Map>(self) -> Result<Tensor> {
        let MapElements { name, invocation } = self;
        elementwise(name, invocation, F::OPERANDS, |a, b| {
            use Element::{Float32, Int32};
            match (a, b) {
                (Float32(x), None) => Ok(Float32(F::float32(x, 0.0))),
                (Float32(x), Some(Float32(y))) => Ok(Float32(F::float32(x, y))),
                (Int32(x), None) if F::INT32 => int32(name, x, 0, F::int32, F::describe),
                (Int32(x), Some(Int32(y))) if F::INT32 => int32(name, x, y, F::int32, F::describe),
                (a, None) => Err(unsupported(name, &[a], invocation)),
                (a, Some(b)) => Err(unsupported(name, &[a, b], invocation)),
            }
        })
    }
}

/// The Int32 result of `op` on `x` and `y`, an Overflow error with `describe` when it left
/// the range.
fn int32(
    name: &str,
    x: i32,
    y: i32,
    op: fn(i32, i32) -> (i32, bool),
    describe: fn(i32, i32) -> String,
) -> Result<Element> {
    match op(x, y) {
        (result, false) => Ok(Element::Int32(result)),
        (_, true) => Err(overflow(name, describe(x, y))),
    }
}

/// The reference of one [`Test`] function: Bool results (NaN compares false).
struct TestElements<'a> {
    name: &'a str,
    invocation: &'a ResolvedInvocation,
}

impl TestVisitor for TestElements<'_> {
    type Output = Result<Tensor>;

    fn visit<F: Test>(self) -> Result<Tensor> {
        let TestElements { name, invocation } = self;
        elementwise(name, invocation, 2, |a, b| {
            use Element::{Bool, Float32, Int32};
            match (a, b) {
                (Float32(x), Some(Float32(y))) => Ok(Bool(F::float32(x, y))),
                (Int32(x), Some(Int32(y))) => Ok(Bool(F::int32(x, y))),
                (Bool(x), Some(Bool(y))) if F::BOOL => Ok(Bool(F::bool(x, y))),
                (a, None) => Err(unsupported(name, &[a], invocation)),
                (a, Some(b)) => Err(unsupported(name, &[a, b], invocation)),
            }
        })
    }
}

/// `select(cond, a, b)`: `cond ? a : b` per result ordinal. The condition is read as Bool
/// (its operand plan must convert it to Bool), the branches convert to the plan's output
/// dtype as their operand plans say, and only the chosen branch is read.
pub(super) fn select(name: &str, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let ctx = Context::new(name, invocation)?;
    if ctx.operand_count() != 3 {
        return Err(Error::Value(format!(
            "'{name}' takes 3 operands, the invocation has {}",
            ctx.operand_count()
        )));
    }
    let plan = invocation.plan();
    let output = plan.output();
    let fits = match plan.operands() {
        [cond, a, b] => {
            cond.convert_to() == DType::BOOL
                && a.convert_to() == output
                && b.convert_to() == output
                && compute_matches(plan.compute(), output)
        }
        _ => false,
    };
    if !fits {
        return Err(Error::NotImplemented(format!(
            "the Generic reference of '{name}' selects a Bool condition between branches of \
             the output dtype, not under the plan {plan}"
        )));
    }
    let (cond, a, b) = (side(&ctx, 0)?, side(&ctx, 1)?, side(&ctx, 2)?);
    let size = ctx.spec().layout().size();
    let mut values = buffer(name, size)?;
    for ordinal in 0..size {
        let chosen = match cond.at(ordinal)? {
            Element::Bool(true) => a.at(ordinal)?,
            Element::Bool(false) => b.at(ordinal)?,
            other => return Err(unsupported(name, &[other], invocation)),
        };
        values.push(chosen.to_value());
    }
    ctx.publish(values)
}
