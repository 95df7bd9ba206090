//! A recursive view of a flattened tree, used by the structural algebra.
//!
//! Shapes, strides and layouts store their leaves flat beside a [`Profile`] so evaluation is
//! a loop over leaves; operations that rebuild hierarchy (composition, division, products,
//! rearrangement) work on this recursive form instead and flatten the result once.
//!
//! Conversion between the two forms is iterative. The recursive walks elsewhere only ever
//! see trees built from profiles within [`MAX_NESTING`](crate::MAX_NESTING) plus the few
//! levels one operation adds, or written trees whose depth was checked first; flattening
//! rejects any result deeper than the limit.

use std::fmt;

use crate::error::Result;
use crate::profile::{Profile, ProfileToken};
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
        let mut stack: Vec<std::slice::Iter<'_, Node<T>>> = vec![std::slice::from_ref(self).iter()];
        while let Some(top) = stack.last_mut() {
            match top.next() {
                None => {
                    stack.pop();
                }
                Some(Node::Leaf(value)) => out.push(*value),
                Some(Node::Tuple(children)) => stack.push(children.iter()),
            }
        }
    }

    /// Applies `f` to every leaf, keeping the structure (recursive: the tree's depth is
    /// bounded as the module documentation says).
    pub(crate) fn map<U>(&self, f: &mut impl FnMut(T) -> U) -> Node<U> {
        match self {
            Node::Leaf(value) => Node::Leaf(f(*value)),
            Node::Tuple(children) => Node::Tuple(children.iter().map(|c| c.map(f)).collect()),
        }
    }
}

/// The top-level modes of the flat tree `(profile, values)` as nodes.
pub(crate) fn to_nodes<T: Copy>(profile: &Profile, values: &[T]) -> Vec<Node<T>> {
    // `open` holds the children gathered so far of every tuple not yet closed, outermost
    // (the implicit top-level tuple) first.
    let mut open: Vec<Vec<Node<T>>> = vec![Vec::new()];
    let mut leaf = 0;
    for token in profile.tokens() {
        match token {
            ProfileToken::Leaf => {
                if let (Some(value), Some(children)) = (values.get(leaf), open.last_mut()) {
                    children.push(Node::Leaf(*value));
                }
                leaf += 1;
            }
            ProfileToken::Push => open.push(Vec::new()),
            ProfileToken::Pop => {
                // A profile is balanced, so the top-level tuple is never closed here.
                if open.len() > 1 {
                    if let (Some(children), Some(parent)) = (open.pop(), open.last_mut()) {
                        parent.push(Node::Tuple(children));
                    }
                }
            }
        }
    }
    open.into_iter().next().unwrap_or_default()
}

/// Flattens top-level `modes` into a profile and the leaf values; fails when the tree nests
/// deeper than [`MAX_NESTING`](crate::MAX_NESTING). `what` names the tree for that message.
pub(crate) fn from_nodes<T: Copy + Default, const N: usize>(
    modes: &[Node<T>],
    what: &dyn fmt::Display,
) -> Result<(Profile, Small<T, N>)> {
    let mut tokens = Small::new();
    let mut values = Small::new();
    let mut stack: Vec<std::slice::Iter<'_, Node<T>>> = vec![modes.iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            None => {
                stack.pop();
                if !stack.is_empty() {
                    tokens.push(ProfileToken::Pop);
                }
            }
            Some(Node::Leaf(value)) => {
                tokens.push(ProfileToken::Leaf);
                values.push(*value);
            }
            Some(Node::Tuple(children)) => {
                tokens.push(ProfileToken::Push);
                stack.push(children.iter());
            }
        }
    }
    Ok((Profile::from_tokens(tokens, what)?, values))
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
