//! `Layout`: a hierarchical shape paired with a stride of the same tree, read as a map from
//! coordinates (or colexicographic ordinals) to indices.

use crate::error::{brief, brief_debug, fail, LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::node::{as_mode, from_nodes, mode_to_modes, to_nodes, Node};
use crate::profile::Profile;
use crate::shape::{Shape, MAX_EXTENT};
use crate::small::Small;
use crate::stride::Stride;

/// One leaf of a layout: an extent and its stride.
pub(crate) type Leaf = (usize, usize);

/// A CuTe-style layout: `index(c) = Σ_leaves c_leaf · stride_leaf`.
///
/// Invariants, checked by every constructor: the shape and stride have the same tree, nested
/// at most [`MAX_NESTING`](crate::MAX_NESTING) levels, every extent is ≥ 1, and both the size
/// and the cosize (`1 + Σ stride·(extent−1)`) fit in `i64`, so evaluating any in-domain
/// coordinate never overflows.
///
/// ```
/// use strideweave_layout::Layout;
/// let layout: Layout = "(4,(2,3)):(1,(4,8))".parse()?;
/// assert_eq!(layout.size(), 24);
/// assert_eq!(layout.cosize(), 1 + 3 + 4 + 16);
/// assert_eq!(layout.index(&(3, (1, 2)).into())?, 3 + 4 + 16);
/// assert_eq!(layout.index_of(5)?, layout.index(&(1, (1, 0)).into())?);
/// # Ok::<(), strideweave_layout::LayoutError>(())
/// ```
#[derive(Clone)]
pub struct Layout {
    shape: Shape,
    stride: Stride,
    /// `(extent, stride)` per leaf, side by side for the evaluation loops.
    leaves: Small<Leaf, 4>,
    /// The number of indices, kept because the hot paths of the runtime ask on every call.
    size: usize,
    /// One more than the largest index (saturating: a validated layout never reaches it).
    cosize: usize,
    /// Whether every leaf's stride is the product of the extents before it.
    column_major: bool,
    /// Whether every top-level mode is a leaf.
    flat: bool,
}

/// Equality on the tree and the `(extent, stride)` leaves: together they determine the shape
/// and the stride, so comparing those again would only repeat the work.
impl PartialEq for Layout {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        // A layout shared between tensors and result specs is often compared with itself.
        std::ptr::eq(self, other)
            || self.leaves == other.leaves && self.shape.profile() == other.shape.profile()
    }
}

impl Eq for Layout {}

impl std::hash::Hash for Layout {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.shape.profile().hash(state);
        self.leaves.hash(state);
    }
}

impl Layout {
    /// Pairs `shape` with `stride`; fails unless both have the identical tree and the cosize
    /// fits in `i64`.
    pub fn new(shape: Shape, stride: Stride) -> Result<Layout> {
        if shape.profile() != stride.profile() {
            let (shape, stride) = (brief(&shape), brief(&stride));
            fail!("Layout shape {shape} and stride {stride} have different trees");
        }
        let layout = Layout::assemble(shape, stride);
        layout.checked_cosize()?;
        Ok(layout)
    }

    /// The compact column-major layout of `shape`: strides are the running products of the
    /// extents, first mode fastest (`(2,3)` gets `(1,2)`, `(3,(2))` gets `(1,(3))`).
    pub fn column_major(shape: Shape) -> Layout {
        let mut running = 1usize;
        let strides: Small<usize, 4> = shape
            .leaves()
            .iter()
            .map(|e| {
                let s = running;
                running *= e;
                s
            })
            .collect();
        // Every stride is a partial product of the extents, which the shape keeps in i64.
        let stride = Stride::from_parts(shape.profile().clone(), strides)
            .unwrap_or_else(|_| unreachable!("partial products of a valid shape fit in i64"));
        Layout::assemble(shape, stride)
    }

    /// Pairs a shape and a stride already known to share a tree and fit in `i64`.
    fn assemble(shape: Shape, stride: Stride) -> Layout {
        let leaves: Small<Leaf, 4> = shape
            .leaves()
            .iter()
            .copied()
            .zip(stride.leaves().iter().copied())
            .collect();
        let (mut size, mut cosize, mut column_major) = (1usize, 1usize, true);
        for &(extent, stride) in leaves.iter() {
            column_major &= stride == size;
            size = size.saturating_mul(extent);
            cosize = cosize.saturating_add(stride.saturating_mul(extent - 1));
        }
        let flat = shape.profile().is_flat();
        Layout {
            shape,
            stride,
            leaves,
            size,
            cosize,
            column_major,
            flat,
        }
    }

    /// A flat layout from parallel lists of extents and strides.
    pub fn from_flat(extents: &[usize], strides: &[usize]) -> Result<Layout> {
        if extents.len() != strides.len() {
            fail!(
                "Layout needs one stride per extent, got extents {} and strides {}",
                brief_debug(extents),
                brief_debug(strides)
            );
        }
        Layout::new(Shape::flat(extents)?, Stride::flat(strides)?)
    }

    /// The layout of `shape` with the given stride per leaf (depth first); fails on a wrong
    /// count or a cosize beyond `i64`.
    pub fn with_leaf_strides(shape: Shape, strides: &[usize]) -> Result<Layout> {
        if strides.len() != shape.leaves().len() {
            fail!(
                "Shape {} has {} leaves, got {} strides",
                brief(&shape),
                shape.leaves().len(),
                strides.len()
            );
        }
        let stride = Stride::from_parts(shape.profile().clone(), Small::from_slice(strides))?;
        Layout::new(shape, stride)
    }

    /// The rank-0 layout `():()`: size 1, cosize 1.
    pub fn scalar() -> Layout {
        Layout::column_major(Shape::scalar())
    }

    /// Builds a layout whose top-level modes are `modes` (the CuTe `make_layout`): a rank-1
    /// layout contributes its one mode, any other rank contributes a nested mode.
    pub fn from_modes(modes: &[Layout]) -> Result<Layout> {
        let nodes: Vec<Node<Leaf>> = modes.iter().map(|m| as_mode(m.nodes())).collect();
        Layout::from_nodes(&nodes)
    }

    pub(crate) fn from_nodes(modes: &[Node<Leaf>]) -> Result<Layout> {
        let (profile, leaves): (Profile, Small<Leaf, 4>) = from_nodes(modes, &"Layout")?;
        let extents = leaves.iter().map(|l| l.0).collect();
        let strides = leaves.iter().map(|l| l.1).collect();
        Layout::new(
            Shape::from_parts(profile.clone(), extents)?,
            Stride::from_parts(profile, strides)?,
        )
    }

    pub(crate) fn nodes(&self) -> Vec<Node<Leaf>> {
        let leaves: Vec<Leaf> = self.leaf_pairs().collect();
        to_nodes(self.shape.profile(), &leaves)
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The stride.
    #[inline]
    pub fn stride(&self) -> &Stride {
        &self.stride
    }

    /// The value-free tree structure (shared by shape and stride).
    #[inline]
    pub fn profile(&self) -> &Profile {
        self.shape.profile()
    }

    /// The number of top-level modes.
    pub fn rank(&self) -> usize {
        if self.flat {
            self.leaves.len()
        } else {
            self.shape.rank()
        }
    }

    /// The nesting depth (1 when flat).
    pub fn depth(&self) -> usize {
        self.shape.depth()
    }

    /// The number of coordinates: the product of the extents.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// One more than the largest index: `1 + Σ stride·(extent−1)`; 1 for rank 0.
    #[inline]
    pub fn cosize(&self) -> usize {
        self.cosize
    }

    fn checked_cosize(&self) -> Result<usize> {
        let this = brief(self);
        let mut total = 1usize;
        for (e, s) in self.leaf_pairs() {
            total = match s
                .checked_mul(e - 1)
                .and_then(|span| total.checked_add(span))
            {
                Some(t) if t <= MAX_EXTENT => t,
                _ => fail!("Layout {this} has a cosize beyond i64::MAX"),
            };
        }
        Ok(total)
    }

    /// The `(extent, stride)` of every leaf, depth first.
    #[inline]
    pub fn leaf_pairs(&self) -> impl ExactSizeIterator<Item = (usize, usize)> + '_ {
        self.leaves.iter().copied()
    }

    /// Whether this is exactly [`Layout::column_major`] of its own shape: every leaf's stride
    /// is the product of the extents before it, so ordinal `i` lands on index `i`.
    #[inline]
    pub fn is_column_major(&self) -> bool {
        self.column_major
    }

    /// Top-level mode `k` as a layout of its own.
    pub fn mode(&self, k: usize) -> Result<Layout> {
        if self.flat && k < self.leaves.len() {
            return Ok(Layout::assemble(
                self.shape.mode(k)?,
                Stride::from_parts(
                    Profile::flat(1),
                    Small::from_slice(&self.stride.leaves()[k..k + 1]),
                )?,
            ));
        }
        let this = brief(self);
        let spans = self.profile().modes();
        let Some(span) = spans.get(k) else {
            fail!("Layout {this} has rank {}, no mode {k}", spans.len());
        };
        Ok(Layout::assemble(
            self.shape.sub_shape(span),
            Stride::from_parts(
                self.profile().sub_profile(span),
                Small::from_slice(&self.stride.leaves()[span.leaves.clone()]),
            )?,
        ))
    }

    /// The `(extent, stride)` leaves of top-level mode `k`, depth first, or `None` past the
    /// rank: a view into this layout, where [`mode`](Self::mode) builds a layout of its own.
    #[inline]
    pub fn mode_leaves(&self, k: usize) -> Option<&[(usize, usize)]> {
        if self.flat {
            return self.leaves.get(k..k + 1);
        }
        let spans = self.profile().modes();
        let span = spans.get(k)?;
        self.leaves.get(span.leaves.clone())
    }

    /// Every top-level mode as a layout of its own.
    pub fn modes(&self) -> Vec<Layout> {
        self.nodes()
            .into_iter()
            .map(|node| {
                Layout::from_nodes(&mode_to_modes(node))
                    .unwrap_or_else(|_| unreachable!("a mode of a valid layout is valid"))
            })
            .collect()
    }

    /// The index of `coord`, where an integer may stand for any subtree (docs/layouts.md,
    /// Layouts). Fails when the coordinate is outside the domain.
    pub fn index(&self, coord: &IntTuple) -> Result<usize> {
        let mut leaf_coords = Small::<usize, 8>::new();
        self.shape.leaf_coordinates(coord, &mut leaf_coords)?;
        Ok(leaf_coords
            .iter()
            .zip(self.stride.leaves())
            .map(|(c, s)| c * s)
            .sum())
    }

    /// The index of the colexicographic `ordinal`. Fails when `ordinal >= size()`.
    #[inline]
    pub fn index_of(&self, ordinal: usize) -> Result<usize> {
        let mut rest = ordinal;
        let mut index = 0usize;
        for &(e, s) in self.leaves.iter() {
            index = index.wrapping_add((rest % e).wrapping_mul(s));
            rest /= e;
        }
        // What is left after dividing by every extent is `ordinal / size`.
        if rest == 0 {
            Ok(index)
        } else {
            Err(self.ordinal_error(ordinal))
        }
    }

    /// The index of a coordinate given as one integer per leaf (depth first): the fast path
    /// of element access. Fails on a wrong count or an out-of-range entry.
    #[inline]
    pub fn index_of_leaves(&self, coords: &[usize]) -> Result<usize> {
        let leaves: &[Leaf] = &self.leaves;
        let checked = match coords.len() {
            n if n != leaves.len() => return Err(self.leaf_count_error(coords)),
            1 => dot::<1>(coords, leaves),
            2 => dot::<2>(coords, leaves),
            3 => dot::<3>(coords, leaves),
            4 => dot::<4>(coords, leaves),
            _ => {
                let mut index = 0usize;
                let mut in_range = true;
                for (&c, &(e, s)) in coords.iter().zip(leaves) {
                    in_range &= c < e;
                    index = index.wrapping_add(c.wrapping_mul(s));
                }
                in_range.then_some(index)
            }
        };
        checked.ok_or_else(|| self.leaf_range_error(coords))
    }

    #[cold]
    #[inline(never)]
    fn ordinal_error(&self, ordinal: usize) -> LayoutError {
        let this = brief(self);
        LayoutError::new(format!(
            "ordinal {ordinal} is out of range for Layout {this} of size {}",
            self.size()
        ))
    }

    #[cold]
    #[inline(never)]
    fn leaf_count_error(&self, coords: &[usize]) -> LayoutError {
        let this = brief(self);
        LayoutError::new(format!(
            "Layout {this} has {} leaves, got {} leaf coordinates",
            self.shape.leaves().len(),
            coords.len()
        ))
    }

    #[cold]
    #[inline(never)]
    fn leaf_range_error(&self, coords: &[usize]) -> LayoutError {
        let this = brief(self);
        let (c, e) = coords
            .iter()
            .zip(self.shape.leaves())
            .find(|(c, e)| c >= e)
            .map_or((0, 0), |(c, e)| (*c, *e));
        LayoutError::new(format!(
            "leaf coordinate {c} is out of range [0, {e}) for Layout {this}"
        ))
    }

    /// Joins the top-level modes of `self` and `other` (`a + b`).
    pub fn concat(&self, other: &Layout) -> Result<Layout> {
        let mut nodes = self.nodes();
        nodes.extend(other.nodes());
        Layout::from_nodes(&nodes)
    }

    /// Appends `other` as one more mode: a rank-1 leaf is concatenated, anything else is
    /// nested as a single mode.
    pub fn append(&self, other: &Layout) -> Result<Layout> {
        let mut nodes = self.nodes();
        nodes.push(as_mode(other.nodes()));
        Layout::from_nodes(&nodes)
    }

    /// Reorders the top-level modes: `order[j]` is the source mode placed at position `j`;
    /// nested modes move whole. Fails unless `order` is a permutation of `0..rank`.
    pub fn permute(&self, order: &[usize]) -> Result<Layout> {
        let this = brief(self);
        let nodes = self.nodes();
        if order.len() != nodes.len() {
            fail!(
                "permute of Layout {this} needs {} positions, got {}",
                nodes.len(),
                brief_debug(order)
            );
        }
        let mut seen = vec![false; nodes.len()];
        for &k in order {
            if k >= nodes.len() {
                fail!(
                    "permute order {} names mode {k} of a rank-{} Layout",
                    brief_debug(order),
                    nodes.len()
                );
            }
            if std::mem::replace(&mut seen[k], true) {
                fail!("permute order {} repeats mode {k}", brief_debug(order));
            }
        }
        let permuted: Vec<Node<Leaf>> = order.iter().map(|&k| nodes[k].clone()).collect();
        Layout::from_nodes(&permuted)
    }

    /// Widens extent-1 leaves to the extents of `target`, with stride 0; equal extents keep
    /// their stride. The trees must be identical: this never aligns ranks, inserts, reorders
    /// or flattens modes.
    pub fn broadcast_to(&self, target: &Shape) -> Result<Layout> {
        let (this, brief_target) = (brief(self), brief(target));
        if self.profile() != target.profile() {
            fail!(
                "broadcast_to needs the same tree: Layout {this} cannot broadcast to Shape {brief_target}"
            );
        }
        let mut strides = Small::<usize, 4>::new();
        for ((e, s), &t) in self.leaf_pairs().zip(target.leaves()) {
            if e == t {
                strides.push(s);
            } else if e == 1 {
                strides.push(0);
            } else {
                fail!(
                    "broadcast_to: extent {e} of Layout {this} cannot become {t} of Shape {brief_target}"
                );
            }
        }
        Layout::new(
            target.clone(),
            Stride::from_parts(target.profile().clone(), strides)?,
        )
    }

    /// How many coordinates map to each index when this layout covers `target`'s size
    /// uniformly, computed from the leaves alone (docs/layouts.md, Layouts); `None` when it does
    /// not. Stride-0 leaves multiply the count; the positive-stride leaves sorted by stride
    /// must tile `0..target.size()` exactly.
    pub fn uniform_preimage_extent(&self, target: &Shape) -> Option<usize> {
        let mut multiplicity = 1usize;
        let mut leaves: Vec<Leaf> = Vec::new();
        for (e, s) in self.leaf_pairs() {
            if e == 1 {
                continue;
            }
            if s == 0 {
                multiplicity *= e;
            } else {
                leaves.push((e, s));
            }
        }
        leaves.sort_by_key(|&(e, s)| (s, e));
        let mut covered = 1usize;
        for (e, s) in leaves {
            if s != covered {
                return None;
            }
            covered *= e;
        }
        (covered == target.size()).then_some(multiplicity)
    }

    /// Whether distinct coordinates always give distinct indices, decided exactly.
    ///
    /// `Ok(true)` and `Ok(false)` are proven answers. The decision never enumerates the
    /// indices: exact reductions by stride order, gcd and divisibility settle every layout
    /// whose non-trivial leaves have a nested or divisible structure (and every layout of at
    /// most two such leaves) in time polynomial in the rank, independent of the extents;
    /// what remains — three or more leaves with unrelated strides, a problem that contains
    /// the NP-complete "equal subset sum" — is searched exactly, with pruning, within
    /// [`INJECTIVITY_SEARCH_BUDGET`](crate::INJECTIVITY_SEARCH_BUDGET) candidates. Fails,
    /// naming that budget, only when the search exhausts it.
    ///
    /// ```
    /// use strideweave_layout::Layout;
    /// assert!("(2,3):(3,1)".parse::<Layout>()?.try_is_injective()?);
    /// assert!(!"(3,2):(1,2)".parse::<Layout>()?.try_is_injective()?);
    /// // Extents do not matter: 2^40 coordinates, decided at once.
    /// assert!("(3,1099511627776):(2,3)".parse::<Layout>()?.try_is_injective()?);
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn try_is_injective(&self) -> Result<bool> {
        match crate::injective::decide(self.leaf_pairs(), crate::INJECTIVITY_SEARCH_BUDGET) {
            Ok(answer) => Ok(answer),
            Err(crate::injective::Undecided) => fail!(
                "injectivity of Layout {} is undecided: the exact search exceeded its budget of {} candidates (INJECTIVITY_SEARCH_BUDGET)",
                brief(self),
                crate::INJECTIVITY_SEARCH_BUDGET
            ),
        }
    }

    /// Whether distinct coordinates always give distinct indices: `true` only when that is
    /// proven, so a `true` is never wrong.
    ///
    /// This is [`Layout::try_is_injective`] with an undecided search read as `false` ("not
    /// known to be injective"), the safe reading for deciding whether writes through the
    /// layout may overlap. Every answer is exact except for the layouts on which
    /// `try_is_injective` fails; operations that need injectivity (complement, division,
    /// products, `left_inverse`, `as_strided`) call `try_is_injective` and report that
    /// failure instead.
    pub fn is_injective(&self) -> bool {
        self.try_is_injective().unwrap_or(false)
    }

    /// The layout with leaves of extent 1 removed and contiguous neighbours merged
    /// (`d1 == s0·d0`); `1:0` when nothing remains. It computes the same function of the
    /// ordinal.
    pub fn coalesce(&self) -> Layout {
        let merged = coalesce_leaves(self.leaf_pairs());
        let merged = if merged.is_empty() {
            vec![(1, 0)]
        } else {
            merged
        };
        let nodes: Vec<Node<Leaf>> = merged.into_iter().map(Node::Leaf).collect();
        Layout::from_nodes(&nodes)
            .unwrap_or_else(|_| unreachable!("coalescing keeps size and cosize"))
    }

    /// The layout with stride-0 and extent-1 leaves removed, coalesced (CuTe `filter`): it
    /// reaches exactly the same indices, each once per remaining coordinate.
    pub fn filter(&self) -> Layout {
        let kept = self
            .leaf_pairs()
            .map(|(e, s)| if s == 0 { (1, 0) } else { (e, s) });
        let merged = coalesce_leaves(kept);
        let merged = if merged.is_empty() {
            vec![(1, 0)]
        } else {
            merged
        };
        let nodes: Vec<Node<Leaf>> = merged.into_iter().map(Node::Leaf).collect();
        Layout::from_nodes(&nodes).unwrap_or_else(|_| unreachable!("filtering shrinks a layout"))
    }
}

/// `Σ c·s` over exactly `N` leaves, unrolled; `None` when a coordinate is out of range.
#[inline(always)]
fn dot<const N: usize>(coords: &[usize], leaves: &[Leaf]) -> Option<usize> {
    let (Ok(c), Ok(l)) = (
        <&[usize; N]>::try_from(coords),
        <&[Leaf; N]>::try_from(leaves),
    ) else {
        return None;
    };
    let mut index = 0usize;
    let mut in_range = true;
    for k in 0..N {
        in_range &= c[k] < l[k].0;
        index = index.wrapping_add(c[k].wrapping_mul(l[k].1));
    }
    in_range.then_some(index)
}

/// Drops extent-1 leaves and merges `(e0,s0),(e1,s1)` into `(e0·e1, s0)` when `s1 == e0·s0`.
pub(crate) fn coalesce_leaves(leaves: impl Iterator<Item = Leaf>) -> Vec<Leaf> {
    let mut out: Vec<Leaf> = Vec::new();
    for (e, s) in leaves {
        if e == 1 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.0 * last.1 == s => last.0 *= e,
            _ => out.push((e, s)),
        }
    }
    out
}
