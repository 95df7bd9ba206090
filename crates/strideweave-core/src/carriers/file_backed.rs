//! `FileBacked`: slots in a raw file that has no name on disk.
//!
//! ```text
//! <temp>/                              std::env::temp_dir() when the carrier is made
//!     (no entry)                       the file is unlinked as it is made
//! descriptor 512.. of this process     the only way to the file (FileBacked::path names it
//!     [ slot 0 | slot 1 | ... ]        /proc/<pid>/fd/<n>); 4 bytes a slot, little-endian
//!                                      f32 or i32
//! ```
//!
//! A file is made with `O_TMPFILE` where the kernel and the file system support it (it never
//! has a name), otherwise under a fresh name that is unlinked before the carrier exists (a kill
//! in that instant leaves one empty `.strideweave-<pid>-<n>.raw`). Either way the kernel frees
//! the bytes when the descriptor closes — at release, at drop, or when the process ends in any
//! way, `SIGKILL` included — so nothing a carrier makes outlives its process, and no exit
//! handler or directory clean-up is needed.
//!
//! Invariants:
//! 1. A live carrier owns exactly one file, made for it alone and reachable only through its
//!    descriptor, so no other carrier or process can overwrite it through a name.
//! 2. A carrier's name (the caller's, or a generated `carrier-N.raw`) is reserved in this
//!    process while the carrier is live, so two live carriers never share a name; the name is
//!    for messages and Debug output only.
//! 3. The file holds `slots * 4` bytes; a new carrier starts with none and grows only as a
//!    move destination ([`DefinitionFreeCarrier::set_extent`]); grown slots read 0.
//! 4. `open` is `None` exactly when the carrier is released, and then its descriptor is closed
//!    and its name free; dropping an unreleased carrier (including one whose construction
//!    failed half way) does the same.

use crate::carrier::CarrierClass;
use crate::carriers::bulk_routes::FileBackedToCpu;
use crate::carriers::Cpu;
use crate::internal;
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::carrier::{Carrier, ClassOrigin, DefinitionFreeCarrier};
use crate::dtype::{accepts_storage_dtype, validate_storage_dtype, DType, Value};
use crate::error::{Error, Result};

const NAME: &str = "FileBacked";
const STORABLE: [DType; 2] = [DType::FLOAT32, DType::INT32];
/// Bytes per slot (Float32 and Int32 alike).
const SLOT_BYTES: u64 = 4;

/// The names of this process's live FileBacked carriers.
static LIVE_NAMES: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Source of generated carrier names.
static NEXT_NAME: AtomicU64 = AtomicU64::new(0);

/// Source of the names a file gets for the moment between its creation and its unlinking
/// where `O_TMPFILE` is unavailable.
static NEXT_FALLBACK_NAME: AtomicU64 = AtomicU64::new(0);

/// The lowest descriptor number a FileBacked file is moved to (see [`relocated`]).
const DESCRIPTOR_FLOOR: u64 = 512;
/// How many numbers from [`DESCRIPTOR_FLOOR`] the search for a free descriptor wraps within.
const DESCRIPTOR_WINDOW: u64 = 256;
/// Where the next descriptor search starts, as an offset from [`DESCRIPTOR_FLOOR`].
static NEXT_DESCRIPTOR: AtomicU64 = AtomicU64::new(0);

/// The element a FileBacked carrier stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Element {
    Float32,
    Int32,
}

impl Element {
    /// The element of a storable `dtype`; a Value error naming FileBacked and the dtype
    /// otherwise.
    fn of(dtype: DType) -> Result<Element> {
        validate_storage_dtype(dtype, NAME, &STORABLE)?;
        if dtype == DType::FLOAT32 {
            Ok(Element::Float32)
        } else if dtype == DType::INT32 {
            Ok(Element::Int32)
        } else {
            Err(Error::Value(format!(
                "carrier {NAME} does not support storage dtype {dtype}"
            )))
        }
    }

    fn dtype(self) -> DType {
        match self {
            Element::Float32 => DType::FLOAT32,
            Element::Int32 => DType::INT32,
        }
    }
}

/// Storage-only slots in a raw file (Float32 or Int32, 4 bytes little-endian each).
///
/// The file is unlinked as it is created, so it lives exactly as long as the carrier's file
/// descriptor: releasing or dropping the carrier frees it, and so does the end of the process,
/// however abrupt. A new carrier is empty and grows only as the destination of a move; scatter
/// and every operation are NotImplemented and the class declares no capabilities.
///
/// ```
/// use strideweave::carriers::FileBacked;
/// use strideweave::DType;
/// let carrier = FileBacked::carrier(None, DType::FLOAT32, true)?;
/// assert_eq!(carrier.size(), 0);
/// let path = carrier.downcast_ref::<FileBacked>().and_then(FileBacked::path);
/// assert!(path.is_some_and(|path| path.exists())); // /proc/<pid>/fd/<n> on Linux
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug)]
pub struct FileBacked {
    element: Element,
    /// The carrier's name, for messages; reserved in [`LIVE_NAMES`] while `open` is `Some`.
    name: String,
    /// `None` once released.
    open: Mutex<Option<Open>>,
    /// The number of slots; changes only while `open` is locked.
    slots: AtomicUsize,
}

/// A live carrier's file and its name's reservation, given up together.
#[derive(Debug)]
struct Open {
    file: File,
    _name: Reservation,
}

/// A name in [`LIVE_NAMES`], freed on drop.
#[derive(Debug)]
struct Reservation(String);

impl Reservation {
    /// Reserves `name`; `None` when a live carrier already holds it.
    fn take(name: &str) -> Option<Reservation> {
        LIVE_NAMES
            .lock()
            .insert(name.to_owned())
            .then(|| Reservation(name.to_owned()))
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        LIVE_NAMES.lock().remove(&self.0);
    }
}

impl FileBacked {
    /// An empty FileBacked carrier of `dtype` (Float32 or Int32) in a new unlinked file of
    /// [`std::env::temp_dir`].
    ///
    /// `filename` names the carrier in messages and Debug output; no file on disk ever has
    /// that name. `None` generates a unique `carrier-N.raw`.
    ///
    /// # Errors
    /// A Value error for another dtype, for a name that is empty, `.`, `..` or contains a
    /// path separator, or for a name a live FileBacked carrier of this process already uses;
    /// an Io error when the file cannot be created.
    pub fn carrier(filename: Option<&str>, dtype: DType, mutable: bool) -> Result<Carrier> {
        let element = Element::of(dtype)?;
        Carrier::new(FileBacked::create(filename, element)?, dtype, mutable)
    }

    /// A path that opens this carrier's file while the carrier is live; `None` once released.
    ///
    /// The file has no name in any directory (it was unlinked when it was created, so it
    /// cannot outlive the process), so the path goes through the carrier's descriptor:
    /// `/proc/<pid>/fd/<n>` on Linux and Android (procfs must be mounted), `/dev/fd/<n>`
    /// elsewhere. Opening, `metadata` and `exists` work on it as on the file itself, from any
    /// process the system lets inspect this one's descriptors. It stops resolving when the
    /// carrier is released or dropped; do not keep it past that, since a later descriptor may
    /// take the same number (FileBacked rotates its numbers so this is rare, not impossible).
    pub fn path(&self) -> Option<PathBuf> {
        let open = self.open.lock();
        open.as_ref()
            .map(|open| descriptor_path(open.file.as_raw_fd()))
    }

    /// Copies `out.len()` bytes starting at `byte_offset` of the file into `out`.
    ///
    /// # Errors
    /// A Runtime error once released, an Index error for bytes beyond the slots, an Io error
    /// naming the carrier and the first slot when the read fails.
    pub(crate) fn read_bytes(&self, byte_offset: u64, out: &mut [u8]) -> Result<()> {
        self.with_file(Transfer::Read, byte_offset, out.len(), |file| {
            file.read_exact_at(out, byte_offset)
        })
    }

    /// Copies `data` into the file starting at `byte_offset`.
    ///
    /// # Errors
    /// A Runtime error once released, an Index error for bytes beyond the slots, an Io error
    /// naming the carrier and the first slot when the write fails.
    pub(crate) fn write_bytes(&self, byte_offset: u64, data: &[u8]) -> Result<()> {
        self.with_file(Transfer::Write, byte_offset, data.len(), |file| {
            file.write_all_at(data, byte_offset)
        })
    }

    /// A new empty carrier named `filename` (or a generated name) in a new unlinked file.
    fn create(filename: Option<&str>, element: Element) -> Result<FileBacked> {
        let reservation = match filename {
            Some(name) => {
                check_name(name)?;
                Reservation::take(name).ok_or_else(|| {
                    Error::Value(format!(
                        "{NAME} file name {name:?} is already used by a live {NAME} carrier"
                    ))
                })?
            }
            // A caller may have taken a generated-looking name; each attempt uses a fresh
            // number, and only finitely many carriers are live, so this ends.
            None => loop {
                let number = NEXT_NAME.fetch_add(1, Ordering::Relaxed);
                if let Some(reservation) = Reservation::take(&format!("carrier-{number}.raw")) {
                    break reservation;
                }
            },
        };
        let directory = std::env::temp_dir();
        let file = create_unlinked(&directory).map_err(|error| {
            Error::io(
                format!(
                    "creating {NAME} file {} in {}",
                    reservation.0,
                    directory.display()
                ),
                error,
            )
        })?;
        Ok(FileBacked {
            element,
            name: reservation.0.clone(),
            open: Mutex::new(Some(Open {
                file: relocated(file),
                _name: reservation,
            })),
            slots: AtomicUsize::new(0),
        })
    }

    /// A new carrier named `filename` (or a generated name) holding already normalized
    /// `values`. On failure the half-made carrier is dropped, which frees its file and name.
    fn filled(filename: Option<&str>, values: &[Value], element: Element) -> Result<FileBacked> {
        let count = byte_len(values.len()).ok_or_else(|| too_large(values.len()))?;
        let mut bytes = Vec::new();
        usize::try_from(count)
            .ok()
            .and_then(|count| bytes.try_reserve_exact(count).ok())
            .ok_or_else(|| too_large(values.len()))?;
        for value in values {
            bytes.extend_from_slice(&encode(element, *value)?);
        }
        let body = FileBacked::create(filename, element)?;
        body.resize(values.len())?;
        body.write_bytes(0, &bytes)?;
        Ok(body)
    }

    /// Sets the file to `slots` slots; new slots read 0.
    fn resize(&self, slots: usize) -> Result<()> {
        let bytes = byte_len(slots).ok_or_else(|| too_large(slots))?;
        let open = self.open.lock();
        let open = open.as_ref().ok_or_else(|| released("resize"))?;
        open.file.set_len(bytes).map_err(|error| {
            Error::io(
                format!("resizing {NAME} file {} to {slots} slots", self.name),
                error,
            )
        })?;
        self.slots.store(slots, Ordering::Release);
        Ok(())
    }

    /// Runs the positioned I/O `op` on the file under its lock, after checking the carrier is
    /// live and `[byte_offset, byte_offset + len)` lies within its slots. An Io error names
    /// the transfer, the carrier and the first slot.
    fn with_file(
        &self,
        transfer: Transfer,
        byte_offset: u64,
        len: usize,
        op: impl FnOnce(&File) -> io::Result<()>,
    ) -> Result<()> {
        let action = transfer.verb();
        let open = self.open.lock();
        let open = open.as_ref().ok_or_else(|| released(action))?;
        let slots = self.slots.load(Ordering::Acquire);
        let end = u64::try_from(len)
            .ok()
            .and_then(|len| byte_offset.checked_add(len));
        let extent = byte_len(slots);
        if end.is_none() || end > extent {
            return Err(Error::Index(format!(
                "cannot {action} {len} bytes at byte {byte_offset}: a {NAME} carrier of \
                 {slots} slots holds {} bytes",
                extent.unwrap_or(u64::MAX)
            )));
        }
        op(&open.file).map_err(|error| {
            Error::io(
                format!(
                    "{} {len} bytes at byte {byte_offset} (slot {}) of {NAME} file {}",
                    transfer.gerund(),
                    byte_offset / SLOT_BYTES,
                    self.name
                ),
                error,
            )
        })
    }
}

/// The direction of a positioned transfer, for messages.
#[derive(Debug, Clone, Copy)]
enum Transfer {
    Read,
    Write,
}

impl Transfer {
    fn verb(self) -> &'static str {
        match self {
            Transfer::Read => "read",
            Transfer::Write => "write",
        }
    }

    fn gerund(self) -> &'static str {
        match self {
            Transfer::Read => "reading",
            Transfer::Write => "writing",
        }
    }
}

impl DefinitionFreeCarrier for FileBacked {
    const NAME: &'static str = NAME;
    const ORIGIN: ClassOrigin = ClassOrigin::SHIPPED;

    /// FileBacked stores only (it declares no capability) and moves in bulk to the CPU.
    fn declare_class(class: CarrierClass) {
        // A shipped class declares once, before any query of it, so none of this can be
        // refused.
        let _ = internal::declare_shipped_capabilities(class, []);
        let _ = internal::declare_shipped_move_operation(
            class,
            CarrierClass::of::<Cpu>(),
            Arc::new(FileBackedToCpu),
        );
    }

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        accepts_storage_dtype(dtype, &STORABLE)
    }

    fn size(&self) -> usize {
        self.slots.load(Ordering::Acquire)
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        let mut bytes = [0; 4];
        self.read_bytes(slot_offset(index)?, &mut bytes)?;
        Ok(decode(self.element, bytes))
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        let bytes = encode(self.element, value)?;
        self.write_bytes(slot_offset(index)?, &bytes)
    }

    fn release(&self) -> Result<()> {
        let mut open = self.open.lock();
        // Closing the descriptor frees the file; the name is free once another carrier can
        // observe the release, since both go under the lock.
        if open.take().is_some() {
            self.slots.store(0, Ordering::Release);
        }
        Ok(())
    }

    fn new_like(&self, values: &[Value], dtype: DType) -> Result<Self> {
        FileBacked::filled(None, values, Element::of(dtype)?)
    }

    fn allocate_like(&self, size: usize, dtype: DType, _empty: bool) -> Result<Self> {
        let body = FileBacked::create(None, Element::of(dtype)?)?;
        body.resize(size)?;
        Ok(body)
    }

    fn grows_as_destination(&self) -> bool {
        true
    }

    fn set_extent(&self, slots: usize, _dtype: DType) -> Result<()> {
        self.resize(slots)
    }

    fn supports_scatter(&self) -> bool {
        false
    }
}

/// Refuses names that are not a single plain file name.
fn check_name(name: &str) -> Result<()> {
    let path_like =
        name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']);
    if path_like {
        return Err(Error::Value(format!(
            "{NAME} file name {name:?} is not a plain file name (it must be non-empty, not \
             '.' or '..', and contain no path separator)"
        )));
    }
    Ok(())
}

/// A new read-write file in `directory` that no directory entry names: made with `O_TMPFILE`
/// where the kernel and the file system support it, otherwise by [`create_then_unlink`].
fn create_unlinked(directory: &Path) -> io::Result<File> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let made = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE)
            .open(directory);
        match made {
            Ok(file) => return Ok(file),
            // The errors of a kernel or file system without O_TMPFILE (ENOENT also when the
            // directory is missing, which the fallback then reports).
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::ENOENT)
                ) => {}
            Err(error) => return Err(error),
        }
    }
    create_then_unlink(directory)
}

/// A new read-write file in `directory`, created under a fresh name and unlinked at once (a
/// process killed between the two leaves that one empty `.strideweave-<pid>-<n>.raw`).
fn create_then_unlink(directory: &Path) -> io::Result<File> {
    loop {
        let number = NEXT_FALLBACK_NAME.fetch_add(1, Ordering::Relaxed);
        let path = directory.join(format!(".strideweave-{}-{number}.raw", std::process::id()));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => {
                fs::remove_file(&path)?;
                return Ok(file);
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
}

/// `file` on a descriptor numbered from [`DESCRIPTOR_FLOOR`] up, taken next fit: the search
/// starts just past the previous FileBacked descriptor and wraps within [`DESCRIPTOR_WINDOW`]
/// numbers. So the number a released carrier closes is neither the next one the process opens
/// (those come from the low numbers) nor, until the search wraps, one FileBacked takes again,
/// and a stale [`FileBacked::path`] seldom names another file. `file` itself where no such
/// descriptor is free (a descriptor limit of 512 or less, for one).
fn relocated(file: File) -> File {
    let start = DESCRIPTOR_FLOOR + NEXT_DESCRIPTOR.load(Ordering::Relaxed) % DESCRIPTOR_WINDOW;
    let Ok(start) = libc::c_int::try_from(start) else {
        return file;
    };
    // SAFETY: F_DUPFD_CLOEXEC reads only the descriptor `file` owns and returns either -1 or
    // a new descriptor.
    let descriptor = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, start) };
    let Ok(number) = u64::try_from(descriptor) else {
        return file;
    };
    // Next fit: the next search starts past this descriptor (racing creations may store in
    // either order; each still gets its own descriptor).
    NEXT_DESCRIPTOR.store(
        number.saturating_sub(DESCRIPTOR_FLOOR) + 1,
        Ordering::Relaxed,
    );
    // SAFETY: `descriptor` was just opened by fcntl and nothing else owns it. Dropping `file`
    // closes only the original descriptor.
    File::from(unsafe { OwnedFd::from_raw_fd(descriptor) })
}

/// The path that opens descriptor `descriptor` of this process.
fn descriptor_path(descriptor: libc::c_int) -> PathBuf {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        PathBuf::from(format!("/proc/{}/fd/{descriptor}", std::process::id()))
    } else {
        PathBuf::from(format!("/dev/fd/{descriptor}"))
    }
}

/// The file length of `slots` slots, unless it overflows.
fn byte_len(slots: usize) -> Option<u64> {
    u64::try_from(slots).ok()?.checked_mul(SLOT_BYTES)
}

/// The byte offset of slot `index`.
fn slot_offset(index: usize) -> Result<u64> {
    byte_len(index).ok_or_else(|| Error::Index(format!("slot {index} is beyond any {NAME} file")))
}

fn too_large(slots: usize) -> Error {
    Error::Memory(format!(
        "cannot hold {slots} slots of {SLOT_BYTES} bytes in a {NAME} file"
    ))
}

fn released(action: &str) -> Error {
    Error::Runtime(format!(
        "cannot {action} the {NAME} carrier: it is released"
    ))
}

/// An already normalized value as little-endian bytes.
fn encode(element: Element, value: Value) -> Result<[u8; 4]> {
    match (element, value) {
        (Element::Float32, Value::Float(x)) => Ok((x as f32).to_le_bytes()),
        (Element::Int32, Value::Int(i)) => i32::try_from(i).map(i32::to_le_bytes).map_err(|_| {
            Error::Overflow(format!(
                "int value {i} is out of range for a {NAME} Int32 slot"
            ))
        }),
        _ => Err(Error::Type(format!(
            "a {NAME} {} slot cannot hold {} value {value}",
            element.dtype(),
            value.type_name()
        ))),
    }
}

fn decode(element: Element, bytes: [u8; 4]) -> Value {
    match element {
        Element::Float32 => Value::Float(f64::from(f32::from_le_bytes(bytes))),
        Element::Int32 => Value::Int(i64::from(i32::from_le_bytes(bytes))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn body(carrier: &Carrier) -> &FileBacked {
        carrier
            .downcast_ref::<FileBacked>()
            .unwrap_or_else(|| panic!("{carrier:?} is not a FileBacked carrier"))
    }

    fn path_of(carrier: &Carrier) -> PathBuf {
        body(carrier)
            .path()
            .unwrap_or_else(|| panic!("{carrier:?} has no file"))
    }

    fn descriptor_of(carrier: &Carrier) -> libc::c_int {
        let open = body(carrier).open.lock();
        open.as_ref()
            .map(|open| open.file.as_raw_fd())
            .unwrap_or_else(|| panic!("{carrier:?} is released"))
    }

    fn values(carrier: &Carrier) -> Result<Vec<Value>> {
        (0..carrier.size()).map(|i| carrier.get(i)).collect()
    }

    fn file_len(path: &Path) -> u64 {
        fs::metadata(path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
            .len()
    }

    fn is_reserved(name: &str) -> bool {
        LIVE_NAMES.lock().contains(name)
    }

    #[test]
    fn files_are_unlinked_at_once_and_carriers_have_unique_names() -> Result<()> {
        let first = FileBacked::carrier(None, DType::FLOAT32, true)?;
        let second = FileBacked::carrier(None, DType::FLOAT32, true)?;
        let (first_path, second_path) = (path_of(&first), path_of(&second));
        assert_ne!(first_path, second_path);
        assert_ne!(body(&first).name, body(&second).name);
        for (carrier, path) in [(&first, &first_path), (&second, &second_path)] {
            let name = &body(carrier).name;
            assert!(
                name.starts_with("carrier-") && name.ends_with(".raw"),
                "{name}"
            );
            assert!(is_reserved(name), "{name}");
            let expected = format!("/proc/{}/fd/{}", std::process::id(), descriptor_of(carrier));
            assert_eq!(path, Path::new(&expected));
            // procfs shows where the file was made and that no name leads to it.
            let target = fs::read_link(path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
                .to_string_lossy()
                .into_owned();
            assert!(target.ends_with(" (deleted)"), "{target}");
            assert!(
                Path::new(&target).starts_with(std::env::temp_dir()),
                "{target}"
            );
        }
        assert_eq!((first.size(), file_len(&first_path)), (0, 0));
        let debug = format!("{:?}", body(&first));
        assert!(debug.contains(&body(&first).name), "{debug}");
        Ok(())
    }

    #[test]
    fn descriptors_sit_above_the_floor_and_a_released_one_is_not_taken_next() -> Result<()> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only the struct it is given.
        let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
        let first = FileBacked::carrier(None, DType::INT32, true)?;
        let number = descriptor_of(&first);
        let room = DESCRIPTOR_FLOOR + 2 * DESCRIPTOR_WINDOW;
        // Where the soft limit leaves no room above the floor, the low descriptor is kept.
        if known && u128::from(limit.rlim_cur) > u128::from(room) {
            assert!(
                u64::try_from(number).is_ok_and(|n| n >= DESCRIPTOR_FLOOR),
                "{number}"
            );
        }
        first.release()?;
        let second = FileBacked::carrier(None, DType::INT32, true)?;
        assert_ne!(descriptor_of(&second), number);
        Ok(())
    }

    #[test]
    fn path_like_names_are_value_errors_and_reserve_nothing() -> Result<()> {
        for name in ["", ".", "..", "a/b", "/abs", "a\\b", "nul\0byte"] {
            let error = FileBacked::carrier(Some(name), DType::FLOAT32, true).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{name:?}: {error}");
            let message = error.to_string();
            assert!(message.contains(&format!("{name:?}")), "{message}");
            assert!(message.contains("is not a plain file name"), "{message}");
            assert!(!is_reserved(name), "{name:?}");
        }
        Ok(())
    }

    #[test]
    fn unsupported_dtypes_are_value_errors_and_reserve_no_name() -> Result<()> {
        for dtype in [DType::BOOL, DType::FLOAT64, DType::INT8, DType::ANY] {
            let error = FileBacked::carrier(Some("unit-bad-dtype"), dtype, true).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            let message = error.to_string();
            assert!(
                message.contains("FileBacked") && message.contains(dtype.name()),
                "{message}"
            );
        }
        assert!(!is_reserved("unit-bad-dtype"));
        Ok(())
    }

    #[test]
    fn a_failed_fill_frees_its_name() -> Result<()> {
        let cases = [
            ("unit-failed-fill-type", Value::Bool(true), ErrorKind::Type),
            (
                "unit-failed-fill-range",
                Value::Int(1 << 40),
                ErrorKind::Overflow,
            ),
        ];
        for (name, bad, kind) in cases {
            let element = if kind == ErrorKind::Type {
                Element::Float32
            } else {
                Element::Int32
            };
            let good = if kind == ErrorKind::Type {
                Value::Float(1.0)
            } else {
                Value::Int(1)
            };
            let error = FileBacked::filled(Some(name), &[good, bad], element).unwrap_err();
            assert_eq!(error.kind(), kind, "{error}");
            assert!(!is_reserved(name), "{name}");
        }
        // A successful fill under the same name shows the name was left free.
        let filled = FileBacked::filled(
            Some("unit-failed-fill-type"),
            &[Value::Float(1.0)],
            Element::Float32,
        )?;
        let path = filled.path().expect("a live carrier has a path");
        assert_eq!(file_len(&path), 4);
        Ok(())
    }

    #[test]
    fn growing_adds_zero_slots_stored_little_endian() -> Result<()> {
        let carrier = FileBacked::carrier(None, DType::INT32, true)?;
        assert!(carrier.grows_as_destination());
        carrier.set_extent(3)?;
        assert_eq!(carrier.size(), 3);
        assert_eq!(file_len(&path_of(&carrier)), 12);
        assert_eq!(values(&carrier)?, [Value::Int(0); 3]);
        carrier.set(1, Value::Int(0x0102_0304))?;
        let mut bytes = [0; 4];
        body(&carrier).read_bytes(4, &mut bytes)?;
        assert_eq!(bytes, [4, 3, 2, 1]);
        body(&carrier).write_bytes(8, &(-2_i32).to_le_bytes())?;
        assert_eq!(carrier.get(2)?, Value::Int(-2));
        carrier.set_extent(5)?;
        assert_eq!(
            values(&carrier)?,
            [0, 0x0102_0304, -2, 0, 0].map(Value::Int)
        );
        // The path reaches the same bytes.
        let on_disk = fs::read(path_of(&carrier)).map_err(|e| Error::io("reading", e))?;
        assert_eq!(on_disk[4..8], [4, 3, 2, 1]);
        assert_eq!(on_disk.len(), 20);
        Ok(())
    }

    #[test]
    fn float32_slots_round_trip_through_the_file() -> Result<()> {
        let prototype = FileBacked::carrier(None, DType::FLOAT32, true)?;
        let carrier = prototype.new_like(&[0.1.into(), 1e40.into(), (-3).into()], true, None)?;
        assert_eq!(carrier.class(), prototype.class());
        assert_eq!(file_len(&path_of(&carrier)), 12);
        assert_eq!(
            values(&carrier)?,
            [
                Value::Float(0.10000000149011612),
                Value::Float(f64::INFINITY),
                Value::Float(-3.0)
            ]
        );
        let mut bytes = [0; 4];
        body(&carrier).read_bytes(8, &mut bytes)?;
        assert_eq!(bytes, (-3.0_f32).to_le_bytes());
        Ok(())
    }

    #[test]
    fn bytes_beyond_the_slots_are_index_errors_and_never_grow_the_file() -> Result<()> {
        let carrier = FileBacked::carrier(None, DType::FLOAT32, true)?;
        carrier.set_extent(2)?;
        let mut out = [0; 8];
        let error = body(&carrier).read_bytes(4, &mut out).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Index, "{error}");
        assert!(
            error.to_string().contains("2 slots holds 8 bytes"),
            "{error}"
        );
        let error = body(&carrier).write_bytes(u64::MAX, &[1]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Index, "{error}");
        let error = body(&carrier).write_bytes(6, &[1, 2, 3]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Index, "{error}");
        assert_eq!(file_len(&path_of(&carrier)), 8);
        body(&carrier).read_bytes(0, &mut out)?;
        assert_eq!(out, [0; 8]);
        Ok(())
    }

    #[test]
    fn release_closes_the_file_frees_the_name_and_refuses_access() -> Result<()> {
        let carrier = FileBacked::carrier(Some("unit-release"), DType::FLOAT32, true)?;
        carrier.set_extent(2)?;
        let path = path_of(&carrier);
        assert!(is_reserved("unit-release"));
        carrier.release()?;
        assert!(!path.exists());
        assert!(!is_reserved("unit-release"));
        let file_backed = body(&carrier);
        assert_eq!(file_backed.path(), None);
        assert_eq!(DefinitionFreeCarrier::size(file_backed), 0);
        let mut out = [0; 4];
        for error in [
            file_backed.read_bytes(0, &mut out).unwrap_err(),
            file_backed.write_bytes(0, &out).unwrap_err(),
            file_backed.set_extent(4, DType::FLOAT32).unwrap_err(),
            DefinitionFreeCarrier::read(file_backed, 0, DType::FLOAT32).unwrap_err(),
        ] {
            assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
            assert!(error
                .to_string()
                .contains("FileBacked carrier: it is released"));
        }
        // Releasing the body twice is harmless.
        DefinitionFreeCarrier::release(file_backed)?;
        Ok(())
    }

    #[test]
    fn a_released_name_is_free_and_dropping_the_old_carrier_keeps_the_new_one() -> Result<()> {
        let old = FileBacked::carrier(Some("unit-reuse"), DType::INT32, true)?;
        let error = FileBacked::carrier(Some("unit-reuse"), DType::INT32, true).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        assert!(
            error.to_string().contains("\"unit-reuse\" is already used"),
            "{error}"
        );
        old.release()?;
        let new = FileBacked::carrier(Some("unit-reuse"), DType::INT32, true)?;
        new.set_extent(1)?;
        new.set(0, Value::Int(7))?;
        drop(old);
        assert!(path_of(&new).exists());
        assert!(is_reserved("unit-reuse"));
        assert_eq!(new.get(0)?, Value::Int(7));
        let path = path_of(&new);
        drop(new);
        assert!(!path.exists());
        assert!(!is_reserved("unit-reuse"));
        Ok(())
    }

    #[test]
    fn a_caller_may_take_a_generated_looking_name() -> Result<()> {
        let next = NEXT_NAME.load(Ordering::Relaxed);
        let taken = format!("carrier-{next}.raw");
        let held = FileBacked::carrier(Some(&taken), DType::FLOAT32, true)?;
        let generated = FileBacked::carrier(None, DType::FLOAT32, true)?;
        assert_ne!(body(&generated).name, body(&held).name);
        Ok(())
    }

    #[test]
    fn allocate_like_makes_a_fresh_zeroed_file_and_scatter_is_unsupported() -> Result<()> {
        let prototype = FileBacked::carrier(None, DType::FLOAT32, true)?;
        prototype.release()?;
        let allocated = prototype.allocate_like(3, true, Some(DType::INT32), true)?;
        assert_eq!(allocated.dtype(), DType::INT32);
        assert_eq!(values(&allocated)?, [Value::Int(0); 3]);
        assert_eq!(file_len(&path_of(&allocated)), 12);
        assert!(!allocated.supports_scatter());
        let error = prototype
            .allocate_like(1, true, Some(DType::BOOL), false)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        Ok(())
    }

    #[test]
    fn both_ways_of_making_a_file_leave_no_directory_entry() -> Result<()> {
        let directory = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let plain = directory.path().join("plain");
        fs::write(&plain, b"").map_err(|e| Error::io("write", e))?;
        type Make = fn(&Path) -> io::Result<File>;
        for (way, make) in [
            ("create_unlinked", create_unlinked as Make),
            ("create_then_unlink", create_then_unlink as Make),
        ] {
            // A plain file where the directory should be is an error, not a loop.
            assert!(make(&plain).is_err(), "{way}");
            let file = make(directory.path()).map_err(|e| Error::io(way, e))?;
            file.write_all_at(&[1, 2, 3, 4], 0)
                .map_err(|e| Error::io("write", e))?;
            let mut back = [0; 4];
            file.read_exact_at(&mut back, 0)
                .map_err(|e| Error::io("read", e))?;
            assert_eq!(back, [1, 2, 3, 4], "{way}");
            let entries: Vec<_> = fs::read_dir(directory.path())
                .map_err(|e| Error::io("read_dir", e))?
                .filter_map(|entry| entry.ok().map(|entry| entry.file_name()))
                .collect();
            assert_eq!(entries, [std::ffi::OsString::from("plain")], "{way}");
        }
        Ok(())
    }

    #[test]
    fn hooks_refuse_values_of_the_wrong_kind() -> Result<()> {
        let carrier = FileBacked::carrier(None, DType::INT32, true)?;
        carrier.set_extent(1)?;
        let file_backed = body(&carrier);
        let error = DefinitionFreeCarrier::write(file_backed, 0, Value::Float(1.0), DType::INT32)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);
        assert!(
            error
                .to_string()
                .contains("FileBacked Int32 slot cannot hold float value 1.0"),
            "{error}"
        );
        assert_eq!(carrier.get(0)?, Value::Int(0));
        Ok(())
    }
}
