//! The direct path of tiny Float32 elementwise operations on CPU tensors.
//!
//! For a handful of elements the general pipeline (binding, planning, the capability gate, a
//! freshly dispatched operation, result validation) costs far more than the arithmetic
//! (docs/performance-targets.md, "tiny-op dispatch"). When an [`ops`](crate::ops) call is exactly
//! the common case, the typed function computes here instead, with the same observable outcome
//! as the pipeline: a fresh mutable CPU carrier at version 0 holding the bit-identical
//! Float32 results under the operands' own (canonical) layout, operands untouched, and no
//! autograd node (the path refuses whenever one would be recorded). Anything else — another
//! carrier class or dtype, differing or non-canonical layouts, a released operand, more than
//! [`DIRECT_MAX`] elements, recording on — answers `None` and the caller takes the general
//! pipeline, which also reports every error. Inside that pipeline the CPU elementwise
//! kernel computes a resolved invocation of the same kind through [`invocation`], so a call
//! that records gradients (or comes through `operation::call`) still skips the general
//! strided machinery.

use std::sync::Arc;

use strideweave_layout::Layout;

pub(crate) use super::elementwise::relu_f32;
use crate::autograd::is_grad_enabled;
use crate::carriers::cpu::INLINE_F32;
use crate::carriers::Cpu;
use crate::dtype::DType;
pub(crate) use crate::kernels::extrema::{maximum_f32, minimum_f32};
use crate::operation::{Operand, ResolvedInvocation};
use crate::tensor::Tensor;

/// The largest result, in elements, the direct path computes. Above it the vectorized and
/// threaded kernels take over and the pipeline's fixed cost no longer matters.
pub(crate) const DIRECT_MAX: usize = 256;

/// `-a`.
#[inline(always)]
pub(crate) fn neg(a: f32) -> f32 {
    -a
}

/// `1 / (1 + e^-a)`: the one Float32 sigmoid formula of the CPU kernels and the direct path.
#[inline(always)]
pub(crate) fn sigmoid(a: f32) -> f32 {
    1.0 / (1.0 + (-a).exp())
}

/// `a + b`.
#[inline(always)]
pub(crate) fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// `a - b`.
#[inline(always)]
pub(crate) fn sub(a: f32, b: f32) -> f32 {
    a - b
}

/// `a · b`.
#[inline(always)]
pub(crate) fn mul(a: f32, b: f32) -> f32 {
    a * b
}

/// `a / b`.
#[inline(always)]
pub(crate) fn div(a: f32, b: f32) -> f32 {
    a / b
}

/// The Float32 unary operations of the direct path, by built-in name.
pub(crate) fn unary_f32(name: &str) -> Option<fn(f32) -> f32> {
    Some(match name {
        "neg" => neg,
        "abs" => f32::abs,
        "exp" => f32::exp,
        "log" => f32::ln,
        "sqrt" => f32::sqrt,
        "tanh" => f32::tanh,
        "sigmoid" => sigmoid,
        "relu" => relu_f32,
        _ => return None,
    })
}

/// The Float32 binary operations of the direct path, by built-in name.
pub(crate) fn binary_f32(name: &str) -> Option<fn(f32, f32) -> f32> {
    Some(match name {
        "add" => add,
        "sub" => sub,
        "mul" | "elementwise_mul" => mul,
        "div" => div,
        "maximum" => maximum_f32,
        "minimum" => minimum_f32,
        _ => return None,
    })
}

/// The direct computation of a resolved Float32 elementwise invocation on CPU tensors, for
/// the CPU kernels (the pipeline around them records gradients): `None` unless every operand
/// is a tensor of the direct case and the single result is a fresh Float32 under their
/// layout.
pub(crate) fn invocation(name: &str, invocation: &ResolvedInvocation) -> Option<Tensor> {
    let [spec] = invocation.results() else {
        return None;
    };
    if spec.dtype() != DType::FLOAT32 || spec.alias_of().is_some() {
        return None;
    }
    let result = match invocation.call().operands() {
        [Operand::Tensor(x)] => compute_unary(x, unary_f32(name)?),
        [Operand::Tensor(lhs), Operand::Tensor(rhs)] => compute_binary(lhs, rhs, binary_f32(name)?),
        _ => None,
    }?;
    (result.layout() == spec.layout()).then_some(result)
}

/// `f` applied to every element of `x`, or `None` when `x` is not the direct case.
pub(crate) fn unary(x: &Tensor, f: impl Fn(f32) -> f32) -> Option<Tensor> {
    if recording(&[x]) {
        return None;
    }
    compute_unary(x, f)
}

/// [`unary`] without the recording check.
fn compute_unary(x: &Tensor, f: impl Fn(f32) -> f32) -> Option<Tensor> {
    let (source, layout) = eligible(x)?;
    let range = x.offset()..x.offset() + layout.size();
    compute(layout, |out| {
        source
            .with_f32(|xs| {
                let xs = xs.get(range)?;
                for (o, &a) in out.iter_mut().zip(xs) {
                    *o = f(a);
                }
                Some(())
            })
            .ok()
            .flatten()
    })
}

/// `f` applied elementwise to `lhs` and `rhs`, or `None` when they are not the direct case
/// (in particular when their layouts differ, which includes every broadcast).
pub(crate) fn binary(lhs: &Tensor, rhs: &Tensor, f: impl Fn(f32, f32) -> f32) -> Option<Tensor> {
    if recording(&[lhs, rhs]) {
        return None;
    }
    compute_binary(lhs, rhs, f)
}

/// [`binary`] without the recording check.
fn compute_binary(lhs: &Tensor, rhs: &Tensor, f: impl Fn(f32, f32) -> f32) -> Option<Tensor> {
    let (left, layout) = eligible(lhs)?;
    // Equal to an eligible layout is eligible: only the dtype and class remain to check.
    let other = rhs.shared_layout();
    let same_layout = Arc::ptr_eq(layout, other) || **layout == **other;
    if !same_layout || rhs.dtype() != DType::FLOAT32 {
        return None;
    }
    let right = rhs.carrier().downcast_ref::<Cpu>()?;
    let n = layout.size();
    let (l, r) = (
        lhs.offset()..lhs.offset() + n,
        rhs.offset()..rhs.offset() + n,
    );
    compute(layout, |out| {
        left.with_f32(|ls| {
            right
                .with_f32(|rs| {
                    let (ls, rs) = (ls.get(l)?, rs.get(r)?);
                    for ((o, &a), &b) in out.iter_mut().zip(ls).zip(rs) {
                        *o = f(a, b);
                    }
                    Some(())
                })
                .ok()
                .flatten()
        })
        .ok()
        .flatten()
    })
}

/// The CPU body and layout of a Float32 CPU tensor under a canonical layout of at most
/// [`DIRECT_MAX`] elements.
fn eligible(t: &Tensor) -> Option<(&Cpu, &Arc<Layout>)> {
    if t.dtype() != DType::FLOAT32 {
        return None;
    }
    let layout = t.shared_layout();
    if layout.size() > DIRECT_MAX || !layout.is_column_major() {
        return None;
    }
    Some((t.carrier().downcast_ref::<Cpu>()?, layout))
}

/// Whether the pipeline would record an autograd node for these operands.
fn recording(operands: &[&Tensor]) -> bool {
    // The operands' flags first: while none is tracked that costs no thread-local access.
    operands.iter().any(|t| t.requires_grad()) && is_grad_enabled()
}

/// A fresh CPU result under `layout` whose slots `fill` writes (`None` from `fill` or a
/// failed allocation abandons the body before anything is published).
fn compute(layout: &Arc<Layout>, fill: impl FnOnce(&mut [f32]) -> Option<()>) -> Option<Tensor> {
    let n = layout.size();
    let carrier = if n <= INLINE_F32 {
        // Computed on the stack, then stored into the new carrier's inline slots.
        let mut values = [0.0f32; INLINE_F32];
        fill(&mut values[..n])?;
        Cpu::inline_f32(&values, n, true)
    } else {
        let mut body = Cpu::zeroed(n, DType::FLOAT32).ok()?;
        body.with_f32_exclusive(fill).ok()??;
        Cpu::wrap(body, DType::FLOAT32, true).ok()?
    };
    Some(Tensor::fresh(carrier, Arc::clone(layout)))
}
