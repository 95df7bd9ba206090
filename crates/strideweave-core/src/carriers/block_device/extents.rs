//! `Extents`: the first-fit allocator of a block device's byte ranges.
//!
//! ```text
//! 0          a         2a         3a         4a   usable = capacity rounded down to a
//! [ carrier  | free    | free     | carrier  |  ]  a = the allocation alignment
//!              \__ one free range [a, 3a) __/
//! ```
//!
//! Invariants:
//! 1. Free ranges are disjoint, non-empty, never adjacent (adjacent ranges are merged on
//!    retirement) and lie inside `[0, usable)`.
//! 2. Every free range starts and ends at a multiple of the alignment, and every allocated
//!    length is a positive multiple of it, so every placement is aligned.
//! 3. A placement is the lowest address of the first free range (in address order) that
//!    is long enough: first fit.

use std::collections::BTreeMap;

/// Why an extent could not be retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RetireError {
    /// The range is not aligned, empty, or beyond the usable bytes.
    Misplaced,
    /// The range overlaps a range that is already free (retired twice).
    AlreadyFree,
}

/// The free byte ranges of one device, allocated first fit at the lowest address.
#[derive(Debug, Clone)]
pub(super) struct Extents {
    alignment: u64,
    usable: u64,
    /// Free ranges, start → end (exclusive).
    free: BTreeMap<u64, u64>,
}

impl Extents {
    /// All of `[0, capacity)` rounded down to `alignment` (a power of two) is free.
    pub(super) fn new(capacity: u64, alignment: u64) -> Extents {
        let alignment = alignment.max(1);
        let usable = capacity - capacity % alignment;
        let mut free = BTreeMap::new();
        if usable > 0 {
            free.insert(0, usable);
        }
        Extents {
            alignment,
            usable,
            free,
        }
    }

    /// `bytes` rounded up to the alignment; `None` when that overflows.
    pub(super) fn round_up(&self, bytes: u64) -> Option<u64> {
        match bytes % self.alignment {
            0 => Some(bytes),
            rest => bytes.checked_add(self.alignment - rest),
        }
    }

    /// The bytes that can ever be allocated (the capacity rounded down to the alignment).
    pub(super) fn usable_bytes(&self) -> u64 {
        self.usable
    }

    /// The bytes currently free.
    pub(super) fn free_bytes(&self) -> u64 {
        self.free.iter().map(|(start, end)| end - start).sum()
    }

    /// Places an extent of `bytes` (a positive multiple of the alignment) at the lowest
    /// free address that has room, and returns that address; `None` when no free range is
    /// long enough (or `bytes` is not a positive multiple of the alignment).
    pub(super) fn allocate(&mut self, bytes: u64) -> Option<u64> {
        if bytes == 0 || !bytes.is_multiple_of(self.alignment) {
            return None;
        }
        let (&start, &end) = self
            .free
            .iter()
            .find(|(start, end)| *end - *start >= bytes)?;
        self.free.remove(&start);
        let taken_end = start + bytes;
        if taken_end < end {
            self.free.insert(taken_end, end);
        }
        Some(start)
    }

    /// Frees `[offset, offset + bytes)` and merges it with adjacent free ranges.
    ///
    /// # Errors
    /// [`RetireError::Misplaced`] for an empty, unaligned or out-of-range extent,
    /// [`RetireError::AlreadyFree`] when any of it is already free; nothing changes then.
    pub(super) fn retire(&mut self, offset: u64, bytes: u64) -> Result<(), RetireError> {
        let end = offset.checked_add(bytes).ok_or(RetireError::Misplaced)?;
        let aligned = offset.is_multiple_of(self.alignment) && bytes.is_multiple_of(self.alignment);
        if bytes == 0 || !aligned || end > self.usable {
            return Err(RetireError::Misplaced);
        }
        let before = self
            .free
            .range(..=offset)
            .next_back()
            .map(|(&start, &stop)| (start, stop));
        let after = self
            .free
            .range(offset..)
            .next()
            .map(|(&start, &stop)| (start, stop));
        let overlaps_before = before.is_some_and(|(_, stop)| stop > offset);
        let overlaps_after = after.is_some_and(|(start, _)| start < end);
        if overlaps_before || overlaps_after {
            return Err(RetireError::AlreadyFree);
        }
        let mut merged = offset..end;
        if let Some((start, _)) = before.filter(|&(_, stop)| stop == offset) {
            self.free.remove(&start);
            merged.start = start;
        }
        if let Some((start, stop)) = after.filter(|&(start, _)| start == end) {
            self.free.remove(&start);
            merged.end = stop;
        }
        self.free.insert(merged.start, merged.end);
        Ok(())
    }

    /// The free ranges in address order (for tests and diagnostics).
    #[cfg(test)]
    fn free_ranges(&self) -> Vec<(u64, u64)> {
        self.free
            .iter()
            .map(|(&start, &end)| (start, end))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_are_aligned_first_fit_at_the_lowest_address() {
        let mut extents = Extents::new(16 * 4096, 4096);
        assert_eq!(extents.usable_bytes(), 16 * 4096);
        assert_eq!(extents.allocate(4096), Some(0));
        assert_eq!(extents.allocate(8192), Some(4096));
        assert_eq!(extents.allocate(4096), Some(12288));
        assert_eq!(extents.free_ranges(), [(16384, 65536)]);
        // A hole at 4096..12288 is reused first by anything that fits in it.
        assert_eq!(extents.retire(4096, 8192), Ok(()));
        assert_eq!(extents.allocate(4096), Some(4096));
        assert_eq!(extents.allocate(8192), Some(16384), "the hole is too small");
        assert_eq!(extents.allocate(4096), Some(8192), "the rest of the hole");
        assert_eq!(extents.free_ranges(), [(24576, 65536)]);
    }

    #[test]
    fn sizes_round_up_to_the_alignment_and_bad_lengths_are_refused() {
        let extents = Extents::new(8192, 512);
        assert_eq!(extents.round_up(0), Some(0));
        assert_eq!(extents.round_up(1), Some(512));
        assert_eq!(extents.round_up(512), Some(512));
        assert_eq!(extents.round_up(513), Some(1024));
        assert_eq!(extents.round_up(u64::MAX), None);
        let mut extents = extents;
        assert_eq!(extents.allocate(0), None);
        assert_eq!(
            extents.allocate(100),
            None,
            "not a multiple of the alignment"
        );
        assert_eq!(extents.free_bytes(), 8192);
    }

    #[test]
    fn the_capacity_is_rounded_down_to_the_alignment() {
        let mut extents = Extents::new(3 * 4096 + 100, 4096);
        assert_eq!(extents.usable_bytes(), 3 * 4096);
        assert_eq!(extents.allocate(3 * 4096), Some(0));
        assert_eq!(extents.free_bytes(), 0);
        let tiny = Extents::new(100, 4096);
        assert_eq!((tiny.usable_bytes(), tiny.free_bytes()), (0, 0));
    }

    #[test]
    fn a_full_device_has_no_room_until_something_is_retired() {
        let mut extents = Extents::new(4 * 512, 512);
        assert_eq!(extents.allocate(2048), Some(0));
        assert_eq!(extents.allocate(512), None);
        assert_eq!(extents.retire(0, 2048), Ok(()));
        assert_eq!(extents.allocate(4096), None, "larger than the device");
        assert_eq!(extents.allocate(2048), Some(0));
    }

    #[test]
    fn adjacent_retirements_merge_in_either_order() {
        let mut extents = Extents::new(4 * 4096, 4096);
        let placed: Vec<_> = (0..4).map(|_| extents.allocate(4096)).collect();
        assert_eq!(placed, [Some(0), Some(4096), Some(8192), Some(12288)]);
        assert_eq!(extents.retire(4096, 4096), Ok(()));
        assert_eq!(extents.retire(12288, 4096), Ok(()));
        assert_eq!(extents.free_ranges(), [(4096, 8192), (12288, 16384)]);
        // Retiring the range between them merges all three into one.
        assert_eq!(extents.retire(8192, 4096), Ok(()));
        assert_eq!(extents.free_ranges(), [(4096, 16384)]);
        assert_eq!(extents.retire(0, 4096), Ok(()));
        assert_eq!(extents.free_ranges(), [(0, 16384)]);
        assert_eq!(extents.allocate(16384), Some(0));
    }

    #[test]
    fn retiring_twice_or_out_of_place_changes_nothing() {
        let mut extents = Extents::new(4 * 512, 512);
        assert_eq!(extents.allocate(1024), Some(0));
        assert_eq!(extents.retire(0, 1024), Ok(()));
        let before = extents.free_ranges();
        assert_eq!(extents.retire(0, 1024), Err(RetireError::AlreadyFree));
        assert_eq!(extents.retire(512, 512), Err(RetireError::AlreadyFree));
        assert_eq!(extents.retire(0, 0), Err(RetireError::Misplaced));
        assert_eq!(extents.retire(100, 512), Err(RetireError::Misplaced));
        assert_eq!(extents.retire(2048, 512), Err(RetireError::Misplaced));
        assert_eq!(
            extents.retire(u64::MAX - 511, 512),
            Err(RetireError::Misplaced)
        );
        assert_eq!(extents.free_ranges(), before);
        // A partial overlap with a free range on either side is refused too.
        let mut extents = Extents::new(4 * 512, 512);
        assert_eq!(extents.allocate(1024), Some(0));
        assert_eq!(extents.retire(512, 1024), Err(RetireError::AlreadyFree));
        assert_eq!(extents.free_ranges(), [(1024, 2048)]);
    }
}
