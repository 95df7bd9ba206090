//! Inverses: `right_inverse` and `left_inverse`.

use crate::complement::Reach;
use crate::error::{brief, fail, Result};
use crate::layout::{coalesce_leaves, Layout, Leaf};
use crate::node::Node;

impl Layout {
    /// A right inverse `R`: `self(R(i)) == i` for every `i < R.size()` (CuTe
    /// `right_inverse`).
    ///
    /// `R` covers the longest prefix `0..n` of indices that `self` reaches contiguously from
    /// 0: the leaves sorted by stride are chained while each stride equals the span before
    /// it. Leaves of extent 1 or stride 0 are skipped; `1:0` when nothing chains.
    ///
    /// ```
    /// use strideweave_layout::Layout;
    /// let a: Layout = "(4,2):(2,1)".parse()?;
    /// let r = a.right_inverse();
    /// for i in 0..r.size() {
    ///     assert_eq!(a.index_of(r.index_of(i)?)?, i);
    /// }
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn right_inverse(&self) -> Layout {
        let mut ordinal_stride = 1usize;
        let mut leaves: Vec<(usize, usize, usize)> = Vec::new();
        for (e, s) in self.leaf_pairs() {
            if e > 1 && s > 0 {
                leaves.push((s, e, ordinal_stride));
            }
            ordinal_stride *= e;
        }
        leaves.sort_unstable();
        let mut chain: Vec<Leaf> = Vec::new();
        let mut covered = 1usize;
        for (s, e, ordinal_stride) in leaves {
            if s != covered {
                break;
            }
            chain.push((e, ordinal_stride));
            covered *= e;
        }
        let merged = coalesce_leaves(chain.into_iter());
        let merged = if merged.is_empty() {
            vec![(1, 0)]
        } else {
            merged
        };
        let nodes: Vec<Node<Leaf>> = merged.into_iter().map(Node::Leaf).collect();
        Layout::from_nodes(&nodes).unwrap_or_else(|_| unreachable!("ordinals fit in the size"))
    }

    /// A left inverse `L`: `L(self(i)) == i` for every `i < self.size()` (CuTe
    /// `left_inverse`), the right inverse of `(self, complement(self))`.
    ///
    /// Fails when `self` is not injective (or its injectivity is undecided, see
    /// [`Layout::try_is_injective`]) or its strides do not chain by divisibility.
    pub fn left_inverse(&self) -> Result<Layout> {
        let this = brief(self);
        if !self.try_is_injective()? {
            fail!("left_inverse: Layout {this} is not injective");
        }
        let filler = match self.complement_leaves(self.cosize(), Reach::AtLeast) {
            Ok(leaves) => leaves,
            Err(e) => fail!("left_inverse of Layout {this}: {e}"),
        };
        let filler_nodes: Vec<Node<Leaf>> = filler.into_iter().map(Node::Leaf).collect();
        let completed = Layout::from_modes(&[self.clone(), Layout::from_nodes(&filler_nodes)?])?;
        Ok(completed.right_inverse())
    }
}
