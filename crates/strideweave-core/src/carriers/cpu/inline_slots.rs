//! `InlineSlots`: the slots of a small CPU carrier, kept inside the carrier and read without
//! a lock.
//!
//! A tiny result (docs/performance-targets.md, "tiny-op dispatch") should cost one allocation and
//! no locked instruction to read. Up to [`INLINE_BYTES`] bytes therefore live in atomic words
//! inside the carrier body, guarded by a sequence lock:
//!
//! - a reader copies the words between two loads of the sequence and retries when a write
//!   overlapped (after a few tries it waits for the writer instead), so it never takes a
//!   lock nor sees a torn value, and its closure runs on the copy, outside any lock;
//! - writers (and release) are serialized by a mutex; a write copies the words out, lets its
//!   closure change the copy, and publishes it with the sequence odd while it stores, so a
//!   closure that panics or fails publishes nothing;
//! - release stores [`RELEASED`] in the sequence, after which every access is a Runtime
//!   error.
//!
//! Every access to the words is atomic, so there is no `unsafe` code here.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::Result;

/// The most bytes kept inline.
pub(super) const INLINE_BYTES: usize = 64;
/// The number of 4-byte words holding them.
pub(super) const WORDS: usize = INLINE_BYTES / 4;
/// The sequence of a released carrier (odd, so it is never mistaken for a stable one).
const RELEASED: u64 = u64::MAX;
/// Optimistic read attempts before a reader waits for the writer.
const READ_ATTEMPTS: usize = 16;

/// A 4-byte element type stored as the bits of one word.
pub(super) trait Word: Copy + Default {
    fn from_word(word: u32) -> Self;
    fn to_word(self) -> u32;
}

impl Word for f32 {
    #[inline(always)]
    fn from_word(word: u32) -> Self {
        f32::from_bits(word)
    }
    #[inline(always)]
    fn to_word(self) -> u32 {
        self.to_bits()
    }
}

impl Word for u32 {
    #[inline(always)]
    fn from_word(word: u32) -> Self {
        word
    }
    #[inline(always)]
    fn to_word(self) -> u32 {
        self
    }
}

impl Word for i32 {
    #[inline(always)]
    fn from_word(word: u32) -> Self {
        i32::from_ne_bytes(word.to_ne_bytes())
    }
    #[inline(always)]
    fn to_word(self) -> u32 {
        u32::from_ne_bytes(self.to_ne_bytes())
    }
}

/// Up to [`INLINE_BYTES`] zero-initialized slot bytes under a sequence lock.
#[derive(Debug)]
pub(super) struct InlineSlots {
    /// The number of usable bytes.
    len: usize,
    /// Even while no write is being published, odd during one, [`RELEASED`] once released.
    sequence: AtomicU64,
    /// Serializes writers and release.
    writer: Mutex<()>,
    /// The bytes, in native-endian words; those past `len` stay zero.
    words: [AtomicU32; WORDS],
}

impl InlineSlots {
    /// `len <= INLINE_BYTES` zeroed bytes.
    #[inline]
    pub(super) fn zeroed(len: usize) -> InlineSlots {
        debug_assert!(len <= INLINE_BYTES);
        InlineSlots {
            len,
            sequence: AtomicU64::new(0),
            writer: Mutex::new(()),
            words: Default::default(),
        }
    }

    /// Stores `values` (at most the used words) into slots nobody else can see yet: one
    /// plain store per word, straight into the carrier's final place. (Building the words
    /// on the stack and moving them in would reload freshly stored values in wider pieces,
    /// which the processor cannot forward; for a tiny result that stall costs more than
    /// the arithmetic.)
    #[inline]
    pub(super) fn fill_fresh<T: Word>(&self, values: &[T]) {
        for (word, value) in self.words[..self.used()].iter().zip(values) {
            word.store(value.to_word(), Ordering::Relaxed);
        }
    }

    /// Stores `bytes` (at most the used bytes) into slots nobody else can see yet, packed
    /// four to a word: [`fill_fresh`](Self::fill_fresh) for one-byte slots.
    #[inline]
    pub(super) fn fill_fresh_bytes(&self, bytes: &[u8]) {
        for (word, chunk) in self.words[..self.used()].iter().zip(bytes.chunks(4)) {
            let mut packed = [0u8; 4];
            packed[..chunk.len()].copy_from_slice(chunk);
            word.store(u32::from_ne_bytes(packed), Ordering::Relaxed);
        }
    }

    /// The address of the first byte; `None` when empty or released. Stable once the
    /// carrier body is in place.
    pub(super) fn address(&self) -> Option<usize> {
        let live = self.sequence.load(Ordering::Acquire) != RELEASED;
        (live && self.len > 0).then(|| self.words.as_ptr().addr())
    }

    /// The number of words holding the `len` bytes.
    fn used(&self) -> usize {
        self.len.div_ceil(4)
    }

    /// Fills `out` (at most the used words) with a consistent copy of the leading words, as
    /// elements; `None` once released. The first attempt is inline; a write overlapping it
    /// (or a released carrier, whose sequence is odd) takes [`load_contended`](Self::load_contended).
    #[inline(always)]
    fn load<T: Word>(&self, out: &mut [T]) -> Option<()> {
        if self.try_load(out) {
            return Some(());
        }
        self.load_contended(out)
    }

    /// One optimistic read: whether `out` now holds a consistent copy (false when a write
    /// was being published or overlapped the copy, and on a released carrier).
    #[inline(always)]
    fn try_load<T: Word>(&self, out: &mut [T]) -> bool {
        let before = self.sequence.load(Ordering::Acquire);
        if !before.is_multiple_of(2) {
            return false;
        }
        self.copy_out(out);
        // Orders the word loads before the second sequence load: if it still reads
        // `before`, no write was published in between (the seqlock read protocol).
        fence(Ordering::Acquire);
        self.sequence.load(Ordering::Relaxed) == before
    }

    /// Copies the leading words into `out`, as elements, with no consistency check.
    #[inline(always)]
    fn copy_out<T: Word>(&self, out: &mut [T]) {
        for (value, word) in out.iter_mut().zip(&self.words) {
            *value = T::from_word(word.load(Ordering::Relaxed));
        }
    }

    /// [`load`](Self::load) after a first attempt that a write overlapped, or on a released
    /// carrier: retries, then waits for the writer.
    #[cold]
    #[inline(never)]
    fn load_contended<T: Word>(&self, out: &mut [T]) -> Option<()> {
        for _ in 0..READ_ATTEMPTS {
            if self.sequence.load(Ordering::Acquire) == RELEASED {
                return None;
            }
            if self.try_load(out) {
                return Some(());
            }
            std::hint::spin_loop();
        }
        // Writers keep overlapping: wait for the current one, then read with none running.
        let _writer = self.writer.lock();
        if self.sequence.load(Ordering::Acquire) == RELEASED {
            return None;
        }
        self.copy_out(out);
        Some(())
    }

    /// Copies the used words into the leading words of `words`; `None` once released.
    #[inline(always)]
    pub(super) fn copy_words(&self, words: &mut [u32; WORDS]) -> Option<()> {
        self.load(&mut words[..self.used()])
    }

    /// Runs `f` on a copy of the elements (`len / 4` of them); `released()` once released.
    #[inline]
    pub(super) fn read<T: Word, R>(
        &self,
        f: impl FnOnce(&[T]) -> R,
        released: impl FnOnce() -> crate::Error,
    ) -> Result<R> {
        let mut values = [T::default(); WORDS];
        let values = &mut values[..self.len / 4];
        self.load(values).ok_or_else(released)?;
        Ok(f(values))
    }

    /// Runs `f` on a copy of the bytes; `released()` once released.
    pub(super) fn read_bytes<R>(
        &self,
        f: impl FnOnce(&[u8]) -> R,
        released: impl FnOnce() -> crate::Error,
    ) -> Result<R> {
        let mut words = [0u32; WORDS];
        self.load(&mut words[..self.used()]).ok_or_else(released)?;
        let bytes = to_bytes(&words);
        Ok(f(&bytes[..self.len]))
    }

    /// Runs `f` on a copy of the elements and publishes what it leaves there, as one write;
    /// `released()` once released.
    pub(super) fn write<T: Word, R>(
        &self,
        f: impl FnOnce(&mut [T]) -> R,
        released: impl FnOnce() -> crate::Error,
        admit: impl FnOnce() -> Result<()>,
    ) -> Result<R> {
        let count = self.len / 4;
        self.publish(
            |words| {
                let mut values = [T::default(); WORDS];
                let values = &mut values[..count];
                for (value, word) in values.iter_mut().zip(words.iter()) {
                    *value = T::from_word(*word);
                }
                let result = f(values);
                for (word, value) in words.iter_mut().zip(values.iter()) {
                    *word = value.to_word();
                }
                result
            },
            released,
            admit,
        )
    }

    /// Runs `f` on a copy of the bytes and publishes what it leaves there, as one write;
    /// `released()` once released.
    pub(super) fn write_bytes<R>(
        &self,
        f: impl FnOnce(&mut [u8]) -> R,
        released: impl FnOnce() -> crate::Error,
        admit: impl FnOnce() -> Result<()>,
    ) -> Result<R> {
        let len = self.len;
        self.publish(
            |words| {
                let mut bytes = to_bytes(words);
                let result = f(&mut bytes[..len]);
                *words = from_bytes(&bytes);
                result
            },
            released,
            admit,
        )
    }

    /// Under the writer mutex: `admit`s the write, copies the words out, lets `change` edit
    /// the copy, then stores the copy with the sequence odd meanwhile.
    fn publish<R>(
        &self,
        change: impl FnOnce(&mut [u32; WORDS]) -> R,
        released: impl FnOnce() -> crate::Error,
        admit: impl FnOnce() -> Result<()>,
    ) -> Result<R> {
        let _writer = self.writer.lock();
        let sequence = self.sequence.load(Ordering::Relaxed);
        if sequence == RELEASED {
            return Err(released());
        }
        admit()?;
        let mut words = [0u32; WORDS];
        for (word, slot) in words.iter_mut().zip(&self.words) {
            *word = slot.load(Ordering::Relaxed);
        }
        let result = change(&mut words);
        // 2^63 writes would be needed for the even sequence to reach RELEASED - 1.
        self.sequence.store(sequence + 1, Ordering::Relaxed);
        // Orders the odd sequence before the word stores (the seqlock write protocol).
        fence(Ordering::Release);
        for (slot, word) in self.words[..self.used()].iter().zip(words) {
            slot.store(word, Ordering::Relaxed);
        }
        self.sequence.store(sequence + 2, Ordering::Release);
        Ok(result)
    }

    /// Runs `f` on the elements of slots nobody else can see yet; `released()` once
    /// released.
    pub(super) fn exclusive<T: Word, R>(
        &mut self,
        f: impl FnOnce(&mut [T]) -> R,
        released: impl FnOnce() -> crate::Error,
    ) -> Result<R> {
        if *self.sequence.get_mut() == RELEASED {
            return Err(released());
        }
        let mut values = [T::default(); WORDS];
        let values = &mut values[..self.len / 4];
        for (value, word) in values.iter_mut().zip(&mut self.words) {
            *value = T::from_word(*word.get_mut());
        }
        let result = f(values);
        for (word, value) in self.words.iter_mut().zip(values.iter()) {
            *word.get_mut() = value.to_word();
        }
        Ok(result)
    }

    /// Runs `f` on the bytes of slots nobody else can see yet; `released()` once released.
    pub(super) fn exclusive_bytes<R>(
        &mut self,
        f: impl FnOnce(&mut [u8]) -> R,
        released: impl FnOnce() -> crate::Error,
    ) -> Result<R> {
        if *self.sequence.get_mut() == RELEASED {
            return Err(released());
        }
        let mut words = [0u32; WORDS];
        for (copy, word) in words.iter_mut().zip(&mut self.words) {
            *copy = *word.get_mut();
        }
        let mut bytes = to_bytes(&words);
        let result = f(&mut bytes[..self.len]);
        for (slot, word) in self.words.iter_mut().zip(from_bytes(&bytes)) {
            *slot.get_mut() = word;
        }
        Ok(result)
    }

    /// Runs `f` with writers excluded, telling it whether the slots are still live.
    pub(super) fn excluding_writers<R>(&self, f: impl FnOnce(bool) -> R) -> R {
        let _writer = self.writer.lock();
        f(self.sequence.load(Ordering::Acquire) != RELEASED)
    }

    /// Marks the slots released; later accesses fail.
    pub(super) fn release(&self) {
        let _writer = self.writer.lock();
        self.sequence.store(RELEASED, Ordering::Release);
    }
}

/// The bytes of `words`, in order, native-endian.
fn to_bytes(words: &[u32; WORDS]) -> [u8; INLINE_BYTES] {
    let mut bytes = [0u8; INLINE_BYTES];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    bytes
}

/// The words of `bytes`, native-endian.
fn from_bytes(bytes: &[u8; INLINE_BYTES]) -> [u32; WORDS] {
    let mut words = [0u32; WORDS];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(4)) {
        *word = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    words
}
