//! The limits that keep every call bounded by what is stored rather than by a tensor's
//! logical size.
//!
//! A view can address far more elements than its carrier holds: a broadcast of one slot to
//! 2^40 elements costs nothing to build. Work that follows such a view must not allocate or
//! iterate in its logical size unchecked. Two rules keep it bounded:
//!
//! - `reserve`: an allocation is checked against the memory this process may use (its
//!   address-space limit when one is set, else the machine's physical memory) before it is
//!   made, and a refusal is a Memory error naming what was being built and the limit;
//! - `check_repeated_work`: a view that repeats slots (its size exceeds the slots it spans)
//!   is processed element by element, and one of more than [`MAX_REPEATED_ELEMENTS`]
//!   elements is a Value error rather than hours of work.

use strideweave_layout::Layout;

use crate::error::{Error, Result};

/// The largest logical size a slot-repeating view may have when work visits it element by
/// element (2^32 elements: a few seconds of work).
pub const MAX_REPEATED_ELEMENTS: usize = 1 << 32;

/// The memory an allocation of this process can use at most, in bytes, and how to name that
/// limit in a message: the address-space limit (`RLIMIT_AS`) when one is set below this
/// machine's physical memory, otherwise the physical memory (`usize::MAX` when the system
/// says neither).
fn memory_limit() -> (usize, &'static str) {
    // SAFETY: `sysconf` reads a system constant; it has no preconditions and touches no
    // memory of ours.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let physical = match (usize::try_from(pages), usize::try_from(page_size)) {
        (Ok(pages), Ok(size)) if pages > 0 && size > 0 => pages.saturating_mul(size),
        _ => usize::MAX,
    };
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` into the valid, exclusively borrowed `limit`
    // and reads nothing of ours.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    match usize::try_from(limit.rlim_cur) {
        Ok(bytes) if read && limit.rlim_cur != libc::RLIM_INFINITY && bytes < physical => {
            (bytes, "address-space limit (RLIMIT_AS) of")
        }
        _ => (physical, "physical memory of"),
    }
}

/// Checks that `count` elements of `element_bytes` bytes each fit in the memory this process
/// may use ([`memory_limit`]), or a Memory error naming `what` (the thing that would have been
/// built), the bytes it needs and the limit in force. For callers that build something sized
/// by their caller outside this crate (the Python binding's lists).
pub fn check_allocation(
    count: usize,
    element_bytes: usize,
    what: impl FnOnce() -> String,
) -> Result<()> {
    let bytes = count.checked_mul(element_bytes);
    let (available, limit) = memory_limit();
    match bytes {
        Some(b) if b <= available => Ok(()),
        _ => Err(memory_error(count, bytes, available, limit, what())),
    }
}

/// The Memory error of an allocation of `count` elements of `element_bytes` bytes, named
/// `what`, that the allocator refused: it names the limit in force, like
/// [`check_allocation`]'s.
#[cold]
pub(crate) fn allocation_refused(count: usize, element_bytes: usize, what: String) -> Error {
    let (available, limit) = memory_limit();
    memory_error(
        count,
        count.checked_mul(element_bytes),
        available,
        limit,
        what,
    )
}

/// Checks that `count` elements of `T` fit in this process's memory (see
/// [`check_allocation`]).
pub fn check_fits<T>(count: usize, what: impl FnOnce() -> String) -> Result<()> {
    check_allocation(count, std::mem::size_of::<T>(), what)
}

/// An empty vector with room for `count` elements of `T`, or a Memory error naming `what`
/// when that many would not fit in this process's memory or the allocator refuses them.
pub(crate) fn reserve<T>(count: usize, what: impl Fn() -> String) -> Result<Vec<T>> {
    check_fits::<T>(count, &what)?;
    let mut vector = Vec::new();
    vector
        .try_reserve_exact(count)
        .map_err(|_| allocation_refused(count, std::mem::size_of::<T>(), what()))?;
    Ok(vector)
}

/// The Memory error of an allocation of `count` elements (`bytes` in all) that the `limit`
/// of `available` bytes cannot hold.
#[cold]
fn memory_error(
    count: usize,
    bytes: Option<usize>,
    available: usize,
    limit: &str,
    what: String,
) -> Error {
    let needed = bytes.map_or_else(|| "more than usize::MAX".to_string(), |b| b.to_string());
    Error::Memory(format!(
        "{what} needs {count} elements ({needed} bytes), more than this process's {limit} \
         {available} bytes can hold"
    ))
}

/// Refuses element-by-element work over `layout` when it repeats slots (its size exceeds its
/// cosize) and its size exceeds [`MAX_REPEATED_ELEMENTS`]; `what` names the view for the
/// message. A layout that addresses each slot at most once passes: its work is bounded by the
/// slots it spans, which exist.
#[inline]
pub(crate) fn check_repeated_work(layout: &Layout, what: impl FnOnce() -> String) -> Result<()> {
    let size = layout.size();
    if size > MAX_REPEATED_ELEMENTS && size > layout.cosize() {
        return Err(repeated_work_error(layout, what()));
    }
    Ok(())
}

/// The error of [`check_repeated_work`], out of the way of the check.
#[cold]
fn repeated_work_error(layout: &Layout, what: String) -> Error {
    Error::Value(format!(
        "{what} is a view of {} elements over {} slots (layout {layout}); element-by-element \
         work over views that repeat slots is limited to {MAX_REPEATED_ELEMENTS} elements",
        layout.size(),
        layout.cosize()
    ))
}

/// The distinct slots `layout` addresses, ascending; the work is bounded by its cosize, never
/// by its logical size, so a broadcast of one slot to 2^40 elements yields `[0]` at once.
///
/// Stride-0 and extent-1 modes are dropped first; if what remains is injective its indices
/// are the answer, otherwise the reached slots are marked in a bitmap of `cosize` bits by
/// doubling each mode's shifts (`rank · log(extent)` passes over the bitmap).
pub(crate) fn distinct_slots(layout: &Layout) -> Result<Vec<usize>> {
    let filtered = layout.filter();
    let cosize = filtered.cosize();
    if filtered.is_injective() {
        let mut slots = reserve(filtered.size(), || format!("the slots of layout {layout}"))?;
        slots.extend(filtered.indices());
        slots.sort_unstable();
        return Ok(slots);
    }
    let words = cosize.div_ceil(64);
    let mut reached: Vec<u64> = reserve(words, || format!("the slot map of layout {layout}"))?;
    reached.resize(words, 0);
    reached[0] = 1;
    for (extent, stride) in filtered.leaf_pairs() {
        // Invariant: `reached` holds S + {0, …, covered-1}·stride, where S is the set before
        // this mode; shifting it by step·stride (step ≤ covered) and joining extends it to
        // S + {0, …, covered+step-1}·stride.
        let mut covered = 1usize;
        while covered < extent {
            let step = covered.min(extent - covered);
            shift_or(&mut reached, step * stride);
            covered += step;
        }
    }
    let mut slots = Vec::new();
    for (w, &word) in reached.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            slots.push(w * 64 + bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }
    Ok(slots)
}

/// Marks `x + shift` for every marked `x`, dropping marks that would fall outside the map.
fn shift_or(map: &mut [u64], shift: usize) {
    let (word_shift, bit_shift) = (shift / 64, shift % 64);
    // Descending, so every word read below `target` still holds its value before this pass.
    for target in (word_shift..map.len()).rev() {
        let low = map[target - word_shift];
        let mut add = low << bit_shift;
        if bit_shift != 0 && target > word_shift {
            add |= map[target - word_shift - 1] >> (64 - bit_shift);
        }
        map[target] |= add;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn brute_force(layout: &Layout) -> Vec<usize> {
        let set: BTreeSet<usize> = layout.indices().collect();
        set.into_iter().collect()
    }

    proptest! {
        #[test]
        fn distinct_slots_are_the_set_of_indices(
            leaves in proptest::collection::vec((1usize..6, 0usize..9), 1..4)
        ) {
            let (extents, strides): (Vec<usize>, Vec<usize>) = leaves.into_iter().unzip();
            let layout = Layout::from_flat(&extents, &strides).unwrap();
            prop_assert_eq!(distinct_slots(&layout).unwrap(), brute_force(&layout));
        }
    }

    #[test]
    fn a_huge_broadcast_has_one_slot() {
        let layout = Layout::from_flat(&[1 << 40, 3], &[0, 0]).unwrap();
        assert_eq!(distinct_slots(&layout).unwrap(), [0]);
    }

    #[test]
    fn shifts_cross_word_boundaries() {
        // 70 elements of stride 1 overlapped by a second mode of stride 65.
        let layout = Layout::from_flat(&[70, 3], &[1, 65]).unwrap();
        assert_eq!(distinct_slots(&layout).unwrap(), brute_force(&layout));
    }

    #[test]
    fn a_reservation_beyond_memory_is_a_memory_error_naming_the_request() {
        let error = reserve::<u64>(usize::MAX / 4, || "the test buffer".into()).unwrap_err();
        assert_eq!(error.kind(), crate::ErrorKind::Memory);
        assert!(
            error
                .to_string()
                .starts_with("memory error: the test buffer needs 4611686018427387903 elements"),
            "{error}"
        );
        assert!(reserve::<u8>(16, String::new).unwrap().capacity() >= 16);
    }
}
