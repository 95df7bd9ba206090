//! The `matmul` CPU kernel: `(N,K)·(M,K) → (N,M)`, `out(i, j) = Σ_k lhs(i, k) · rhs(j, k)`.
//!
//! Float32 runs on `faer`'s GEMM: the result is a column-major `N×M` matrix, `lhs` an `N×K`
//! matrix and `rhs` an `M×K` matrix used transposed, each read in place through its own row
//! and column strides whenever each of its modes coalesces to one (extent, stride) leaf — so
//! a permuted (transposed) or broadcast operand costs no copy. Other operands (nested modes
//! that do not coalesce, Int32 read as Float32) are packed column-major first. Small products
//! run on the calling thread (`Par::Seq`), large ones on as many threads as
//! [`crate::parallelism`] allows and the product's size justifies (`Par::rayon(t)`).
//!
//! A Float64 accumulator packs both operands in binary64 (every Float32 product is exact
//! there), multiplies in binary64 and rounds each result once. Int32 multiplies exactly:
//! i64 products summed in i128, each result narrowed with an Overflow check.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use super::parallel::{allowed, spread};
use super::slots::{with_slots, Compute, Slots, Stored};
use super::strided::{fits, walk_of};
use super::{fresh_result, overflow, result_spec};
use crate::carriers::cpu::{INLINE_F32, INLINE_WORDS};
use crate::carriers::Cpu;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::{Accumulation, Operand, ResolvedInvocation};
use crate::tensor::Tensor;

/// Products with fewer multiply-adds than this (64³) run on one thread; larger ones use a
/// thread per `PARALLEL_WORK / 2` multiply-adds, up to the setting (so 64³ uses two).
const PARALLEL_WORK: usize = 64 * 64 * 64;

/// One two-mode operand: its tensor and the leaves of its kept (mode 0) and contracted
/// (mode 1) modes.
struct Matrix<'a> {
    /// The operand.
    tensor: &'a Tensor,
    /// Mode 0, the kept rows, as `(extent, stride)` leaves.
    rows: &'a [(usize, usize)],
    /// Mode 1, the contracted columns, as `(extent, stride)` leaves.
    cols: &'a [(usize, usize)],
}

impl<'a> Matrix<'a> {
    /// `tensor` split into its two modes (a Value error unless it has exactly two).
    fn new(name: &str, tensor: &'a Tensor, side: &str) -> Result<Matrix<'a>> {
        let layout = tensor.layout();
        let modes = (layout.rank() == 2)
            .then(|| layout.mode_leaves(0).zip(layout.mode_leaves(1)))
            .flatten();
        let Some((rows, cols)) = modes else {
            return Err(Error::Value(format!(
                "'{name}' contracts two-mode tensors; {side} Layout {layout} has {} modes",
                layout.rank()
            )));
        };
        Ok(Matrix { tensor, rows, cols })
    }

    /// The row and column strides when both modes coalesce to a single leaf.
    fn strides(&self) -> Option<(usize, usize)> {
        Some((single_stride(self.rows)?, single_stride(self.cols)?))
    }
}

/// The number of elements of a mode given by its leaves.
fn mode_size(leaves: &[(usize, usize)]) -> usize {
    leaves.iter().map(|&(extent, _)| extent).product()
}

/// The stride of a mode whose leaves coalesce to one (0 for a mode of one element): every
/// leaf past the first of extent above 1 continues the previous one.
fn single_stride(leaves: &[(usize, usize)]) -> Option<usize> {
    let mut kept = leaves.iter().filter(|&&(extent, _)| extent != 1);
    let Some(&(mut extent, stride)) = kept.next() else {
        return Some(0);
    };
    for &(e, s) in kept {
        if Some(s) != extent.checked_mul(stride) {
            return None;
        }
        extent = extent.checked_mul(e)?;
    }
    Some(stride)
}

/// Executes `matmul`.
///
/// # Errors
/// Value for operands that are not two two-mode tensors with equal contracted sizes,
/// NotImplemented for a plan these kernels do not compute, Overflow for an Int32 result
/// outside the range, Memory when a packed copy cannot be allocated.
pub(super) fn execute(name: &str, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let (lhs, rhs) = match invocation.call().operands() {
        [Operand::Tensor(lhs), Operand::Tensor(rhs)] => (lhs, rhs),
        _ => return Err(Error::Value(format!("'{name}' takes two tensor operands"))),
    };
    let (lhs, rhs) = (
        Matrix::new(name, lhs, "lhs")?,
        Matrix::new(name, rhs, "rhs")?,
    );
    let (n, m, k) = (
        mode_size(lhs.rows),
        mode_size(rhs.rows),
        mode_size(lhs.cols),
    );
    if mode_size(rhs.cols) != k {
        return Err(Error::Value(format!(
            "'{name}' contracts mode 1 of both operands: (N,K)·(M,K); lhs has K = {k} but rhs has K = {}",
            mode_size(rhs.cols)
        )));
    }
    let plan = invocation.plan();
    let converts: [DType; 2] = match plan.operands() {
        [a, b] => [a.convert_to(), b.convert_to()],
        _ => return Err(unsupported(name, invocation)),
    };
    let accumulation = plan.accumulation();
    let floating = matches!(accumulation, None | Some(Accumulation::Floating));
    let exact = matches!(accumulation, None | Some(Accumulation::ExactInteger));
    let shape = Shape3 { n, m, k };
    let reads = |read: fn(DType) -> bool| read(lhs.tensor.dtype()) && read(rhs.tensor.dtype());
    match (converts, plan.accumulator_dtype()) {
        ([a, b], acc)
            if a == DType::FLOAT32 && b == DType::FLOAT32 && floating && reads(f32::reads) =>
        {
            let spec = result_spec::<f32>(name, invocation)?;
            shape.check(name, spec.layout().size())?;
            match acc {
                None => float32(name, spec, &lhs, &rhs, shape),
                Some(d) if d == DType::FLOAT32 => float32(name, spec, &lhs, &rhs, shape),
                Some(d) if d == DType::FLOAT64 => float64(name, spec, &lhs, &rhs, shape),
                Some(_) => Err(unsupported(name, invocation)),
            }
        }
        ([a, b], None) if a == DType::INT32 && b == DType::INT32 && exact && reads(i32::reads) => {
            let spec = result_spec::<i32>(name, invocation)?;
            shape.check(name, spec.layout().size())?;
            int32(name, spec, &lhs, &rhs, shape)
        }
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

/// The extents of a product.
#[derive(Clone, Copy)]
struct Shape3 {
    /// Rows of the result (lhs mode 0).
    n: usize,
    /// Columns of the result (rhs mode 0).
    m: usize,
    /// The contracted extent.
    k: usize,
}

impl Shape3 {
    /// Checks that an `N×M` product fills a result of `size` elements.
    fn check(self, name: &str, size: usize) -> Result<()> {
        if self.n > 0 && self.m > 0 && self.k > 0 && self.n.checked_mul(self.m) == Some(size) {
            return Ok(());
        }
        Err(Error::Value(format!(
            "'{name}': an ({},{}) product does not fill a result of {size} elements",
            self.n, self.m
        )))
    }

    /// faer's parallelism for this product: sequential below [`PARALLEL_WORK`] (the setting
    /// is not even read), else `min(threads allowed, work / (PARALLEL_WORK / 2))` threads.
    fn par(self) -> Par {
        let work = self.n.saturating_mul(self.m).saturating_mul(self.k);
        if work < PARALLEL_WORK {
            return Par::Seq;
        }
        match spread(work, PARALLEL_WORK / 2, allowed()) {
            1 => Par::Seq,
            threads => Par::rayon(threads),
        }
    }
}

/// An empty vector with room for `len` elements, or a Memory error.
fn buffer<T>(name: &str, len: usize) -> Result<Vec<T>> {
    crate::limits::reserve(len, || format!("a packed operand of '{name}'"))
}

/// The tensor's elements converted to `T`, in its ordinal order (column-major for a
/// two-mode tensor).
fn pack<T: Compute>(name: &str, slots: Slots<'_>, tensor: &Tensor) -> Result<Vec<T>> {
    let walk = walk_of(tensor.layout())?;
    let size = walk.size();
    let mut packed = buffer::<T>(name, size)?;
    packed.resize(size, T::default());
    let (_, [stride]) = walk.inner();
    walk.runs(0, size, |ordinal, [base], len| {
        let start = tensor.offset() + base;
        let out = packed.get_mut(ordinal..ordinal + len);
        match out {
            Some(out) if fits(start, stride, len, slots.len()) => {
                T::gather(slots, start, stride, out);
                Ok(())
            }
            _ => Err(Error::Index(format!(
                "'{name}': an operand's layout reaches past its slots"
            ))),
        }
    })?;
    Ok(packed)
}

/// A Float32 operand as faer reads it.
enum Operand32<'a> {
    /// In place: the slots, the first element's slot, the row and column strides.
    View(&'a [f32], usize, usize, usize),
    /// A packed column-major copy.
    Packed(Vec<f32>),
}

impl Operand32<'_> {
    /// The operand of `matrix` over its `slots`: in place when possible, else packed.
    fn new<'s>(name: &str, matrix: &Matrix<'_>, slots: Slots<'s>) -> Result<Operand32<'s>> {
        match (matrix.strides(), slots) {
            (Some((rows, cols)), Slots::F32(values)) => {
                Ok(Operand32::View(values, matrix.tensor.offset(), rows, cols))
            }
            _ => Ok(Operand32::Packed(pack::<f32>(name, slots, matrix.tensor)?)),
        }
    }

    /// The `nrows × ncols` faer view (a Value error when the operand does not cover it).
    fn as_mat(&self, name: &str, nrows: usize, ncols: usize) -> Result<MatRef<'_, f32>> {
        let misfit = || {
            Error::Value(format!(
                "'{name}': an operand does not cover its {nrows}×{ncols} matrix"
            ))
        };
        match self {
            Operand32::Packed(values) => {
                if nrows.checked_mul(ncols) != Some(values.len()) {
                    return Err(misfit());
                }
                Ok(MatRef::from_column_major_slice(values, nrows, ncols))
            }
            &Operand32::View(values, offset, row_stride, col_stride) => {
                let last = (nrows.checked_sub(1), ncols.checked_sub(1));
                let (Some(last_row), Some(last_col)) = last else {
                    return Err(misfit());
                };
                let reach = last_row
                    .checked_mul(row_stride)
                    .zip(last_col.checked_mul(col_stride))
                    .and_then(|(r, c)| r.checked_add(c))
                    .and_then(|span| span.checked_add(offset));
                let strides = (isize::try_from(row_stride), isize::try_from(col_stride));
                let (Some(reach), (Ok(rs), Ok(cs))) = (reach, strides) else {
                    return Err(misfit());
                };
                let from_offset = values.get(offset..).filter(|_| reach < values.len());
                let Some(from_offset) = from_offset else {
                    return Err(misfit());
                };
                // SAFETY: every element the view addresses, `offset + r·row_stride +
                // c·col_stride` for `r < nrows`, `c < ncols`, is at most `reach`, which is
                // inside `values` (checked above), so the whole region lies in one live,
                // initialized allocation borrowed for the view's lifetime; the pointer comes
                // from a `&[f32]` and is aligned; the strides fit `isize`; the view only
                // reads, so shared (even zero-stride, self-overlapping) access is allowed.
                Ok(unsafe { MatRef::from_raw_parts(from_offset.as_ptr(), nrows, ncols, rs, cs) })
            }
        }
    }
}

/// Float32 elements accumulated in binary32, on faer, reading the operands in place.
fn float32(
    name: &str,
    spec: &crate::operation::ResultSpec,
    lhs: &Matrix<'_>,
    rhs: &Matrix<'_>,
    shape: Shape3,
) -> Result<Tensor> {
    let Shape3 { n, m, k } = shape;
    if let Some(result) = tiny_float32(spec, lhs, rhs, shape) {
        return Ok(result);
    }
    with_slots(name, lhs.tensor, |ls| {
        with_slots(name, rhs.tensor, |rs| {
            let (a, b) = (
                Operand32::new(name, lhs, ls)?,
                Operand32::new(name, rhs, rs)?,
            );
            let (a, b) = (a.as_mat(name, n, k)?, b.as_mat(name, m, k)?);
            fresh_result::<f32>(spec, |out| {
                if out.len() != n * m {
                    return Err(Error::Value(format!("'{name}': the result is not {n}×{m}")));
                }
                // Touch the fresh (lazily mapped) result pages here, on one thread, rather
                // than inside the parallel product where both threads would fault them in.
                out.fill(0.0);
                let dst = MatMut::from_column_major_slice_mut(out, n, m);
                matmul(dst, Accum::Replace, a, b.transpose(), 1.0f32, shape.par());
                Ok(())
            })
        })
    })
}

/// The longest result column [`tiny_float32`] computes: one vector of four lanes.
const TINY_ROWS: usize = 4;

/// The first arm of the Float32 product: when the result fits a carrier's inline slots with
/// columns of at most [`TINY_ROWS`], and both operands are Float32 kept inline with
/// single-leaf modes (so `K` is small too), each operand is copied once under its sequence
/// lock and packed on the stack, and each result is summed in ascending `k`, a product then
/// a sum per step (no fused multiply-add). `None` otherwise, and for any operand the copy
/// does not cover: the general path then runs and reports every error.
#[inline]
fn tiny_float32(
    spec: &crate::operation::ResultSpec,
    lhs: &Matrix<'_>,
    rhs: &Matrix<'_>,
    shape: Shape3,
) -> Option<Tensor> {
    let Shape3 { n, m, k } = shape;
    if n > TINY_ROWS || n.checked_mul(m)? > INLINE_F32 {
        return None;
    }
    // Column `kk` of lhs is the vector `a[kk]`; rhs(j, kk) is `b[j + kk·m]`.
    let a: [[f32; TINY_ROWS]; INLINE_F32] = pack_inline(lhs, n, k)?;
    let b: [[f32; 1]; INLINE_F32] = pack_inline(rhs, m, k)?;
    let mut out = [0.0f32; INLINE_F32];
    for j in 0..m {
        let mut sums = [0.0f32; TINY_ROWS];
        for (kk, column) in a.iter().enumerate().take(k) {
            let [r] = *b.get(j + kk * m)?;
            for (sum, &l) in sums.iter_mut().zip(column) {
                *sum += l * r;
            }
        }
        for (i, &sum) in sums.iter().enumerate().take(n) {
            *out.get_mut(i + j * n)? = sum;
        }
    }
    Some(Tensor::fresh(
        f32::inline(out.get(..n * m)?),
        spec.shared_layout().clone(),
    ))
}

/// The `rows × cols` elements of `matrix` in `L`-lane groups: element `(r, c)` is lane
/// `(c·rows + r) mod L` of group `(c·rows + r) div L` for one lane (`L = 1`), lane `r` of
/// group `c` for `L ≥ rows`. Only when it is a Float32 operand kept inline (read as one
/// consistent copy, lock-free) whose modes are single leaves, whose last element lies
/// inside its slots and whose elements fit the groups.
#[inline]
fn pack_inline<const L: usize>(
    matrix: &Matrix<'_>,
    rows: usize,
    cols: usize,
) -> Option<[[f32; L]; INLINE_F32]> {
    let tensor = matrix.tensor;
    let pitch = if L == 1 { rows } else { L };
    if tensor.dtype() != DType::FLOAT32 || rows > pitch || cols.checked_mul(pitch)? > INLINE_F32 * L
    {
        return None;
    }
    let (row_stride, col_stride) = matrix.strides()?;
    let mut words = [0u32; INLINE_WORDS];
    let count = tensor
        .carrier()
        .downcast_ref::<Cpu>()?
        .copy_inline(&mut words)?;
    let slots = bytemuck::cast_slice::<u32, f32>(&words).get(..count)?;
    let offset = tensor.offset();
    let mut packed = [[0.0f32; L]; INLINE_F32];
    let lanes = packed.as_flattened_mut();
    if row_stride == 1 && (col_stride == pitch || cols == 1) && pitch == rows {
        // Already laid out as the groups are: one copy.
        let len = rows.checked_mul(cols)?;
        lanes
            .get_mut(..len)?
            .copy_from_slice(slots.get(offset..offset.checked_add(len)?)?);
        return Some(packed);
    }
    for c in 0..cols {
        for r in 0..rows {
            *lanes.get_mut(c * pitch + r)? =
                *slots.get(offset + r * row_stride + c * col_stride)?;
        }
    }
    Some(packed)
}

/// Float32 elements accumulated in binary64 and rounded once.
fn float64(
    name: &str,
    spec: &crate::operation::ResultSpec,
    lhs: &Matrix<'_>,
    rhs: &Matrix<'_>,
    shape: Shape3,
) -> Result<Tensor> {
    let Shape3 { n, m, k } = shape;
    let widen = |packed: Vec<f32>| -> Vec<f64> { packed.into_iter().map(f64::from).collect() };
    let a = widen(with_slots(name, lhs.tensor, |s| {
        pack::<f32>(name, s, lhs.tensor)
    })?);
    let b = widen(with_slots(name, rhs.tensor, |s| {
        pack::<f32>(name, s, rhs.tensor)
    })?);
    if a.len() != n * k || b.len() != m * k {
        return Err(Error::Value(format!(
            "'{name}': the operands are not {n}×{k} and {m}×{k}"
        )));
    }
    let mut wide = buffer::<f64>(name, n * m)?;
    wide.resize(n * m, 0.0);
    let a = MatRef::from_column_major_slice(&a, n, k);
    let b = MatRef::from_column_major_slice(&b, m, k);
    let dst = MatMut::from_column_major_slice_mut(&mut wide, n, m);
    matmul(dst, Accum::Replace, a, b.transpose(), 1.0f64, shape.par());
    fresh_result::<f32>(spec, |out| {
        for (o, &w) in out.iter_mut().zip(&wide) {
            *o = w as f32;
        }
        Ok(())
    })
}

/// Int32 elements: exact i64 products summed in i128, each result narrowed with a check.
fn int32(
    name: &str,
    spec: &crate::operation::ResultSpec,
    lhs: &Matrix<'_>,
    rhs: &Matrix<'_>,
    shape: Shape3,
) -> Result<Tensor> {
    let Shape3 { n, m, k } = shape;
    let a = with_slots(name, lhs.tensor, |s| pack::<i32>(name, s, lhs.tensor))?;
    let b = with_slots(name, rhs.tensor, |s| pack::<i32>(name, s, rhs.tensor))?;
    if a.len() != n * k || b.len() != m * k {
        return Err(Error::Value(format!(
            "'{name}': the operands are not {n}×{k} and {m}×{k}"
        )));
    }
    let mut sums = vec![0i128; n];
    fresh_result::<i32>(spec, |out| {
        for (j, column) in out.chunks_exact_mut(n).enumerate() {
            sums.fill(0);
            // rhs(j, kk) for kk ascending, beside the lhs column kk.
            for (&r, a_column) in b.iter().skip(j).step_by(m).zip(a.chunks_exact(n)) {
                let r = i64::from(r);
                for (sum, &l) in sums.iter_mut().zip(a_column) {
                    *sum += i128::from(i64::from(l) * r);
                }
            }
            for (i, (o, &sum)) in column.iter_mut().zip(&sums).enumerate() {
                *o = i32::try_from(sum)
                    .map_err(|_| overflow(name, format!("out({i}, {j}) is {sum}")))?;
            }
        }
        Ok(())
    })
}
