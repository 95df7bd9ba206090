//! The operating-system edge of block devices: opening a node for direct I/O and asking it
//! for its geometry. Linux only; every other OS answers NotImplemented.
//!
//! All `unsafe` code of the block-device carrier is here: three `ioctl` calls, each in a
//! small function that passes a pointer to a local integer of the width the kernel writes.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// The size and block sizes a block device reports, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    /// The device size (`BLKGETSIZE64`).
    pub(super) capacity: u64,
    /// The smallest addressable unit (`BLKSSZGET`); direct I/O is aligned to it.
    pub(super) logical: u64,
    /// The unit the device writes atomically (`BLKPBSZGET`).
    pub(super) physical: u64,
}

impl Geometry {
    /// `max(logical, physical)`: the alignment of every extent.
    pub(super) fn alignment(&self) -> u64 {
        self.logical.max(self.physical)
    }

    /// Fails unless both block sizes are powers of two and the physical size is a multiple
    /// of the logical one (what every Linux block device reports).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn validate(self, path: &Path) -> Result<Geometry> {
        let sane = self.logical.is_power_of_two()
            && self.physical.is_power_of_two()
            && self
                .physical
                .is_multiple_of(self.logical.min(self.physical));
        if !sane {
            return Err(Error::Value(format!(
                "block device {} reports an unusable geometry: logical block {} bytes, \
                 physical block {} bytes",
                path.display(),
                self.logical,
                self.physical
            )));
        }
        Ok(self)
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    use super::Geometry;

    /// `_IOR(0x12, 114, size_t)` of `<linux/fs.h>`, which the libc crate does not define.
    const BLKGETSIZE64: libc::Ioctl = ioctl_read(0x12, 114, std::mem::size_of::<libc::size_t>());

    /// The `_IOR(type, number, size)` request encoding of the target architecture.
    const fn ioctl_read(kind: u32, number: u32, size: usize) -> libc::Ioctl {
        // MIPS, PowerPC and SPARC use 13 size bits and put the read direction at bit
        // 30 (value 2 << 29); the other architectures use 14 size bits and bit 31 (2 << 30).
        const READ: u32 = if cfg!(any(
            target_arch = "mips",
            target_arch = "mips64",
            target_arch = "powerpc",
            target_arch = "powerpc64",
            target_arch = "sparc",
            target_arch = "sparc64"
        )) {
            2 << 29
        } else {
            2 << 30
        };
        let request = READ | ((size as u32) << 16) | (kind << 8) | number;
        // The kernel compares the low 32 bits; `Ioctl` is `c_ulong` (glibc) or `c_int`
        // (musl), and either cast keeps those bits.
        request as libc::Ioctl
    }

    /// Opens `path` for reading and writing with `O_DIRECT` (no page cache).
    pub(in super::super) fn open_direct(path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
    }

    /// The device's size and block sizes.
    pub(in super::super) fn geometry(file: &File) -> io::Result<Geometry> {
        Ok(Geometry {
            capacity: capacity_bytes(file)?,
            logical: u64::try_from(logical_block_size(file)?)
                .map_err(|_| invalid("a negative logical block size"))?,
            physical: u64::from(physical_block_size(file)?),
        })
    }

    fn invalid(what: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the device reported {what}"),
        )
    }

    fn capacity_bytes(file: &File) -> io::Result<u64> {
        let mut bytes: u64 = 0;
        // SAFETY: BLKGETSIZE64 writes one u64 through its pointer argument, which points to
        // a live, writable, aligned local; the descriptor is owned by `file` and open.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut bytes as *mut u64) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(bytes)
    }

    fn logical_block_size(file: &File) -> io::Result<libc::c_int> {
        let mut size: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int through its pointer argument, which points to a
        // live, writable, aligned local; the descriptor is owned by `file` and open.
        let rc = unsafe {
            libc::ioctl(
                file.as_raw_fd(),
                libc::BLKSSZGET,
                &mut size as *mut libc::c_int,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(size)
    }

    fn physical_block_size(file: &File) -> io::Result<libc::c_uint> {
        let mut size: libc::c_uint = 0;
        // SAFETY: BLKPBSZGET writes one unsigned int through its pointer argument, which
        // points to a live, writable, aligned local; the descriptor is owned by `file`.
        let rc = unsafe {
            libc::ioctl(
                file.as_raw_fd(),
                libc::BLKPBSZGET,
                &mut size as *mut libc::c_uint,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(size)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        #[cfg(target_arch = "x86_64")]
        fn blkgetsize64_matches_the_linux_header() {
            // `Ioctl` is `c_ulong` (glibc) or `c_int` (musl); the low 32 bits are the request.
            assert_eq!(BLKGETSIZE64 as u32, 0x8008_1272);
        }

        #[test]
        fn geometry_ioctls_on_a_regular_file_are_os_errors() -> io::Result<()> {
            let file = tempfile::tempfile()?;
            let error = geometry(&file).unwrap_err();
            assert_eq!(error.raw_os_error(), Some(libc::ENOTTY), "{error}");
            Ok(())
        }
    }
}

/// Fails with NotImplemented naming `path` on every OS but Linux.
pub(super) fn ensure_supported(path: &Path) -> Result<()> {
    if cfg!(target_os = "linux") {
        return Ok(());
    }
    Err(Error::NotImplemented(format!(
        "cannot open block device {}: BlockDevice is only implemented on Linux",
        path.display()
    )))
}

/// Opens the block device node at `path` for direct I/O and reads its geometry.
///
/// # Errors
/// An Io error naming the path when the node cannot be opened or queried, a Value error for
/// an unusable geometry.
#[cfg(target_os = "linux")]
pub(super) fn open(path: &Path) -> Result<(File, Geometry)> {
    let file = linux::open_direct(path).map_err(|error| {
        Error::io(
            format!("opening block device {} for direct I/O", path.display()),
            error,
        )
    })?;
    let geometry = linux::geometry(&file).map_err(|error| {
        Error::io(
            format!("reading the geometry of block device {}", path.display()),
            error,
        )
    })?;
    Ok((file, geometry.validate(path)?))
}

/// Block devices are opened on Linux only.
#[cfg(not(target_os = "linux"))]
pub(super) fn open(path: &Path) -> Result<(File, Geometry)> {
    Err(Error::NotImplemented(format!(
        "block device {}: BlockDevice is only implemented on Linux",
        path.display()
    )))
}
