//! Unary, binary and ternary (`select`) elementwise reference kernels, comparisons
//! included.
//!
//! The result shape is already the broadcast of the tensor operands' shapes; each tensor
//! operand is read at result ordinal `i` through its layout broadcast to that shape (extent-1
//! leaves widened with stride 0), and a weak scalar is converted once.

use crate::kernels::extrema::{maximum_f32, minimum_f32};
use strideweave_layout::Layout;

use super::{buffer, compute_matches, overflow, unsupported, Context, Element, Reader};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::{Builtin, Operand, ResolvedInvocation};
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

/// `neg abs exp log sqrt tanh sigmoid relu` on the single tensor operand.
pub(super) fn unary(builtin: Builtin, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let name = builtin.name();
    let ctx = Context::new(name, invocation)?;
    check_operands(&ctx, 1)?;
    let x = side(&ctx, 0)?;
    let size = ctx.spec().layout().size();
    let mut values = buffer(name, size)?;
    for ordinal in 0..size {
        let element = x.at(ordinal)?;
        values.push(unary_op(builtin, invocation, element)?.to_value());
    }
    ctx.publish(values)
}

/// `add sub mul elementwise_mul div maximum minimum eq lt le` on two operands (tensors or a
/// tensor and a weak scalar, in either order for `mul`).
pub(super) fn binary(builtin: Builtin, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let name = builtin.name();
    let ctx = Context::new(name, invocation)?;
    check_operands(&ctx, 2)?;
    let (lhs, rhs) = (side(&ctx, 0)?, side(&ctx, 1)?);
    let size = ctx.spec().layout().size();
    let mut values = buffer(name, size)?;
    for ordinal in 0..size {
        let (a, b) = (lhs.at(ordinal)?, rhs.at(ordinal)?);
        values.push(binary_op(builtin, invocation, a, b)?.to_value());
    }
    ctx.publish(values)
}

/// `select(cond, a, b)`: `cond ? a : b` per result ordinal. The condition is read as Bool
/// (its operand plan must convert it to Bool), the branches convert to the plan's output
/// dtype as their operand plans say, and only the chosen branch is read.
pub(super) fn select(builtin: Builtin, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let name = builtin.name();
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

/// One unary element: Float32 in IEEE binary32, Int32 checked (`neg`, `abs`) or exact
/// (`relu`).
fn unary_op(builtin: Builtin, invocation: &ResolvedInvocation, x: Element) -> Result<Element> {
    let name = builtin.name();
    use Element::{Float32, Int32};
    let result = match (builtin, x) {
        (Builtin::Neg, Float32(a)) => Float32(-a),
        (Builtin::Neg, Int32(a)) => Int32(
            a.checked_neg()
                .ok_or_else(|| overflow(name, format!("-({a})")))?,
        ),
        (Builtin::Abs, Float32(a)) => Float32(a.abs()),
        (Builtin::Abs, Int32(a)) => Int32(
            a.checked_abs()
                .ok_or_else(|| overflow(name, format!("|{a}|")))?,
        ),
        (Builtin::Exp, Float32(a)) => Float32(a.exp()),
        (Builtin::Log, Float32(a)) => Float32(a.ln()),
        (Builtin::Sqrt, Float32(a)) => Float32(a.sqrt()),
        (Builtin::Tanh, Float32(a)) => Float32(a.tanh()),
        (Builtin::Sigmoid, Float32(a)) => Float32(1.0 / (1.0 + (-a).exp())),
        (Builtin::Relu, Float32(a)) => Float32(if a > 0.0 || a.is_nan() { a } else { 0.0 }),
        (Builtin::Relu, Int32(a)) => Int32(a.max(0)),
        _ => return Err(unsupported(name, &[x], invocation)),
    };
    Ok(result)
}

/// One binary element: Float32 in IEEE binary32 (no fused operations), Int32 checked
/// (leaving the range is an Overflow error naming the operation and the operands), and
/// comparisons giving Bool (NaN compares false).
fn binary_op(
    builtin: Builtin,
    invocation: &ResolvedInvocation,
    a: Element,
    b: Element,
) -> Result<Element> {
    let name = builtin.name();
    use Element::{Bool, Float32, Int32};
    let checked = |result: Option<i32>, symbol: &str, x: i32, y: i32| {
        result
            .map(Int32)
            .ok_or_else(|| overflow(name, format!("{x} {symbol} {y}")))
    };
    let result = match (builtin, a, b) {
        (Builtin::Add, Float32(x), Float32(y)) => Float32(x + y),
        (Builtin::Add, Int32(x), Int32(y)) => checked(x.checked_add(y), "+", x, y)?,
        (Builtin::Sub, Float32(x), Float32(y)) => Float32(x - y),
        (Builtin::Sub, Int32(x), Int32(y)) => checked(x.checked_sub(y), "-", x, y)?,
        (Builtin::Mul | Builtin::ElementwiseMul, Float32(x), Float32(y)) => Float32(x * y),
        (Builtin::Mul | Builtin::ElementwiseMul, Int32(x), Int32(y)) => {
            checked(x.checked_mul(y), "*", x, y)?
        }
        (Builtin::Div, Float32(x), Float32(y)) => Float32(x / y),
        (Builtin::Maximum, Float32(x), Float32(y)) => Float32(maximum_f32(x, y)),
        (Builtin::Maximum, Int32(x), Int32(y)) => Int32(x.max(y)),
        (Builtin::Minimum, Float32(x), Float32(y)) => Float32(minimum_f32(x, y)),
        (Builtin::Minimum, Int32(x), Int32(y)) => Int32(x.min(y)),
        (Builtin::Eq, Float32(x), Float32(y)) => Bool(x == y),
        (Builtin::Eq, Int32(x), Int32(y)) => Bool(x == y),
        (Builtin::Eq, Bool(x), Bool(y)) => Bool(x == y),
        (Builtin::Lt, Float32(x), Float32(y)) => Bool(x < y),
        (Builtin::Lt, Int32(x), Int32(y)) => Bool(x < y),
        (Builtin::Le, Float32(x), Float32(y)) => Bool(x <= y),
        (Builtin::Le, Int32(x), Int32(y)) => Bool(x <= y),
        _ => return Err(unsupported(name, &[a, b], invocation)),
    };
    Ok(result)
}
