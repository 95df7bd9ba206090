//! The CPU kernel of `select(cond, a, b)`: `cond ? a : b` elementwise.
//!
//! Like the other elementwise kernels ([`super::elementwise`]), the three operands are read at
//! the result's ordinals through their layouts broadcast to the result shape, jointly
//! coalesced with the result ([`Walk`]), so the kernel loops over long runs: a contiguous
//! operand of the computed type is read in place, a stride-0 operand (or a weak scalar) is one
//! value, anything else (another stride, Int32 read as Float32) is gathered into a small
//! buffer first. A run whose condition is one value copies the chosen branch whole. Long runs
//! are compiled for the running CPU's vector units ([`pulp`] runtime dispatch) and results
//! above the threading threshold are split over two threads.
//!
//! Selecting does no arithmetic: the branches are only converted as their operand plans say
//! (Int32 → Float32 as `as f32` rounds, a weak bool scalar to 1.0 or 0.0), so the results
//! equal the Generic reference exactly.

use strideweave_layout::Layout;

use super::elementwise::{
    operands, out_of_range, side_strides, unsupported, with_side, Run, Side, BLOCK, DISPATCH_MIN,
};
use super::parallel::{join, midpoint, threaded};
use super::slots::{Compute, Stored};
use super::strided::Walk;
use super::{fresh_result, result_spec};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::{Arithmetic, Operand, ResolvedInvocation};
use crate::tensor::Tensor;

/// The three operands as the kernel reads them: the condition (Bool as 0/1 bytes), then the
/// branches in the computed type.
type Sides<'a, T> = (Side<'a, u8>, Side<'a, T>, Side<'a, T>);

/// Executes `select` on `invocation`.
///
/// # Errors
/// NotImplemented for a plan the kernel does not compute (a condition not read as Bool,
/// branches converting to another dtype than the output, an arithmetic that does not match
/// the output), a Value error for a wrong operand count, and the carriers' errors.
pub(super) fn execute(name: &str, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let plan = invocation.plan();
    let output = plan.output();
    let fits = match plan.operands() {
        [cond, a, b] => {
            cond.convert_to() == DType::BOOL
                && a.convert_to() == output
                && b.convert_to() == output
                && match plan.compute() {
                    Arithmetic::Binary32 => output == DType::FLOAT32,
                    Arithmetic::Int32ExactChecked | Arithmetic::Int32Exact => {
                        output == DType::INT32 || output == DType::BOOL
                    }
                }
        }
        _ => false,
    };
    if !fits {
        return Err(unsupported(name, invocation));
    }
    if output == DType::FLOAT32 {
        typed::<f32>(name, invocation)
    } else if output == DType::INT32 {
        typed::<i32>(name, invocation)
    } else {
        typed::<u8>(name, invocation)
    }
}

/// `select` computing (and storing) `T`: the condition's slots under its carrier's read
/// lock, each branch a weak scalar converted once or a tensor's slots under its read lock.
fn typed<T: Compute + Stored>(name: &str, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let [cond, a, b] = operands::<3>(name, invocation)?;
    let spec = result_spec::<T>(name, invocation)?;
    let walk = walk(spec.layout(), [cond, a, b])?;
    with_side::<u8, _>(name, cond, |c| {
        with_side::<T, _>(name, a, |x| {
            with_side::<T, _>(name, b, |y| {
                fresh_result::<T>(spec, |out| drive(name, &walk, (c, x, y), out))
            })
        })
    })
}

/// The walk of the result's ordinals over the three operands: one flat run when every
/// operand is dense like the result or a single value, else jointly coalesced strides.
fn walk(result: &Layout, operands: [&Operand; 3]) -> Result<Walk<3>> {
    let flat = |operand: &Operand| match operand {
        Operand::Scalar(_) => Some(0),
        Operand::Tensor(t) if t.size() == 1 => Some(0),
        Operand::Tensor(t) if t.layout() == result => Some(1),
        Operand::Tensor(_) => None,
    };
    if let [Some(c), Some(a), Some(b)] = operands.map(flat) {
        return Ok(Walk::flat(result.size(), [c, a, b]));
    }
    let extents = result.shape().leaves();
    let [c, a, b] = [
        side_strides(operands[0], extents)?,
        side_strides(operands[1], extents)?,
        side_strides(operands[2], extents)?,
    ];
    Walk::new(extents, [c.as_slice(), a.as_slice(), b.as_slice()])
}

/// Fills `out` (the result, in ordinal order), on two threads when large.
fn drive<T: Compute>(name: &str, walk: &Walk<3>, sides: Sides<'_, T>, out: &mut [T]) -> Result<()> {
    if walk.size() != out.len() {
        return Err(Error::Value(format!(
            "'{name}': the operands cover {} elements but the result has {}",
            walk.size(),
            out.len()
        )));
    }
    if !threaded(out.len()) {
        return part(name, walk, sides, 0, out);
    }
    let mid = midpoint(out.len());
    let (low, high) = out.split_at_mut(mid);
    let (first, second) = join(
        || part(name, walk, sides, 0, low),
        || part(name, walk, sides, mid, high),
    );
    first.and(second)
}

/// Fills `out`, the result ordinals `begin..begin + out.len()`, run by run; operands that
/// cannot be read in place are gathered [`BLOCK`] elements at a time.
fn part<T: Compute>(
    name: &str,
    walk: &Walk<3>,
    (cond, a, b): Sides<'_, T>,
    begin: usize,
    out: &mut [T],
) -> Result<()> {
    let (_, strides) = walk.inner();
    let gathered = [
        cond.gathers(strides[0]),
        a.gathers(strides[1]),
        b.gathers(strides[2]),
    ];
    let chunked = gathered.contains(&true);
    // Buffers only for the operands that are gathered (a dense select allocates nothing).
    let room = |k: usize| if gathered[k] { BLOCK } else { 0 };
    let mut cond_buffer = vec![0u8; room(0)];
    let mut a_buffer = vec![T::default(); room(1)];
    let mut b_buffer = vec![T::default(); room(2)];
    let end = begin + out.len();
    walk.runs(begin, end, |ordinal, bases, len| {
        let start = ordinal - begin;
        let run = out
            .get_mut(start..start + len)
            .ok_or_else(|| out_of_range(name))?;
        let step = if chunked { BLOCK } else { len.max(1) };
        for (n, chunk) in run.chunks_mut(step).enumerate() {
            let done = n * step;
            let at = |k: usize| bases[k] + done * strides[k];
            let rc = cond.run(at(0), strides[0], chunk.len(), &mut cond_buffer);
            let ra = a.run(at(1), strides[1], chunk.len(), &mut a_buffer);
            let rb = b.run(at(2), strides[2], chunk.len(), &mut b_buffer);
            let (Some(rc), Some(ra), Some(rb)) = (rc, ra, rb) else {
                return Err(out_of_range(name));
            };
            choose(rc, ra, rb, chunk);
        }
        Ok(())
    })
}

/// `out[t] = c[t] ? a[t] : b[t]` over one run. A single condition copies the chosen branch;
/// long runs run compiled for the best vector extension the CPU has.
#[inline]
fn choose<T: Copy>(c: Run<'_, u8>, a: Run<'_, T>, b: Run<'_, T>, out: &mut [T]) {
    if let Run::Scalar(flag) = c {
        copy_run(if flag != 0 { a } else { b }, out);
    } else if out.len() < DISPATCH_MIN {
        choose_loop(c, a, b, out);
    } else {
        pulp::Arch::new().dispatch(Choose { c, a, b, out });
    }
}

/// `out[t] = run[t]` (one value everywhere for a single value).
#[inline]
fn copy_run<T: Copy>(run: Run<'_, T>, out: &mut [T]) {
    match run {
        Run::Scalar(x) => out.fill(x),
        Run::Slice(values) => {
            for (o, &x) in out.iter_mut().zip(values) {
                *o = x;
            }
        }
    }
}

/// [`choose_loop`] as a [`pulp::WithSimd`] operation, so that it is compiled (inlined)
/// inside pulp's target-feature functions.
struct Choose<'a, T> {
    /// The condition's values (0 or 1).
    c: Run<'a, u8>,
    /// The values chosen where the condition holds.
    a: Run<'a, T>,
    /// The values chosen where it does not.
    b: Run<'a, T>,
    /// The result run.
    out: &'a mut [T],
}

impl<T: Copy> pulp::WithSimd for Choose<'_, T> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        choose_loop(self.c, self.a, self.b, self.out);
    }
}

/// The plain loops the compiler vectorizes (branch-free selects): one per combination of
/// in-place and single values.
#[inline(always)]
fn choose_loop<T: Copy>(c: Run<'_, u8>, a: Run<'_, T>, b: Run<'_, T>, out: &mut [T]) {
    let flags = match c {
        Run::Slice(flags) => flags,
        Run::Scalar(flag) => return copy_run(if flag != 0 { a } else { b }, out),
    };
    match (a, b) {
        (Run::Slice(a), Run::Slice(b)) => {
            for (((o, &f), &x), &y) in out.iter_mut().zip(flags).zip(a).zip(b) {
                *o = if f != 0 { x } else { y };
            }
        }
        (Run::Slice(a), Run::Scalar(y)) => {
            for ((o, &f), &x) in out.iter_mut().zip(flags).zip(a) {
                *o = if f != 0 { x } else { y };
            }
        }
        (Run::Scalar(x), Run::Slice(b)) => {
            for ((o, &f), &y) in out.iter_mut().zip(flags).zip(b) {
                *o = if f != 0 { x } else { y };
            }
        }
        (Run::Scalar(x), Run::Scalar(y)) => {
            for (o, &f) in out.iter_mut().zip(flags) {
                *o = if f != 0 { x } else { y };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_loops_cover_every_combination() {
        let flags = [1u8, 0, 1, 0];
        let mut out = [0i32; 4];
        choose(
            Run::Slice(&flags),
            Run::Slice(&[1, 2, 3, 4]),
            Run::Slice(&[-1, -2, -3, -4]),
            &mut out,
        );
        assert_eq!(out, [1, -2, 3, -4]);
        choose(
            Run::Slice(&flags),
            Run::Slice(&[1, 2, 3, 4]),
            Run::Scalar(9),
            &mut out,
        );
        assert_eq!(out, [1, 9, 3, 9]);
        choose(
            Run::Slice(&flags),
            Run::Scalar(7),
            Run::Slice(&[-1, -2, -3, -4]),
            &mut out,
        );
        assert_eq!(out, [7, -2, 7, -4]);
        choose(Run::Slice(&flags), Run::Scalar(7), Run::Scalar(9), &mut out);
        assert_eq!(out, [7, 9, 7, 9]);
        choose(
            Run::Scalar(0),
            Run::Scalar(7),
            Run::Slice(&[5, 6, 7, 8]),
            &mut out,
        );
        assert_eq!(out, [5, 6, 7, 8]);
        choose(Run::Scalar(1), Run::Scalar(7), Run::Scalar(9), &mut out);
        assert_eq!(out, [7; 4]);
        // Long runs go through the vector-unit dispatch.
        let flags: Vec<u8> = (0..100).map(|i| u8::from(i % 3 == 0)).collect();
        let a: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let mut wide = vec![0.0f32; 100];
        choose(
            Run::Slice(&flags),
            Run::Slice(&a),
            Run::Scalar(-0.0),
            &mut wide,
        );
        for (i, x) in wide.iter().enumerate() {
            let expected = if i % 3 == 0 { i as f32 } else { -0.0 };
            assert_eq!(x.to_bits(), expected.to_bits(), "{i}");
        }
    }
}
