//! `Stride`: a hierarchical tuple of non-negative steps, one per shape leaf.

use std::fmt;

use crate::error::{fail, Result};
use crate::int_tuple::IntTuple;
use crate::node::{from_nodes, Node};
use crate::profile::Profile;
use crate::shape::{written_leaves, MAX_EXTENT};
use crate::small::Small;

/// A hierarchical tuple of strides (each in `0..=i64::MAX`; 0 means broadcast).
///
/// It is written like a [`Shape`](crate::Shape): an integer is a rank-1 stride, a tuple gives
/// the hierarchy.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Stride {
    profile: Profile,
    values: Small<usize, 4>,
}

impl Stride {
    /// Builds a stride from its written form; fails on a negative value, a value beyond
    /// `i64::MAX` (an [`IntTuple::Wide`]) or nesting beyond
    /// [`MAX_NESTING`](crate::MAX_NESTING).
    pub fn new(written: impl Into<IntTuple>) -> Result<Stride> {
        let leaves = written_leaves(written.into(), "Stride")?;
        if let Some(bad) = leaves.values.iter().find(|s| **s < 0) {
            fail!("Stride values must be >= 0, got {bad}");
        }
        if let Some(bad) = leaves.values.iter().find(|s| **s > MAX_EXTENT as i128) {
            fail!("Stride value {bad} exceeds i64::MAX");
        }
        // Every leaf is now in 0..=i64::MAX.
        let modes: Vec<Node<usize>> = leaves
            .nodes
            .iter()
            .map(|m| m.map(&mut |s| usize::try_from(s).unwrap_or(MAX_EXTENT)))
            .collect();
        let (profile, values) = from_nodes(&modes, &"Stride")?;
        Ok(Stride { profile, values })
    }

    /// A flat stride with the given values.
    pub fn flat(values: &[usize]) -> Result<Stride> {
        Stride::from_parts(Profile::flat(values.len()), Small::from_slice(values))
    }

    pub(crate) fn from_parts(profile: Profile, values: Small<usize, 4>) -> Result<Stride> {
        if let Some(bad) = values.iter().find(|s| **s > MAX_EXTENT) {
            fail!("Stride value {bad} exceeds i64::MAX");
        }
        Ok(Stride { profile, values })
    }

    /// The number of top-level modes.
    pub fn rank(&self) -> usize {
        self.profile.rank()
    }

    /// The value-free tree structure.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The strides of the leaves, depth first.
    #[inline]
    pub fn leaves(&self) -> &[usize] {
        &self.values
    }

    /// The written form of this stride.
    pub fn to_int_tuple(&self) -> IntTuple {
        let nodes = crate::node::to_nodes(&self.profile, &self.values);
        IntTuple::Tuple(nodes.iter().map(crate::shape::node_to_tuple).collect())
    }
}

impl fmt::Display for Stride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::notation::write_tree(f, &self.profile, &self.values)
    }
}

impl fmt::Debug for Stride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stride({self})")
    }
}
