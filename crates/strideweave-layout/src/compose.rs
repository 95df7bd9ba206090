//! Composition `outer ∘ inner`: with a layout, a shape, or a tiler of one layout per mode.

use crate::error::{brief, fail, Result};
use crate::index_map::{ComposedMap, Composition};
use crate::layout::{coalesce_leaves, Layout, Leaf};
use crate::node::{as_mode, mode_to_modes, Node};
use crate::shape::Shape;

impl Layout {
    /// `self ∘ inner`, the map `q ↦ self(inner(q))` on `inner`'s shape (docs/layouts.md, Algebra).
    ///
    /// The result is a [`Layout`] exactly when CuTe's by-mode composition divides: each
    /// leaf of `inner` becomes a leaf of the result, or — when `inner` has more than one
    /// leaf — a nest of equal size. A rank-1 leaf `inner` must stay one leaf. Otherwise the
    /// result is a [`ComposedMap`] with the same values. Fails when `inner`'s cosize exceeds
    /// `self`'s size.
    ///
    /// ```
    /// use strideweave_layout::{IndexMap, Layout};
    /// let outer: Layout = "(6,2):(8,2)".parse()?;
    /// let inner: Layout = "(4,3):(3,1)".parse()?;
    /// let exact = outer.compose(&inner)?;
    /// assert_eq!(exact.to_string(), "((2,2),3):((24,2),8)");
    /// let general = "(2,2):(1,3)".parse::<Layout>()?.compose(&"4:1".parse()?)?;
    /// assert!(general.as_layout().is_none());
    /// assert_eq!((0..4).map(|i| general.apply(i)).collect::<Result<Vec<_>, _>>()?, [0, 1, 3, 4]);
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn compose(&self, inner: &Layout) -> Result<Composition> {
        self.check_reach(inner, "composition")?;
        let modes = inner.nodes();
        let single_leaf = matches!(modes.as_slice(), [Node::Leaf(_)]);
        match compose_exact(&self.coalesced_leaves(), &modes) {
            Some(result) if !(single_leaf && matches!(result[0], Node::Tuple(_))) => {
                Ok(Composition::Layout(Layout::from_nodes(&result)?))
            }
            _ => Ok(Composition::Map(ComposedMap::new(vec![
                self.clone(),
                inner.clone(),
            ]))),
        }
    }

    /// Composition with a shape: each top-level mode of `shape` becomes the compact tile of
    /// that mode on the matching leading mode of `self` (`e` becomes `e:1`).
    pub fn compose_shape(&self, shape: &Shape) -> Result<Layout> {
        let tiles: Vec<Layout> = shape
            .nodes()
            .into_iter()
            .map(|mode| Shape::from_nodes(&mode_to_modes(mode)).map(Layout::column_major))
            .collect::<Result<_>>()?;
        self.compose_tiler(&tiles)
    }

    /// Composition with a tiler: tile `i` composes with top-level mode `i`, trailing modes
    /// are kept, an empty tiler returns `self`. Fails when there are more tiles than modes,
    /// a tile reaches beyond its mode, or a mode is not divisible by its tile.
    pub fn compose_tiler(&self, tiles: &[Layout]) -> Result<Layout> {
        let this = brief(self);
        let mut modes = self.nodes();
        if tiles.len() > modes.len() {
            fail!(
                "tiler of {} tiles is too long for rank-{} Layout {this}",
                tiles.len(),
                modes.len()
            );
        }
        for (i, tile) in tiles.iter().enumerate() {
            let mode = Layout::from_nodes(&mode_to_modes(modes[i].clone()))?;
            mode.check_reach(tile, &format!("tile {i} of a tiler"))?;
            let composed = compose_exact(&mode.coalesced_leaves(), &[as_mode(tile.nodes())]);
            let Some(result) = composed.and_then(|mut nodes| nodes.pop()) else {
                let (mode, tile) = (brief(&mode), brief(tile));
                fail!("mode {i} ({mode}) of Layout {this} is not divisible by tile {tile}");
            };
            modes[i] = result;
        }
        Layout::from_nodes(&modes)
    }

    pub(crate) fn check_reach(&self, inner: &Layout, what: &str) -> Result<()> {
        let this = brief(self);
        if inner.cosize() > self.size() {
            fail!(
                "{what} needs the inner codomain within the outer size: {} reaches {} but {this} has size {}",
                brief(inner),
                inner.cosize(),
                self.size()
            );
        }
        Ok(())
    }

    /// The leaves of `coalesce(self)` (at least one).
    pub(crate) fn coalesced_leaves(&self) -> Vec<Leaf> {
        let leaves = coalesce_leaves(self.leaf_pairs());
        if leaves.is_empty() {
            vec![(1, 0)]
        } else {
            leaves
        }
    }
}

/// Composes the coalesced `outer` with the tree whose top-level modes are `modes`; `None`
/// when no layout expresses the result.
///
/// Composition distributes over the inner leaves only when `outer` adds their images without
/// carries: always when `outer` is a single leaf (it is then linear), and otherwise when the
/// inner leaves, sorted by stride, occupy disjoint digit ranges (`d_{k+1} ≥ d_k·s_k`) and
/// each leaf divides `outer`'s modes.
pub(crate) fn compose_exact(outer: &[Leaf], modes: &[Node<Leaf>]) -> Option<Vec<Node<Leaf>>> {
    if outer.len() > 1 {
        let mut leaves = Vec::new();
        modes.iter().for_each(|m| m.leaves(&mut leaves));
        leaves.retain(|&(e, s)| e > 1 && s > 0);
        leaves.sort_by_key(|&(e, s)| (s, e));
        let nested = leaves.windows(2).all(|w| {
            w[0].0
                .checked_mul(w[0].1)
                .is_some_and(|span| w[1].1 >= span)
        });
        if !nested {
            return None;
        }
    }
    modes.iter().map(|m| compose_node(outer, m)).collect()
}

/// Composes the coalesced `outer` with one mode of the inner layout, keeping its structure;
/// `None` when some leaf does not divide.
fn compose_node(outer: &[Leaf], mode: &Node<Leaf>) -> Option<Node<Leaf>> {
    match mode {
        Node::Leaf(leaf) => compose_leaf(outer, *leaf),
        Node::Tuple(children) => children
            .iter()
            .map(|c| compose_node(outer, c))
            .collect::<Option<Vec<_>>>()
            .map(Node::Tuple),
    }
}

/// `outer ∘ (s:d)` for a coalesced `outer`: first divide out the stride `d` mode by mode,
/// then take `s` elements across the following modes (CuTe's stride- and
/// shape-divisibility conditions). A leaf whose whole span `d·s` fits in the current mode
/// needs no divisibility. The last outer mode extends without bound.
fn compose_leaf(outer: &[Leaf], (s, d): Leaf) -> Option<Node<Leaf>> {
    if s == 1 || d == 0 {
        return Some(Node::Leaf((s, 0)));
    }
    let (&(_, last_stride), init) = outer.split_last()?;
    let mut out: Vec<Leaf> = Vec::new();
    let mut rest_shape = s;
    let mut rest_stride = d;
    for &(e, stride) in init {
        if rest_stride >= e {
            if !rest_stride.is_multiple_of(e) {
                return None;
            }
            rest_stride /= e;
            continue;
        }
        let step = rest_stride.checked_mul(stride)?;
        if rest_stride.checked_mul(rest_shape)? <= e {
            out.push((rest_shape, step));
            rest_shape = 1;
            break;
        }
        if !e.is_multiple_of(rest_stride) {
            return None;
        }
        let available = e / rest_stride;
        if !rest_shape.is_multiple_of(available) {
            return None;
        }
        out.push((available, step));
        rest_shape /= available;
        rest_stride = 1;
    }
    if rest_shape > 1 {
        out.push((rest_shape, rest_stride.checked_mul(last_stride)?));
    }
    let mut leaves: Vec<Node<Leaf>> = out.into_iter().map(Node::Leaf).collect();
    Some(if leaves.len() == 1 {
        leaves.remove(0)
    } else {
        Node::Tuple(leaves)
    })
}
