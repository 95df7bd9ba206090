//! `BlockDevice`: the handle to one opened block device node, its extent allocator and its
//! serialized direct I/O.

use std::fmt;
use std::fs::{self, File};
use std::io;
use std::ops::Range;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::bounce::Bounce;
use super::carrier::{BlockDeviceCarrier, NAME, SLOT_BYTES, STORABLE};
use super::extents::{Extents, RetireError};
use super::sys::{self, Geometry};
use crate::carrier::Carrier;
use crate::dtype::{validate_storage_dtype, DType};
use crate::error::{Error, Result};

/// The most bytes one direct transfer moves (larger spans are split into chunks).
const CHUNK_BYTES: u64 = 1 << 20;

/// A handle to an opened Linux block device, from which [`BlockDeviceCarrier`]s are
/// allocated.
///
/// Cloning is cheap and shares the device. The device is a resource, not a carrier: it
/// backs carriers made by [`allocate`](BlockDevice::allocate), each owning one extent of the
/// device (`size * 4` bytes rounded up to [`allocation_alignment`], placed first fit at the
/// lowest free aligned address). Every transfer is aligned direct I/O (`O_DIRECT`), and all
/// operations on one device are serialized by a lock inside it.
///
/// An operating-system error during a transfer is reported as an Io error naming the device
/// and the byte offset, and *faults* the device, as does a transfer that completes zero
/// bytes (a Runtime error): a faulted device refuses access and allocation, but its carriers
/// can still be released and the device closed.
///
/// [`allocation_alignment`]: BlockDevice::allocation_alignment
///
/// ```no_run
/// use strideweave::carriers::{BlockDevice, BlockDeviceCarrier};
/// use strideweave::{DType, Value};
/// let device = BlockDevice::open("/dev/loop0")?;
/// let carrier = device.allocate(3, true, DType::FLOAT32, false)?;
/// carrier.set(1, Value::Float(2.5))?;
/// assert_eq!(carrier.get(1)?, Value::Float(2.5));
/// let body = carrier.downcast_ref::<BlockDeviceCarrier>().expect("a block carrier");
/// assert_eq!(body.device_offset_bytes(), 0);
/// carrier.release()?;
/// device.close()?;
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Clone)]
pub struct BlockDevice {
    inner: Arc<Device>,
}

struct Device {
    /// The path as the caller gave it.
    path: PathBuf,
    geometry: Geometry,
    state: Mutex<State>,
}

/// Everything the device lock guards.
struct State {
    /// `None` once closed.
    file: Option<File>,
    /// Why the device faulted, once it has.
    fault: Option<String>,
    extents: Extents,
    /// Carriers allocated and not yet released (or dropped).
    live: usize,
    bounce: Bounce,
}

/// The direction of a transfer, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Read,
    Write,
}

impl Direction {
    fn gerund(self) -> &'static str {
        match self {
            Direction::Read => "reading",
            Direction::Write => "writing",
        }
    }
}

impl BlockDevice {
    /// Opens the block device node at `path` (kept verbatim) for aligned direct I/O.
    ///
    /// # Errors
    /// NotImplemented on any OS but Linux; an Io error naming the path when it does not
    /// exist or cannot be opened or queried; a Value error naming the path when it is not a
    /// block device node (a regular file, a directory, a character device, ...) or reports an
    /// unusable geometry.
    pub fn open(path: impl AsRef<Path>) -> Result<BlockDevice> {
        let path = path.as_ref();
        sys::ensure_supported(path)?;
        let metadata = fs::metadata(path).map_err(|error| {
            Error::io(format!("opening block device {}", path.display()), error)
        })?;
        ensure_block_node(path, &metadata.file_type())?;
        let (file, geometry) = sys::open(path)?;
        // The node could have been replaced between the check and the open.
        let opened = file.metadata().map_err(|error| {
            Error::io(format!("inspecting block device {}", path.display()), error)
        })?;
        ensure_block_node(path, &opened.file_type())?;
        Ok(BlockDevice::opened(path.to_path_buf(), file, geometry))
    }

    /// A device over an already opened `file` with a known `geometry`.
    pub(super) fn opened(path: PathBuf, file: File, geometry: Geometry) -> BlockDevice {
        BlockDevice {
            inner: Arc::new(Device {
                path,
                geometry,
                state: Mutex::new(State {
                    file: Some(file),
                    fault: None,
                    extents: Extents::new(geometry.capacity, geometry.alignment()),
                    live: 0,
                    bounce: Bounce::default(),
                }),
            }),
        }
    }

    /// The path the device was opened with, verbatim.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The device size in bytes (`BLKGETSIZE64`).
    pub fn capacity_bytes(&self) -> u64 {
        self.inner.geometry.capacity
    }

    /// The logical block size in bytes (`BLKSSZGET`), the unit of direct I/O.
    pub fn logical_block_size(&self) -> u64 {
        self.inner.geometry.logical
    }

    /// The physical block size in bytes (`BLKPBSZGET`).
    pub fn physical_block_size(&self) -> u64 {
        self.inner.geometry.physical
    }

    /// `max(logical_block_size, physical_block_size)`: every extent starts at a multiple of
    /// it and its length is one.
    pub fn allocation_alignment(&self) -> u64 {
        self.inner.geometry.alignment()
    }

    /// Whether [`close`](BlockDevice::close) has succeeded.
    pub fn is_closed(&self) -> bool {
        self.state().file.is_none()
    }

    /// Whether a failed transfer has faulted the device.
    pub fn is_faulted(&self) -> bool {
        self.state().fault.is_some()
    }

    /// How many carriers of this device are live (allocated, not released or dropped).
    pub fn live_carriers(&self) -> usize {
        self.state().live
    }

    /// The bytes not held by any live carrier's extent.
    pub fn free_bytes(&self) -> u64 {
        self.state().extents.free_bytes()
    }

    /// Whether `self` and `other` are handles to the same opened device.
    pub fn same_as(&self, other: &BlockDevice) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A carrier of `size` Float32 slots in a new extent of this device, zeroed unless
    /// `empty` (then it holds whatever the device held there).
    ///
    /// The extent is `size * 4` bytes rounded up to the
    /// [`allocation_alignment`](BlockDevice::allocation_alignment), placed at the lowest free
    /// aligned address with room; `size` 0 gives offset 0 and extent 0 and takes no space.
    ///
    /// # Errors
    /// A Value error for any dtype but Float32; a Runtime error when the device is closed or
    /// faulted; a Memory error when no free range is large enough; an Io error (which faults
    /// the device and frees the extent) when zeroing fails.
    pub fn allocate(
        &self,
        size: usize,
        mutable: bool,
        dtype: DType,
        empty: bool,
    ) -> Result<Carrier> {
        let body = self.allocate_body(size, dtype, empty)?;
        Carrier::new(body, dtype, mutable)
    }

    /// Closes the device; later allocation and access fail with a Runtime error. Closing a
    /// closed device does nothing; a faulted device can be closed.
    ///
    /// # Errors
    /// A Runtime error naming how many carriers are live while any is.
    pub fn close(&self) -> Result<()> {
        let mut state = self.state();
        if state.live > 0 {
            let live = state.live;
            let (noun, verb) = if live == 1 {
                ("carrier", "is")
            } else {
                ("carriers", "are")
            };
            return Err(Error::Runtime(format!(
                "cannot close block device {}: {live} {noun} {verb} still live (release \
                 them first)",
                self.inner.path.display()
            )));
        }
        state.file = None;
        state.bounce = Bounce::default();
        Ok(())
    }

    /// A new carrier body of `size` slots (see [`allocate`](BlockDevice::allocate)).
    pub(super) fn allocate_body(
        &self,
        size: usize,
        dtype: DType,
        empty: bool,
    ) -> Result<BlockDeviceCarrier> {
        validate_storage_dtype(dtype, NAME, &STORABLE)?;
        let mut state = self.state();
        self.usable(&state, "allocate from")?;
        let bytes = u64::try_from(size)
            .ok()
            .and_then(|size| size.checked_mul(SLOT_BYTES))
            .and_then(|bytes| state.extents.round_up(bytes))
            .ok_or_else(|| {
                Error::Memory(format!(
                    "{size} Float32 slots do not fit on block device {} (the byte count \
                     overflows)",
                    self.inner.path.display()
                ))
            })?;
        let offset = if bytes == 0 {
            0
        } else {
            state.extents.allocate(bytes).ok_or_else(|| {
                Error::Memory(format!(
                    "block device {} has no free extent of {bytes} bytes for {size} Float32 \
                     slots ({} of {} usable bytes are free)",
                    self.inner.path.display(),
                    state.extents.free_bytes(),
                    state.extents.usable_bytes()
                ))
            })?
        };
        if !empty && bytes > 0 {
            let zeroed = self.write_locked(&mut state, offset, bytes, |_, chunk| chunk.fill(0));
            if let Err(error) = zeroed {
                // The extent was never handed out; a retire error cannot happen here.
                let _ = state.extents.retire(offset, bytes);
                return Err(error);
            }
        }
        state.live += 1;
        drop(state);
        Ok(BlockDeviceCarrier::placed(
            self.clone(),
            offset,
            bytes,
            size,
        ))
    }

    /// Reads the `len` bytes at device byte `start` (4-byte aligned), handing them to
    /// `sink(position in the span, bytes)` chunk by chunk, in order.
    ///
    /// # Errors
    /// A Runtime error when `retired` is set (the carrier is released), the device is closed
    /// or faulted, or a transfer completes zero bytes (which faults the device); an Io error
    /// naming the device and offset (which faults it) when a transfer fails.
    pub(super) fn read(
        &self,
        retired: &AtomicBool,
        start: u64,
        len: u64,
        sink: impl FnMut(u64, &[u8]),
    ) -> Result<()> {
        let mut state = self.state();
        ensure_unretired(retired, "read")?;
        self.read_locked(&mut state, start, len, sink)
    }

    /// Writes the `len` bytes at device byte `start` (4-byte aligned), asking
    /// `source(position in the span, bytes)` to fill them chunk by chunk, in order; blocks
    /// only partly covered are read first and written back whole.
    ///
    /// # Errors
    /// As [`read`](BlockDevice::read).
    pub(super) fn write(
        &self,
        retired: &AtomicBool,
        start: u64,
        len: u64,
        source: impl FnMut(u64, &mut [u8]),
    ) -> Result<()> {
        let mut state = self.state();
        ensure_unretired(retired, "write")?;
        self.write_locked(&mut state, start, len, source)
    }

    /// Returns a carrier's extent to the free ranges, once: the first call (with `retired`
    /// still clear) retires it, later calls do nothing. Allowed on a closed or faulted
    /// device; it waits for any transfer in progress.
    ///
    /// # Errors
    /// A Runtime error when the extent is not a retirable allocation of this device (which
    /// would be a bookkeeping bug); the carrier counts as released anyway.
    pub(super) fn retire(&self, retired: &AtomicBool, offset: u64, bytes: u64) -> Result<()> {
        let mut state = self.state();
        if retired.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        state.live = state.live.saturating_sub(1);
        if bytes == 0 {
            return Ok(());
        }
        state.extents.retire(offset, bytes).map_err(|error| {
            let why = match error {
                RetireError::Misplaced => "is not an extent of the device",
                RetireError::AlreadyFree => "is already free",
            };
            Error::Runtime(format!(
                "cannot retire bytes {offset}..{} of block device {}: the range {why}",
                offset.saturating_add(bytes),
                self.inner.path.display()
            ))
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock()
    }

    /// Fails with a Runtime error when the device is closed or faulted.
    fn usable(&self, state: &State, action: &str) -> Result<()> {
        open_file(&self.inner.path, &state.file, &state.fault, action).map(|_| ())
    }

    /// The aligned chunks covering `[start, start + len)`, in address order.
    fn chunks(&self, start: u64, len: u64) -> Result<Vec<Chunk>> {
        let geometry = self.inner.geometry;
        let logical = geometry.logical;
        let end = start
            .checked_add(len)
            .filter(|&end| end <= geometry.capacity);
        let Some(end) = end else {
            return Err(Error::Index(format!(
                "{len} bytes at byte offset {start} are beyond block device {} of {} bytes",
                self.inner.path.display(),
                geometry.capacity
            )));
        };
        // `end <= capacity`, a whole number of blocks, so rounding up cannot overflow.
        let covered_end = match end % logical {
            0 => end,
            rest => end + (logical - rest),
        };
        let chunk_bytes = CHUNK_BYTES.max(geometry.alignment());
        let mut chunks = Vec::new();
        if len == 0 {
            return Ok(chunks);
        }
        let mut at = start - start % logical;
        while at < end {
            let chunk_end = covered_end.min(at.saturating_add(chunk_bytes));
            chunks.push(Chunk {
                at,
                len: to_usize(chunk_end - at)?,
                data: to_usize(start.max(at) - at)?..to_usize(end.min(chunk_end) - at)?,
                position: start.max(at) - start,
            });
            at = chunk_end;
        }
        Ok(chunks)
    }

    fn read_locked(
        &self,
        state: &mut State,
        start: u64,
        len: u64,
        mut sink: impl FnMut(u64, &[u8]),
    ) -> Result<()> {
        let align = to_usize(self.inner.geometry.alignment())?;
        let State {
            file,
            fault,
            bounce,
            ..
        } = state;
        let file = open_file(&self.inner.path, file, fault, "read from")?;
        let chunks = self.chunks(start, len)?;
        let mut io = Io {
            path: &self.inner.path,
            file,
            fault,
        };
        for chunk in chunks {
            let window = bounce.window(chunk.len, align)?;
            io.transfer(Direction::Read, chunk.at, window)?;
            sink(chunk.position, part(window, chunk.data)?);
        }
        Ok(())
    }

    fn write_locked(
        &self,
        state: &mut State,
        start: u64,
        len: u64,
        mut source: impl FnMut(u64, &mut [u8]),
    ) -> Result<()> {
        let align = to_usize(self.inner.geometry.alignment())?;
        let logical = to_usize(self.inner.geometry.logical)?;
        let State {
            file,
            fault,
            bounce,
            ..
        } = state;
        let file = open_file(&self.inner.path, file, fault, "write to")?;
        let chunks = self.chunks(start, len)?;
        let mut io = Io {
            path: &self.inner.path,
            file,
            fault,
        };
        for chunk in chunks {
            let window = bounce.window(chunk.len, align)?;
            // Read back the blocks the data covers only partly, so their other bytes
            // survive the whole-block write.
            let head = chunk.data.start > 0;
            let tail = chunk.data.end < chunk.len;
            if head {
                io.transfer(Direction::Read, chunk.at, part_mut(window, 0..logical)?)?;
            }
            let last = chunk.len.saturating_sub(logical);
            if tail && !(head && last == 0) {
                let block = part_mut(window, last..chunk.len)?;
                io.transfer(Direction::Read, chunk.at + last as u64, block)?;
            }
            source(chunk.position, part_mut(window, chunk.data)?);
            io.transfer(Direction::Write, chunk.at, window)?;
        }
        Ok(())
    }
}

/// One aligned transfer unit of a span: whole logical blocks, at most [`CHUNK_BYTES`]
/// (or one allocation alignment, if that is larger).
#[derive(Debug)]
struct Chunk {
    /// The device byte the chunk starts at (block aligned).
    at: u64,
    /// The chunk length in bytes (whole blocks).
    len: usize,
    /// The span's bytes inside the chunk.
    data: Range<usize>,
    /// Where `data` starts within the span.
    position: u64,
}

/// The parts of the locked state one run of transfers uses together.
struct Io<'s> {
    path: &'s Path,
    file: &'s File,
    fault: &'s mut Option<String>,
}

impl Io<'_> {
    /// One positioned transfer of all of `buffer` at device byte `at`, retried on `EINTR`
    /// and continued after a short completion. A failure faults the device: an OS error is
    /// an Io error, a completion of zero bytes a Runtime error, each naming the device path
    /// and the byte offset.
    fn transfer(&mut self, direction: Direction, at: u64, buffer: &mut [u8]) -> Result<()> {
        let total = buffer.len();
        let mut done = 0;
        while done < total {
            let position = at.saturating_add(done as u64);
            let result = match direction {
                Direction::Read => self.file.read_at(part_mut(buffer, done..total)?, position),
                Direction::Write => self.file.write_at(part(buffer, done..total)?, position),
            };
            let what = || {
                format!(
                    "{} {} bytes at byte offset {position} of block device {}",
                    direction.gerund(),
                    total - done,
                    self.path.display()
                )
            };
            match result {
                Ok(0) => {
                    let message = format!("{} completed zero bytes", what());
                    *self.fault = Some(message.clone());
                    return Err(Error::Runtime(format!(
                        "{message}; the device is now faulted"
                    )));
                }
                Ok(count) => done += count,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    *self.fault = Some(format!("{} failed: {error}", what()));
                    return Err(Error::io(what(), error));
                }
            }
        }
        Ok(())
    }
}

impl fmt::Debug for BlockDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let geometry = self.inner.geometry;
        f.debug_struct("BlockDevice")
            .field("path", &self.inner.path)
            .field("capacity_bytes", &geometry.capacity)
            .field("logical_block_size", &geometry.logical)
            .field("physical_block_size", &geometry.physical)
            .finish()
    }
}

/// A Value error unless `file_type` is a block device node.
fn ensure_block_node(path: &Path, file_type: &fs::FileType) -> Result<()> {
    if file_type.is_block_device() {
        return Ok(());
    }
    let what = if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a device node"
    };
    Err(Error::Value(format!(
        "{} is not a block device node (it is {what})",
        path.display()
    )))
}

/// The open file, unless the device is closed or faulted (Runtime errors).
fn open_file<'f>(
    path: &Path,
    file: &'f Option<File>,
    fault: &Option<String>,
    action: &str,
) -> Result<&'f File> {
    let path = path.display();
    if let Some(fault) = fault {
        return Err(Error::Runtime(format!(
            "cannot {action} block device {path}: the device is faulted ({fault}); only \
             release and close are allowed"
        )));
    }
    file.as_ref()
        .ok_or_else(|| Error::Runtime(format!("cannot {action} block device {path}: it is closed")))
}

/// `buffer[range]`; the ranges come from [`Chunk`]s, so a miss is a bookkeeping bug,
/// reported rather than panicking.
fn part(buffer: &[u8], range: Range<usize>) -> Result<&[u8]> {
    let len = buffer.len();
    buffer.get(range.clone()).ok_or_else(|| outside(range, len))
}

/// `&mut buffer[range]` (see [`part`]).
fn part_mut(buffer: &mut [u8], range: Range<usize>) -> Result<&mut [u8]> {
    let len = buffer.len();
    buffer
        .get_mut(range.clone())
        .ok_or_else(|| outside(range, len))
}

fn outside(range: Range<usize>, len: usize) -> Error {
    Error::Runtime(format!(
        "direct I/O bytes {range:?} are outside the {len}-byte staging buffer"
    ))
}

fn ensure_unretired(retired: &AtomicBool, action: &str) -> Result<()> {
    if retired.load(Ordering::Acquire) {
        return Err(Error::Runtime(format!(
            "cannot {action} the {NAME}: it is released"
        )));
    }
    Ok(())
}

fn to_usize(bytes: u64) -> Result<usize> {
    usize::try_from(bytes)
        .map_err(|_| Error::Memory(format!("{bytes} bytes do not fit in this machine's memory")))
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;

    use tempfile::NamedTempFile;

    use super::*;
    use crate::carrier::DefinitionFreeCarrier;
    use crate::dtype::Value;
    use crate::error::ErrorKind;

    /// A device over a temporary regular file of `file_len` bytes that claims
    /// `capacity` bytes and the given block sizes; `read_only` makes every write fail.
    fn file_device(
        file_len: u64,
        capacity: u64,
        logical: u64,
        physical: u64,
        read_only: bool,
    ) -> std::io::Result<(NamedTempFile, BlockDevice)> {
        let backing = NamedTempFile::new()?;
        backing.as_file().set_len(file_len)?;
        let mut options = OpenOptions::new();
        options.read(true).write(!read_only);
        // Direct I/O where the file system supports it, so misaligned transfers would fail
        // here as they do on a device.
        #[cfg(target_os = "linux")]
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            let mut direct = options.clone();
            direct.custom_flags(libc::O_DIRECT);
            direct.open(backing.path())
        };
        #[cfg(not(target_os = "linux"))]
        let file = options.open(backing.path());
        let file = match file {
            Ok(file) => file,
            Err(_) => options.open(backing.path())?,
        };
        let geometry = Geometry {
            capacity,
            logical,
            physical,
        };
        let device = BlockDevice::opened(backing.path().to_path_buf(), file, geometry);
        Ok((backing, device))
    }

    fn body(carrier: &Carrier) -> &BlockDeviceCarrier {
        carrier
            .downcast_ref::<BlockDeviceCarrier>()
            .unwrap_or_else(|| panic!("{carrier:?} is not a BlockDeviceCarrier"))
    }

    fn placement(carrier: &Carrier) -> (u64, u64) {
        let body = body(carrier);
        (body.device_offset_bytes(), body.extent_bytes())
    }

    #[test]
    fn opening_refuses_regular_files_directories_and_missing_paths() -> std::io::Result<()> {
        let file = NamedTempFile::new()?;
        let error = BlockDevice::open(file.path()).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value, "{error}");
        let expected = format!("{} is not a block device node", file.path().display());
        assert!(error.to_string().contains(&expected), "{error}");
        assert!(error.to_string().contains("a regular file"), "{error}");
        let directory = tempfile::tempdir()?;
        let error = BlockDevice::open(directory.path()).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value, "{error}");
        assert!(error.to_string().contains("a directory"), "{error}");
        let error = BlockDevice::open("/dev/null").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value, "{error}");
        assert!(error.to_string().contains("/dev/null is not"), "{error}");
        assert!(error.to_string().contains("a character device"), "{error}");
        let missing = directory.path().join("missing");
        let error = BlockDevice::open(&missing).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io, "{error}");
        assert!(
            error.to_string().contains(&missing.display().to_string()),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn allocation_is_aligned_first_fit_and_merges_released_extents() -> Result<()> {
        let (_file, device) = file_device(16 * 4096, 16 * 4096, 512, 4096, false)
            .map_err(|e| Error::io("test file", e))?;
        assert_eq!(device.allocation_alignment(), 4096);
        let first = device.allocate(1, true, DType::FLOAT32, false)?;
        let second = device.allocate(1025, true, DType::FLOAT32, false)?;
        let third = device.allocate(10, true, DType::FLOAT32, true)?;
        assert_eq!(placement(&first), (0, 4096));
        assert_eq!(placement(&second), (4096, 8192));
        assert_eq!(placement(&third), (12288, 4096));
        let nothing = device.allocate(0, true, DType::FLOAT32, false)?;
        assert_eq!((placement(&nothing), nothing.size()), ((0, 0), 0));
        assert_eq!(device.live_carriers(), 4);
        assert_eq!(device.free_bytes(), 12 * 4096);
        // Releasing the first two merges them: three blocks fit at address 0 again.
        first.release()?;
        second.release()?;
        second.release()?;
        assert_eq!(device.free_bytes(), 15 * 4096);
        let merged = device.allocate(3 * 1024, true, DType::FLOAT32, true)?;
        assert_eq!(placement(&merged), (0, 3 * 4096));
        let error = device
            .allocate(12 * 1024 + 1, true, DType::FLOAT32, true)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
        assert!(
            error.to_string().contains("no free extent of 53248 bytes"),
            "{error}"
        );
        // Dropping an unreleased carrier returns its extent too.
        drop(merged);
        assert_eq!(device.live_carriers(), 2);
        assert_eq!(device.free_bytes(), 15 * 4096);
        Ok(())
    }

    #[test]
    fn only_float32_is_allocated() -> Result<()> {
        let (_file, device) =
            file_device(4096, 4096, 512, 512, false).map_err(|e| Error::io("test file", e))?;
        for dtype in [DType::INT32, DType::BOOL, DType::FLOAT64, DType::FLOATING] {
            let error = device.allocate(1, true, dtype, false).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            let message = error.to_string();
            assert!(
                message.contains("BlockDeviceCarrier") && message.contains(dtype.name()),
                "{message}"
            );
        }
        assert_eq!((device.live_carriers(), device.free_bytes()), (0, 4096));
        Ok(())
    }

    #[test]
    fn close_refuses_live_carriers_and_then_refuses_allocation() -> Result<()> {
        let (_file, device) =
            file_device(8192, 8192, 512, 512, false).map_err(|e| Error::io("test file", e))?;
        let one = device.allocate(1, true, DType::FLOAT32, false)?;
        let two = device.allocate(0, true, DType::FLOAT32, false)?;
        let error = device.close().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        assert!(
            error.to_string().contains("2 carriers are still live"),
            "{error}"
        );
        one.release()?;
        let error = device.close().unwrap_err();
        assert!(
            error.to_string().contains("1 carrier is still live"),
            "{error}"
        );
        two.release()?;
        device.close()?;
        device.close()?;
        assert!(device.is_closed());
        let error = device.allocate(1, true, DType::FLOAT32, false).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        assert!(error.to_string().contains("it is closed"), "{error}");
        // A released carrier is still a prototype, but the closed device refuses it.
        let error = one.allocate_like(1, true, None, false).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        Ok(())
    }

    #[test]
    fn slots_are_little_endian_at_the_extent_and_neighbours_survive() -> Result<()> {
        let (file, device) =
            file_device(8192, 8192, 512, 512, false).map_err(|e| Error::io("test file", e))?;
        let first = device.allocate(3, true, DType::FLOAT32, false)?;
        let second = device.allocate(200, true, DType::FLOAT32, false)?;
        assert_eq!(placement(&second), (512, 1024));
        second.set(0, Value::Float(0.1))?;
        second.set(199, Value::Float(-2.5))?;
        first.set(2, Value::Float(7.0))?;
        assert_eq!(second.get(0)?, Value::Float(0.10000000149011612));
        assert_eq!(second.get(1)?, Value::Float(0.0));
        assert_eq!(second.get(199)?, Value::Float(-2.5));
        assert_eq!(first.get(2)?, Value::Float(7.0));
        assert_eq!(second.version(), 2);
        let bytes = fs::read(file.path()).map_err(|e| Error::io("reading back", e))?;
        assert_eq!(bytes.get(512..516), Some(&0.1_f32.to_le_bytes()[..]));
        assert_eq!(
            bytes.get(512 + 199 * 4..512 + 200 * 4),
            Some(&(-2.5_f32).to_le_bytes()[..])
        );
        assert_eq!(bytes.get(8..12), Some(&7.0_f32.to_le_bytes()[..]));
        Ok(())
    }

    #[test]
    fn bulk_spans_cross_chunks_at_any_slot_offset() -> Result<()> {
        let capacity = 3 << 20;
        let (_file, device) = file_device(capacity, capacity, 512, 512, false)
            .map_err(|e| Error::io("test file", e))?;
        let slots = 700_000; // 2.8 MB: three chunks
        let carrier = device.allocate(slots, true, DType::FLOAT32, false)?;
        let block = body(&carrier);
        let values: Vec<f32> = (0..slots - 300).map(|i| i as f32 * 0.5).collect();
        block.write_f32(3, &values)?;
        let mut back = vec![0.0; values.len()];
        block.read_f32(3, &mut back)?;
        assert_eq!(back, values);
        // The partly covered blocks at both ends kept their other slots.
        let mut edges = [1.0; 3];
        block.read_f32(0, &mut edges)?;
        assert_eq!(edges, [0.0; 3]);
        block.read_f32(slots - 297, &mut edges)?;
        assert_eq!(edges, [0.0; 3]);
        let mut middle = [0.0; 5];
        block.read_f32(262_141, &mut middle)?;
        assert_eq!(
            middle,
            [262_138.0, 262_139.0, 262_140.0, 262_141.0, 262_142.0].map(|x: f32| x * 0.5)
        );
        // An empty span transfers nothing, and spans beyond the carrier are Index errors.
        block.write_f32(slots, &[])?;
        let error = block.read_f32(slots - 1, &mut [0.0; 2]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Index, "{error}");
        let error = block.write_f32(usize::MAX, &[0.0]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Index, "{error}");
        Ok(())
    }

    #[test]
    fn a_failed_write_is_an_io_error_that_faults_the_device() -> Result<()> {
        let (file, device) =
            file_device(8192, 8192, 512, 512, true).map_err(|e| Error::io("test file", e))?;
        let path = file.path().display().to_string();
        let carrier = device.allocate(4, true, DType::FLOAT32, true)?;
        let spare = device.allocate(4, true, DType::FLOAT32, true)?;
        assert_eq!(
            carrier.get(1)?,
            Value::Float(0.0),
            "reads work until the fault"
        );
        let error = carrier.set(1, Value::Float(1.0)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io, "{error}");
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "writing 512 bytes at byte offset 0 of block device {path}"
            )),
            "{message}"
        );
        // The write was counted when its transfer started (docs/carriers.md, Block devices).
        assert_eq!(carrier.version(), 1);
        assert!(device.is_faulted());
        for error in [
            carrier.get(0).unwrap_err(),
            spare.get(0).unwrap_err(),
            spare.set(0, Value::Float(2.0)).unwrap_err(),
            device.allocate(1, true, DType::FLOAT32, true).unwrap_err(),
            carrier.allocate_like(1, true, None, true).unwrap_err(),
        ] {
            assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
            let message = error.to_string();
            assert!(
                message.contains("the device is faulted (writing 512 bytes"),
                "{message}"
            );
            assert!(
                message.contains("only release and close are allowed"),
                "{message}"
            );
        }
        carrier.release()?;
        spare.release()?;
        assert_eq!((device.live_carriers(), device.free_bytes()), (0, 8192));
        device.close()?;
        Ok(())
    }

    #[test]
    fn failed_zeroing_frees_the_extent_and_faults_the_device() -> Result<()> {
        let (_file, device) =
            file_device(8192, 8192, 512, 512, true).map_err(|e| Error::io("test file", e))?;
        let error = device.allocate(2, true, DType::FLOAT32, false).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io, "{error}");
        assert!(device.is_faulted());
        assert_eq!((device.live_carriers(), device.free_bytes()), (0, 8192));
        device.close()?;
        Ok(())
    }

    #[test]
    fn a_zero_byte_completion_is_a_runtime_error_that_faults_the_device() -> Result<()> {
        // The file ends at 4096 bytes, but the device claims 16384.
        let (file, device) =
            file_device(4096, 16384, 512, 512, false).map_err(|e| Error::io("test file", e))?;
        let low = device.allocate(1024, true, DType::FLOAT32, false)?;
        let high = device.allocate(4, true, DType::FLOAT32, true)?;
        assert_eq!(placement(&high), (4096, 512));
        let error = high.get(0).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "reading 512 bytes at byte offset 4096 of block device {} completed zero bytes",
                file.path().display()
            )),
            "{message}"
        );
        assert!(message.contains("the device is now faulted"), "{message}");
        assert!(device.is_faulted());
        assert_eq!(low.get(0).unwrap_err().kind(), ErrorKind::Runtime);
        high.release()?;
        low.release()?;
        device.close()?;
        Ok(())
    }

    #[test]
    fn factories_allocate_from_the_same_device() -> Result<()> {
        let (_file, device) =
            file_device(8192, 8192, 512, 512, false).map_err(|e| Error::io("test file", e))?;
        let prototype = device.allocate(1, true, DType::FLOAT32, false)?;
        let fresh = prototype.new_like(&[Value::Float(1.5), Value::Int(2)], true, None)?;
        assert_eq!(fresh.class(), prototype.class());
        assert_eq!(placement(&fresh), (512, 512));
        assert!(body(&fresh).device().same_as(&device));
        assert_eq!(fresh.get(0)?, Value::Float(1.5));
        assert_eq!(fresh.get(1)?, Value::Float(2.0));
        prototype.release()?;
        let allocated = prototype.allocate_like(3, false, None, false)?;
        assert_eq!(placement(&allocated), (0, 512));
        assert!(!allocated.is_mutable());
        assert_eq!(allocated.get(2)?, Value::Float(0.0));
        let error = prototype
            .new_like(&[Value::Float(1.0)], true, Some(DType::INT32))
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value, "{error}");
        assert!(!allocated.supports_scatter());
        assert_eq!(device.live_carriers(), 2);
        Ok(())
    }

    #[test]
    fn hooks_refuse_values_of_the_wrong_kind_and_released_extents() -> Result<()> {
        let (_file, device) =
            file_device(4096, 4096, 512, 512, false).map_err(|e| Error::io("test file", e))?;
        let carrier = device.allocate(2, true, DType::FLOAT32, false)?;
        let block = body(&carrier);
        let error =
            DefinitionFreeCarrier::write(block, 0, Value::Int(1), DType::FLOAT32).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type, "{error}");
        assert!(
            error
                .to_string()
                .contains("BlockDeviceCarrier Float32 slot cannot hold int value 1"),
            "{error}"
        );
        carrier.release()?;
        assert_eq!(DefinitionFreeCarrier::size(block), 0);
        for error in [
            DefinitionFreeCarrier::read(block, 0, DType::FLOAT32).unwrap_err(),
            block.write_f32(0, &[1.0]).unwrap_err(),
        ] {
            assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
            assert!(error
                .to_string()
                .contains("BlockDeviceCarrier: it is released"));
        }
        // Retiring again (release, then drop) changes nothing.
        DefinitionFreeCarrier::release(block)?;
        assert_eq!((device.live_carriers(), device.free_bytes()), (0, 4096));
        Ok(())
    }
}
