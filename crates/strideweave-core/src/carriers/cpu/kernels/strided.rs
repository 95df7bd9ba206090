//! Walking strided layouts in runs: the iteration space of a kernel is the result's ordinals
//! (first leaf fastest), and every operand reads them through its own strides.
//!
//! A [`Walk`] pairs the result extents with one stride per leaf for each of `N` operands,
//! jointly coalesced: extent-1 leaves are dropped and a leaf merges into the previous one when
//! it continues it for *every* operand (`stride == previous stride · previous extent`). The
//! first remaining leaf is then the longest stretch of ordinals each operand reads at one
//! fixed stride; [`Walk::runs`] hands those stretches ("runs") to the kernel, which loops over
//! them without any per-element index arithmetic.
//!
//! ```text
//! result (4,3) column-major, lhs (4,3):(1,4), rhs (1,3):(0,1) broadcast
//!   leaves     extent  lhs  rhs
//!     0          4      1    0      <- runs of 4: lhs contiguous, rhs one value
//!     1          3      4    1
//! ```

use strideweave_layout::Layout;

use crate::error::{Error, Result};

/// How many items a [`Small`] holds in place before it moves to the heap.
const INLINE: usize = 4;

/// A short list of `Copy` items kept in place (up to [`INLINE`]) so that the common kernel
/// setup allocates nothing; longer lists move to the heap.
#[derive(Debug, Clone)]
pub(super) enum Small<T: Copy> {
    /// Up to [`INLINE`] items and how many are used.
    Inline([T; INLINE], usize),
    /// More items.
    Heap(Vec<T>),
}

impl<T: Copy + Default> Small<T> {
    /// An empty list.
    pub(super) fn new() -> Small<T> {
        Small::empty(T::default())
    }
}

impl<T: Copy> Small<T> {
    /// An empty list whose unused places hold `filler`.
    pub(super) fn empty(filler: T) -> Small<T> {
        Small::Inline([filler; INLINE], 0)
    }

    /// `len` copies of `value`.
    pub(super) fn filled(value: T, len: usize) -> Small<T> {
        if len <= INLINE {
            Small::Inline([value; INLINE], len)
        } else {
            Small::Heap(vec![value; len])
        }
    }

    /// Appends `item`.
    #[inline]
    pub(super) fn push(&mut self, item: T) {
        match self {
            Small::Inline(items, len) if *len < INLINE => {
                items[*len] = item;
                *len += 1;
            }
            Small::Inline(items, len) => {
                let mut heap = Vec::with_capacity(2 * INLINE);
                heap.extend_from_slice(&items[..*len]);
                heap.push(item);
                *self = Small::Heap(heap);
            }
            Small::Heap(items) => items.push(item),
        }
    }

    /// The items.
    pub(super) fn as_slice(&self) -> &[T] {
        match self {
            Small::Inline(items, len) => &items[..*len],
            Small::Heap(items) => items,
        }
    }

    /// The items, mutably.
    pub(super) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Small::Inline(items, len) => &mut items[..*len],
            Small::Heap(items) => items,
        }
    }

    /// The last item, mutably.
    fn last_mut(&mut self) -> Option<&mut T> {
        self.as_mut_slice().last_mut()
    }
}

/// One jointly coalesced leaf: its extent and each operand's stride along it.
pub(super) type Leaf<const N: usize> = (usize, [usize; N]);

/// The iteration space of a kernel over `N` operands, jointly coalesced (see the module
/// docs). Ordinal `o` of the walk is result ordinal `o`; operand `k` reads slot
/// `Σ coordinate·stride[k]` relative to its own base.
#[derive(Debug, Clone)]
pub(super) struct Walk<const N: usize> {
    /// The leaves, first fastest; never empty (a single `(1, [0; N])` when nothing is left).
    leaves: Small<Leaf<N>>,
}

impl<const N: usize> Walk<N> {
    /// The walk of `extents` (the result's leaf extents) where operand `k` reads with
    /// `strides[k]` (one stride per leaf, stride 0 for a broadcast leaf).
    ///
    /// # Errors
    /// A Value error when a stride list does not have one stride per extent.
    pub(super) fn new(extents: &[usize], strides: [&[usize]; N]) -> Result<Walk<N>> {
        if let Some(bad) = strides.iter().find(|s| s.len() != extents.len()) {
            return Err(Error::Value(format!(
                "a strided walk over {} leaves got {} strides",
                extents.len(),
                bad.len()
            )));
        }
        let mut leaves: Small<Leaf<N>> = Small::empty((1, [0; N]));
        for (leaf, &extent) in extents.iter().enumerate() {
            if extent == 1 {
                continue;
            }
            let mut stride = [0usize; N];
            for (k, s) in strides.iter().enumerate() {
                stride[k] = s[leaf];
            }
            match leaves.last_mut() {
                Some((previous, before))
                    if (0..N).all(|k| Some(stride[k]) == before[k].checked_mul(*previous)) =>
                {
                    *previous *= extent;
                }
                _ => leaves.push((extent, stride)),
            }
        }
        if leaves.as_slice().is_empty() {
            leaves.push((1, [0; N]));
        }
        Ok(Walk { leaves })
    }

    /// The walk of `size` ordinals along one leaf, operand `k` reading at `strides[k]`
    /// (the common dense case, built without coalescing).
    pub(super) fn flat(size: usize, strides: [usize; N]) -> Walk<N> {
        let mut leaves = Small::empty((1, [0; N]));
        leaves.push((size.max(1), strides));
        Walk { leaves }
    }

    /// The jointly coalesced leaves, first fastest.
    pub(super) fn leaves(&self) -> &[Leaf<N>] {
        self.leaves.as_slice()
    }

    /// The number of ordinals.
    pub(super) fn size(&self) -> usize {
        self.leaves().iter().map(|l| l.0).product()
    }

    /// The extent and operand strides of the innermost (first) leaf.
    pub(super) fn inner(&self) -> Leaf<N> {
        self.leaves().first().copied().unwrap_or((1, [0; N]))
    }

    /// Calls `f(ordinal, bases, len)` for every run of ordinals in `begin..end`, in order: a
    /// run is `len` consecutive ordinals along the first leaf, where operand `k` reads
    /// `bases[k] + t · inner().1[k]` for `t < len`. Stops at (and returns) the first error of
    /// `f`.
    pub(super) fn runs<E>(
        &self,
        begin: usize,
        end: usize,
        mut f: impl FnMut(usize, [usize; N], usize) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let leaves = self.leaves();
        let end = end.min(self.size());
        if begin >= end {
            return Ok(());
        }
        if let [(_, stride)] = leaves {
            // One leaf: a single run.
            return f(begin, stride.map(|s| begin * s), end - begin);
        }
        // Decompose `begin` into leaf coordinates and the operands' bases.
        let mut coords: Small<usize> = Small::filled(0, leaves.len());
        let mut bases = [0usize; N];
        let mut rest = begin;
        for (c, (extent, stride)) in coords.as_mut_slice().iter_mut().zip(leaves) {
            *c = rest % extent;
            rest /= extent;
            for (b, s) in bases.iter_mut().zip(stride) {
                *b += *c * s;
            }
        }
        let coords = coords.as_mut_slice();
        let (first, outer) = leaves.split_first().unwrap_or((&(1, [0; N]), &[]));
        let mut ordinal = begin;
        loop {
            let start = coords.first().copied().unwrap_or(0);
            let len = (first.0 - start).min(end - ordinal);
            f(ordinal, bases, len)?;
            ordinal += len;
            if ordinal >= end {
                return Ok(());
            }
            // The run reached the end of the first leaf: rewind it and carry outward.
            for (b, s) in bases.iter_mut().zip(&first.1) {
                *b -= start * s;
            }
            let (head, outer_coords) = coords.split_at_mut(1);
            head[0] = 0;
            for (c, (extent, stride)) in outer_coords.iter_mut().zip(outer) {
                *c += 1;
                if *c < *extent {
                    for (b, s) in bases.iter_mut().zip(stride) {
                        *b += s;
                    }
                    break;
                }
                *c = 0;
                for (b, s) in bases.iter_mut().zip(stride) {
                    *b -= (extent - 1) * s;
                }
            }
        }
    }
}

/// Operand `layout`'s strides when read at the ordinals of `extents` (the result's leaf
/// extents, same tree): equal extents keep their stride, an extent-1 leaf broadcasts with
/// stride 0.
///
/// # Errors
/// A Value error when the leaf counts differ or an extent neither matches nor is 1.
pub(super) fn broadcast_strides(layout: &Layout, extents: &[usize]) -> Result<Small<usize>> {
    if layout.leaf_pairs().len() != extents.len() {
        return Err(Error::Value(format!(
            "Layout {layout} cannot be read at the {} leaves of the result",
            extents.len()
        )));
    }
    let mut strides = Small::new();
    for ((extent, stride), &target) in layout.leaf_pairs().zip(extents) {
        if extent == target {
            strides.push(stride);
        } else if extent == 1 {
            strides.push(0);
        } else {
            return Err(Error::Value(format!(
                "Layout {layout} cannot broadcast extent {extent} to {target}"
            )));
        }
    }
    Ok(strides)
}

/// The walk of one layout over its own ordinals.
pub(super) fn walk_of(layout: &Layout) -> Result<Walk<1>> {
    let leaves: Small<(usize, usize)> = layout.leaf_pairs().fold(Small::new(), push);
    walk_of_leaves(leaves.as_slice().iter().copied())
}

/// [`walk_of`] over `(extent, stride)` leaves (one mode of a layout, say).
pub(super) fn walk_of_leaves(
    leaves: impl Iterator<Item = (usize, usize)> + Clone,
) -> Result<Walk<1>> {
    let mut first = leaves.clone();
    if let (Some((extent, stride)), None) = (first.next(), first.next()) {
        // One leaf has nothing to coalesce: what `Walk::new` makes of it, directly.
        let mut walk = Small::empty((1, [0]));
        walk.push(if extent == 1 {
            (1, [0])
        } else {
            (extent, [stride])
        });
        return Ok(Walk { leaves: walk });
    }
    let extents: Small<usize> = leaves.clone().map(|l| l.0).fold(Small::new(), push);
    let strides: Small<usize> = leaves.map(|l| l.1).fold(Small::new(), push);
    Walk::new(extents.as_slice(), [strides.as_slice()])
}

/// `list` with `item` appended (a fold step).
fn push<T: Copy + Default>(mut list: Small<T>, item: T) -> Small<T> {
    list.push(item);
    list
}

/// Whether every slot `base + t·stride` for `t < len` lies below `limit` (a guard kernels run
/// before slicing, so that no input can make them index out of range).
pub(super) fn fits(base: usize, stride: usize, len: usize, limit: usize) -> bool {
    match len.checked_sub(1) {
        None => true,
        Some(last) => last
            .checked_mul(stride)
            .and_then(|span| span.checked_add(base))
            .is_some_and(|top| top < limit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect<const N: usize>(
        walk: &Walk<N>,
        begin: usize,
        end: usize,
    ) -> Vec<(usize, [usize; N], usize)> {
        let mut runs = Vec::new();
        let _ = walk.runs::<()>(begin, end, |o, b, l| {
            runs.push((o, b, l));
            Ok(())
        });
        runs
    }

    #[test]
    fn a_single_leaf_walks_as_the_general_walk_does() -> Result<()> {
        for leaf in [(0, 3), (1, 7), (1, 0), (5, 1), (5, 0), (4, 9)] {
            let quick = walk_of_leaves([leaf].into_iter())?;
            let general = Walk::new(&[leaf.0], [&[leaf.1]])?;
            assert_eq!(quick.leaves(), general.leaves(), "leaf {leaf:?}");
        }
        Ok(())
    }

    #[test]
    fn joint_coalescing_merges_only_what_every_operand_continues() -> Result<()> {
        // lhs (4,3):(1,4) contiguous, rhs (4,3):(3,1) transposed.
        let both = Walk::new(&[4, 3], [&[1, 4], &[3, 1]])?;
        assert_eq!(both.leaves(), [(4, [1, 3]), (3, [4, 1])]);
        let contiguous = Walk::new(&[4, 3, 1, 2], [&[1, 4, 99, 12], &[0, 0, 5, 0]])?;
        assert_eq!(contiguous.leaves(), [(24, [1, 0])]);
        let scalar = Walk::<1>::new(&[1, 1], [&[3, 4]])?;
        assert_eq!(scalar.leaves(), [(1, [0])]);
        assert!(Walk::<1>::new(&[2, 2], [&[1]]).is_err());
        Ok(())
    }

    #[test]
    fn runs_visit_every_ordinal_once_from_any_start() -> Result<()> {
        let layout: Layout = "((2,3),(2,2)):((1,6),(2,20))".parse()?;
        let walk = walk_of(&layout)?;
        for begin in 0..layout.size() {
            for end in begin..=layout.size() {
                let mut seen = Vec::new();
                for (ordinal, [base], len) in collect(&walk, begin, end) {
                    for t in 0..len {
                        seen.push((ordinal + t, base + t * walk.inner().1[0]));
                    }
                }
                let expected: Vec<(usize, usize)> = (begin..end)
                    .map(|o| (o, layout.index_of(o).unwrap_or(usize::MAX)))
                    .collect();
                assert_eq!(seen, expected, "{begin}..{end}");
            }
        }
        Ok(())
    }

    #[test]
    fn broadcast_strides_widen_extent_one_leaves() -> Result<()> {
        let layout: Layout = "(1,(3,1)):(7,(1,5))".parse()?;
        let strides = broadcast_strides(&layout, &[4, 3, 2])?;
        assert_eq!(strides.as_slice(), [0, 1, 0]);
        assert!(broadcast_strides(&layout, &[4, 2, 2]).is_err());
        assert!(broadcast_strides(&layout, &[4, 3]).is_err());
        Ok(())
    }

    #[test]
    fn small_lists_spill_to_the_heap_keeping_their_items() {
        let mut list = Small::new();
        for i in 0..20 {
            list.push(i);
        }
        assert_eq!(list.as_slice(), (0..20).collect::<Vec<_>>());
        assert!(matches!(list, Small::Heap(_)));
        assert_eq!(Small::filled(3, 9).as_slice(), [3; 9]);
    }

    #[test]
    fn fits_guards_the_last_slot() {
        assert!(fits(0, 1, 4, 4));
        assert!(!fits(1, 1, 4, 4));
        assert!(fits(9, 0, 1000, 10));
        assert!(fits(100, 5, 0, 0));
        assert!(!fits(0, usize::MAX, 3, usize::MAX));
    }
}
