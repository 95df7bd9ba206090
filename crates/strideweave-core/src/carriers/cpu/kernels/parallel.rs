//! When and how the CPU kernels use threads (docs/performance-targets.md, How the CPU path is
//! built for it; the public setting is [`crate::parallelism`]).
//!
//! Work of at most [`THREADING_THRESHOLD`] elements runs on the calling thread without
//! reading the setting or touching the pool. Larger work is cut into
//! `min(threads allowed, work / MIN_CHUNK)` contiguous chunks ([`chunk_count`]) run as rayon
//! tasks ([`for_each_chunk`]), so every chunk holds at least [`MIN_CHUNK`] elements and work
//! just above the threshold splits in two. A cut that would change a result — a reduction's
//! partial sums — is made by [`pieces`] from the size of the work alone, and the setting only
//! decides how many threads compute the pieces ([`map_pieces`]).

use std::convert::Infallible;

/// The element count above which a kernel may split its work over threads.
pub(super) const THREADING_THRESHOLD: usize = 100_000;

/// The fewest elements a chunk of split work holds: half the threshold, so work just above
/// it splits in two.
pub(super) const MIN_CHUNK: usize = THREADING_THRESHOLD / 2;

/// Output chunks start on multiples of this many elements when they can (a cache line of the
/// widest element), so threads never share an output line.
const LINE: usize = 64;

/// The most tasks the setting in force on this thread allows
/// ([`crate::parallelism::current`]).
pub(super) fn allowed() -> usize {
    crate::parallelism::current().thread_count()
}

/// How many tasks work of `work` units uses when every task needs at least `share` units and
/// `threads` are allowed: `min(threads, work / share)`, at least 1.
pub(super) fn spread(work: usize, share: usize, threads: usize) -> usize {
    threads.min(work / share.max(1)).max(1)
}

/// How many chunks elementwise or reduction work of `elements` elements is cut into under the
/// setting in force: 1 up to [`THREADING_THRESHOLD`] (the setting is not even read), else
/// [`spread`] over [`MIN_CHUNK`]-element shares.
pub(super) fn chunk_count(elements: usize) -> usize {
    if elements <= THREADING_THRESHOLD {
        1
    } else {
        spread(elements, MIN_CHUNK, allowed())
    }
}

/// Whether work over `elements` elements is split over threads under the setting in force.
pub(super) fn threaded(elements: usize) -> bool {
    chunk_count(elements) > 1
}

/// How many pieces a reduction over `elements` elements cuts its reduced mode of `extent`
/// ordinals into when it cuts it: one per [`MIN_CHUNK`] elements, at most `extent`. It depends
/// on the work alone, never on the setting, so the partial sums — and the result bits — are
/// the same on any number of threads.
pub(super) fn pieces(elements: usize, extent: usize) -> usize {
    (elements / MIN_CHUNK).min(extent).max(1)
}

/// The end of the first `left` of `parts` equal shares of `0..len`, moved down onto a
/// multiple of `align` unless that would leave the first share empty.
fn boundary(len: usize, left: usize, parts: usize, align: usize) -> usize {
    // `left < parts`, so the quotient is below `len` and fits.
    let exact = (len as u128 * left as u128 / parts as u128) as usize;
    let aligned = exact - exact % align;
    if aligned == 0 {
        exact
    } else {
        aligned
    }
}

/// The split point of `0..len` into two halves whose first ends on a multiple of 64 elements
/// when it can (what [`for_each_chunk`] does with two chunks).
pub(super) fn midpoint(len: usize) -> usize {
    boundary(len, 1, 2, LINE)
}

/// Runs `left` and `right` on two threads and returns both results.
pub(super) fn join<A: Send, B: Send>(
    left: impl FnOnce() -> A + Send,
    right: impl FnOnce() -> B + Send,
) -> (A, B) {
    rayon::join(left, right)
}

/// Runs `part(begin, chunk)` over `out` cut into `chunks` contiguous chunks (`begin` is the
/// chunk's first index; boundaries on multiples of 64 elements when they can be), as rayon
/// tasks when there is more than one, else on the calling thread. The error of the first
/// failing chunk in index order is returned, so errors do not depend on the chunk count.
pub(super) fn for_each_chunk<O: Send, E: Send>(
    out: &mut [O],
    chunks: usize,
    part: impl Fn(usize, &mut [O]) -> Result<(), E> + Sync,
) -> Result<(), E> {
    split(out, 0, chunks.min(out.len()), LINE, &part)
}

/// [`for_each_chunk`] over `out[..]`, whose first element has index `begin`.
fn split<O: Send, E: Send>(
    out: &mut [O],
    begin: usize,
    chunks: usize,
    align: usize,
    part: &(impl Fn(usize, &mut [O]) -> Result<(), E> + Sync),
) -> Result<(), E> {
    if chunks <= 1 {
        return part(begin, out);
    }
    let left = chunks / 2;
    let mid = boundary(out.len(), left, chunks, align);
    let (low, high) = out.split_at_mut(mid);
    let (first, second) = rayon::join(
        || split(low, begin, left, align, part),
        || split(high, begin + mid, chunks - left, align, part),
    );
    first.and(second)
}

/// `piece(lo, hi)` for each of `pieces` consecutive near-equal ranges `lo..hi` covering
/// `0..extent`, computed by up to `threads` tasks, returned in range order. The ranges
/// depend on `extent` and `pieces` only.
pub(super) fn map_pieces<T: Send>(
    extent: usize,
    pieces: usize,
    threads: usize,
    piece: impl Fn(usize, usize) -> T + Sync,
) -> Vec<T> {
    let pieces = pieces.max(1);
    // `p ≤ pieces`, so the quotient is at most `extent` and fits.
    let bound = |p: usize| (extent as u128 * p as u128 / pieces as u128) as usize;
    let mut slots: Vec<Option<T>> = (0..pieces).map(|_| None).collect();
    let tasks = threads.min(pieces);
    let filled = split(
        &mut slots,
        0,
        tasks,
        1,
        &|first, chunk: &mut [Option<T>]| {
            for (t, slot) in chunk.iter_mut().enumerate() {
                *slot = Some(piece(bound(first + t), bound(first + t + 1)));
            }
            Ok::<(), Infallible>(())
        },
    );
    match filled {
        Ok(()) => slots.into_iter().flatten().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    #[test]
    fn midpoints_split_on_cache_lines_when_they_can() {
        assert_eq!(midpoint(300_000), 149_952);
        assert_eq!(midpoint(10), 5);
        assert_eq!(midpoint(1), 0);
        assert_eq!(join(|| 1, || 2), (1, 2));
    }

    #[test]
    fn small_work_stays_on_one_chunk_whatever_the_setting() {
        use crate::parallelism::{with_parallelism, Parallelism};
        for p in [
            Parallelism::Machine,
            Parallelism::threads(64).unwrap(),
            Parallelism::threads(usize::MAX).unwrap(),
        ] {
            with_parallelism(p, || {
                assert_eq!(chunk_count(0), 1);
                assert_eq!(chunk_count(1), 1);
                assert_eq!(chunk_count(THREADING_THRESHOLD), 1);
                assert!(!threaded(THREADING_THRESHOLD));
            });
        }
        with_parallelism(Parallelism::threads(4).unwrap(), || {
            assert_eq!(chunk_count(THREADING_THRESHOLD + 1), 2);
            assert_eq!(chunk_count(3 * MIN_CHUNK), 3);
            assert_eq!(chunk_count(100 * MIN_CHUNK), 4);
            assert!(threaded(THREADING_THRESHOLD + 1));
        });
        for p in [Parallelism::Sequential, Parallelism::threads(1).unwrap()] {
            with_parallelism(p, || assert_eq!(chunk_count(usize::MAX), 1));
        }
    }

    #[test]
    fn spread_is_the_smaller_of_the_threads_and_the_shares() {
        assert_eq!(spread(0, 10, 8), 1);
        assert_eq!(spread(9, 10, 8), 1);
        assert_eq!(spread(20, 10, 8), 2);
        assert_eq!(spread(1000, 10, 8), 8);
        assert_eq!(spread(1000, 0, 8), 8);
        assert_eq!(spread(1000, 10, 0), 1);
    }

    #[test]
    fn reduction_pieces_depend_on_the_work_alone() {
        assert_eq!(pieces(THREADING_THRESHOLD + 1, 1 << 20), 2);
        assert_eq!(pieces(16 << 20, 16 << 20), (16 << 20) / MIN_CHUNK);
        assert_eq!(pieces(16 << 20, 3), 3);
        assert_eq!(pieces(10, 10), 1);
        for threads in [1, 2, 3, 4, 7] {
            let ranges = map_pieces(1001, 7, threads, |lo, hi| (lo, hi));
            let starts: Vec<usize> = ranges.iter().map(|r| r.0).collect();
            assert_eq!(starts, [0, 143, 286, 429, 572, 715, 858]);
            assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0));
            assert_eq!(ranges.last(), Some(&(858, 1001)));
        }
        assert_eq!(map_pieces(5, 1, 4, |lo, hi| hi - lo), [5]);
    }

    #[test]
    fn one_chunk_runs_on_the_calling_thread() {
        // The test thread is not a rayon worker, so a part run by a rayon task would see an
        // index; one chunk must not even enter the pool.
        let mut out = vec![0u8; 1000];
        let seen = Mutex::new(Vec::new());
        for_each_chunk(&mut out, 1, |begin, chunk| {
            seen.lock()
                .unwrap()
                .push((begin, chunk.len(), rayon::current_thread_index()));
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(*seen.lock().unwrap(), [(0, 1000, None)]);
    }

    #[test]
    fn chunks_cover_the_output_on_cache_lines_and_report_the_first_error() {
        for chunks in [2, 3, 4, 5, 8] {
            let mut out = vec![usize::MAX; 100_003];
            let calls = AtomicUsize::new(0);
            for_each_chunk(&mut out, chunks, |begin, chunk| {
                calls.fetch_add(1, Ordering::Relaxed);
                assert_eq!(begin % LINE, 0);
                for (t, o) in chunk.iter_mut().enumerate() {
                    *o = begin + t;
                }
                Ok::<(), ()>(())
            })
            .unwrap();
            assert_eq!(calls.into_inner(), chunks);
            assert!(out.iter().enumerate().all(|(i, &o)| i == o));
        }
        let mut tiny = [0u8; 3];
        let calls = AtomicUsize::new(0);
        let _ = for_each_chunk(&mut tiny, 8, |_, _| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok::<(), ()>(())
        });
        assert_eq!(calls.into_inner(), 3);
        let mut out = vec![0u8; 1 << 16];
        let first = for_each_chunk(
            &mut out,
            4,
            |begin, _| if begin > 0 { Err(begin) } else { Ok(()) },
        );
        assert_eq!(first, Err(1 << 14));
    }
}
