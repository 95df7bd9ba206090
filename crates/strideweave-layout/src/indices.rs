//! `Indices`: the index of every ordinal of a layout, in ordinal order, computed by stepping
//! rather than by decoding each ordinal.

use crate::layout::{coalesce_leaves, Layout};

/// The iterator [`Layout::indices`] returns: `index_of(0), index_of(1), …, index_of(size-1)`.
///
/// It walks an odometer over the layout's coalesced leaves, so each step is an add (and, at
/// the end of a leaf, a carry) instead of the divisions of [`Layout::index_of`].
#[derive(Debug, Clone)]
pub struct Indices {
    /// `(extent, stride)` of the coalesced leaves, fastest first.
    leaves: Vec<(usize, usize)>,
    /// The coordinate along each leaf.
    counters: Vec<usize>,
    /// The index of the current coordinate.
    index: usize,
    /// How many indices are still to come.
    remaining: usize,
}

impl Indices {
    pub(crate) fn new(layout: &Layout) -> Indices {
        let leaves = coalesce_leaves(layout.leaf_pairs());
        Indices {
            counters: vec![0; leaves.len()],
            leaves,
            index: 0,
            remaining: layout.size(),
        }
    }
}

impl Iterator for Indices {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.index;
        // Advance the odometer: the fastest leaf steps, a full leaf wraps and carries.
        for (counter, &(extent, stride)) in self.counters.iter_mut().zip(&self.leaves) {
            *counter += 1;
            if *counter < extent {
                self.index += stride;
                break;
            }
            *counter = 0;
            self.index -= stride * (extent - 1);
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Indices {}

impl Layout {
    /// The index of every ordinal in ordinal (colexicographic) order, the same values as
    /// `(0..self.size()).map(|i| self.index_of(i))`, computed incrementally.
    ///
    /// ```
    /// use strideweave_layout::Layout;
    /// let a: Layout = "(2,(2,3)):(1,(10,100))".parse()?;
    /// let all: Vec<usize> = a.indices().collect();
    /// assert_eq!(all, [0, 1, 10, 11, 100, 101, 110, 111, 200, 201, 210, 211]);
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn indices(&self) -> Indices {
        Indices::new(self)
    }
}
