//! `Shape`: a hierarchical tuple of extents with colexicographic coordinates.

use std::fmt;

use crate::error::{brief, brief_debug};
use crate::error::{fail, Result};
use crate::int_tuple::{dismantle, IntTuple};
use crate::node::{from_nodes, to_nodes, Node};
use crate::profile::{check_nesting, Profile, Span};
use crate::small::Small;

/// Largest size or index any layout may reach, so that every product stays in `i64`.
pub(crate) const MAX_EXTENT: usize = i64::MAX as usize;

/// A hierarchical tuple of extents (each ≥ 1) whose size fits in `i64`, nested at most
/// [`MAX_NESTING`](crate::MAX_NESTING) levels.
///
/// Coordinates are colexicographic (first mode fastest): [`Shape::encode`] turns a
/// coordinate into an ordinal `c0 + s0*(c1 + s1*(…))` and [`Shape::decode`] turns it back.
///
/// ```
/// use strideweave_layout::Shape;
/// let shape = Shape::new((5, (20, 4)))?;
/// assert_eq!(shape.size(), 400);
/// // An integer may stand for a whole subtree: 42 is the ordinal (2,2) of (20,4).
/// assert_eq!(shape.encode(&(4, 42).into())?, 214);
/// assert_eq!(shape.encode(&(4, (2, 2)).into())?, 214);
/// # Ok::<(), strideweave_layout::LayoutError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    profile: Profile,
    extents: Small<usize, 4>,
}

impl Shape {
    /// Builds a shape from its written form: an integer `n` is the rank-1 shape `(n)`, a
    /// tuple gives its hierarchy, `()` the rank-0 shape of size 1.
    ///
    /// Fails when an extent is below 1 or beyond `i64::MAX` (an [`IntTuple::Wide`]), the
    /// size exceeds `i64::MAX`, or the tree nests deeper than
    /// [`MAX_NESTING`](crate::MAX_NESTING).
    pub fn new(written: impl Into<IntTuple>) -> Result<Shape> {
        let leaves = written_leaves(written.into(), "Shape")?;
        let modes = leaves.nodes;
        if let Some(bad) = leaves.values.iter().find(|e| **e < 1) {
            fail!("Shape extents must be >= 1, got {bad}");
        }
        if let Some(bad) = leaves.values.iter().find(|e| **e > MAX_EXTENT as i128) {
            fail!("Shape extent {bad} exceeds i64::MAX");
        }
        // Every leaf is now in 1..=i64::MAX.
        let modes: Vec<Node<usize>> = modes
            .iter()
            .map(|m| m.map(&mut |e| usize::try_from(e).unwrap_or(MAX_EXTENT)))
            .collect();
        Shape::from_nodes(&modes)
    }

    /// A flat shape with the given extents (each ≥ 1).
    pub fn flat(extents: &[usize]) -> Result<Shape> {
        Shape::from_parts(Profile::flat(extents.len()), Small::from_slice(extents))
    }

    /// The rank-0 shape: no modes, size 1.
    pub fn scalar() -> Shape {
        Shape {
            profile: Profile::default(),
            extents: Small::new(),
        }
    }

    pub(crate) fn from_nodes(modes: &[Node<usize>]) -> Result<Shape> {
        let (profile, extents) = from_nodes(modes, &"Shape")?;
        Shape::from_parts(profile, extents)
    }

    pub(crate) fn from_parts(profile: Profile, extents: Small<usize, 4>) -> Result<Shape> {
        let mut size = 1usize;
        for &extent in extents.iter() {
            if extent < 1 {
                fail!("Shape extents must be >= 1, got {extent}");
            }
            size = match size.checked_mul(extent) {
                Some(s) if s <= MAX_EXTENT => s,
                _ => fail!(
                    "Shape size overflows i64: extents {}",
                    brief_debug(&*extents)
                ),
            };
        }
        Ok(Shape { profile, extents })
    }

    pub(crate) fn nodes(&self) -> Vec<Node<usize>> {
        to_nodes(&self.profile, &self.extents)
    }

    /// The product of all extents.
    #[inline]
    pub fn size(&self) -> usize {
        self.extents.iter().product()
    }

    /// The number of top-level modes.
    #[inline]
    pub fn rank(&self) -> usize {
        self.profile.rank()
    }

    /// The nesting depth (1 when flat).
    pub fn depth(&self) -> usize {
        self.profile.depth()
    }

    /// The value-free tree structure.
    #[inline]
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The extents of the leaves, depth first (which is colexicographic order).
    #[inline]
    pub fn leaves(&self) -> &[usize] {
        &self.extents
    }

    /// The shape with the same tree and the given leaf extents (depth first); fails when the
    /// count differs or an extent is invalid.
    pub fn with_leaves(&self, extents: &[usize]) -> Result<Shape> {
        let this = brief(self);
        if extents.len() != self.extents.len() {
            fail!(
                "Shape {this} has {} leaves, got {} extents",
                self.extents.len(),
                extents.len()
            );
        }
        Shape::from_parts(self.profile.clone(), Small::from_slice(extents))
    }

    /// Top-level mode `k` as a shape of its own (a leaf becomes a rank-1 shape, a tuple
    /// yields its children as modes).
    pub fn mode(&self, k: usize) -> Result<Shape> {
        if self.profile.is_flat() {
            if let Some(&extent) = self.extents.get(k) {
                return Ok(Shape {
                    profile: Profile::flat(1),
                    extents: Small::from_slice(&[extent]),
                });
            }
        }
        let this = brief(self);
        let modes = self.profile.modes();
        let Some(span) = modes.get(k) else {
            fail!("Shape {this} has rank {}, no mode {k}", modes.len());
        };
        Ok(self.sub_shape(span))
    }

    pub(crate) fn sub_shape(&self, span: &Span) -> Shape {
        Shape {
            profile: self.profile.sub_profile(span),
            extents: Small::from_slice(&self.extents[span.leaves.clone()]),
        }
    }

    /// The written form of this shape.
    pub fn to_int_tuple(&self) -> IntTuple {
        IntTuple::Tuple(self.nodes().iter().map(node_to_tuple).collect())
    }

    /// The colexicographic ordinal of `coord`, where an integer may stand for any subtree.
    ///
    /// Fails when a coordinate is negative or out of range, or its nesting does not fit.
    /// The rank-0 shape accepts `0` and `()`.
    pub fn encode(&self, coord: &IntTuple) -> Result<usize> {
        let mut leaf_coords = Small::<usize, 4>::new();
        self.leaf_coordinates(coord, &mut leaf_coords)?;
        let mut ordinal = 0;
        let mut scale = 1;
        for (c, e) in leaf_coords.iter().zip(self.extents.iter()) {
            ordinal += c * scale;
            scale *= e;
        }
        Ok(ordinal)
    }

    /// The full coordinate of `ordinal` (every leaf an integer).
    pub fn decode(&self, ordinal: usize) -> Result<IntTuple> {
        let this = brief(self);
        if ordinal >= self.size() {
            fail!(
                "ordinal {ordinal} is out of range for Shape {this} of size {}",
                self.size()
            );
        }
        let mut rest = ordinal;
        let coords: Vec<usize> = self
            .extents
            .iter()
            .map(|e| {
                let c = rest % e;
                rest /= e;
                c
            })
            .collect();
        let nodes = to_nodes(&self.profile, &coords);
        Ok(IntTuple::Tuple(nodes.iter().map(node_to_tuple).collect()))
    }

    /// Resolves `coord` into one coordinate per leaf, validating it against this shape.
    pub(crate) fn leaf_coordinates<const N: usize>(
        &self,
        coord: &IntTuple,
        out: &mut Small<usize, N>,
    ) -> Result<()> {
        let top = Span {
            tokens: 0..self.profile.tokens().len(),
            leaves: 0..self.extents.len(),
        };
        self.resolve(coord, &top, &mut Vec::new(), out)
    }

    /// Resolves `coord` against the subtree `span`, reached from the top through the child
    /// positions in `path`.
    fn resolve<const N: usize>(
        &self,
        coord: &IntTuple,
        span: &Span,
        path: &mut Vec<usize>,
        out: &mut Small<usize, N>,
    ) -> Result<()> {
        let top = path.is_empty();
        match coord {
            IntTuple::Int(_) | IntTuple::Wide(_) => {
                let extents = &self.extents[span.leaves.clone()];
                let size: usize = extents.iter().product();
                let value = match coord {
                    IntTuple::Int(value) => i128::from(*value),
                    IntTuple::Wide(value) => *value,
                    IntTuple::Tuple(_) => 0,
                };
                let Some(ordinal) = usize::try_from(value).ok().filter(|v| *v < size) else {
                    fail!(
                        "coordinate {value} is out of range [0, {size}) for {}",
                        describe(self, path)
                    );
                };
                let mut rest = ordinal;
                for e in extents {
                    out.push(rest % e);
                    rest /= e;
                }
                Ok(())
            }
            IntTuple::Tuple(items) => {
                if !top && span.is_leaf(&self.profile) {
                    fail!(
                        "coordinate {} has more nesting than {}",
                        brief(coord),
                        describe(self, path)
                    );
                }
                let inner = if top {
                    span.tokens.clone()
                } else {
                    span.tokens.start + 1..span.tokens.end - 1
                };
                let children = self.profile.children(inner, span.leaves.start);
                if children.len() != items.len() {
                    fail!(
                        "coordinate {} has {} entries but {} has {} modes",
                        brief(coord),
                        items.len(),
                        describe(self, path),
                        children.len()
                    );
                }
                for (i, (item, child)) in items.iter().zip(children.iter()).enumerate() {
                    path.push(i);
                    self.resolve(item, child, path, out)?;
                    path.pop();
                }
                Ok(())
            }
        }
    }
}

/// Names the subtree at `path`: "the whole of Shape S", "mode 1 of Shape S" or
/// "mode (1,0) of Shape S".
fn describe(shape: &Shape, path: &[usize]) -> String {
    let shape = brief(shape);
    match path {
        [] => format!("the whole of Shape {shape}"),
        [k] => format!("mode {k} of Shape {shape}"),
        _ => {
            let joined: Vec<String> = path.iter().map(ToString::to_string).collect();
            format!("mode ({}) of Shape {shape}", joined.join(","))
        }
    }
}

/// The nodes of a written shape or stride and its leaf values, depth first.
pub(crate) struct WrittenLeaves {
    pub(crate) nodes: Vec<Node<i128>>,
    pub(crate) values: Vec<i128>,
}

/// Reads a written shape or stride (`what` names it): an integer is a rank-1 tree, a tuple
/// gives the hierarchy. Fails, without recursing into it, when it nests deeper than
/// [`MAX_NESTING`](crate::MAX_NESTING).
pub(crate) fn written_leaves(written: IntTuple, what: &str) -> Result<WrittenLeaves> {
    if let Err(e) = check_nesting(written.depth(), &what) {
        dismantle(written);
        return Err(e);
    }
    let nodes: Vec<Node<i128>> = match &written {
        IntTuple::Tuple(items) => items.iter().map(node_from_tuple).collect(),
        leaf => vec![node_from_tuple(leaf)],
    };
    let mut values = Vec::new();
    nodes.iter().for_each(|m| m.leaves(&mut values));
    Ok(WrittenLeaves { nodes, values })
}

/// The node of a written item whose depth is already checked.
fn node_from_tuple(item: &IntTuple) -> Node<i128> {
    match item {
        IntTuple::Int(value) => Node::Leaf(i128::from(*value)),
        IntTuple::Wide(value) => Node::Leaf(*value),
        IntTuple::Tuple(items) => Node::Tuple(items.iter().map(node_from_tuple).collect()),
    }
}

pub(crate) fn node_to_tuple(node: &Node<usize>) -> IntTuple {
    match node {
        Node::Leaf(value) => IntTuple::from(*value),
        Node::Tuple(children) => IntTuple::Tuple(children.iter().map(node_to_tuple).collect()),
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::notation::write_tree(f, &self.profile, &self.extents)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Shape({self})")
    }
}
