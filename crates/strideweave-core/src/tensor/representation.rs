//! `Tensor`: one subtensor `(carrier, offset, layout)` with its logical dtype.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strideweave_layout::{Layout, Shape};

use parking_lot::Mutex;

use crate::autograd::AutogradState;
use crate::carrier::Carrier;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::shared_layout::SharedLayout;

struct Inner {
    carrier: Carrier,
    offset: usize,
    /// Shared, so a result under an operand's or a canonical layout costs at most a
    /// reference count, not a copy.
    layout: SharedLayout,
    dtype: DType,
    /// Gradient bookkeeping (framework-owned; see the autograd module).
    autograd: Mutex<AutogradState>,
    /// Set before the tensor first requires gradients or gets a producing node, and never
    /// cleared: while it is false, `requires_grad()` is false without taking the lock.
    tracked: AtomicBool,
}

/// A tensor: the value at coordinate `c` is `carrier[offset + layout(c)]`
/// (docs/tensors.md, Representation).
///
/// Cloning is cheap and keeps the identity ([`Tensor::same_as`]); views share the carrier and
/// therefore its version. Construction validates, in order, that the carrier's dtype has a
/// storage schema and that `offset + layout.cosize() <= carrier.size()`.
///
/// ```
/// use strideweave::carriers::Generic;
/// use strideweave::{DType, Layout, Tensor, Value};
/// let carrier = Generic::carrier(&[Value::Float(0.0); 10], DType::FLOAT32, true)?;
/// let t = Tensor::new(carrier.clone(), 0, "(2,3):(1,4)".parse()?)?;
/// t.set(&(1, 0).into(), Value::Float(2.5))?;
/// assert_eq!(carrier.get(1)?, Value::Float(2.5));
/// assert_eq!(t.version(), 1);
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor {
    inner: Arc<Inner>,
}

impl Tensor {
    /// The tensor of `layout` over `carrier` starting at slot `offset`.
    ///
    /// Fails with a Value error when the carrier's dtype has no storage schema or the slots
    /// `offset .. offset + cosize` do not fit in the carrier (a released carrier has none).
    pub fn new(carrier: Carrier, offset: usize, layout: Layout) -> Result<Tensor> {
        Tensor::with_shared_layout(carrier, offset, SharedLayout::counted(layout))
    }

    /// [`Tensor::new`] with a layout already shared (a result spec's, an operand's), so the
    /// tensor holds another reference to it rather than a copy.
    pub(crate) fn with_shared_layout(
        carrier: Carrier,
        offset: usize,
        layout: SharedLayout,
    ) -> Result<Tensor> {
        let dtype = carrier.dtype();
        if dtype.is_category() {
            // A category has no storage schema (docs/tensors.md, DTypes).
            dtype.storage_schema()?;
        }
        let cosize = layout.cosize();
        let size = carrier.size();
        match offset.checked_add(cosize) {
            Some(end) if end <= size => {}
            _ => {
                return Err(Error::Value(format!(
                    "Tensor needs slots {offset}..{offset}+{cosize} (layout {layout}) but the {} carrier has {size}",
                    carrier.class()
                )))
            }
        }
        Ok(Tensor::assemble(carrier, offset, layout, dtype))
    }

    /// The compact tensor of `layout` (a bijection onto its slots) over a fresh
    /// `carrier` that has exactly its slots: a kernel's result, already valid by
    /// construction, so none of [`Tensor::new`]'s checks are repeated.
    pub(crate) fn fresh(carrier: Carrier, layout: SharedLayout) -> Tensor {
        debug_assert!(layout.cosize() == carrier.size() && layout.cosize() == layout.size());
        let dtype = carrier.dtype();
        Tensor::assemble(carrier, 0, layout, dtype)
    }

    fn assemble(carrier: Carrier, offset: usize, layout: SharedLayout, dtype: DType) -> Tensor {
        Tensor {
            inner: Arc::new(Inner {
                carrier,
                offset,
                layout,
                dtype,
                autograd: Mutex::new(AutogradState::default()),
                tracked: AtomicBool::new(false),
            }),
        }
    }

    /// The compact column-major tensor of `shape` over `carrier` from slot 0. Its layout is
    /// shared with other compact tensors and results of an equal shape.
    pub fn compact(carrier: Carrier, shape: Shape) -> Result<Tensor> {
        let layout = super::canonical_layouts::canonical_layout(shape);
        Tensor::with_shared_layout(carrier, 0, layout)
    }

    /// The carrier holding the slots.
    pub fn carrier(&self) -> &Carrier {
        &self.inner.carrier
    }

    /// The first slot of the tensor in its carrier.
    pub fn offset(&self) -> usize {
        self.inner.offset
    }

    /// The layout from coordinates to slots (relative to the offset).
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// The layout as the shared handle this tensor holds.
    pub(crate) fn shared_layout(&self) -> &SharedLayout {
        &self.inner.layout
    }

    /// The logical shape.
    pub fn shape(&self) -> &Shape {
        self.inner.layout.shape()
    }

    /// The number of elements.
    pub fn size(&self) -> usize {
        self.inner.layout.size()
    }

    /// The logical dtype.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The carrier's version (views share it).
    pub fn version(&self) -> u64 {
        self.inner.carrier.version()
    }

    /// The version token: `(carrier id, version)` per distinct carrier, in first-occurrence
    /// order.
    pub fn version_token(&self) -> Vec<(usize, u64)> {
        vec![(self.inner.carrier.id(), self.inner.carrier.version())]
    }

    /// Whether writes through this tensor are allowed now.
    pub fn is_mutable(&self) -> bool {
        self.inner.carrier.is_mutable()
    }

    /// Whether `self` and `other` are the same tensor object (not merely views of the same
    /// storage).
    pub fn same_as(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A process-unique identity of this tensor object (clones share it).
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }

    /// When this is the last handle to the tensor object, takes its producing node out so
    /// a long graph can be dropped without recursion.
    pub(crate) fn take_grad_fn_if_last(mut self) -> Option<(crate::autograd::Node, usize)> {
        Arc::get_mut(&mut self.inner).and_then(|inner| inner.autograd.get_mut().grad_fn.take())
    }

    /// The gradient bookkeeping of this tensor object.
    pub(crate) fn autograd(&self) -> &Mutex<AutogradState> {
        &self.inner.autograd
    }

    /// Records that this tensor may take part in differentiation; called before its state
    /// first says so (see [`Tensor::is_tracked`]).
    pub(crate) fn mark_tracked(&self) {
        self.inner.tracked.store(true, Ordering::Release);
    }

    /// `false` when this tensor has never required gradients nor had a producing node, so
    /// its autograd state need not be locked to know it does not require gradients.
    pub(crate) fn is_tracked(&self) -> bool {
        self.inner.tracked.load(Ordering::Acquire)
    }

    /// A new tensor object over the same slots, outside the autograd graph.
    pub(crate) fn clone_without_autograd(&self) -> Tensor {
        Tensor::assemble(
            self.inner.carrier.clone(),
            self.inner.offset,
            self.inner.layout.clone(),
            self.inner.dtype,
        )
    }

    /// The same carrier and offset with another layout, validated like [`Tensor::new`].
    pub(crate) fn with_layout(&self, offset: usize, layout: Layout) -> Result<Tensor> {
        Tensor::new(self.inner.carrier.clone(), offset, layout)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({} on {} at {} : {})",
            self.inner.dtype,
            self.inner.carrier.class(),
            self.inner.offset,
            self.inner.layout
        )
    }
}
