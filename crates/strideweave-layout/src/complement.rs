//! `complement(A, cotarget)`: the layout that fills the gaps of an injective `A` up to
//! `cotarget`.

use crate::error::{brief, fail, Result};
use crate::layout::{Layout, Leaf};
use crate::node::Node;

/// How the last mode of a complement reaches the cotarget.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The cotarget must be a multiple of the covered span (the public rule).
    Exact,
    /// The last mode rounds up to cover at least the cotarget (used by `left_inverse`).
    AtLeast,
}

impl Layout {
    /// The complement of `self` with respect to `cotarget` (docs/layouts.md, Algebra).
    ///
    /// `(self, complement)` is then a bijection onto `0..cotarget`. Leaves of extent 1 or
    /// stride 0 are ignored; an exact fit gives the rank-0 layout. Fails when `self` is not
    /// injective ("overlaps with itself"), when a stride does not divide the span before it,
    /// or when `self` reaches beyond `cotarget` or does not divide it; and when its
    /// injectivity is undecided (see [`Layout::try_is_injective`]).
    ///
    /// ```
    /// use strideweave_layout::Layout;
    /// let a: Layout = "(2,2):(1,6)".parse()?;
    /// assert_eq!(a.complement(24)?.to_string(), "(3,2):(2,12)");
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn complement(&self, cotarget: usize) -> Result<Layout> {
        let leaves = self.complement_leaves(cotarget, Reach::Exact)?;
        let nodes: Vec<Node<Leaf>> = leaves.into_iter().map(Node::Leaf).collect();
        Layout::from_nodes(&nodes)
    }

    pub(crate) fn complement_leaves(&self, cotarget: usize, reach: Reach) -> Result<Vec<Leaf>> {
        let this = brief(self);
        if cotarget == 0 {
            fail!("complement of Layout {this} needs a cotarget >= 1, got 0");
        }
        if !self.filter().try_is_injective()? {
            fail!("complement: Layout {this} overlaps with itself");
        }
        let mut leaves: Vec<Leaf> = self.leaf_pairs().filter(|&(e, s)| e > 1 && s > 0).collect();
        leaves.sort_by_key(|&(e, s)| (s, e));
        let mut out = Vec::new();
        let mut covered = 1usize;
        for (e, s) in leaves {
            if !s.is_multiple_of(covered) {
                fail!(
                    "complement: stride {s} of Layout {this} is not a multiple of the span {covered} below it"
                );
            }
            if s > covered {
                out.push((s / covered, covered));
            }
            covered = match s.checked_mul(e) {
                Some(c) => c,
                None => fail!("complement of Layout {this} overflows"),
            };
        }
        match reach {
            Reach::Exact => {
                if covered > cotarget {
                    fail!(
                        "complement: Layout {this} spans {covered}, beyond the cotarget {cotarget}"
                    );
                }
                if !cotarget.is_multiple_of(covered) {
                    fail!(
                        "complement: cotarget {cotarget} is not a multiple of the span {covered} of Layout {this}"
                    );
                }
                if cotarget > covered {
                    out.push((cotarget / covered, covered));
                }
            }
            Reach::AtLeast => {
                let rounds = cotarget.div_ceil(covered);
                if rounds > 1 {
                    out.push((rounds, covered));
                }
            }
        }
        Ok(out)
    }
}
