//! `AlignedBuffer`: the heap slots of a CPU carrier larger than its inline room.
//!
//! All of the CPU carrier's `unsafe` code lives here: the buffer owns one zeroed allocation
//! like a `Box<[u8]>`, hands out typed views of it through borrows, and frees it on drop. A
//! borrowed buffer views memory someone else owns instead, kept alive by an [`Owner`] the
//! buffer drops with itself.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

use super::NAME;
use crate::error::Result;

/// The alignment of every heap CPU buffer: one cache line (and one AVX-512 vector).
pub(super) const CACHE_LINE: usize = 64;
/// Buffers of at least this many bytes are aligned to it and advised to use huge pages.
pub(super) const HUGE_PAGE: usize = 2 << 20;
/// The alignment asked of the allocator. The system allocator serves it with `calloc`,
/// which skips the zeroing pass for memory fresh from the OS; the wider alignment is then
/// reached by offsetting into a slightly larger allocation.
const BASE_ALIGN: usize = 16;

/// A zero-sized type aligned like a cache line, for the dangling pointer of empty buffers.
#[repr(align(64))]
struct CacheLine;

/// Element types that may view an [`AlignedBuffer`]'s bytes.
///
/// # Safety
/// Implementors have no padding, an alignment of at most 4 (borrowed buffers are 4-byte
/// aligned, allocated ones [`CACHE_LINE`] aligned), and every bit pattern of their size is a
/// valid value.
pub(super) unsafe trait Plain: Copy {}

// SAFETY: f32 is 4 bytes, 4-aligned, without padding, and every bit pattern is an f32.
unsafe impl Plain for f32 {}
// SAFETY: i32 is 4 bytes, 4-aligned, without padding, and every bit pattern is an i32.
unsafe impl Plain for i32 {}

/// What keeps borrowed memory alive: dropped when the buffer is.
pub(super) struct Owner {
    _kept: Box<dyn Send + Sync>,
}

impl Owner {
    pub(super) fn new(owner: Box<dyn Send + Sync>) -> Owner {
        Owner { _kept: owner }
    }
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Owner(..)")
    }
}

/// One zero-initialized heap allocation, aligned to 64 bytes (2 MiB from 2 MiB up), owned
/// like a `Box<[u8]>` and freed on drop.
#[derive(Debug)]
pub(super) struct AlignedBuffer {
    /// The first byte; aligned, and dangling (but still aligned) when `len` is 0.
    ptr: NonNull<u8>,
    /// The number of usable bytes from `ptr`.
    len: usize,
    /// The allocation as made, for `dealloc`; `None` when `len` is 0 or the memory is
    /// borrowed.
    allocation: Option<(NonNull<u8>, Layout)>,
    /// The owner of borrowed memory; `None` for an allocation of the buffer's own.
    owner: Option<Owner>,
}

// SAFETY: the buffer uniquely owns its allocation (no other pointer to it escapes except
// through borrows of the buffer), so moving it to another thread is like moving a Box<[u8]>.
unsafe impl Send for AlignedBuffer {}
// SAFETY: shared access only hands out `&[T]` through `&self`; mutation needs `&mut self`.
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// `len` zeroed bytes; a Memory error naming `len` when they cannot be allocated.
    pub(super) fn zeroed(len: usize) -> Result<AlignedBuffer> {
        if len == 0 {
            return Ok(AlignedBuffer {
                ptr: NonNull::<CacheLine>::dangling().cast(),
                len: 0,
                allocation: None,
                owner: None,
            });
        }
        let align = if len >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            CACHE_LINE
        };
        let what = || format!("the storage of a {NAME} carrier");
        crate::limits::check_allocation(len, 1, what)?;
        let failure = || crate::limits::allocation_refused(len, 1, what());
        // Enough room to move the start up to the next multiple of `align`.
        let padded = len.checked_add(align - BASE_ALIGN).ok_or_else(failure)?;
        let layout = Layout::from_size_align(padded, BASE_ALIGN).map_err(|_| failure())?;
        // SAFETY: `layout` has a non-zero size (`padded >= len > 0`).
        let base = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or_else(failure)?;
        let misalignment = base.as_ptr().addr() % align;
        let offset = if misalignment == 0 {
            0
        } else {
            align - misalignment
        };
        // The allocation is at least BASE_ALIGN aligned, so the offset is at most
        // `align - BASE_ALIGN`; check rather than trust a custom global allocator.
        if offset > padded - len {
            // SAFETY: `base` was just returned by `alloc_zeroed(layout)` and is freed once.
            unsafe { dealloc(base.as_ptr(), layout) };
            return Err(failure());
        }
        // SAFETY: `offset + len <= padded`, so the result stays inside the allocation.
        let ptr = unsafe { base.add(offset) };
        let buffer = AlignedBuffer {
            ptr,
            len,
            allocation: Some((base, layout)),
            owner: None,
        };
        buffer.advise_huge_pages();
        Ok(buffer)
    }

    /// A buffer over `len` bytes at `ptr` that `owner` keeps alive.
    ///
    /// # Safety
    /// Until `owner` is dropped, `ptr` is valid for reads of `len` initialized bytes and
    /// aligned to 4 bytes (the alignment of every [`Plain`] type); the buffer is only read.
    pub(super) unsafe fn borrowed(ptr: NonNull<u8>, len: usize, owner: Owner) -> AlignedBuffer {
        AlignedBuffer {
            ptr,
            len,
            allocation: None,
            owner: Some(owner),
        }
    }

    /// Whether the memory is borrowed (read only) rather than the buffer's own.
    pub(super) fn is_borrowed(&self) -> bool {
        self.owner.is_some()
    }

    /// Asks Linux to back the whole 2 MiB blocks of a large buffer with huge pages.
    #[cfg(target_os = "linux")]
    fn advise_huge_pages(&self) {
        let huge_len = self.len - self.len % HUGE_PAGE;
        if huge_len == 0 {
            return;
        }
        // SAFETY: `ptr` is 2 MiB aligned (hence page aligned) for buffers of at least 2 MiB,
        // and `[ptr, ptr + huge_len)` lies inside this live allocation. MADV_HUGEPAGE is a
        // hint that changes neither the contents nor the validity of the mapping; its result
        // is irrelevant to correctness.
        unsafe {
            libc::madvise(self.ptr.as_ptr().cast(), huge_len, libc::MADV_HUGEPAGE);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn advise_huge_pages(&self) {}

    /// The address of the first byte; `None` for an empty buffer.
    pub(super) fn address(&self) -> Option<usize> {
        (self.len > 0).then(|| self.ptr.as_ptr().addr())
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialized (zeroed at allocation) bytes owned by
        // `self` (or dangling and aligned with `len == 0`), and the borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(super) fn as_bytes_mut(&mut self) -> &mut [u8] {
        debug_assert!(!self.is_borrowed(), "borrowed memory is only read");
        // SAFETY: as in `as_bytes`, and `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    pub(super) fn typed<T: Plain>(&self) -> &[T] {
        let count = self.len / std::mem::size_of::<T>();
        // SAFETY: `ptr` is aligned to at least align_of::<T>() (CACHE_LINE for an allocation
        // of its own, 4 for borrowed memory, and T: Plain is at most that aligned), the
        // `count * size_of::<T>() <= len` bytes are initialized and owned by `self`, every bit
        // pattern is a valid T (T: Plain), and the borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<T>(), count) }
    }

    pub(super) fn typed_mut<T: Plain>(&mut self) -> &mut [T] {
        debug_assert!(!self.is_borrowed(), "borrowed memory is only read");
        let count = self.len / std::mem::size_of::<T>();
        // SAFETY: as in `typed`; `&mut self` makes this the only borrow, and any T written is
        // valid bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<T>(), count) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if let Some((base, layout)) = self.allocation.take() {
            // SAFETY: `base` was returned by `alloc_zeroed(layout)` and is freed only here,
            // once (`take` leaves `None` behind).
            unsafe { dealloc(base.as_ptr(), layout) };
        }
    }
}
