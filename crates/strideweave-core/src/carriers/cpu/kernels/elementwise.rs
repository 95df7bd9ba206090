//! Elementwise CPU kernels: the unary and binary built-ins, comparisons included.
//!
//! Every operand is read at the result's ordinals through its layout broadcast to the result
//! shape, jointly coalesced with the result ([`Walk`]), so each kernel loops over long runs:
//! a contiguous operand of the computed type is read in place, a stride-0 operand (or a weak
//! scalar) is one value, anything else (another stride, Int32 read as Float32) is gathered
//! into a small buffer first. An operand read transposed (a large stride along the result's
//! fastest leaf, a small one along the next) is copied in tiles, row by row along its own
//! contiguous direction, so its cache lines are not fetched once per element. The run loops
//! are compiled for the running CPU's vector units ([`pulp`] runtime dispatch) and large
//! results are split over the threads [`crate::parallelism`] allows.
//!
//! Float32 is plain IEEE binary32 arithmetic (no fused multiply-add, no reassociation), so the
//! results equal the Generic reference bit for bit; Int32 `add sub mul elementwise_mul neg
//! abs` compute exactly in i64 and report the first result outside the Int32 range as an
//! Overflow error naming the operation and the operands.

use strideweave_layout::Layout;

use super::parallel::{chunk_count, for_each_chunk};
use super::slots::{with_slots, Compute, Slots, Stored};
use super::strided::{broadcast_strides, fits, Small, Walk};
use super::{fresh_result, overflow, result_spec};
use crate::carriers::cpu::INLINE_WORDS;
use crate::carriers::Cpu;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::operation::builtin::kernel::{Map, MapFn, MapVisitor, Test, TestFn, TestVisitor};
use crate::operation::{Arithmetic, Operand, ResolvedInvocation, ResultSpec};
use crate::tensor::Tensor;

/// Elements gathered per step when an operand cannot be read in place.
pub(super) const BLOCK: usize = 512;

/// Runs shorter than this skip the vector-unit dispatch (its fixed cost would dominate).
pub(super) const DISPATCH_MIN: usize = 16;

/// A per-element operation: the stored result and whether it left the Int32 range.
trait Op<T, O>: Fn(T, T) -> (O, bool) + Copy + Send + Sync {}

impl<T, O, F: Fn(T, T) -> (O, bool) + Copy + Send + Sync> Op<T, O> for F {}

/// Describes the operands of an overflowing element for the error message (`2147483647 +
/// 1`).
type Describe<T> = fn(T, T) -> String;

/// Whether the plan of `invocation` converts every operand to one dtype its arithmetic
/// computes in; that dtype.
fn converted(invocation: &ResolvedInvocation) -> Option<DType> {
    let plan = invocation.plan();
    let mut converts = plan.operands().iter().map(|o| o.convert_to());
    let convert = converts.next().unwrap_or(DType::ANY);
    let consistent = converts.all(|c| c == convert)
        && match plan.compute() {
            Arithmetic::Binary32 => convert == DType::FLOAT32,
            Arithmetic::Int32ExactChecked | Arithmetic::Int32Exact => {
                convert == DType::INT32 || convert == DType::BOOL
            }
        };
    consistent.then_some(convert)
}

/// Executes the elementwise built-in `name` whose result has its operands' computed dtype,
/// computing `function` (its entry's).
///
/// # Errors
/// NotImplemented for a plan the CPU kernels do not compute (operands converting to
/// different dtypes, an arithmetic that does not match them, a dtype `function` does not
/// compute on), Overflow for an Int32 result outside the range, and the carrier's errors.
pub(super) fn map(name: &str, function: MapFn, invocation: &ResolvedInvocation) -> Result<Tensor> {
    function.visit(MapKernel { name, invocation })
}

/// Executes the elementwise comparison `name` computing `function` (its entry's); errors as
/// [`map`]'s.
pub(super) fn test(
    name: &str,
    function: TestFn,
    invocation: &ResolvedInvocation,
) -> Result<Tensor> {
    function.visit(TestKernel { name, invocation })
}

/// The kernel of one [`Map`] function, compiled for it.
struct MapKernel<'a> {
    name: &'a str,
    invocation: &'a ResolvedInvocation,
}

impl MapVisitor for MapKernel<'_> {
    type Output = Result<Tensor>;

    #[inline(always)]
    fn visit<F: Map>(self) -> Result<Tensor> {
        let MapKernel { name, invocation } = self;
        let convert = converted(invocation);
        if convert == Some(DType::FLOAT32) {
            let op = |a: f32, b: f32| (F::float32(a, b), false);
            if F::OPERANDS == 1 {
                unary::<f32, f32>(name, invocation, move |a| op(a, 0.0), describe_none)
            } else {
                binary::<f32, f32>(name, invocation, op, describe_none)
            }
        } else if convert == Some(DType::INT32) && F::INT32 {
            if F::OPERANDS == 1 {
                unary::<i32, i32>(name, invocation, |a| F::int32(a, 0), F::describe)
            } else {
                binary::<i32, i32>(name, invocation, F::int32, F::describe)
            }
        } else {
            Err(unsupported(name, invocation))
        }
    }
}

/// The kernel of one [`Test`] function, compiled for it: the Bool result stored as 0/1
/// bytes.
struct TestKernel<'a> {
    name: &'a str,
    invocation: &'a ResolvedInvocation,
}

impl TestVisitor for TestKernel<'_> {
    type Output = Result<Tensor>;

    #[inline(always)]
    fn visit<F: Test>(self) -> Result<Tensor> {
        let TestKernel { name, invocation } = self;
        let convert = converted(invocation);
        if convert == Some(DType::FLOAT32) {
            let op = |a, b| (u8::from(F::float32(a, b)), false);
            binary::<f32, u8>(name, invocation, op, describe_none)
        } else if convert == Some(DType::INT32) {
            let op = |a, b| (u8::from(F::int32(a, b)), false);
            binary::<i32, u8>(name, invocation, op, describe_none)
        } else if convert == Some(DType::BOOL) && F::BOOL {
            let op = |a: u8, b: u8| (u8::from(F::bool(a != 0, b != 0)), false);
            binary::<u8, u8>(name, invocation, op, describe_none)
        } else {
            Err(unsupported(name, invocation))
        }
    }
}

/// The NotImplemented error of a plan these kernels do not compute.
pub(super) fn unsupported(name: &str, invocation: &ResolvedInvocation) -> Error {
    Error::NotImplemented(format!(
        "the CPU kernel of '{name}' does not execute the plan {}",
        invocation.plan()
    ))
}

/// The description of operations that cannot overflow (never called).
fn describe_none<T>(_: T, _: T) -> String {
    String::new()
}

/// One operand as the kernels read it.
#[derive(Clone, Copy)]
pub(super) enum Side<'a, T> {
    /// A weak scalar, converted once (also the absent second operand of a unary op).
    Scalar(T),
    /// A tensor's slots, read from `offset` on.
    Tensor {
        /// The carrier's slots.
        slots: Slots<'a>,
        /// The tensor's offset.
        offset: usize,
    },
}

/// The values of one operand over one run.
#[derive(Clone, Copy)]
pub(super) enum Run<'a, T> {
    /// One value for every element.
    Scalar(T),
    /// One value per element.
    Slice(&'a [T]),
}

impl<T: Copy> Run<'_, T> {
    /// The value of element `t` (`t` within the run).
    fn at(self, t: usize) -> Option<T> {
        match self {
            Run::Scalar(x) => Some(x),
            Run::Slice(s) => s.get(t).copied(),
        }
    }
}

impl<'a, T: Compute> Side<'a, T> {
    /// Whether reading `len > 1` elements at `stride` needs a gather into a buffer.
    pub(super) fn gathers(self, stride: usize) -> bool {
        match self {
            Side::Scalar(_) => false,
            Side::Tensor { slots, .. } => {
                stride != 0 && (stride != 1 || T::direct(slots).is_none())
            }
        }
    }

    /// The values at `base + t·stride` (relative to the offset) for `t < len`: in place,
    /// one value, or gathered into `buffer` (at least `len` long).
    pub(super) fn run<'b>(
        self,
        base: usize,
        stride: usize,
        len: usize,
        buffer: &'b mut [T],
    ) -> Option<Run<'b, T>>
    where
        'a: 'b,
    {
        let (slots, offset) = match self {
            Side::Scalar(x) => return Some(Run::Scalar(x)),
            Side::Tensor { slots, offset } => (slots, offset),
        };
        let start = offset.checked_add(base)?;
        if !super::strided::fits(start, stride, len, slots.len()) {
            return None;
        }
        if stride == 0 {
            return Some(Run::Scalar(T::load(slots, start)));
        }
        if let (1, Some(direct)) = (stride, T::direct(slots)) {
            return direct.get(start..start + len).map(Run::Slice);
        }
        let buffer = buffer.get_mut(..len)?;
        T::gather(slots, start, stride, buffer);
        Some(Run::Slice(buffer))
    }
}

/// The unary operation `op` on the single tensor operand.
fn unary<T: Compute, O: Stored>(
    name: &str,
    invocation: &ResolvedInvocation,
    op: impl Fn(T) -> (O, bool) + Copy + Send + Sync,
    describe: Describe<T>,
) -> Result<Tensor> {
    let [x] = operands::<1>(name, invocation)?;
    let spec = result_spec::<O>(name, invocation)?;
    if let Some(result) = tiny(name, spec, [Some(x), None], move |a, _| op(a)) {
        return Ok(result);
    }
    let unit = Operand::Scalar(crate::dtype::Value::Bool(false));
    let walk = walk(spec.layout(), [x, &unit])?;
    with_side::<T, _>(name, x, |a| {
        fresh_result::<O>(spec, |out| {
            drive(
                name,
                &walk,
                a,
                Side::Scalar(T::default()),
                out,
                move |a, _| op(a),
                describe,
            )
        })
    })
}

/// The binary operation `op` on two operands (tensors or a tensor and a weak scalar).
fn binary<T: Compute, O: Stored>(
    name: &str,
    invocation: &ResolvedInvocation,
    op: impl Op<T, O>,
    describe: Describe<T>,
) -> Result<Tensor> {
    let [lhs, rhs] = operands::<2>(name, invocation)?;
    let spec = result_spec::<O>(name, invocation)?;
    if let Some(result) = tiny(name, spec, [Some(lhs), Some(rhs)], op) {
        return Ok(result);
    }
    let walk = walk(spec.layout(), [lhs, rhs])?;
    with_side::<T, _>(name, lhs, |a| {
        with_side::<T, _>(name, rhs, |b| {
            fresh_result::<O>(spec, |out| drive(name, &walk, a, b, out, op, describe))
        })
    })
}

/// The first arm of every elementwise kernel: a result that fits a carrier's inline slots,
/// whose tensor operands keep their slots inline and are laid out exactly like it (or hold a
/// single value), computed on copies on the stack: no walk, lock or buffer. The absent
/// second operand of a unary operation is `None`.
///
/// It decides nothing: `None` (a heap or released operand, another layout, a conversion, a
/// scalar that does not convert, an Int32 overflow) hands the call to the general loop,
/// which computes the same values and reports every error.
#[inline]
fn tiny<T: Compute, O: Stored>(
    name: &str,
    spec: &ResultSpec,
    [lhs, rhs]: [Option<&Operand>; 2],
    op: impl Op<T, O>,
) -> Option<Tensor> {
    let layout = spec.layout();
    let len = layout.size();
    if len > O::INLINE {
        return None;
    }
    // The operands' copied slots and the result, as words viewed as their element type.
    let mut words = [[0u32; INLINE_WORDS]; 3];
    let [wa, wb, out] = &mut words;
    let a = tiny_run(name, lhs, layout, wa)?;
    let b = tiny_run(name, rhs, layout, wb)?;
    let values = bytemuck::cast_slice_mut::<u32, O>(out).get_mut(..len)?;
    if apply_loop(a, b, values, op) {
        return None;
    }
    Some(Tensor::fresh(
        O::inline(values),
        spec.shared_layout().clone(),
    ))
}

/// One operand of [`tiny`] over the `layout.size()` result elements: a weak scalar (the
/// default for an absent operand), the single value of a one-element tensor, or the inline
/// slots of a tensor laid out as `layout` and stored as `T`, copied into `words`.
#[inline(always)]
fn tiny_run<'b, T: Compute>(
    name: &str,
    operand: Option<&Operand>,
    layout: &Layout,
    words: &'b mut [u32; INLINE_WORDS],
) -> Option<Run<'b, T>> {
    let tensor = match operand {
        None => return Some(Run::Scalar(T::default())),
        Some(Operand::Scalar(value)) => return T::from_value(name, *value).ok().map(Run::Scalar),
        Some(Operand::Tensor(tensor)) => tensor,
    };
    let single = tensor.size() == 1;
    if tensor.dtype() != T::DTYPE
        || (!single && !std::ptr::eq(tensor.layout(), layout) && tensor.layout() != layout)
    {
        return None;
    }
    let count = tensor.carrier().downcast_ref::<Cpu>()?.copy_inline(words)?;
    let slots = bytemuck::cast_slice::<u32, T>(words).get(..count)?;
    let start = tensor.offset();
    if single {
        slots.get(start).copied().map(Run::Scalar)
    } else {
        slots.get(start..start + layout.size()).map(Run::Slice)
    }
}

/// The call's operands, exactly `N` of them (a Value error otherwise).
pub(super) fn operands<'a, const N: usize>(
    name: &str,
    invocation: &'a ResolvedInvocation,
) -> Result<&'a [Operand; N]> {
    let operands = invocation.call().operands();
    <&[Operand; N]>::try_from(operands).map_err(|_| {
        Error::Value(format!(
            "'{name}' takes {N} operand(s), the invocation has {}",
            operands.len()
        ))
    })
}

/// The walk of the result's ordinals over both operands: one flat run when every operand
/// is dense like the result or a single value, else jointly coalesced strides.
fn walk(result: &Layout, operands: [&Operand; 2]) -> Result<Walk<2>> {
    let flat = |operand: &Operand| match operand {
        Operand::Scalar(_) => Some(0),
        Operand::Tensor(t) if t.size() == 1 => Some(0),
        Operand::Tensor(t) if t.layout() == result => Some(1),
        Operand::Tensor(_) => None,
    };
    if let (Some(a), Some(b)) = (flat(operands[0]), flat(operands[1])) {
        return Ok(Walk::flat(result.size(), [a, b]));
    }
    let extents = result.shape().leaves();
    let (a, b) = (
        side_strides(operands[0], extents)?,
        side_strides(operands[1], extents)?,
    );
    Walk::new(extents, [a.as_slice(), b.as_slice()])
}

/// The strides an operand reads at the result's leaves (all 0 for a weak scalar).
pub(super) fn side_strides(operand: &Operand, extents: &[usize]) -> Result<Small<usize>> {
    match operand {
        Operand::Tensor(t) => broadcast_strides(t.layout(), extents),
        Operand::Scalar(_) => Ok(Small::filled(0, extents.len())),
    }
}

/// Runs `f` on `operand` as a [`Side`]: a weak scalar converted once, or a tensor's slots
/// under its carrier's read lock.
pub(super) fn with_side<T: Compute, R>(
    name: &str,
    operand: &Operand,
    f: impl FnOnce(Side<'_, T>) -> Result<R>,
) -> Result<R> {
    match operand {
        Operand::Scalar(value) => f(Side::Scalar(T::from_value(name, *value)?)),
        Operand::Tensor(t) => {
            if !T::reads(t.dtype()) {
                return Err(Error::NotImplemented(format!(
                    "the CPU kernel of '{name}' does not convert {} tensors to {}",
                    t.dtype(),
                    T::DTYPE
                )));
            }
            with_slots(name, t, |slots| {
                f(Side::Tensor {
                    slots,
                    offset: t.offset(),
                })
            })
        }
    }
}

/// Fills `out` (the result, in ordinal order) with `op(a, b)`, split over threads when large.
fn drive<T: Compute, O: Stored>(
    name: &str,
    walk: &Walk<2>,
    a: Side<'_, T>,
    b: Side<'_, T>,
    out: &mut [O],
    op: impl Op<T, O>,
    describe: Describe<T>,
) -> Result<()> {
    if walk.size() != out.len() {
        return Err(Error::Value(format!(
            "'{name}': the operands cover {} elements but the result has {}",
            walk.size(),
            out.len()
        )));
    }
    let chunks = chunk_count(out.len());
    if chunks == 1 {
        if let [(len, strides)] = walk.leaves() {
            if *len == out.len() && !a.gathers(strides[0]) && !b.gathers(strides[1]) {
                // One run read in place (or as single values): what `part` does with it,
                // without setting up gather buffers and tiles.
                let (Some(ra), Some(rb)) = (
                    a.run(0, strides[0], *len, &mut []),
                    b.run(0, strides[1], *len, &mut []),
                ) else {
                    return Err(out_of_range(name));
                };
                if apply(ra, rb, out, op) {
                    return Err(first_overflow(name, ra, rb, out.len(), op, describe));
                }
                return Ok(());
            }
        }
        return part(name, walk, a, b, 0, out, op, describe);
    }
    for_each_chunk(out, chunks, |begin, chunk| {
        part(name, walk, a, b, begin, chunk, op, describe)
    })
}

/// Fills `out`, the result ordinals `begin..begin + out.len()`, run by run (in tiles when an
/// operand is read transposed).
#[allow(clippy::too_many_arguments)]
fn part<T: Compute, O: Stored>(
    name: &str,
    walk: &Walk<2>,
    a: Side<'_, T>,
    b: Side<'_, T>,
    begin: usize,
    out: &mut [O],
    op: impl Op<T, O>,
    describe: Describe<T>,
) -> Result<()> {
    let (_, strides) = walk.inner();
    let across = transposing(walk, a, b);
    let chunked = a.gathers(strides[0]) || b.gathers(strides[1]);
    // Buffers only when some operand is gathered (a tiny op allocates nothing).
    let buffer_len = if chunked { BLOCK } else { 0 };
    let mut buffers = [
        vec![T::default(); buffer_len],
        vec![T::default(); buffer_len],
    ];
    let tile_len = |k: usize| if across[k] { TILE_ROWS * TILE_COLS } else { 0 };
    let mut tiles = [
        vec![T::default(); tile_len(0)],
        vec![T::default(); tile_len(1)],
    ];
    let end = begin + out.len();
    // Fills the rows `row..row + len` of the runs (ordinal, bases) in `columns`; a side read
    // `across` the runs is first copied, row by row, into its tile buffer.
    let mut visit = |columns: &[(usize, [usize; 2])], row: usize, len: usize, across: [bool; 2]| {
        for (k, side) in [a, b].into_iter().enumerate() {
            if across[k] {
                fill_tile(side, k, columns, (row, len), strides[k], &mut tiles[k])
                    .ok_or_else(|| out_of_range(name))?;
            }
        }
        for (c, &(ordinal, bases)) in columns.iter().enumerate() {
            let start = ordinal + row - begin;
            let out = out
                .get_mut(start..start + len)
                .ok_or_else(|| out_of_range(name))?;
            let step = if chunked { BLOCK } else { len.max(1) };
            for (n, chunk) in out.chunks_mut(step).enumerate() {
                let done = row + n * step;
                let [ta, tb] = &tiles;
                let [ba, bb] = &mut buffers;
                let ra = side_run(
                    a,
                    across[0],
                    ta,
                    c,
                    bases[0],
                    done,
                    strides[0],
                    chunk.len(),
                    ba,
                );
                let rb = side_run(
                    b,
                    across[1],
                    tb,
                    c,
                    bases[1],
                    done,
                    strides[1],
                    chunk.len(),
                    bb,
                );
                let (Some(ra), Some(rb)) = (ra, rb) else {
                    return Err(out_of_range(name));
                };
                if apply(ra, rb, chunk, op) {
                    return Err(first_overflow(name, ra, rb, chunk.len(), op, describe));
                }
            }
        }
        Ok(())
    };
    if across != [false, false] {
        match tiled(walk, begin, end, across, &mut visit) {
            // Tiles run out of ordinal order: find the first overflow in order below.
            Err(error) if error.kind() == ErrorKind::Overflow => {}
            done => return done,
        }
    }
    walk.runs(begin, end, |ordinal, bases, len| {
        visit(&[(ordinal, bases)], 0, len, [false, false])
    })
}

/// The values of one side over `len` elements from row `row` of run `column`: from its tile
/// when the side is read across the runs, else read (or gathered) from its slots.
#[allow(clippy::too_many_arguments)]
fn side_run<'b, T: Compute>(
    side: Side<'b, T>,
    across: bool,
    tile: &'b [T],
    column: usize,
    base: usize,
    row: usize,
    stride: usize,
    len: usize,
    buffer: &'b mut [T],
) -> Option<Run<'b, T>> {
    if across {
        let start = column * TILE_ROWS;
        return tile.get(start..start + len).map(Run::Slice);
    }
    side.run(base + row * stride, stride, len, buffer)
}

/// Rows (ordinals along the first leaf) per tile of [`tiled`].
const TILE_ROWS: usize = 128;

/// Runs of the first leaf per tile of [`tiled`].
const TILE_COLS: usize = 64;

/// Which operands read the first leaf at a large stride but the second one closer together
/// (a transposed view): whole runs would touch a new cache line per element of such an
/// operand, so [`tiled`] visits the result in tiles and copies its tiles row by row.
fn transposing<T: Compute>(walk: &Walk<2>, a: Side<'_, T>, b: Side<'_, T>) -> [bool; 2] {
    let [(rows, first), (_, second), ..] = walk.leaves() else {
        return [false, false];
    };
    let across = |side: Side<'_, T>, k: usize| {
        *rows >= TILE_ROWS
            && matches!(side, Side::Tensor { .. })
            && first[k] > 1
            && second[k] < first[k]
    };
    [across(a, 0), across(b, 1)]
}

/// Visits the ordinals `begin..end` like [`Walk::runs`], but whole runs of the first leaf
/// go in tiles of [`TILE_COLS`] runs by [`TILE_ROWS`] rows: `visit(columns, row, len,
/// across)` fills rows `row..row + len` of each `(ordinal, bases)` run in `columns`. Partial
/// runs at either end are visited whole, as single-run tiles read in place.
fn tiled(
    walk: &Walk<2>,
    begin: usize,
    end: usize,
    across: [bool; 2],
    visit: &mut impl FnMut(&[(usize, [usize; 2])], usize, usize, [bool; 2]) -> Result<()>,
) -> Result<()> {
    let plain = [false, false];
    let (rows, _) = walk.inner();
    let head_end = begin.div_ceil(rows).saturating_mul(rows).min(end);
    walk.runs(begin, head_end, |o, bases, len| {
        visit(&[(o, bases)], 0, len, plain)
    })?;
    let body_end = (end / rows * rows).max(head_end);
    let mut column = head_end;
    while column < body_end {
        let group_end = column.saturating_add(TILE_COLS * rows).min(body_end);
        let mut columns = [(0usize, [0usize; 2]); TILE_COLS];
        let mut count = 0;
        walk.runs(column, group_end, |ordinal, bases, _| {
            let slot = columns
                .get_mut(count)
                .ok_or_else(|| Error::Value("a tile holds too many runs".into()))?;
            *slot = (ordinal, bases);
            count += 1;
            Ok::<(), Error>(())
        })?;
        let columns = columns.get(..count).unwrap_or_default();
        for row in (0..rows).step_by(TILE_ROWS) {
            visit(columns, row, TILE_ROWS.min(rows - row), across)?;
        }
        column = group_end;
    }
    walk.runs(body_end, end, |o, bases, len| {
        visit(&[(o, bases)], 0, len, plain)
    })
}

/// Copies rows `row..row + len` of every run in `columns` of operand `k` (read at `stride`
/// along the runs) into `tile`, run `c` at `c · TILE_ROWS`: the reads go row by row, across
/// the runs, which is along the operand's own contiguous direction. `None` when a slot is
/// out of range.
fn fill_tile<T: Compute>(
    side: Side<'_, T>,
    k: usize,
    columns: &[(usize, [usize; 2])],
    (row, len): (usize, usize),
    stride: usize,
    tile: &mut [T],
) -> Option<()> {
    let Side::Tensor { slots, offset } = side else {
        return Some(());
    };
    if columns.len() > TILE_COLS || columns.len() * TILE_ROWS > tile.len() || len > TILE_ROWS {
        return None;
    }
    let mut starts = [0usize; TILE_COLS];
    for (start, &(_, bases)) in starts.iter_mut().zip(columns) {
        *start = offset
            .checked_add(bases[k])?
            .checked_add(row.checked_mul(stride)?)?;
        if !fits(*start, stride, len, slots.len()) {
            return None;
        }
    }
    let starts = starts.get(..columns.len())?;
    match T::direct(slots) {
        Some(values) => {
            for r in 0..len {
                let shift = r * stride;
                for (c, &start) in starts.iter().enumerate() {
                    let x = values.get(start + shift);
                    if let (Some(slot), Some(&x)) = (tile.get_mut(c * TILE_ROWS + r), x) {
                        *slot = x;
                    }
                }
            }
        }
        None => {
            for r in 0..len {
                for (c, &start) in starts.iter().enumerate() {
                    if let Some(slot) = tile.get_mut(c * TILE_ROWS + r) {
                        *slot = T::load(slots, start + r * stride);
                    }
                }
            }
        }
    }
    Some(())
}

/// The Index error of an operand whose slots do not cover its layout (ruled out upfront).
pub(super) fn out_of_range(name: &str) -> Error {
    Error::Index(format!(
        "'{name}': an operand's layout reaches past its slots"
    ))
}

/// The Overflow error naming the first overflowing element of a run.
fn first_overflow<T: Copy, O>(
    name: &str,
    a: Run<'_, T>,
    b: Run<'_, T>,
    len: usize,
    op: impl Op<T, O>,
    describe: Describe<T>,
) -> Error {
    for t in 0..len {
        if let (Some(x), Some(y)) = (a.at(t), b.at(t)) {
            if op(x, y).1 {
                return overflow(name, describe(x, y));
            }
        }
    }
    overflow(name, "a result left the Int32 range")
}

/// `out[t] = op(a[t], b[t])` over one run; whether any element overflowed. Long runs run
/// compiled for the best vector extension the CPU has.
#[inline]
fn apply<T: Copy, O: Copy>(a: Run<'_, T>, b: Run<'_, T>, out: &mut [O], op: impl Op<T, O>) -> bool {
    if out.len() < DISPATCH_MIN {
        return apply_loop(a, b, out, op);
    }
    pulp::Arch::new().dispatch(Apply { a, b, out, op })
}

/// [`apply_loop`] as a [`pulp::WithSimd`] operation, so that it is compiled (inlined) inside
/// pulp's target-feature functions.
struct Apply<'a, T, O, F> {
    /// The first operand's values.
    a: Run<'a, T>,
    /// The second operand's values.
    b: Run<'a, T>,
    /// The result run.
    out: &'a mut [O],
    /// The element operation.
    op: F,
}

impl<T: Copy, O: Copy, F: Op<T, O>> pulp::WithSimd for Apply<'_, T, O, F> {
    type Output = bool;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> bool {
        apply_loop(self.a, self.b, self.out, self.op)
    }
}

/// The plain loops the compiler vectorizes: one per combination of in-place and single
/// values.
#[inline(always)]
fn apply_loop<T: Copy, O: Copy>(
    a: Run<'_, T>,
    b: Run<'_, T>,
    out: &mut [O],
    op: impl Op<T, O>,
) -> bool {
    let mut overflowed = false;
    match (a, b) {
        (Run::Slice(a), Run::Slice(b)) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                let (r, v) = op(x, y);
                *o = r;
                overflowed |= v;
            }
        }
        (Run::Slice(a), Run::Scalar(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                let (r, v) = op(x, y);
                *o = r;
                overflowed |= v;
            }
        }
        (Run::Scalar(x), Run::Slice(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                let (r, v) = op(x, y);
                *o = r;
                overflowed |= v;
            }
        }
        (Run::Scalar(x), Run::Scalar(y)) => {
            let (r, v) = op(x, y);
            out.fill(r);
            overflowed = v && !out.is_empty();
        }
    }
    overflowed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::builtin::kernel::narrow;

    #[test]
    fn run_loops_cover_every_combination() {
        let add = |a: i32, b: i32| narrow(i64::from(a) + i64::from(b));
        let mut out = [0; 3];
        assert!(!apply(
            Run::Slice(&[1, 2, 3]),
            Run::Scalar(10),
            &mut out,
            add
        ));
        assert_eq!(out, [11, 12, 13]);
        assert!(!apply(
            Run::Scalar(1),
            Run::Slice(&[1, 2, 3]),
            &mut out,
            add
        ));
        assert_eq!(out, [2, 3, 4]);
        assert!(apply(Run::Scalar(i32::MAX), Run::Scalar(1), &mut out, add));
        let long: Vec<i32> = (0..100).collect();
        let mut wide = vec![0; 100];
        assert!(!apply(Run::Slice(&long), Run::Slice(&long), &mut wide, add));
        assert_eq!(wide[99], 198);
        let error = first_overflow(
            "add",
            Run::Slice(&[0, i32::MAX]),
            Run::Scalar(1),
            2,
            add,
            |a, b| format!("{a} + {b}"),
        );
        assert!(error.to_string().contains("2147483647 + 1"), "{error}");
    }
}
