//! A short sequence stored inline up to `N` items and on the heap beyond.
//!
//! Layout evaluation runs on every element access, so the leaves of a layout of rank ≤ 4
//! must not live behind a pointer. This is the one container the crate needs; it has no
//! unsafe code because its items are `Copy + Default`.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

/// A vector of `Copy` items kept inline while it holds at most `N` of them.
#[derive(Clone)]
pub(crate) enum Small<T: Copy + Default, const N: usize> {
    Inline { len: usize, items: [T; N] },
    Heap(Vec<T>),
}

impl<T: Copy + Default, const N: usize> Small<T, N> {
    /// An empty sequence.
    pub(crate) fn new() -> Self {
        Small::Inline {
            len: 0,
            items: [T::default(); N],
        }
    }

    /// A sequence holding a copy of `items`.
    pub(crate) fn from_slice(items: &[T]) -> Self {
        if items.len() <= N {
            let mut inline = [T::default(); N];
            inline[..items.len()].copy_from_slice(items);
            Small::Inline {
                len: items.len(),
                items: inline,
            }
        } else {
            Small::Heap(items.to_vec())
        }
    }

    /// Appends one item, moving to the heap when the inline room is full.
    pub(crate) fn push(&mut self, item: T) {
        match self {
            Small::Inline { len, items } if *len < N => {
                items[*len] = item;
                *len += 1;
            }
            Small::Inline { len, items } => {
                let mut heap = Vec::with_capacity(2 * N + 1);
                heap.extend_from_slice(&items[..*len]);
                heap.push(item);
                *self = Small::Heap(heap);
            }
            Small::Heap(heap) => heap.push(item),
        }
    }
}

impl<T: Copy + Default, const N: usize> Default for Small<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default, const N: usize> Deref for Small<T, N> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            Small::Inline { len, items } => &items[..*len],
            Small::Heap(heap) => heap,
        }
    }
}

impl<T: Copy + Default, const N: usize> DerefMut for Small<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Small::Inline { len, items } => &mut items[..*len],
            Small::Heap(heap) => heap,
        }
    }
}

impl<T: Copy + Default, const N: usize> FromIterator<T> for Small<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut small = Small::new();
        for item in iter {
            small.push(item);
        }
        small
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for Small<T, N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy + Default + Eq, const N: usize> Eq for Small<T, N> {}

impl<T: Copy + Default + Hash, const N: usize> Hash for Small<T, N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl<T: Copy + Default + fmt::Debug, const N: usize> fmt::Debug for Small<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_inline_up_to_capacity_then_spills() {
        let mut small: Small<usize, 2> = Small::new();
        small.push(1);
        small.push(2);
        assert!(matches!(small, Small::Inline { .. }));
        small.push(3);
        assert!(matches!(small, Small::Heap(_)));
        assert_eq!(&*small, &[1, 2, 3]);
    }

    #[test]
    fn equality_ignores_storage() {
        let inline: Small<usize, 4> = Small::from_slice(&[1, 2]);
        let heap: Small<usize, 4> = Small::Heap(vec![1, 2]);
        assert_eq!(inline, heap);
    }
}
