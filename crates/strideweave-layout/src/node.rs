//! A recursive view of a flattened tree, used by the structural algebra.
//!
//! Shapes, strides and layouts store their leaves flat beside a [`Profile`] so evaluation is
//! a loop over leaves; operations that rebuild hierarchy (composition, division, products,
//! rearrangement) work on this recursive form instead and flatten the result once.

use crate::profile::{Profile, ProfileToken, Span};
use crate::small::Small;

/// One node of a tree whose leaves carry `T`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node<T> {
    Leaf(T),
    Tuple(Vec<Node<T>>),
}

impl<T: Copy> Node<T> {
    /// The leaves, depth first.
    pub(crate) fn leaves(&self, out: &mut Vec<T>) {
        match self {
            Node::Leaf(value) => out.push(*value),
            Node::Tuple(children) => children.iter().for_each(|child| child.leaves(out)),
        }
    }

    /// Applies `f` to every leaf, keeping the structure.
    pub(crate) fn map<U>(&self, f: &mut impl FnMut(T) -> U) -> Node<U> {
        match self {
            Node::Leaf(value) => Node::Leaf(f(*value)),
            Node::Tuple(children) => Node::Tuple(children.iter().map(|c| c.map(f)).collect()),
        }
    }
}

/// The top-level modes of the flat tree `(profile, values)` as nodes.
pub(crate) fn to_nodes<T: Copy>(profile: &Profile, values: &[T]) -> Vec<Node<T>> {
    fn build<T: Copy>(profile: &Profile, values: &[T], span: &Span) -> Node<T> {
        if span.is_leaf(profile) {
            Node::Leaf(values[span.leaves.start])
        } else {
            let inner = span.tokens.start + 1..span.tokens.end - 1;
            Node::Tuple(
                profile
                    .children(inner, span.leaves.start)
                    .iter()
                    .map(|child| build(profile, values, child))
                    .collect(),
            )
        }
    }
    profile
        .modes()
        .iter()
        .map(|span| build(profile, values, span))
        .collect()
}

/// Flattens top-level `modes` into a profile and the leaf values.
pub(crate) fn from_nodes<T: Copy + Default, const N: usize>(
    modes: &[Node<T>],
) -> (Profile, Small<T, N>) {
    fn walk<T: Copy + Default, const N: usize>(
        node: &Node<T>,
        tokens: &mut Small<ProfileToken, 8>,
        values: &mut Small<T, N>,
    ) {
        match node {
            Node::Leaf(value) => {
                tokens.push(ProfileToken::Leaf);
                values.push(*value);
            }
            Node::Tuple(children) => {
                tokens.push(ProfileToken::Push);
                children.iter().for_each(|c| walk(c, tokens, values));
                tokens.push(ProfileToken::Pop);
            }
        }
    }
    let mut tokens = Small::new();
    let mut values = Small::new();
    modes.iter().for_each(|m| walk(m, &mut tokens, &mut values));
    (Profile::from_tokens(tokens), values)
}

/// The single node that stands for a whole tree with top-level `modes` when it becomes one
/// mode of another tree: a rank-1 tree is its mode, any other rank becomes a tuple.
pub(crate) fn as_mode<T>(modes: Vec<Node<T>>) -> Node<T> {
    match <[Node<T>; 1]>::try_from(modes) {
        Ok([mode]) => mode,
        Err(modes) => Node::Tuple(modes),
    }
}

/// The top-level modes of a tree that consists of the single node `mode`: a tuple's children,
/// or the leaf itself.
pub(crate) fn mode_to_modes<T>(mode: Node<T>) -> Vec<Node<T>> {
    match mode {
        Node::Tuple(children) => children,
        leaf => vec![leaf],
    }
}
