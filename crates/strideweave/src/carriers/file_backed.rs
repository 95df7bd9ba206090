//! `FileBacked`: slots in a raw file of a hidden per-process temporary directory.
//!
//! ```text
//! <temp>/.strideweave-XXXXXX/          one directory per process, removed at exit
//!     carrier-0.raw                    a generated name
//!     weights.raw                      a caller's name
//!         [ slot 0 | slot 1 | ... ]    4 bytes each, little-endian f32 or i32
//! ```
//!
//! Invariants:
//! 1. A live carrier owns exactly one file, created with `create_new`, so a name is never
//!    shared by two live carriers and an existing file is never overwritten.
//! 2. The file holds `slots * 4` bytes; a new carrier starts with none and grows only as a
//!    move destination ([`DefinitionFreeCarrier::set_extent`]); grown slots read 0.
//! 3. `file` is `None` exactly when the carrier is released, and then the file is gone;
//!    dropping an unreleased carrier (including one whose construction failed half way)
//!    deletes its file.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, OnceLock};

use parking_lot::Mutex;
use tempfile::TempDir;

use crate::carrier::{Carrier, DefinitionFreeCarrier};
use crate::dtype::{accepts_storage_dtype, validate_storage_dtype, DType, Value};
use crate::error::{Error, Result};

const NAME: &str = "FileBacked";
const STORABLE: [DType; 2] = [DType::FLOAT32, DType::INT32];
/// Bytes per slot (Float32 and Int32 alike).
const SLOT_BYTES: u64 = 4;

/// The per-process directory, created on first use.
static DIRECTORY: LazyLock<io::Result<TempDir>> = LazyLock::new(|| {
    let directory = tempfile::Builder::new().prefix(".strideweave-").tempdir()?;
    // Statics are never dropped, so the directory is removed by an exit handler instead.
    if CLEANUP
        .set((std::process::id(), directory.path().to_path_buf()))
        .is_ok()
    {
        // SAFETY: `remove_directory` is an `extern "C"` function taking no arguments that
        // never unwinds and uses only state that lives until the process ends.
        unsafe {
            libc::atexit(remove_directory);
        }
    }
    Ok(directory)
});

/// The process that created the directory, and its path, for the exit handler.
static CLEANUP: OnceLock<(u32, PathBuf)> = OnceLock::new();

/// Source of generated file names.
static NEXT_NAME: AtomicU64 = AtomicU64::new(0);

/// Removes the directory at exit (only in the process that created it, not a forked child).
extern "C" fn remove_directory() {
    if let Some((owner, path)) = CLEANUP.get() {
        if *owner == std::process::id() {
            let _ = fs::remove_dir_all(path);
        }
    }
}

/// The per-process directory, or an Io error when it could not be created.
fn directory() -> Result<&'static Path> {
    match &*DIRECTORY {
        Ok(directory) => Ok(directory.path()),
        Err(error) => Err(Error::io(
            format!("creating the {NAME} temporary directory"),
            io::Error::new(error.kind(), error.to_string()),
        )),
    }
}

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
/// A new carrier is empty and grows only as the destination of a move; scatter and every
/// operation are NotImplemented and the class declares no capabilities. Releasing or dropping
/// the carrier deletes its file.
///
/// ```
/// use strideweave::carriers::FileBacked;
/// use strideweave::DType;
/// let carrier = FileBacked::carrier(None, DType::FLOAT32, true)?;
/// assert_eq!(carrier.size(), 0);
/// let path = carrier.downcast_ref::<FileBacked>().and_then(FileBacked::path);
/// assert!(path.is_some_and(|path| path.exists()));
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug)]
pub struct FileBacked {
    element: Element,
    path: PathBuf,
    /// `None` once released.
    file: Mutex<Option<File>>,
    /// The number of slots; changes only while `file` is locked.
    slots: AtomicUsize,
}

impl FileBacked {
    /// An empty FileBacked carrier of `dtype` (Float32 or Int32) in a new file.
    ///
    /// `filename` names the file inside the per-process directory; `None` generates a
    /// unique name.
    ///
    /// # Errors
    /// A Value error for another dtype, for a name that is empty, `.`, `..` or contains a
    /// path separator, or for a name a live FileBacked carrier already uses (whose file is
    /// kept); an Io error when the directory or the file cannot be created.
    pub fn carrier(filename: Option<&str>, dtype: DType, mutable: bool) -> Result<Carrier> {
        let element = Element::of(dtype)?;
        Carrier::new(FileBacked::create(filename, element)?, dtype, mutable)
    }

    /// The file's path; `None` once released (the file is then deleted).
    pub fn path(&self) -> Option<PathBuf> {
        self.file.lock().is_some().then(|| self.path.clone())
    }

    /// Copies `out.len()` bytes starting at `byte_offset` of the file into `out`.
    ///
    /// # Errors
    /// A Runtime error once released, an Index error for bytes beyond the slots, an Io error
    /// naming the file and the first slot when the read fails.
    pub(crate) fn read_bytes(&self, byte_offset: u64, out: &mut [u8]) -> Result<()> {
        self.with_file(Transfer::Read, byte_offset, out.len(), |file| {
            file.read_exact_at(out, byte_offset)
        })
    }

    /// Copies `data` into the file starting at `byte_offset`.
    ///
    /// # Errors
    /// A Runtime error once released, an Index error for bytes beyond the slots, an Io error
    /// naming the file and the first slot when the write fails.
    pub(crate) fn write_bytes(&self, byte_offset: u64, data: &[u8]) -> Result<()> {
        self.with_file(Transfer::Write, byte_offset, data.len(), |file| {
            file.write_all_at(data, byte_offset)
        })
    }

    /// A new empty file named `filename` (or a generated name).
    fn create(filename: Option<&str>, element: Element) -> Result<FileBacked> {
        let directory = directory()?;
        if let Some(name) = filename {
            check_name(name)?;
            let path = directory.join(name);
            return match create_new(&path) {
                Ok(file) => Ok(FileBacked::opened(path, file, element)),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Err(Error::Value(
                    format!("{NAME} file name {name:?} is already used by a live {NAME} carrier"),
                )),
                Err(error) => Err(creating(&path, error)),
            };
        }
        // Each attempt uses a fresh name, and only finitely many files exist, so this ends.
        loop {
            let number = NEXT_NAME.fetch_add(1, Ordering::Relaxed);
            let path = directory.join(format!("carrier-{number}.raw"));
            match create_new(&path) {
                Ok(file) => return Ok(FileBacked::opened(path, file, element)),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(creating(&path, error)),
            }
        }
    }

    fn opened(path: PathBuf, file: File, element: Element) -> FileBacked {
        FileBacked {
            element,
            path,
            file: Mutex::new(Some(file)),
            slots: AtomicUsize::new(0),
        }
    }

    /// A new file named `filename` (or a generated name) holding already normalized
    /// `values`. On failure the half-made carrier is dropped, which deletes its file.
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
        let file = self.file.lock();
        let file = file.as_ref().ok_or_else(|| released("resize"))?;
        file.set_len(bytes).map_err(|error| {
            Error::io(
                format!(
                    "resizing {NAME} file {} to {slots} slots",
                    self.path.display()
                ),
                error,
            )
        })?;
        self.slots.store(slots, Ordering::Release);
        Ok(())
    }

    /// Runs the positioned I/O `op` on the file under its lock, after checking the carrier is
    /// live and `[byte_offset, byte_offset + len)` lies within its slots. An Io error names
    /// the transfer, the file and the first slot.
    fn with_file(
        &self,
        transfer: Transfer,
        byte_offset: u64,
        len: usize,
        op: impl FnOnce(&File) -> io::Result<()>,
    ) -> Result<()> {
        let action = transfer.verb();
        let file = self.file.lock();
        let file = file.as_ref().ok_or_else(|| released(action))?;
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
        op(file).map_err(|error| {
            Error::io(
                format!(
                    "{} {len} bytes at byte {byte_offset} (slot {}) of {NAME} file {}",
                    transfer.gerund(),
                    byte_offset / SLOT_BYTES,
                    self.path.display()
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
        let mut file = self.file.lock();
        if file.take().is_none() {
            return Ok(());
        }
        self.slots.store(0, Ordering::Release);
        // Delete under the lock, so the name is free once another carrier can observe it.
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(Error::io(
                format!("deleting {NAME} file {}", self.path.display()),
                error,
            )),
        }
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

impl Drop for FileBacked {
    fn drop(&mut self) {
        // Only an unreleased carrier still owns its file; a released one's name may already
        // belong to a newer carrier.
        if self.file.get_mut().take().is_some() {
            let _ = fs::remove_file(&self.path);
        }
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

fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
}

fn creating(path: &Path, error: io::Error) -> Error {
    Error::io(format!("creating {NAME} file {}", path.display()), error)
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

    fn values(carrier: &Carrier) -> Result<Vec<Value>> {
        (0..carrier.size()).map(|i| carrier.get(i)).collect()
    }

    fn file_len(path: &Path) -> u64 {
        fs::metadata(path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
            .len()
    }

    #[test]
    fn files_live_in_one_hidden_directory_under_unique_names() -> Result<()> {
        let first = FileBacked::carrier(None, DType::FLOAT32, true)?;
        let second = FileBacked::carrier(None, DType::FLOAT32, true)?;
        let (first_path, second_path) = (path_of(&first), path_of(&second));
        assert_ne!(first_path, second_path);
        let directory = directory()?;
        assert_eq!(first_path.parent(), Some(directory));
        assert_eq!(second_path.parent(), Some(directory));
        let hidden = directory
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(".strideweave-"));
        assert!(hidden, "{}", directory.display());
        assert_eq!((first.size(), file_len(&first_path)), (0, 0));
        Ok(())
    }

    #[test]
    fn path_like_names_are_value_errors_and_create_nothing() -> Result<()> {
        for name in ["", ".", "..", "a/b", "/abs", "a\\b", "nul\0byte"] {
            let error = FileBacked::carrier(Some(name), DType::FLOAT32, true).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{name:?}: {error}");
            let message = error.to_string();
            assert!(message.contains(&format!("{name:?}")), "{message}");
            assert!(message.contains("is not a plain file name"), "{message}");
        }
        assert!(!directory()?.join("a").exists());
        Ok(())
    }

    #[test]
    fn unsupported_dtypes_are_value_errors_and_create_no_file() -> Result<()> {
        for dtype in [DType::BOOL, DType::FLOAT64, DType::INT8, DType::ANY] {
            let error = FileBacked::carrier(Some("unit-bad-dtype"), dtype, true).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            let message = error.to_string();
            assert!(
                message.contains("FileBacked") && message.contains(dtype.name()),
                "{message}"
            );
        }
        assert!(!directory()?.join("unit-bad-dtype").exists());
        Ok(())
    }

    #[test]
    fn a_failed_fill_leaves_no_file_behind() -> Result<()> {
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
            assert!(!directory()?.join(name).exists(), "{name}");
        }
        // A successful fill under the same name shows the name was left free.
        let filled = FileBacked::filled(
            Some("unit-failed-fill-type"),
            &[Value::Float(1.0)],
            Element::Float32,
        )?;
        assert_eq!(file_len(&filled.path), 4);
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
    fn release_deletes_the_file_and_refuses_access() -> Result<()> {
        let carrier = FileBacked::carrier(Some("unit-release"), DType::FLOAT32, true)?;
        carrier.set_extent(2)?;
        let path = path_of(&carrier);
        carrier.release()?;
        assert!(!path.exists());
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
    fn a_released_name_is_free_and_dropping_the_old_carrier_keeps_the_new_file() -> Result<()> {
        let old = FileBacked::carrier(Some("unit-reuse"), DType::INT32, true)?;
        let error = FileBacked::carrier(Some("unit-reuse"), DType::INT32, true).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        assert!(
            error.to_string().contains("\"unit-reuse\" is already used"),
            "{error}"
        );
        old.release()?;
        let new = FileBacked::carrier(Some("unit-reuse"), DType::INT32, true)?;
        drop(old);
        assert!(path_of(&new).exists());
        let path = path_of(&new);
        drop(new);
        assert!(!path.exists());
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
