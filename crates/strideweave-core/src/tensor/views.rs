//! Zero-copy views (docs/layouts.md, Views): a fresh validated tensor over the same carrier,
//! whose version it shares. Each view is the layout algebra of `strideweave_layout` plus the
//! offset; a view of a tensor that requires gradients is recorded in the graph.

use strideweave_layout::{Layout, Shape, SliceKey, Stride};

use crate::autograd::record_view;
use crate::error::Result;
use crate::tensor::Tensor;

impl Tensor {
    /// Slices with one key per top-level mode: an index removes its mode, a range keeps
    /// `(stop−start)/step` coordinates.
    pub fn slice(&self, keys: &[SliceKey]) -> Result<Tensor> {
        let (offset, layout) = self.layout().slice(keys)?;
        Ok(record_view(
            "slice",
            self,
            self.with_layout(self.offset() + offset, layout)?,
        ))
    }

    /// Reorders the top-level modes: `order[j]` is the source mode placed at `j`.
    pub fn permute(&self, order: &[usize]) -> Result<Tensor> {
        Ok(record_view(
            "permute",
            self,
            self.with_layout(self.offset(), self.layout().permute(order)?)?,
        ))
    }

    /// The same slots under `shape`; the layout must coalesce to one leaf.
    pub fn reshape(&self, shape: &Shape) -> Result<Tensor> {
        Ok(record_view(
            "reshape",
            self,
            self.with_layout(self.offset(), self.layout().reshape(shape)?)?,
        ))
    }

    /// The view selected by the layout `shape:stride` over this tensor's *ordinals*; it must
    /// be injective, within the size, and compose with the layout to an injective layout.
    pub fn as_strided(&self, shape: Shape, stride: Stride) -> Result<Tensor> {
        let selector = Layout::new(shape, stride)?;
        let layout = self.layout().as_strided(&selector)?;
        Ok(record_view(
            "as_strided",
            self,
            self.with_layout(self.offset(), layout)?,
        ))
    }

    /// Widens extent-1 leaves to `shape` with stride 0 (same tree required).
    pub fn broadcast_to(&self, shape: &Shape) -> Result<Tensor> {
        let layout = self.layout().broadcast_to(shape)?;
        Ok(record_view(
            "broadcast_to",
            self,
            self.with_layout(self.offset(), layout)?,
        ))
    }

    /// Places mode `j` at position `dims[j]` of `shape`, inserting `1:0` elsewhere, then
    /// broadcasts.
    pub fn broadcast_in_dim(&self, shape: &Shape, dims: &[usize]) -> Result<Tensor> {
        let layout = self.layout().broadcast_in_dim(shape, dims)?;
        Ok(record_view(
            "broadcast_in_dim",
            self,
            self.with_layout(self.offset(), layout)?,
        ))
    }

    /// Removes the extent-1 top-level mode `dim` (negative counts from the end).
    pub fn squeeze(&self, dim: i64) -> Result<Tensor> {
        Ok(record_view(
            "squeeze",
            self,
            self.with_layout(self.offset(), self.layout().squeeze(dim)?)?,
        ))
    }

    /// Inserts an extent-1 mode at `dim` (normalised against rank + 1).
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        Ok(record_view(
            "unsqueeze",
            self,
            self.with_layout(self.offset(), self.layout().unsqueeze(dim)?)?,
        ))
    }
}
