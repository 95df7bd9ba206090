//! Reduction CPU kernels: `reduce_sum` and `reduce_max` over mode 1 of a two-mode tensor.
//!
//! Result ordinal `i` (an ordinal of mode 0) reduces `x(i, j)` over the ordinals `j` of mode
//! 1, which live at `offset + mode0(i) + mode1(j)`. Each mode is coalesced on its own, and the
//! kernel picks the loop order its strides favour:
//!
//! - **vertical** (mode 0 contiguous, e.g. a column-major `(N,K)`): for each `j` in ascending
//!   order, `acc[i] ⊕= x(i, j)` over a block of result ordinals — a vectorized slice loop, and
//!   exactly the Generic reference's summation order; up to 16 columns at a time take turns
//!   on a block of 64 accumulators held in registers, each accumulator still adding its
//!   elements in ascending `j`;
//! - **horizontal** (mode 1 contiguous, e.g. a transposed view): each `acc[i]` folds its run
//!   of mode 1 in several independent lanes (vectorized; the order differs from the
//!   reference only within the Float32 tolerance).
//!
//! Sums accumulate in the plan's accumulator dtype (Float32 or Float64 for Float32 elements,
//! exact integers for Int32, narrowed once with an Overflow check); maxima propagate NaN.
//! Above the threading threshold the result ordinals are split over the threads
//! [`crate::parallelism`] allows; for few results the reduced ordinals are cut into pieces
//! set by the work's size alone ([`pieces`]), so the result bits do not depend on the setting.

use std::fmt::Display;

use super::parallel::{chunk_count, for_each_chunk, map_pieces, pieces, THREADING_THRESHOLD};
use super::slots::{with_slots, Compute, Stored};
use super::strided::{fits, walk_of_leaves, Walk};
use super::{fresh_result, overflow, result_spec};
use crate::carriers::cpu::INLINE_WORDS;
use crate::carriers::Cpu;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::builtin::extrema::maximum_f32;
use crate::operation::builtin::kernel::Fold;
use crate::operation::{Accumulation, Operand, ResolvedInvocation, ResultSpec};
use crate::tensor::Tensor;

/// Result ordinals accumulated together in the vertical order (their accumulators stay in
/// the L1/L2 cache while every `j` streams over them).
const ROWS_BLOCK: usize = 2048;

/// Columns a vertical accumulation adds into a block of accumulators before it moves on.
const COLUMNS: usize = 16;

/// Accumulators a vertical accumulation holds in registers while its columns stream over
/// them.
const REGISTER_ROWS: usize = 64;

/// Independent partial accumulators of a horizontal fold.
const LANES: usize = 32;

/// Results below which the threads split the reduced mode rather than the results.
const FEW_RESULTS: usize = 64;

/// Results and elements up to which a single-run reduction accumulates on the stack
/// ([`tiny`]).
const TINY_RESULTS: usize = 16;
const TINY_WORK: usize = 256;

/// How one reduction combines elements.
trait Reducer: Copy + Send + Sync {
    /// The element type read.
    type In: Compute;
    /// The accumulator.
    type Acc: Copy + Send + Sync + Display;
    /// The stored result.
    type Out: Stored;

    /// The empty accumulator.
    fn identity(self) -> Self::Acc;
    /// The accumulator after one more element.
    fn add(self, acc: Self::Acc, x: Self::In) -> Self::Acc;
    /// Two partial accumulators combined.
    fn merge(self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The stored result, or `None` when it does not fit the result dtype.
    fn finish(self, acc: Self::Acc) -> Option<Self::Out>;
}

/// Float32 sum in binary32 (starting at −0.0, the additive identity).
#[derive(Clone, Copy)]
struct SumF32;

impl Reducer for SumF32 {
    type In = f32;
    type Acc = f32;
    type Out = f32;
    #[inline(always)]
    fn identity(self) -> f32 {
        -0.0
    }
    #[inline(always)]
    fn add(self, acc: f32, x: f32) -> f32 {
        acc + x
    }
    #[inline(always)]
    fn merge(self, a: f32, b: f32) -> f32 {
        a + b
    }
    fn finish(self, acc: f32) -> Option<f32> {
        Some(acc)
    }
}

/// Float32 sum in binary64, rounded once.
#[derive(Clone, Copy)]
struct SumF64;

impl Reducer for SumF64 {
    type In = f32;
    type Acc = f64;
    type Out = f32;
    #[inline(always)]
    fn identity(self) -> f64 {
        -0.0
    }
    #[inline(always)]
    fn add(self, acc: f64, x: f32) -> f64 {
        acc + f64::from(x)
    }
    #[inline(always)]
    fn merge(self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn finish(self, acc: f64) -> Option<f32> {
        Some(acc as f32)
    }
}

/// Exact Int32 sum in i64 (exact while at most 2^32 elements meet one accumulator).
#[derive(Clone, Copy)]
struct SumI64;

impl Reducer for SumI64 {
    type In = i32;
    type Acc = i64;
    type Out = i32;
    #[inline(always)]
    fn identity(self) -> i64 {
        0
    }
    #[inline(always)]
    fn add(self, acc: i64, x: i32) -> i64 {
        acc + i64::from(x)
    }
    #[inline(always)]
    fn merge(self, a: i64, b: i64) -> i64 {
        a + b
    }
    fn finish(self, acc: i64) -> Option<i32> {
        i32::try_from(acc).ok()
    }
}

/// Exact Int32 sum in i128, for reduced modes beyond 2^32 elements.
#[derive(Clone, Copy)]
struct SumI128;

impl Reducer for SumI128 {
    type In = i32;
    type Acc = i128;
    type Out = i32;
    #[inline(always)]
    fn identity(self) -> i128 {
        0
    }
    #[inline(always)]
    fn add(self, acc: i128, x: i32) -> i128 {
        acc + i128::from(x)
    }
    #[inline(always)]
    fn merge(self, a: i128, b: i128) -> i128 {
        a + b
    }
    fn finish(self, acc: i128) -> Option<i32> {
        i32::try_from(acc).ok()
    }
}

/// Float32 maximum: NaN once any element is NaN, +0.0 over −0.0.
#[derive(Clone, Copy)]
struct MaxF32;

impl Reducer for MaxF32 {
    type In = f32;
    type Acc = f32;
    type Out = f32;
    #[inline(always)]
    fn identity(self) -> f32 {
        f32::NEG_INFINITY
    }
    #[inline(always)]
    fn add(self, acc: f32, x: f32) -> f32 {
        maximum_f32(acc, x)
    }
    #[inline(always)]
    fn merge(self, a: f32, b: f32) -> f32 {
        maximum_f32(a, b)
    }
    fn finish(self, acc: f32) -> Option<f32> {
        Some(acc)
    }
}

/// Int32 maximum.
#[derive(Clone, Copy)]
struct MaxI32;

impl Reducer for MaxI32 {
    type In = i32;
    type Acc = i32;
    type Out = i32;
    #[inline(always)]
    fn identity(self) -> i32 {
        i32::MIN
    }
    #[inline(always)]
    fn add(self, acc: i32, x: i32) -> i32 {
        acc.max(x)
    }
    #[inline(always)]
    fn merge(self, a: i32, b: i32) -> i32 {
        a.max(b)
    }
    fn finish(self, acc: i32) -> Option<i32> {
        Some(acc)
    }
}

/// Executes `reduce_sum` or `reduce_max`.
///
/// # Errors
/// Value for an operand that is not one two-mode tensor, NotImplemented for a plan these
/// kernels do not compute, Overflow for an Int32 sum outside the range.
pub(super) fn execute(name: &str, fold: Fold, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let x = match invocation.call().operands() {
        [Operand::Tensor(x)] => x,
        operands => {
            return Err(Error::Value(format!(
                "'{name}' takes one tensor operand, the invocation has {} operand(s)",
                operands.len()
            )))
        }
    };
    let plan = invocation.plan();
    let convert = plan.operands().first().map(|o| o.convert_to());
    let f32_ = Some(DType::FLOAT32);
    let i32_ = Some(DType::INT32);
    let accumulator = plan.accumulator_dtype();
    let ordered = plan.accumulation() == Some(Accumulation::SequentialBinary32);
    let floating = matches!(
        plan.accumulation(),
        None | Some(Accumulation::Floating | Accumulation::SequentialBinary32)
    );
    let summing = matches!(plan.accumulation(), None | Some(Accumulation::ExactInteger));
    let maximum = matches!(plan.accumulation(), None | Some(Accumulation::Maximum));
    let exact_ok = |k: usize| k as u64 <= 1 << 32;
    match fold {
        Fold::Sum if convert == f32_ && floating => match accumulator {
            None => reduce(name, invocation, x, SumF32, ordered),
            Some(d) if d == DType::FLOAT32 => reduce(name, invocation, x, SumF32, ordered),
            Some(d) if d == DType::FLOAT64 && !ordered => {
                reduce(name, invocation, x, SumF64, false)
            }
            _ => Err(unsupported(name, invocation)),
        },
        Fold::Sum if convert == i32_ && summing && accumulator.is_none() => {
            if exact_ok(reduced_size(x)) {
                reduce(name, invocation, x, SumI64, false)
            } else {
                reduce(name, invocation, x, SumI128, false)
            }
        }
        Fold::Max if convert == f32_ && maximum => reduce(name, invocation, x, MaxF32, false),
        Fold::Max if convert == i32_ && maximum => reduce(name, invocation, x, MaxI32, false),
        _ => Err(unsupported(name, invocation)),
    }
}

/// The NotImplemented error of a plan these kernels do not compute.
fn unsupported(name: &str, invocation: &ResolvedInvocation) -> Error {
    Error::NotImplemented(format!(
        "the CPU kernel of '{name}' does not execute the plan {}",
        invocation.plan()
    ))
}

/// The size of mode 1 (0 when the tensor has no mode 1; checked later).
fn reduced_size(x: &Tensor) -> usize {
    x.layout().mode_leaves(1).map_or(0, |leaves| {
        leaves.iter().map(|&(extent, _)| extent).product()
    })
}

/// What the accumulation loops read: the input's slots and both modes' walks.
struct Input<'a, T> {
    /// The slots of the input's carrier, of the element type.
    slots: &'a [T],
    /// The input's offset.
    offset: usize,
    /// Mode 0 (the result ordinals), coalesced.
    rows: &'a Walk<1>,
    /// Mode 1 (the reduced ordinals), coalesced.
    cols: &'a Walk<1>,
}

/// Reduces `x` with `r`; `ordered` forces the reference's ascending order.
fn reduce<R: Reducer>(
    name: &str,
    invocation: &ResolvedInvocation,
    x: &Tensor,
    r: R,
    ordered: bool,
) -> Result<Tensor> {
    let spec = result_spec::<R::Out>(name, invocation)?;
    let layout = x.layout();
    if layout.rank() != 2 {
        return Err(Error::Value(format!(
            "'{name}' reduces mode 1 of a two-mode tensor; Layout {layout} has {} modes",
            layout.rank()
        )));
    }
    let (Some(rows), Some(cols)) = (layout.mode_leaves(0), layout.mode_leaves(1)) else {
        return Err(Error::Value(format!(
            "'{name}' reduces mode 1 of a two-mode tensor; Layout {layout} has no mode 1"
        )));
    };
    if let Some(result) = inline_first(name, r, spec, x, [rows, cols], ordered) {
        return result;
    }
    let (rows, cols) = (
        walk_of_leaves(rows.iter().copied())?,
        walk_of_leaves(cols.iter().copied())?,
    );
    let n = rows.size();
    if n != spec.layout().size() {
        return Err(Error::Value(format!(
            "'{name}': mode 0 of Layout {layout} has {n} elements but the result has {}",
            spec.layout().size()
        )));
    }
    if x.dtype() != R::In::DTYPE {
        return Err(Error::NotImplemented(format!(
            "the CPU kernel of '{name}' reduces {} tensors, not {}",
            R::In::DTYPE,
            x.dtype()
        )));
    }
    with_slots(name, x, |slots| {
        let slots = R::In::direct(slots).ok_or_else(|| unsupported(name, invocation))?;
        let input = Input {
            slots,
            offset: x.offset(),
            rows: &rows,
            cols: &cols,
        };
        fresh_result::<R::Out>(spec, |out| drive(name, r, &input, ordered, out))
    })
}

/// Fills `out` with the reductions of every result ordinal, split over threads when large.
fn drive<R: Reducer>(
    name: &str,
    r: R,
    input: &Input<'_, R::In>,
    ordered: bool,
    out: &mut [R::Out],
) -> Result<()> {
    let (n, k) = (input.rows.size(), input.cols.size());
    let (row_extent, [row_stride]) = input.rows.inner();
    let (col_extent, [col_stride]) = input.cols.inner();
    let vertical = is_vertical(ordered, (row_extent, row_stride), (col_extent, col_stride));
    let work = n.saturating_mul(k);
    if n <= TINY_RESULTS
        && work <= TINY_WORK
        && input.rows.leaves().len() <= 1
        && input.cols.leaves().len() <= 1
    {
        return tiny(
            name,
            r,
            (input.slots, input.offset),
            [(n, row_stride), (k, col_stride)],
            vertical,
            out,
        );
    }
    let threads = chunk_count(work);
    if work <= THREADING_THRESHOLD || n >= FEW_RESULTS || ordered || k < 2 {
        // Each result's order does not depend on how the results are cut.
        return for_each_chunk(out, threads, |begin, chunk| {
            results(name, r, input, vertical, begin, chunk)
        });
    }
    // Few results over a long reduced mode: mode 1 is cut into pieces the work's size alone
    // sets, reduced on the threads allowed and merged in piece order.
    let partial = |j_lo: usize, j_hi: usize| -> Result<Vec<R::Acc>> {
        let mut accs = vec![r.identity(); n];
        accumulate(name, r, input, vertical, (0, n), (j_lo, j_hi), &mut accs)?;
        Ok(accs)
    };
    let mut partials = map_pieces(k, pieces(work, k), threads, partial).into_iter();
    let mut accs = partials
        .next()
        .unwrap_or_else(|| Ok(vec![r.identity(); n]))?;
    for piece in partials {
        for (acc, p) in accs.iter_mut().zip(piece?) {
            *acc = r.merge(*acc, p);
        }
    }
    for (i, (o, &acc)) in out.iter_mut().zip(&accs).enumerate() {
        *o = finish(name, r, acc, i)?;
    }
    Ok(())
}

/// The first arm of [`drive`]: a small reduction whose modes are each one run, accumulated on
/// the stack in exactly the order [`accumulate`] takes for it — `vertical`: ascending `j`,
/// then `i`; else each result's run folded alone ([`horizontal_run`], contiguous runs in
/// lanes) — with no accumulator buffer, block set-up or vector-unit dispatch.
///
/// `(xs, offset)` are the input's slots and offset, `[(n, rs), (k, cs)]` the extent and stride
/// of mode 0 (the results) and mode 1 (the reduced ordinals), each a single run.
fn tiny<R: Reducer>(
    name: &str,
    r: R,
    (xs, offset): (&[R::In], usize),
    [(n, rs), (k, cs)]: [(usize, usize); 2],
    vertical: bool,
    out: &mut [R::Out],
) -> Result<()> {
    let mut accs = [r.identity(); TINY_RESULTS];
    let accs = accs.get_mut(..n).unwrap_or_default();
    if n > 0 && k > 0 {
        let reach = (n - 1)
            .checked_mul(rs)
            .zip((k - 1).checked_mul(cs))
            .and_then(|(a, b)| a.checked_add(b)?.checked_add(offset));
        if reach.is_none_or(|top| top >= xs.len()) {
            return Err(Error::Index(format!(
                "'{name}': the input's layout reaches past its slots"
            )));
        }
        if vertical {
            for j in 0..k {
                let column = offset + j * cs;
                for (i, acc) in accs.iter_mut().enumerate() {
                    if let Some(&x) = xs.get(column + i * rs) {
                        *acc = r.add(*acc, x);
                    }
                }
            }
        } else {
            for (i, acc) in accs.iter_mut().enumerate() {
                let row = offset + i * rs;
                let folded = match (cs, xs.get(row..row + k)) {
                    (1, Some(run)) => lane_fold(r, run),
                    _ => horizontal_run(r, xs, row, cs, k),
                };
                *acc = r.merge(*acc, folded);
            }
        }
    }
    for (i, (o, &acc)) in out.iter_mut().zip(accs.iter()).enumerate() {
        *o = finish(name, r, acc, i)?;
    }
    Ok(())
}

/// Whether a reduction with innermost mode-0 leaf `(row_extent, row_stride)` and mode-1 leaf
/// `(col_extent, col_stride)` accumulates in the vertical order (ascending `j`, then `i`):
/// when the reference order is asked for, or mode 0 is the contiguous one.
fn is_vertical(
    ordered: bool,
    (row_extent, row_stride): (usize, usize),
    (col_extent, col_stride): (usize, usize),
) -> bool {
    ordered
        || (row_stride == 1 && row_extent >= 16)
        || (col_stride != 1 && row_extent >= col_extent)
}

/// The first arm of [`reduce`]: a reduction small enough for [`tiny`] whose modes are one
/// leaf each, over CPU slots kept inline, reads the slots once lock-free into the stack
/// ([`Cpu::copy_inline`]) and runs [`tiny`] on them with the strides a walk would give
/// (a unit extent walks with stride 0), so it computes exactly what the general path
/// computes. `None` sends every other case, and every case with an error to report, to the
/// general path.
fn inline_first<R: Reducer>(
    name: &str,
    r: R,
    spec: &ResultSpec,
    x: &Tensor,
    [rows, cols]: [&[(usize, usize)]; 2],
    ordered: bool,
) -> Option<Result<Tensor>> {
    let (&[(n, rs)], &[(k, cs)]) = (rows, cols) else {
        return None;
    };
    let walked = |extent: usize, stride: usize| if extent == 1 { 0 } else { stride };
    let (rs, cs) = (walked(n, rs), walked(k, cs));
    if n > TINY_RESULTS || n.checked_mul(k)? > TINY_WORK || n != spec.layout().size() {
        return None;
    }
    if x.dtype() != R::In::DTYPE {
        return None;
    }
    let cpu = x.carrier().downcast_ref::<Cpu>()?;
    let mut words = [0u32; INLINE_WORDS];
    let slots = cpu.copy_inline(&mut words)?;
    let xs = bytemuck::try_cast_slice::<u32, R::In>(&words)
        .ok()?
        .get(..slots)?;
    let vertical = is_vertical(ordered, (n, rs), (k, cs));
    Some(fresh_result::<R::Out>(spec, |out| {
        tiny(name, r, (xs, x.offset()), [(n, rs), (k, cs)], vertical, out)
    }))
}

/// The result of accumulator `acc` at result ordinal `i` (Overflow when it does not fit).
fn finish<R: Reducer>(name: &str, r: R, acc: R::Acc, i: usize) -> Result<R::Out> {
    r.finish(acc).ok_or_else(|| {
        overflow(
            name,
            format!("the sum over mode 1 at result ordinal {i} is {acc}"),
        )
    })
}

/// Fills `out`, the results of ordinals `begin..begin + out.len()`, block by block.
fn results<R: Reducer>(
    name: &str,
    r: R,
    input: &Input<'_, R::In>,
    vertical: bool,
    begin: usize,
    out: &mut [R::Out],
) -> Result<()> {
    let k = input.cols.size();
    let mut accs = vec![r.identity(); out.len().min(ROWS_BLOCK)];
    for (b, block) in out.chunks_mut(ROWS_BLOCK).enumerate() {
        let lo = begin + b * ROWS_BLOCK;
        let accs = accs.get_mut(..block.len()).unwrap_or_default();
        accs.fill(r.identity());
        accumulate(
            name,
            r,
            input,
            vertical,
            (lo, lo + block.len()),
            (0, k),
            accs,
        )?;
        for (t, (o, &acc)) in block.iter_mut().zip(accs.iter()).enumerate() {
            *o = finish(name, r, acc, lo + t)?;
        }
    }
    Ok(())
}

/// Accumulates `x(i, j)` for `i` in `rows` and `j` in `cols` (ordinal ranges) into
/// `accs[i - rows.0]`.
fn accumulate<R: Reducer>(
    name: &str,
    r: R,
    input: &Input<'_, R::In>,
    vertical: bool,
    (i_lo, i_hi): (usize, usize),
    (j_lo, j_hi): (usize, usize),
    accs: &mut [R::Acc],
) -> Result<()> {
    let xs = input.slots;
    let (_, [rs]) = input.rows.inner();
    let (_, [cs]) = input.cols.inner();
    let out_of_range = || {
        Error::Index(format!(
            "'{name}': the input's layout reaches past its slots"
        ))
    };
    if vertical {
        // Up to COLUMNS columns at a time, each element still in ascending `j`.
        let add_columns = |columns: &[usize], accs: &mut [R::Acc]| -> Result<()> {
            input.rows.runs(i_lo, i_hi, |i, [row], rlen| {
                let accs = accs
                    .get_mut(i - i_lo..i - i_lo + rlen)
                    .ok_or_else(out_of_range)?;
                if columns
                    .iter()
                    .any(|&column| !fits(column + row, rs, rlen, xs.len()))
                {
                    return Err(out_of_range());
                }
                vertical_runs(r, accs, xs, (columns, row), rs);
                Ok(())
            })
        };
        let mut columns = [0; COLUMNS];
        let mut pending = 0;
        input.cols.runs(j_lo, j_hi, |_, [col], len| -> Result<()> {
            for t in 0..len {
                columns[pending] = input.offset + col + t * cs;
                pending += 1;
                if pending == COLUMNS {
                    add_columns(&columns, accs)?;
                    pending = 0;
                }
            }
            Ok(())
        })?;
        add_columns(&columns[..pending], accs)
    } else {
        input.rows.runs(i_lo, i_hi, |i, [row], rlen| {
            for t in 0..rlen {
                let row = input.offset + row + t * rs;
                let acc = accs.get_mut(i - i_lo + t).ok_or_else(out_of_range)?;
                input.cols.runs(j_lo, j_hi, |_, [col], len| {
                    let start = row + col;
                    if !fits(start, cs, len, xs.len()) {
                        return Err(out_of_range());
                    }
                    *acc = r.merge(*acc, horizontal_run(r, xs, start, cs, len));
                    Ok(())
                })?;
            }
            Ok(())
        })
    }
}

/// `accs[t] ⊕= xs[start + t·stride]` for every accumulator (in range, checked by the caller).
fn vertical_run<R: Reducer>(r: R, accs: &mut [R::Acc], xs: &[R::In], start: usize, stride: usize) {
    match stride {
        0 => {
            if let Some(&x) = xs.get(start) {
                accs.iter_mut().for_each(|a| *a = r.add(*a, x));
            }
        }
        1 => {
            if let Some(xs) = xs.get(start..start + accs.len()) {
                pulp::Arch::new().dispatch(Vertical { r, accs, xs });
            }
        }
        _ => {
            let xs = xs.get(start..).unwrap_or_default().iter().step_by(stride);
            for (a, &x) in accs.iter_mut().zip(xs) {
                *a = r.add(*a, x);
            }
        }
    }
}

/// `accs[t] ⊕= xs[c + row + t·stride]` for each column start `c` of `columns` in turn (in
/// range, checked by the caller): per accumulator, the columns in their order.
fn vertical_runs<R: Reducer>(
    r: R,
    accs: &mut [R::Acc],
    xs: &[R::In],
    (columns, row): (&[usize], usize),
    stride: usize,
) {
    if stride == 1 && !columns.is_empty() {
        pulp::Arch::new().dispatch(VerticalColumns {
            r,
            accs,
            xs,
            columns,
            row,
        });
        return;
    }
    for &column in columns {
        vertical_run(r, accs, xs, column + row, stride);
    }
}

/// The contiguous vertical loop over several columns as a [`pulp::WithSimd`] operation: each
/// block of [`REGISTER_ROWS`] accumulators is loaded once, takes every column in order and is
/// stored once, so the accumulators stay in registers while the columns stream over them.
struct VerticalColumns<'a, R: Reducer> {
    /// The reduction.
    r: R,
    /// The accumulators.
    accs: &'a mut [R::Acc],
    /// The input's slots.
    xs: &'a [R::In],
    /// Where each column starts, before `row`.
    columns: &'a [usize],
    /// The slot of the first accumulator's element within a column.
    row: usize,
}

impl<R: Reducer> pulp::WithSimd for VerticalColumns<'_, R> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let r = self.r;
        let mut lo = 0;
        for block in self.accs.chunks_mut(REGISTER_ROWS) {
            let len = block.len();
            if let Ok(block) = <&mut [R::Acc; REGISTER_ROWS]>::try_from(&mut *block) {
                let mut held = *block;
                for &column in self.columns {
                    let start = column + self.row + lo;
                    let run = self.xs.get(start..start + REGISTER_ROWS);
                    if let Some(Ok(run)) = run.map(<&[R::In; REGISTER_ROWS]>::try_from) {
                        for (a, &x) in held.iter_mut().zip(run) {
                            *a = r.add(*a, x);
                        }
                    }
                }
                *block = held;
            } else {
                for &column in self.columns {
                    let start = column + self.row + lo;
                    if let Some(run) = self.xs.get(start..start + len) {
                        for (a, &x) in block.iter_mut().zip(run) {
                            *a = r.add(*a, x);
                        }
                    }
                }
            }
            lo += len;
        }
    }
}

/// The contiguous vertical loop as a [`pulp::WithSimd`] operation (vectorized for the CPU).
struct Vertical<'a, R: Reducer> {
    /// The reduction.
    r: R,
    /// The accumulators.
    accs: &'a mut [R::Acc],
    /// One element per accumulator.
    xs: &'a [R::In],
}

impl<R: Reducer> pulp::WithSimd for Vertical<'_, R> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let r = self.r;
        for (a, &x) in self.accs.iter_mut().zip(self.xs) {
            *a = r.add(*a, x);
        }
    }
}

/// The fold of `xs[start + t·stride]` for `t < len` (in range, checked by the caller).
fn horizontal_run<R: Reducer>(
    r: R,
    xs: &[R::In],
    start: usize,
    stride: usize,
    len: usize,
) -> R::Acc {
    match stride {
        1 => match xs.get(start..start + len) {
            Some(xs) => pulp::Arch::new().dispatch(Horizontal { r, xs }),
            None => r.identity(),
        },
        0 => {
            let x = xs.get(start).copied().unwrap_or_default();
            (0..len).fold(r.identity(), |acc, _| r.add(acc, x))
        }
        _ => xs
            .get(start..)
            .unwrap_or_default()
            .iter()
            .step_by(stride)
            .take(len)
            .fold(r.identity(), |acc, &x| r.add(acc, x)),
    }
}

/// The contiguous horizontal fold in [`LANES`] independent lanes, as a [`pulp::WithSimd`]
/// operation.
struct Horizontal<'a, R: Reducer> {
    /// The reduction.
    r: R,
    /// The elements folded.
    xs: &'a [R::In],
}

impl<R: Reducer> pulp::WithSimd for Horizontal<'_, R> {
    type Output = R::Acc;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> R::Acc {
        lane_fold(self.r, self.xs)
    }
}

/// The fold of contiguous `xs` in [`LANES`] independent lanes (element `t` into lane
/// `t % LANES`), the lanes then merged pairwise: the one order of every contiguous horizontal
/// run, whether or not it runs inside the vector-unit dispatch.
///
/// A run of at most 4 or 8 elements folds in that many lanes: the other lanes would hold the
/// identity, and merging an accumulator with the identity leaves its bits unchanged for every
/// reducer (−0.0 for sums, −∞ for maxima, …), so the narrower fold gives the same bits.
#[inline(always)]
fn lane_fold<R: Reducer>(r: R, xs: &[R::In]) -> R::Acc {
    match xs.len() {
        0..=4 => fold_in_lanes::<R, 4>(r, xs),
        5..=8 => fold_in_lanes::<R, 8>(r, xs),
        _ => fold_in_lanes::<R, LANES>(r, xs),
    }
}

/// [`lane_fold`] in `W` lanes (a power of two).
#[inline(always)]
fn fold_in_lanes<R: Reducer, const W: usize>(r: R, xs: &[R::In]) -> R::Acc {
    let mut lanes = [r.identity(); W];
    let chunks = xs.chunks_exact(W);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = r.add(*lane, x);
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(rest) {
        *lane = r.add(*lane, x);
    }
    let mut width = W;
    while width > 1 {
        width /= 2;
        let (low, high) = lanes.split_at_mut(width);
        for (a, &b) in low.iter_mut().zip(high.iter()) {
            *a = r.merge(*a, b);
        }
    }
    lanes[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every run of at most 8 of `values` (all starting points), folded in 4, 8 and 32 lanes.
    fn assert_narrow_folds_match<R: Reducer>(
        r: R,
        values: &[R::In],
        bits: impl Fn(R::Acc) -> u128,
    ) {
        for start in 0..values.len() {
            for len in 0..=8.min(values.len() - start) {
                let run = &values[start..start + len];
                let wide = bits(fold_in_lanes::<R, LANES>(r, run));
                if len <= 4 {
                    assert_eq!(
                        bits(fold_in_lanes::<R, 4>(r, run)),
                        wide,
                        "4 lanes, {start}+{len}"
                    );
                }
                assert_eq!(
                    bits(fold_in_lanes::<R, 8>(r, run)),
                    wide,
                    "8 lanes, {start}+{len}"
                );
                assert_eq!(bits(lane_fold(r, run)), wide, "lane_fold, {start}+{len}");
            }
        }
    }

    #[test]
    fn short_runs_fold_in_fewer_lanes_to_the_same_bits() {
        let floats = [
            -0.0f32,
            -0.0,
            -0.0,
            -0.0,
            -0.0,
            0.0,
            -0.0,
            f32::NAN,
            1.0e8,
            1.0,
            -1.0e8,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.1,
            -0.0,
            3.5e-40,
            -7.25,
            0.0,
            f32::MAX,
            f32::MAX,
        ];
        let f32_bits = |x: f32| u128::from(x.to_bits());
        assert_narrow_folds_match(SumF32, &floats, f32_bits);
        assert_narrow_folds_match(MaxF32, &floats, f32_bits);
        assert_narrow_folds_match(SumF64, &floats, |x: f64| u128::from(x.to_bits()));
        let ints = [i32::MAX, i32::MIN, -1, 0, 7, i32::MAX, 3, -9, i32::MIN, 0];
        assert_narrow_folds_match(SumI64, &ints, |x: i64| x as u128);
        assert_narrow_folds_match(SumI128, &ints, |x: i128| x as u128);
        assert_narrow_folds_match(MaxI32, &ints, |x: i32| x as u128);
    }

    #[test]
    fn horizontal_folds_match_sequential_sums_on_exact_values() {
        let xs: Vec<f32> = (0..1000).map(|i| (i % 7) as f32).collect();
        let expected: f32 = xs.iter().sum();
        assert_eq!(horizontal_run(SumF32, &xs, 0, 1, xs.len()), expected);
        assert_eq!(
            horizontal_run(SumF64, &xs, 1, 3, 333),
            xs.iter()
                .skip(1)
                .step_by(3)
                .take(333)
                .map(|&x| f64::from(x))
                .sum::<f64>()
        );
        assert_eq!(
            horizontal_run(SumI64, &[i32::MAX, 1, -1], 0, 1, 3),
            i64::from(i32::MAX)
        );
        assert_eq!(horizontal_run(MaxI32, &[3, 9, -2], 0, 0, 5), 3);
        assert!(horizontal_run(MaxF32, &[1.0, f32::NAN, 2.0], 0, 1, 3).is_nan());
    }

    #[test]
    fn vertical_runs_accumulate_each_lane() {
        let mut accs = [SumI64.identity(); 3];
        vertical_run(SumI64, &mut accs, &[1, 2, 3, 4, 5, 6], 0, 2);
        vertical_run(SumI64, &mut accs, &[1, 2, 3, 4, 5, 6], 3, 1);
        vertical_run(SumI64, &mut accs, &[1, 2, 3, 4, 5, 6], 5, 0);
        assert_eq!(accs, [1 + 4 + 6, 3 + 5 + 6, 5 + 6 + 6]);
        assert_eq!(SumI64.finish(i64::from(i32::MAX) + 1), None);
        assert_eq!(SumI128.finish(-5), Some(-5));
        assert_eq!(SumF64.finish(0.1), Some(0.1f32));
    }
}
