//! `copy_async` and `copy_to`: the non-destructive sibling of a move.

use crate::carrier::Carrier;
use crate::error::Result;
use crate::movement::asynchronous::{start, start_keeping, Kind};
use crate::movement::MoveHandle;
use crate::tensor::Tensor;

/// Starts copying `tensor` into `destination` and returns the handle of the copy: the result
/// is the tensor at offset 0 of `destination` with the same layout, and — unlike
/// [`move_async`](crate::movement::move_async) — the **source carrier stays live**.
///
/// A copy is a move that commits without releasing its source. It uses the same exact-pair
/// route selection (a definition's `TransferRoute`, the legacy registry's bulk routes such as
/// FileBacked → CPU, or the elementwise fallback where the move rules permit it; a pair no
/// move can join is NotImplemented), the same transfer, the same check order and the same
/// rollback. Two differences follow from the source only being read:
///
/// 1. a source owned by another carrier may be copied from outside the owner's access scope
///    (any alias may read an owned carrier; only moving it out needs the owner);
/// 2. at commit the source is unclaimed, not released: its version and contents are
///    unchanged.
///
/// While the copy is pending the source is claimed like a move's (writing, releasing,
/// moving or copying it again is a Runtime error until the copy is terminal), so the copied
/// contents are one consistent version; the commit re-checks that version anyway. The
/// destination's version moves by 1 at commit. On any failure nothing is published: the
/// source is live and unchanged, no version moves, and a grown destination is shrunk back.
/// With recording on and a source that requires gradients, the copy is recorded like a move
/// (one node; its backward returns the gradient on the source's carrier class).
///
/// ```
/// use strideweave::carriers::{Cpu, FileBacked};
/// use strideweave::movement::{copy_to, move_to};
/// use strideweave::{DType, Shape, Tensor, Value};
/// let cpu = Cpu::from_f32(&[1.0, 2.0, 3.0, 4.0], true)?;
/// let on_disk = move_to(&Tensor::compact(cpu, Shape::new(4)?)?, &FileBacked::carrier(None, DType::FLOAT32, true)?)?;
/// // Read the middle two slots of the file in bulk into a fresh CPU carrier.
/// let version = on_disk.carrier().version();
/// let region = Tensor::new(on_disk.carrier().clone(), 1, "2:1".parse()?)?;
/// let staged = Cpu::from_f32(&[0.0; 2], true)?;
/// let copied = copy_to(&region, &staged)?;
/// assert_eq!(copied.to_values()?, [Value::Float(2.0), Value::Float(3.0)]);
/// assert!(!on_disk.carrier().is_released());                 // the source stays live
/// assert_eq!(on_disk.carrier().version(), version);     // and unchanged
/// # Ok::<(), strideweave::Error>(())
/// ```
pub fn copy_async(tensor: &Tensor, destination: &Carrier) -> Result<MoveHandle> {
    start(tensor, destination, Kind::Copy)
}

/// Copies `tensor` into `destination` and returns the copy at offset 0 of `destination`
/// with the same layout: `copy_async(tensor, destination)?.wait()`. The source carrier stays
/// live and unchanged; see [`copy_async`].
pub fn copy_to(tensor: &Tensor, destination: &Carrier) -> Result<Tensor> {
    copy_async(tensor, destination)?.wait()
}

/// [`copy_to`] into a scratch `destination` whose previous contents nobody reads again (a
/// staging buffer reused from call to call): saving the old contents first, so that a
/// failure can restore them, is skipped — a failed copy may leave part of the new contents
/// in `destination`. Everything else is `copy_to`'s: the route, the checks, the claims, the
/// source left live and unchanged, the destination's version moving by 1, and nothing
/// published on failure. The saving costs a copy of the destination's span (and an
/// allocation of that size) per call, so repeated bulk copies into one buffer use this.
///
/// ```
/// use strideweave::carriers::{Cpu, FileBacked};
/// use strideweave::movement::{copy_to_scratch, move_to};
/// use strideweave::{DType, Shape, Tensor, Value};
/// let cpu = Cpu::from_f32(&[1.0, 2.0, 3.0], true)?;
/// let on_disk = move_to(&Tensor::compact(cpu, Shape::new(3)?)?, &FileBacked::carrier(None, DType::FLOAT32, true)?)?;
/// let buffer = Cpu::from_f32(&[0.0; 3], true)?;
/// for _ in 0..2 {
///     let copied = copy_to_scratch(&on_disk, &buffer)?;
///     assert_eq!(copied.to_values()?, [Value::Float(1.0), Value::Float(2.0), Value::Float(3.0)]);
/// }
/// assert_eq!(buffer.version(), 2);
/// assert!(!on_disk.carrier().is_released());
/// # Ok::<(), strideweave::Error>(())
/// ```
pub fn copy_to_scratch(tensor: &Tensor, destination: &Carrier) -> Result<Tensor> {
    start_keeping(tensor, destination, Kind::Copy, false)?.wait()
}

/// [`move_to`](crate::movement::move_to) into a scratch `destination` whose previous contents
/// nobody reads again (a freshly allocated tier carrier, the other tier of a residency
/// transition): as [`copy_to_scratch`], the old contents are not saved first.
pub fn move_to_scratch(tensor: &Tensor, destination: &Carrier) -> Result<Tensor> {
    move_async_to_scratch(tensor, destination)?.wait()
}

/// [`move_to_scratch`] without waiting: the handle of the move.
pub fn move_async_to_scratch(tensor: &Tensor, destination: &Carrier) -> Result<MoveHandle> {
    start_keeping(tensor, destination, Kind::Move, false)
}
