//! The layout side of zero-copy views: slicing, reshape, as_strided, broadcast_in_dim,
//! squeeze and unsqueeze (docs/layouts.md, Views). A tensor view applies these to its layout
//! and adds the returned offset.

use std::ops::{Range, RangeFrom, RangeFull, RangeTo};

use crate::error::{brief, brief_debug, fail, Result};
use crate::layout::{Layout, Leaf};
use crate::node::{as_mode, Node};
use crate::shape::Shape;

/// The key for one top-level mode of a slice ([`Layout::slice`]).
///
/// The rules, which follow Python's only where they say so:
/// - `Index(i)` needs `0 <= i < size` of the mode (a negative index is an error, not counted
///   from the end); on a nested mode `i` is a colexicographic ordinal.
/// - `Range` bounds are resolved as Python's `slice.indices` resolves them: `None` is the
///   whole extent, a negative bound counts from the end, and a bound past either end is
///   clamped to it.
/// - Unlike Python, the resolved range must be non-empty, `step` must be at least 1, and
///   `stop − start` must be a multiple of `step` (a view keeps whole strides); each is a
///   Value error naming the mode.
/// - A nested mode accepts only the full range `:` (every bound `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SliceKey {
    /// Fix the mode at this colexicographic ordinal, removing it.
    Index(i64),
    /// Keep `start..stop` every `step` coordinates, bounds resolved as above.
    Range {
        /// First kept coordinate (negative counts from the end; `None` is 0).
        start: Option<i64>,
        /// One past the last kept coordinate (negative counts from the end; `None` is the
        /// extent).
        stop: Option<i64>,
        /// Distance between kept coordinates (`None` is 1).
        step: Option<i64>,
    },
}

impl SliceKey {
    /// The whole mode (`:`).
    pub fn all() -> SliceKey {
        SliceKey::Range {
            start: None,
            stop: None,
            step: None,
        }
    }

    /// `start:stop:step`.
    pub fn stepped(start: i64, stop: i64, step: i64) -> SliceKey {
        SliceKey::Range {
            start: Some(start),
            stop: Some(stop),
            step: Some(step),
        }
    }
}

impl From<i64> for SliceKey {
    fn from(index: i64) -> Self {
        SliceKey::Index(index)
    }
}

impl From<Range<i64>> for SliceKey {
    fn from(range: Range<i64>) -> Self {
        SliceKey::Range {
            start: Some(range.start),
            stop: Some(range.end),
            step: None,
        }
    }
}

impl From<RangeFrom<i64>> for SliceKey {
    fn from(range: RangeFrom<i64>) -> Self {
        SliceKey::Range {
            start: Some(range.start),
            stop: None,
            step: None,
        }
    }
}

impl From<RangeTo<i64>> for SliceKey {
    fn from(range: RangeTo<i64>) -> Self {
        SliceKey::Range {
            start: None,
            stop: Some(range.end),
            step: None,
        }
    }
}

impl From<RangeFull> for SliceKey {
    fn from(_: RangeFull) -> Self {
        SliceKey::all()
    }
}

/// Clamps a Python slice bound into `0..=extent`.
fn bound(value: Option<i64>, default: i64, extent: i64) -> i64 {
    match value {
        None => default,
        Some(v) if v < 0 => (v + extent).max(0),
        Some(v) => v.min(extent),
    }
}

impl Layout {
    /// Slices with exactly one key per top-level mode; returns the offset to add and the
    /// layout of the view.
    ///
    /// An index removes its mode (on a nested mode it is an ordinal); a range on a leaf keeps
    /// `(stop−start)/step` coordinates with stride·step. Fails on a wrong key count, a step
    /// ≤ 0, an empty range, `(stop−start) % step ≠ 0`, a negative or out-of-range index, or
    /// anything but the full range on a nested mode.
    ///
    /// ```
    /// use strideweave_layout::{Layout, SliceKey};
    /// let a: Layout = "(5,10):(1,5)".parse()?;
    /// let (offset, view) = a.slice(&[SliceKey::Index(2), SliceKey::stepped(1, 9, 2)])?;
    /// assert_eq!((offset, view.to_string()), (7, "4:10".to_string()));
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn slice(&self, keys: &[SliceKey]) -> Result<(usize, Layout)> {
        let this = brief(self);
        let modes = self.modes();
        if keys.len() != modes.len() {
            fail!(
                "slice of Layout {this} needs one key per mode ({}), got {}",
                modes.len(),
                keys.len()
            );
        }
        let mut offset = 0usize;
        let mut kept: Vec<Node<Leaf>> = Vec::new();
        for (k, (mode, key)) in modes.iter().zip(keys).enumerate() {
            let is_leaf = mode.rank() == 1 && mode.profile().is_flat();
            match *key {
                SliceKey::Index(i) => {
                    if i < 0 || i as u64 >= mode.size() as u64 {
                        fail!(
                            "slice index {i} is out of range [0, {}) for mode {k} of Layout {this}",
                            mode.size()
                        );
                    }
                    offset += mode.index_of(i as usize)?;
                }
                SliceKey::Range { start, stop, step } if !is_leaf => {
                    if start.is_some() || stop.is_some() || step.is_some() {
                        fail!("slice of nested mode {k} of Layout {this} accepts only the full range ':'");
                    }
                    kept.push(as_mode(mode.nodes()));
                }
                SliceKey::Range { start, stop, step } => {
                    let step = step.unwrap_or(1);
                    if step <= 0 {
                        fail!("slice step must be >= 1, got {step} for mode {k} of Layout {this}");
                    }
                    let (extent, stride) = mode.leaf_pairs().next().unwrap_or((1, 0));
                    let n = extent as i64;
                    let start = bound(start, 0, n);
                    let stop = bound(stop, n, n);
                    if stop <= start {
                        fail!("slice {start}:{stop} of mode {k} of Layout {this} is empty");
                    }
                    if (stop - start) % step != 0 {
                        fail!(
                            "slice {start}:{stop}:{step} of mode {k} of Layout {this} does not divide evenly"
                        );
                    }
                    offset += start as usize * stride;
                    kept.push(Node::Leaf((
                        ((stop - start) / step) as usize,
                        stride * step as usize,
                    )));
                }
            }
        }
        Ok((offset, Layout::from_nodes(&kept)?))
    }

    /// The layout of `target` over the same run of slots: `self` must coalesce to one leaf
    /// `n:b`, and the result is `target`'s compact column-major layout scaled by `b`.
    pub fn reshape(&self, target: &Shape) -> Result<Layout> {
        let this = brief(self);
        if target.size() != self.size() {
            fail!(
                "reshape of Layout {this} (size {}) to Shape {} (size {}) changes the size",
                self.size(),
                brief(target),
                target.size()
            );
        }
        let coalesced = self.coalesced_leaves();
        let [(_, base)] = coalesced[..] else {
            fail!("reshape needs a Layout that coalesces to one leaf, {this} does not");
        };
        let compact = Layout::column_major(target.clone());
        let nodes: Vec<Node<Leaf>> = compact
            .nodes()
            .iter()
            .map(|node| node.map(&mut |(e, s)| (e, s * base)))
            .collect();
        Layout::from_nodes(&nodes)
    }

    /// The layout selected by `selector`, which maps onto `self`'s ordinals: `self ∘
    /// selector`. Fails unless `selector` is injective and within `self`'s size, and the
    /// composition is an injective layout; fails too when either injectivity is undecided
    /// (see [`Layout::try_is_injective`]).
    pub fn as_strided(&self, selector: &Layout) -> Result<Layout> {
        let this = brief(self);
        if !selector.try_is_injective()? {
            fail!("as_strided selector {} is not injective", brief(selector));
        }
        let composed = self.compose(selector)?;
        let Some(layout) = composed.as_layout() else {
            fail!("as_strided: {} is not a Layout", brief(&composed));
        };
        if !layout.try_is_injective()? {
            fail!(
                "as_strided: the selected layout {} of Layout {this} is not injective",
                brief(layout)
            );
        }
        Ok(layout.clone())
    }

    /// Places mode `j` of `self` at position `dims[j]` of `target`, inserts `1:0` at every
    /// other position, then broadcasts to `target`. `dims` must be strictly increasing
    /// positions below `target`'s rank, one per mode.
    pub fn broadcast_in_dim(&self, target: &Shape, dims: &[usize]) -> Result<Layout> {
        let this = brief(self);
        let modes = self.nodes();
        if dims.len() != modes.len() {
            fail!(
                "broadcast_in_dim of rank-{} Layout {this} needs {} dims, got {}",
                modes.len(),
                modes.len(),
                brief_debug(dims)
            );
        }
        if dims.windows(2).any(|w| w[0] >= w[1]) {
            fail!(
                "broadcast_in_dim dims {} must be strictly increasing",
                brief_debug(dims)
            );
        }
        if let Some(&last) = dims.last() {
            if last >= target.rank() {
                fail!(
                    "broadcast_in_dim dim {last} is out of range for rank-{} Shape {}",
                    target.rank(),
                    brief(target)
                );
            }
        }
        // `dims` is strictly increasing, so one pass pairs positions with modes.
        let mut source = modes.into_iter().zip(dims.iter().copied()).peekable();
        let placed: Vec<Node<Leaf>> = (0..target.rank())
            .map(|p| match source.next_if(|(_, dim)| *dim == p) {
                Some((mode, _)) => mode,
                None => Node::Leaf((1, 0)),
            })
            .collect();
        Layout::from_nodes(&placed)?.broadcast_to(target)
    }

    /// Inserts a `1:0` mode at `dim`, normalised against rank + 1 (negative counts from the
    /// end).
    pub fn unsqueeze(&self, dim: i64) -> Result<Layout> {
        let mut modes = self.nodes();
        let position = normalize_dim(dim, modes.len() + 1, "unsqueeze", self)?;
        modes.insert(position, Node::Leaf((1, 0)));
        Layout::from_nodes(&modes)
    }

    /// Removes the top-level mode `dim` (negative counts from the end), which must be a
    /// leaf of extent 1.
    pub fn squeeze(&self, dim: i64) -> Result<Layout> {
        let this = brief(self);
        let mut modes = self.nodes();
        let position = normalize_dim(dim, modes.len(), "squeeze", self)?;
        if !matches!(modes[position], Node::Leaf((1, _))) {
            fail!("squeeze: mode {position} of Layout {this} is not an extent-1 leaf");
        }
        modes.remove(position);
        Layout::from_nodes(&modes)
    }
}

fn normalize_dim(dim: i64, bound: usize, what: &str, layout: &Layout) -> Result<usize> {
    let n = bound as i64;
    let position = if dim < 0 { dim + n } else { dim };
    if !(0..n).contains(&position) {
        fail!(
            "{what}: dim {dim} is out of range for Layout {} (positions 0..{bound})",
            brief(layout)
        );
    }
    Ok(position as usize)
}
