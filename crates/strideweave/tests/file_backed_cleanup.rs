//! FileBacked files are unlinked as they are made: their data still round-trips, and a
//! process killed with `SIGKILL` leaves nothing behind in its temporary directory.
//!
//! The kill test re-runs this test binary as a child (`HOLDER_ROLE` set, filtered to
//! [`holder_child_keeps_carriers_until_killed`], `TMPDIR` pointed at a fresh directory); the
//! child makes carriers, prints `READY <temp dir> <path>` and sleeps until it is killed.

#![cfg(target_os = "linux")]

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use strideweave::carriers::{Cpu, FileBacked};
use strideweave::movement::move_to;
use strideweave::{Carrier, DType, Error, Result, Shape, Tensor, Value};

/// The environment variable that makes [`holder_child_keeps_carriers_until_killed`] the child.
const HOLDER_ROLE: &str = "STRIDEWEAVE_FILE_BACKED_HOLDER";
/// The values the child's moved carrier holds.
const HELD: [f32; 6] = [1.5, -2.0, 0.25, 8.0, -0.5, 3.0];

fn io(context: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |error| Error::io(context, error)
}

fn path_of(carrier: &Carrier) -> PathBuf {
    carrier
        .downcast_ref::<FileBacked>()
        .and_then(FileBacked::path)
        .unwrap_or_else(|| panic!("{carrier:?} has no FileBacked file"))
}

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(values: &[f32]) -> Vec<Value> {
    values.iter().map(|&x| Value::Float(f64::from(x))).collect()
}

/// Every path under `directory`, relative to it, sorted.
fn tree(directory: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let listed = directory.join(&relative);
        let listing = fs::read_dir(&listed)
            .unwrap_or_else(|error| panic!("listing {}: {error}", listed.display()));
        for entry in listing {
            let entry =
                entry.unwrap_or_else(|error| panic!("listing {}: {error}", listed.display()));
            let path = relative.join(entry.file_name());
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

#[test]
fn data_round_trips_through_an_unlinked_file() -> Result<()> {
    let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
    let source = Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new((3, 4))?)?;
    let carrier = FileBacked::carrier(Some("round-trip.raw"), DType::FLOAT32, true)?;
    let on_file = move_to(&source, &carrier)?;
    assert_eq!(
        carrier.size(),
        12,
        "an empty FileBacked grows as a destination"
    );
    assert_eq!(on_file.to_values()?, floats(&values));

    // The path reaches the unlinked file: procfs marks it deleted, yet it reads and writes.
    let path = path_of(&carrier);
    let target = fs::read_link(&path).map_err(io("read_link"))?;
    assert!(
        target.to_string_lossy().ends_with(" (deleted)"),
        "{} -> {}",
        path.display(),
        target.display()
    );
    assert_eq!(fs::metadata(&path).map_err(io("metadata"))?.len(), 48);
    assert_eq!(fs::read(&path).map_err(io("read"))?, le_bytes(&values));
    carrier.set(5, Value::Float(42.0))?;
    let mut slot = [0; 4];
    File::open(&path)
        .and_then(|file| file.read_exact_at(&mut slot, 20))
        .map_err(io("reading slot 5 through the path"))?;
    assert_eq!(slot, 42.0_f32.to_le_bytes());
    File::options()
        .write(true)
        .open(&path)
        .and_then(|file| file.write_all_at(&(-7.0_f32).to_le_bytes(), 4))
        .map_err(io("writing slot 1 through the path"))?;
    assert_eq!(carrier.get(1)?, Value::Float(-7.0));

    // Allocation and filling make fresh unlinked files of their own.
    let allocated = carrier.allocate_like(5, true, Some(DType::INT32), false)?;
    assert_eq!(allocated.size(), 5);
    allocated.set(4, Value::Int(-9))?;
    let allocated_values: Vec<Value> = (0..5).map(|i| allocated.get(i)).collect::<Result<_>>()?;
    assert_eq!(allocated_values, [0, 0, 0, 0, -9].map(Value::Int));
    let filled = carrier.new_like(&floats(&[0.5, 1.5]), true, None)?;
    assert_eq!(
        (filled.get(0)?, filled.get(1)?),
        (Value::Float(0.5), Value::Float(1.5))
    );
    let paths = [path_of(&carrier), path_of(&allocated), path_of(&filled)];
    assert!(paths[0] != paths[1] && paths[1] != paths[2] && paths[0] != paths[2]);

    // Back to the CPU in bulk: the moved-back values are the file's, and the file is gone.
    let back = move_to(&on_file, &Cpu::carrier(12, DType::FLOAT32, true, false)?)?;
    let mut expected = values.clone();
    expected[1] = -7.0;
    expected[5] = 42.0;
    assert_eq!(back.to_values()?, floats(&expected));
    assert!(carrier.is_released());
    assert!(!path.exists());
    Ok(())
}

/// The child side of [`a_killed_process_leaves_no_file_behind`]; passes at once unless
/// `HOLDER_ROLE` is set.
#[test]
fn holder_child_keeps_carriers_until_killed() -> Result<()> {
    if std::env::var_os(HOLDER_ROLE).is_none() {
        return Ok(());
    }
    let source = Tensor::compact(Cpu::from_f32(&HELD, true)?, Shape::new(6)?)?;
    let moved = FileBacked::carrier(None, DType::FLOAT32, true)?;
    move_to(&source, &moved)?;
    let named = FileBacked::carrier(Some("weights.raw"), DType::INT32, true)?;
    let allocated = named.allocate_like(1024, true, None, false)?;
    allocated.set(1023, Value::Int(7))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "\nREADY {} {}",
        std::env::temp_dir().display(),
        path_of(&moved).display()
    )
    .and_then(|()| stdout.flush())
    .map_err(io("signalling readiness"))?;
    drop(stdout);
    // The parent kills this process long before; the bound only stops an orphan lingering.
    thread::sleep(Duration::from_secs(120));
    Ok(())
}

/// Kills the child if a check fails before the test kills it.
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_killed_process_leaves_no_file_behind() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let scratch_path = scratch
        .path()
        .canonicalize()
        .expect("the scratch directory's real path");
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut holder = Holder(
        Command::new(exe)
            .args([
                "holder_child_keeps_carriers_until_killed",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HOLDER_ROLE, "1")
            .env("TMPDIR", &scratch_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("re-running the test binary as the holder"),
    );
    let stdout = holder.0.stdout.take().expect("the holder's stdout");
    let mut stderr = holder.0.stderr.take().expect("the holder's stderr");
    let stderr = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (lines, ready) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let announced = loop {
        match ready.recv_timeout(Duration::from_secs(60)) {
            // libtest's "test holder_child_... ... " may precede the line.
            Ok(line) => match line.split_once("READY ") {
                Some((_, rest)) => break rest.to_owned(),
                None => seen.push(line),
            },
            Err(error) => {
                drop(holder);
                panic!(
                    "the holder never signalled readiness ({error}); its stdout: {seen:#?}; \
                     its stderr: {}",
                    stderr.join().unwrap_or_default()
                );
            }
        }
    };
    let (directory, path) = announced
        .split_once(' ')
        .unwrap_or_else(|| panic!("a malformed readiness line: READY {announced}"));
    let (directory, path) = (PathBuf::from(directory), PathBuf::from(path));
    assert_eq!(
        directory.canonicalize().ok(),
        Some(scratch_path.clone()),
        "the holder uses the scratch directory as its temporary directory"
    );

    // While the holder lives, its carriers' files are already nameless: the directory is
    // empty, yet the holder's descriptors lead to deleted files made in it.
    assert_eq!(tree(&scratch_path), Vec::<PathBuf>::new(), "while alive");
    let descriptors = PathBuf::from(format!("/proc/{}/fd", holder.0.id()));
    let in_scratch = fs::read_dir(&descriptors)
        .expect("the holder's descriptors")
        .filter_map(|entry| fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| {
            target.starts_with(&scratch_path) && target.to_string_lossy().ends_with(" (deleted)")
        })
        .count();
    assert_eq!(in_scratch, 3, "the holder's three carriers' files");
    assert!(path.starts_with(&descriptors), "{}", path.display());
    assert_eq!(
        fs::read(&path).expect("reading the holder's carrier through its path"),
        le_bytes(&HELD)
    );

    holder.0.kill().expect("SIGKILL to the holder");
    let status = holder.0.wait().expect("the holder's exit");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    let left = tree(&scratch_path);
    let carrier_files: Vec<&PathBuf> = left
        .iter()
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("carrier-") && name.ends_with(".raw"))
        })
        .collect();
    assert!(
        carrier_files.is_empty(),
        "carrier files left behind: {carrier_files:?}"
    );
    assert_eq!(left, Vec::<PathBuf>::new(), "nothing at all is left behind");
    assert!(!path.exists(), "{}", path.display());
}
