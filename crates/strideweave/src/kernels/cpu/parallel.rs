//! When and how the CPU kernels use threads: two rayon tasks over contiguous halves of the
//! work, only above [`THREADING_THRESHOLD`] elements (docs/performance-targets.md, How the
//! CPU path is built for it); smaller work runs on the calling thread without touching the
//! pool.

/// The element count from which a kernel splits its work over two threads.
pub(super) const THREADING_THRESHOLD: usize = 100_000;

/// The number of threads a large kernel uses (the machines have two cores).
pub(super) const THREADS: usize = 2;

/// Whether work over `elements` elements is split over threads.
pub(super) fn threaded(elements: usize) -> bool {
    elements > THREADING_THRESHOLD
}

/// The split point of `0..len` into two halves whose first ends on a multiple of 64 elements
/// (a cache line of the widest element), so threads never share an output line.
pub(super) fn midpoint(len: usize) -> usize {
    let half = len / 2;
    let aligned = half - half % 64;
    if aligned == 0 {
        half
    } else {
        aligned
    }
}

/// Runs `left` and `right` on two threads and returns both results.
pub(super) fn join<A: Send, B: Send>(
    left: impl FnOnce() -> A + Send,
    right: impl FnOnce() -> B + Send,
) -> (A, B) {
    rayon::join(left, right)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midpoints_split_on_cache_lines_when_they_can() {
        assert_eq!(midpoint(300_000), 149_952);
        assert_eq!(midpoint(10), 5);
        assert_eq!(midpoint(1), 0);
        assert!(!threaded(THREADING_THRESHOLD));
        assert!(threaded(THREADING_THRESHOLD + 1));
        assert_eq!(join(|| 1, || 2), (1, 2));
        assert_eq!(THREADS, 2);
    }
}
