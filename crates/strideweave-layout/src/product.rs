//! Products: `logical_product` and `blocked_product`.

use crate::compose::compose_exact;
use crate::error::{brief, fail, Result};
use crate::layout::{Layout, Leaf};
use crate::node::{as_mode, Node};

impl Layout {
    /// The logical product `(self, complement(self, size·cosize(other)) ∘ other)`: `self`
    /// repeated in the arrangement of `other` (CuTe `logical_product`).
    ///
    /// Fails when `self` is not injective, the complement does not divide, or the
    /// composition is not a layout.
    pub fn logical_product(&self, other: &Layout) -> Result<Layout> {
        let repeat = self.product_repeat(&[as_mode(other.nodes())], other)?;
        let mut nodes = vec![as_mode(self.nodes())];
        nodes.extend(repeat);
        Layout::from_nodes(&nodes)
    }

    /// The blocked product: like [`Layout::logical_product`], with mode `i` of the result
    /// pairing mode `i` of `self` (the block) with mode `i` of the repetition. Both operands
    /// are padded with `1:0` modes to the larger rank (CuTe `blocked_product`).
    pub fn blocked_product(&self, other: &Layout) -> Result<Layout> {
        let rank = self.rank().max(other.rank());
        let pad = |layout: &Layout| {
            let mut nodes = layout.nodes();
            nodes.resize(rank, Node::Leaf((1, 0)));
            nodes
        };
        let block = pad(self);
        let arrangement = pad(other);
        let repeat = self.product_repeat(&arrangement, other)?;
        let zipped: Vec<Node<Leaf>> = block
            .into_iter()
            .zip(repeat)
            .map(|(b, r)| Node::Tuple(vec![b, r]))
            .collect();
        Layout::from_nodes(&zipped)
    }

    /// `complement(self, size·cosize(other)) ∘ arrangement`, where `arrangement` holds the
    /// modes of `other`.
    fn product_repeat(
        &self,
        arrangement: &[Node<Leaf>],
        other: &Layout,
    ) -> Result<Vec<Node<Leaf>>> {
        let (this, other_b) = (brief(self), brief(other));
        let Some(cotarget) = self.size().checked_mul(other.cosize()) else {
            fail!("product of Layout {this} and {other_b} overflows");
        };
        let complement = self.complement(cotarget).map_err(|e| {
            crate::error::LayoutError::new(format!("product of Layout {this} and {other_b}: {e}"))
        })?;
        match compose_exact(&complement.coalesced_leaves(), arrangement) {
            Some(repeat) => Ok(repeat),
            None => fail!(
                "product of Layout {this} and {other_b}: the complement {} does not compose with {other_b} as a Layout",
                brief(&complement)
            ),
        }
    }
}
