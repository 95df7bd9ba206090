//! `Bounce`: the reusable, aligned staging buffer of a device's direct I/O.
//!
//! `O_DIRECT` transfers need a memory address, a length and a device offset that are all
//! multiples of the logical block size. Slot data lives elsewhere (one 4-byte value, or a
//! CPU carrier's slots), so every transfer is staged through a window of this buffer.
//! The window is cut from an over-allocated `Vec` at an aligned offset, which needs no
//! `unsafe` code.

use crate::error::{Error, Result};

/// A heap buffer from which aligned windows are cut; it grows on demand and is reused.
#[derive(Debug, Default)]
pub(super) struct Bounce {
    bytes: Vec<u8>,
}

impl Bounce {
    /// A window of `len` bytes whose address is a multiple of `align` (a power of two).
    ///
    /// The window's contents are unspecified (left from earlier transfers); callers fill it
    /// completely, by reading from the device or copying data in, before using it.
    ///
    /// # Errors
    /// A Memory error naming the byte count when the buffer cannot grow.
    pub(super) fn window(&mut self, len: usize, align: usize) -> Result<&mut [u8]> {
        let failure = || {
            Error::Memory(format!(
                "cannot allocate a {len}-byte direct I/O buffer aligned to {align} bytes"
            ))
        };
        let needed = len.checked_add(align).ok_or_else(failure)?;
        if self.bytes.len() < needed {
            // Free the old buffer first, so growing never holds both.
            self.bytes = Vec::new();
            let mut fresh = Vec::new();
            fresh.try_reserve_exact(needed).map_err(|_| failure())?;
            fresh.resize(needed, 0);
            self.bytes = fresh;
        }
        let start = self.bytes.as_ptr().align_offset(align.max(1));
        let end = start.checked_add(len).ok_or_else(failure)?;
        self.bytes.get_mut(start..end).ok_or_else(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn windows_are_aligned_and_reuse_the_buffer() -> Result<()> {
        let mut bounce = Bounce::default();
        for (len, align) in [(512, 512), (4096, 4096), (1 << 20, 4096), (0, 512), (8, 1)] {
            let window = bounce.window(len, align)?;
            assert_eq!(window.len(), len);
            assert_eq!(window.as_ptr().addr() % align, 0, "{len} {align}");
            window.fill(7);
        }
        let grown = bounce.bytes.len();
        bounce.window(512, 512)?;
        assert_eq!(
            bounce.bytes.len(),
            grown,
            "a smaller window reuses the buffer"
        );
        Ok(())
    }

    #[test]
    fn impossible_windows_are_memory_errors() {
        let mut bounce = Bounce::default();
        for (len, align) in [(usize::MAX, 512), (usize::MAX / 2, 4096)] {
            let error = bounce.window(len, align).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
            assert!(
                error.to_string().contains(&format!("{len}-byte")),
                "{error}"
            );
        }
    }
}
