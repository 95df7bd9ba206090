//! `move_to`: the blocking move.

use crate::carrier::Carrier;
use crate::error::Result;
use crate::movement::move_async;
use crate::tensor::Tensor;

/// Copies `tensor` into `destination`, releases the source carrier and returns the tensor
/// at offset 0 of `destination` with the same layout: `move_async(tensor, destination)?.wait()`
/// (docs/movement.md, Moves), with its check order, route choice, claims, growth and
/// rollback — see [`move_async`]. On any failure the source is live and unchanged, no
/// version moves, and a grown destination is shrunk back.
pub fn move_to(tensor: &Tensor, destination: &Carrier) -> Result<Tensor> {
    move_async(tensor, destination)?.wait()
}
