//! `Profile`: the value-free structure of a hierarchical shape.

use std::fmt;
use std::ops::Range;

use crate::error::{fail, Result};
use crate::small::Small;

/// The deepest nesting any shape, stride, layout, coordinate, rearrange tree or layout string
/// may have, counted like [`Profile::depth`]: a flat tuple is 1 level, `(2,(3,4))` is 2.
///
/// Every constructor, the parser and every operation that builds a deeper tree returns a
/// [`LayoutError`](crate::LayoutError) naming this limit and the depth found, so no tree a
/// recursive walk could overflow the stack on ever gets in. Real layouts nest a handful of
/// levels; 64 leaves a wide margin while keeping every walk far inside a 2 MiB thread stack.
pub const MAX_NESTING: usize = 64;

/// Fails unless `depth` (of the tree `what` names) is within [`MAX_NESTING`].
pub(crate) fn check_nesting(depth: usize, what: &dyn fmt::Display) -> Result<()> {
    if depth > MAX_NESTING {
        fail!(
            "{what} nests {depth} levels deep, beyond the limit of {MAX_NESTING} levels (MAX_NESTING)"
        );
    }
    Ok(())
}

/// One step of a [`Profile`] recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProfileToken {
    /// An integer leaf.
    #[default]
    Leaf,
    /// The start of a nested tuple.
    Push,
    /// The end of a nested tuple.
    Pop,
}

/// The shape-tree recipe of a shape, stride or layout, independent of its values.
///
/// The top-level tuple is implicit: `(2,(3,4))` has the profile `[Leaf,Push,Leaf,Leaf,Pop]`,
/// a rank-0 shape has the empty profile (docs/layouts.md, Shapes, strides and trees).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Profile {
    tokens: Small<ProfileToken, 8>,
}

/// Where one top-level mode (or one child of a nested tuple) sits in a flattened tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Span {
    /// Its tokens, including its own `Push`/`Pop` when it is a tuple.
    pub(crate) tokens: Range<usize>,
    /// Its leaves, as positions in the flat value list.
    pub(crate) leaves: Range<usize>,
}

impl Span {
    pub(crate) fn is_leaf(&self, profile: &Profile) -> bool {
        self.tokens.len() == 1 && profile.tokens[self.tokens.start] == ProfileToken::Leaf
    }
}

impl Profile {
    /// The profile with the given (balanced) recipe; fails when it nests deeper than
    /// [`MAX_NESTING`]. `what` names the tree for the message.
    pub(crate) fn from_tokens(
        tokens: Small<ProfileToken, 8>,
        what: &dyn fmt::Display,
    ) -> Result<Self> {
        let profile = Profile { tokens };
        check_nesting(profile.depth(), what)?;
        Ok(profile)
    }

    /// The profile of a flat tuple of `rank` leaves.
    pub fn flat(rank: usize) -> Self {
        Profile {
            tokens: std::iter::repeat_n(ProfileToken::Leaf, rank).collect(),
        }
    }

    /// The recipe, top-level tuple omitted.
    pub fn tokens(&self) -> &[ProfileToken] {
        &self.tokens
    }

    /// The number of top-level modes.
    pub fn rank(&self) -> usize {
        let mut depth = 0usize;
        let mut rank = 0;
        for token in self.tokens.iter() {
            match token {
                ProfileToken::Leaf if depth == 0 => rank += 1,
                ProfileToken::Push => {
                    if depth == 0 {
                        rank += 1;
                    }
                    depth += 1;
                }
                ProfileToken::Pop => depth -= 1,
                ProfileToken::Leaf => {}
            }
        }
        rank
    }

    /// The nesting depth: 1 for a flat (or rank-0) tuple, one more per level of nesting;
    /// never more than [`MAX_NESTING`].
    pub fn depth(&self) -> usize {
        let mut depth = 1usize;
        let mut deepest = 1;
        for token in self.tokens.iter() {
            match token {
                ProfileToken::Push => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ProfileToken::Pop => depth -= 1,
                ProfileToken::Leaf => {}
            }
        }
        deepest
    }

    /// The number of integer leaves.
    pub fn leaf_count(&self) -> usize {
        self.tokens
            .iter()
            .filter(|token| **token == ProfileToken::Leaf)
            .count()
    }

    /// Whether every top-level mode is a leaf.
    pub fn is_flat(&self) -> bool {
        self.tokens.iter().all(|token| *token == ProfileToken::Leaf)
    }

    /// The spans of the children of the tuple whose contents are `tokens` (starting at leaf
    /// position `first_leaf`).
    pub(crate) fn children(&self, tokens: Range<usize>, first_leaf: usize) -> Vec<Span> {
        let mut spans = Vec::new();
        let mut leaf = first_leaf;
        let mut i = tokens.start;
        while i < tokens.end {
            let start = i;
            let leaf_start = leaf;
            let mut depth = 0usize;
            loop {
                match self.tokens[i] {
                    ProfileToken::Leaf => leaf += 1,
                    ProfileToken::Push => depth += 1,
                    ProfileToken::Pop => depth -= 1,
                }
                i += 1;
                if depth == 0 {
                    break;
                }
            }
            spans.push(Span {
                tokens: start..i,
                leaves: leaf_start..leaf,
            });
        }
        spans
    }

    /// The spans of the top-level modes.
    pub(crate) fn modes(&self) -> Vec<Span> {
        self.children(0..self.tokens.len(), 0)
    }

    /// The profile of the sub-tree `span`, unwrapped so that a tuple's children become the
    /// top-level modes.
    pub(crate) fn sub_profile(&self, span: &Span) -> Profile {
        let tokens = &self.tokens[span.tokens.clone()];
        let inner = if span.is_leaf(self) {
            tokens
        } else {
            &tokens[1..tokens.len() - 1]
        };
        Profile {
            tokens: Small::from_slice(inner),
        }
    }
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.tokens.iter()).finish()
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, token) in self.tokens.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{token:?}")?;
        }
        f.write_str("]")
    }
}
