//! `BlockDevice` and `BlockDeviceCarrier` on real Linux loop devices (docs/carriers.md,
//! Block devices, and its Worked examples item 13).
//!
//! Each loop-device test makes its own loop device over a sparse backing file with `losetup`
//! (root only) and detaches it when done. Those tests are `#[ignore]`d with the reason, so a
//! plain `cargo test` lists them as ignored; `.ci/run` runs them as root with
//! `cargo test -p strideweave --test block_device -- --ignored`. Run that way where no loop
//! device can be made (not root, no `losetup`, no loop module), each fails with a message
//! saying why. The tests that need no loop device always run.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};

use strideweave::carrier::{capabilities_for_carrier_class, CarrierClass};
use strideweave::carriers::{BlockDevice, BlockDeviceCarrier, Cpu, FileBacked, Generic};
use strideweave::movement::{
    move_to, register_move_operation, unregister_move_operation, ElementwiseMoveOperation,
};
use strideweave::{Carrier, DType, Error, ErrorKind, Layout, Result, Tensor, Value};

/// Serializes `losetup --find` within this process, so parallel tests do not race for the
/// same free loop device.
static LOSETUP: Mutex<()> = Mutex::new(());

/// A loop device over a backing file in a temporary directory, detached on drop.
struct LoopDevice {
    path: String,
    backing: PathBuf,
    _directory: tempfile::TempDir,
}

impl LoopDevice {
    /// A loop device of `bytes` bytes with `sector`-byte logical blocks, or why none could
    /// be made.
    fn create(bytes: u64, sector: u64) -> std::result::Result<LoopDevice, String> {
        let directory = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
        let backing = directory.path().join("backing.img");
        File::create(&backing)
            .and_then(|file| file.set_len(bytes))
            .map_err(|e| format!("cannot create the backing file: {e}"))?;
        let _serial = LOSETUP.lock().unwrap_or_else(PoisonError::into_inner);
        let output = Command::new("losetup")
            .args(["--find", "--show", "--sector-size", &sector.to_string()])
            .arg(&backing)
            .output()
            .map_err(|e| format!("losetup is unavailable: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "losetup --find --show --sector-size {sector} failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if !path.starts_with("/dev/") {
            return Err(format!("losetup printed no device: {path:?}"));
        }
        Ok(LoopDevice {
            path,
            backing,
            _directory: directory,
        })
    }

    /// Shrinks the backing file to `bytes` and makes the device notice (`losetup -c`).
    fn shrink(&self, bytes: u64) -> std::io::Result<()> {
        File::options()
            .write(true)
            .open(&self.backing)?
            .set_len(bytes)?;
        let status = Command::new("losetup").arg("-c").arg(&self.path).status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "losetup -c failed: {status}"
            )))
        }
    }

    /// `len` bytes of the backing file from `offset`.
    fn backing_bytes(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut bytes = vec![0; len];
        File::open(&self.backing)?.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let detached = Command::new("losetup").arg("-d").arg(&self.path).status();
        if !detached.as_ref().is_ok_and(|status| status.success()) {
            eprintln!("could not detach loop device {}: {detached:?}", self.path);
        }
    }
}

/// A loop device, or a panic saying why none can be made: the loop-device tests run only when
/// asked for with `--ignored`, so a missing device is a failure there, never a silent pass.
fn make_loop_device(bytes: u64, sector: u64) -> LoopDevice {
    LoopDevice::create(bytes, sector).unwrap_or_else(|reason| {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        panic!(
            "no loop device can be made here: {reason} (effective uid {euid}). The ignored \
             block-device tests create Linux loop devices: run them as root, with losetup \
             (Debian package `mount`, from util-linux) and the loop module, or leave them \
             ignored"
        )
    })
}

fn block(carrier: &Carrier) -> &BlockDeviceCarrier {
    carrier
        .downcast_ref::<BlockDeviceCarrier>()
        .unwrap_or_else(|| panic!("{carrier:?} is not a BlockDeviceCarrier"))
}

fn placement(carrier: &Carrier) -> (u64, u64) {
    let body = block(carrier);
    (body.device_offset_bytes(), body.extent_bytes())
}

fn values(carrier: &Carrier) -> Result<Vec<Value>> {
    (0..carrier.size()).map(|i| carrier.get(i)).collect()
}

fn floats(xs: impl IntoIterator<Item = f64>) -> Vec<Value> {
    xs.into_iter().map(Value::Float).collect()
}

fn layout(text: &str) -> Layout {
    text.parse()
        .unwrap_or_else(|e| panic!("test layout {text}: {e}"))
}

fn io(context: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |error| Error::io(context, error)
}

#[test]
fn a_regular_file_is_a_value_error_and_a_missing_path_an_io_error() -> Result<()> {
    let directory = tempfile::tempdir().map_err(io("tempdir"))?;
    let file = directory.path().join("plain.img");
    fs::write(&file, [0; 4096]).map_err(io("write"))?;
    let error = BlockDevice::open(&file).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(
        error.to_string().contains(&format!(
            "{} is not a block device node (it is a regular file)",
            file.display()
        )),
        "{error}"
    );
    let missing = directory.path().join("missing");
    let error = BlockDevice::open(&missing).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Io, "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("opening block device {}", missing.display())),
        "{error}"
    );
    Ok(())
}

#[test]
fn the_block_class_is_shipped_and_declares_nothing() {
    let class = CarrierClass::of::<BlockDeviceCarrier>();
    assert!(class.is_shipped());
    assert_eq!(class.name(), "BlockDeviceCarrier");
    assert!(capabilities_for_carrier_class(class).is_empty());
}

#[test]
fn block_routes_cannot_be_registered_or_unregistered() {
    let block = CarrierClass::of::<BlockDeviceCarrier>();
    let generic = CarrierClass::of::<Generic>();
    let cpu = CarrierClass::of::<Cpu>();
    let error =
        register_move_operation(generic, block, Arc::new(ElementwiseMoveOperation)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(
        error
            .to_string()
            .contains("from Generic to BlockDeviceCarrier cannot be registered"),
        "{error}"
    );
    let error = unregister_move_operation(cpu, block).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(
        error.to_string().contains("from CPU to BlockDeviceCarrier"),
        "{error}"
    );
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn geometry_is_the_loop_devices() -> Result<()> {
    for (bytes, sector) in [(64 << 10, 512), (1 << 20, 4096)] {
        let loop_device = make_loop_device(bytes, sector);
        let device = BlockDevice::open(&loop_device.path)?;
        assert_eq!(device.path(), Path::new(&loop_device.path), "kept verbatim");
        assert_eq!(device.capacity_bytes(), bytes);
        assert_eq!(device.logical_block_size(), sector);
        assert_eq!(device.physical_block_size(), sector);
        assert_eq!(
            device.allocation_alignment(),
            device
                .logical_block_size()
                .max(device.physical_block_size())
        );
        assert_eq!((device.free_bytes(), device.live_carriers()), (bytes, 0));
        assert!(!device.is_closed() && !device.is_faulted());
        let clone = device.clone();
        assert!(clone.same_as(&device));
        assert!(!BlockDevice::open(&loop_device.path)?.same_as(&device));
        device.close()?;
        assert!(clone.is_closed());
    }
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn allocation_is_aligned_first_fit_and_releases_merge() -> Result<()> {
    let loop_device = make_loop_device(64 << 10, 4096);
    let device = BlockDevice::open(&loop_device.path)?;
    assert_eq!(device.allocation_alignment(), 4096);
    let first = device.allocate(3, true, DType::FLOAT32, false)?;
    let second = device.allocate(1024, true, DType::FLOAT32, false)?;
    let third = device.allocate(1025, true, DType::FLOAT32, false)?;
    assert_eq!(placement(&first), (0, 4096));
    assert_eq!(placement(&second), (4096, 4096));
    assert_eq!(placement(&third), (8192, 8192));
    assert!(block(&first).device().same_as(&device));
    assert_eq!((first.size(), first.dtype()), (3, DType::FLOAT32));

    let nothing = device.allocate(0, true, DType::FLOAT32, false)?;
    assert_eq!((placement(&nothing), nothing.size()), ((0, 0), 0));
    assert_eq!(
        device.free_bytes(),
        (64 << 10) - 16384,
        "size 0 takes no space"
    );

    let error = device.allocate(2, true, DType::INT32, false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(error.to_string().contains("BlockDeviceCarrier"), "{error}");
    assert!(error.to_string().contains("Int32"), "{error}");

    // 48 KiB are free at 16384..65536; 49 KiB do not fit.
    let error = device
        .allocate(12 * 1024 + 1, true, DType::FLOAT32, true)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
    assert!(
        error.to_string().contains(&format!(
            "block device {} has no free extent of 53248 bytes",
            loop_device.path
        )),
        "{error}"
    );
    let rest = device.allocate(12 * 1024, true, DType::FLOAT32, true)?;
    assert_eq!(placement(&rest), (16384, 49152));
    let error = device.allocate(1, true, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory, "{error}");

    // Releasing the first two (adjacent) extents merges them into 8 KiB at address 0.
    first.release()?;
    second.release()?;
    first.release()?;
    let merged = device.allocate(2048, true, DType::FLOAT32, true)?;
    assert_eq!(placement(&merged), (0, 8192));
    for carrier in [&merged, &third, &rest, &nothing] {
        carrier.release()?;
    }
    assert_eq!(device.free_bytes(), 64 << 10);
    device.close()?;
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn a_512_byte_device_places_extents_at_multiples_of_512() -> Result<()> {
    let loop_device = make_loop_device(64 << 10, 512);
    let device = BlockDevice::open(&loop_device.path)?;
    let placed = (0..3)
        .map(|_| {
            device
                .allocate(100, true, DType::FLOAT32, false)
                .map(|c| placement(&c))
        })
        .collect::<Result<Vec<_>>>()?;
    // Each carrier was dropped right away, which returned its extent.
    assert_eq!(placed, [(0, 512); 3]);
    let kept = (0..3)
        .map(|_| device.allocate(129, true, DType::FLOAT32, false))
        .collect::<Result<Vec<_>>>()?;
    let offsets: Vec<_> = kept.iter().map(placement).collect();
    assert_eq!(offsets, [(0, 1024), (1024, 1024), (2048, 1024)]);
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn close_while_live_is_a_runtime_error_and_closed_devices_refuse_allocation() -> Result<()> {
    let loop_device = make_loop_device(64 << 10, 512);
    let device = BlockDevice::open(&loop_device.path)?;
    let one = device.allocate(1, true, DType::FLOAT32, false)?;
    let two = device.allocate(1, true, DType::FLOAT32, false)?;
    let error = device.close().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(
        error.to_string().contains(&format!(
            "cannot close block device {}: 2 carriers are still live",
            loop_device.path
        )),
        "{error}"
    );
    assert!(!device.is_closed());
    assert_eq!(
        one.get(0)?,
        Value::Float(0.0),
        "a refused close changes nothing"
    );
    one.release()?;
    two.release()?;
    device.close()?;
    let error = device.allocate(1, true, DType::FLOAT32, false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(error.to_string().contains("it is closed"), "{error}");
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn values_round_trip_through_set_and_get() -> Result<()> {
    let loop_device = make_loop_device(64 << 10, 4096);
    let device = BlockDevice::open(&loop_device.path)?;
    let _first = device.allocate(1, true, DType::FLOAT32, false)?;
    let carrier = device.allocate(1500, true, DType::FLOAT32, false)?;
    assert_eq!(placement(&carrier), (4096, 8192));
    assert_eq!(values(&carrier)?, floats([0.0; 1500]));
    carrier.set(0, Value::Float(0.1))?;
    carrier.set(1023, Value::Int(3))?;
    carrier.set(1024, Value::Float(1e40))?;
    carrier.set(1499, Value::Float(-2.5))?;
    assert_eq!(carrier.version(), 4);
    assert_eq!(carrier.get(0)?, Value::Float(0.10000000149011612));
    assert_eq!(carrier.get(1023)?, Value::Float(3.0));
    assert_eq!(carrier.get(1024)?, Value::Float(f64::INFINITY));
    assert_eq!(carrier.get(1499)?, Value::Float(-2.5));
    assert_eq!(carrier.get(1)?, Value::Float(0.0));
    let error = carrier.get(1500).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Index, "{error}");
    let error = carrier.set(0, Value::Bool(true)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type, "{error}");
    assert_eq!(carrier.version(), 4);

    // Slots are little-endian binary32 at the device offset.
    let bytes = loop_device
        .backing_bytes(4096, 8)
        .map_err(io("reading the backing file"))?;
    assert_eq!(bytes[..4], 0.1_f32.to_le_bytes());
    assert_eq!(bytes[4..], 0.0_f32.to_le_bytes());

    let frozen = device.allocate(2, false, DType::FLOAT32, false)?;
    let error = frozen.set(0, Value::Float(1.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(error.to_string().contains("immutable"), "{error}");

    let error = carrier.dispatch_op("add").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    assert!(carrier.capabilities().is_empty());
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn moves_round_trip_cpu_to_block_to_cpu() -> Result<()> {
    let loop_device = make_loop_device(1 << 20, 4096);
    let device = BlockDevice::open(&loop_device.path)?;
    let _first = device.allocate(5, true, DType::FLOAT32, false)?;

    // A non-compact (2,3):(1,4) view at offset 1: cosize 10, slots 1..11 of the source.
    let source = Cpu::from_f32(&(0..12).map(|i| i as f32 + 0.5).collect::<Vec<_>>(), true)?;
    let tensor = Tensor::new(source.clone(), 1, layout("(2,3):(1,4)"))?;
    let expected = tensor.to_values()?;
    let destination = device.allocate(10, true, DType::FLOAT32, false)?;
    assert_eq!(placement(&destination), (4096, 4096));
    let on_block = move_to(&tensor, &destination)?;
    assert!(source.is_released());
    assert!(on_block.carrier().same_as(&destination));
    assert_eq!((on_block.offset(), on_block.layout()), (0, tensor.layout()));
    assert_eq!(on_block.to_values()?, expected);
    assert_eq!(destination.version(), 1);
    // The whole cosize span moved, holes included.
    assert_eq!(
        values(&destination)?,
        floats((1..11).map(|i| f64::from(i) + 0.5))
    );

    let back = Cpu::carrier(10, DType::FLOAT32, true, false)?;
    let on_cpu = move_to(&on_block, &back)?;
    assert!(destination.is_released());
    assert_eq!(on_cpu.to_values()?, expected);
    assert_eq!(device.live_carriers(), 1);

    // A block tensor at an unaligned slot offset moves out correctly too.
    let big = device.allocate(5000, true, DType::FLOAT32, true)?;
    let filler = Cpu::from_f32(&(0..5000).map(|i| i as f32).collect::<Vec<_>>(), true)?;
    move_to(&Tensor::new(filler, 0, layout("5000:1"))?, &big)?;
    // (3,900):(1,4) has cosize 3599; from slot 1021 it spans device bytes 4084..18480
    // of the extent, neither end block aligned.
    let window = Tensor::new(big.clone(), 1021, layout("(3,900):(1,4)"))?;
    let expected = window.to_values()?;
    let out = Cpu::carrier(3599, DType::FLOAT32, true, true)?;
    let moved = move_to(&window, &out)?;
    assert_eq!(moved.to_values()?, expected);
    assert_eq!(out.get(0)?, Value::Float(1021.0));
    assert_eq!(out.get(3598)?, Value::Float(4619.0));
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn other_block_pairs_are_not_implemented_and_keep_the_source() -> Result<()> {
    let loop_device = make_loop_device(64 << 10, 512);
    let device = BlockDevice::open(&loop_device.path)?;
    let destination = device.allocate(3, true, DType::FLOAT32, false)?;
    let generic = Generic::carrier(&floats([1.0, 2.0, 3.0]), DType::FLOAT32, true)?;
    let tensor = Tensor::new(generic.clone(), 0, layout("3:1"))?;
    let error = move_to(&tensor, &destination).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    assert!(
        error
            .to_string()
            .contains("no move route from Generic to BlockDeviceCarrier"),
        "{error}"
    );
    assert!(!generic.is_released());
    assert_eq!(values(&destination)?, floats([0.0; 3]));
    assert_eq!(destination.version(), 0);

    let on_block = Tensor::new(destination.clone(), 0, layout("3:1"))?;
    let file = FileBacked::carrier(None, DType::FLOAT32, true)?;
    let other = device.allocate(3, true, DType::FLOAT32, false)?;
    for (target, name) in [
        (generic.clone(), "Generic"),
        (file, "FileBacked"),
        (other, "BlockDeviceCarrier"),
    ] {
        let error = move_to(&on_block, &target).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
        assert!(
            error
                .to_string()
                .contains(&format!("no move route from BlockDeviceCarrier to {name}")),
            "{error}"
        );
        assert!(!destination.is_released());
    }
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn a_size_zero_destination_for_a_non_empty_tensor_is_a_value_error() -> Result<()> {
    let loop_device = make_loop_device(64 << 10, 512);
    let device = BlockDevice::open(&loop_device.path)?;
    let empty = device.allocate(0, true, DType::FLOAT32, false)?;
    let source = Cpu::from_f32(&[1.0, 2.0], true)?;
    let tensor = Tensor::new(source.clone(), 0, layout("2:1"))?;
    let error = move_to(&tensor, &empty).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(
        error
            .to_string()
            .contains("BlockDeviceCarrier destination has 0 slots but the tensor needs 2"),
        "{error}"
    );
    assert!(!source.is_released());
    assert_eq!(empty.size(), 0);
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn data_survives_release_and_an_empty_reallocation() -> Result<()> {
    let loop_device = make_loop_device(64 << 10, 4096);
    let device = BlockDevice::open(&loop_device.path)?;
    let written = device.allocate(4, true, DType::FLOAT32, false)?;
    for (slot, value) in [1.25, -3.0, 0.1, 42.0].into_iter().enumerate() {
        written.set(slot, Value::Float(value))?;
    }
    let expected = values(&written)?;
    written.release()?;
    assert_eq!(written.size(), 0);
    assert_eq!(written.get(0).unwrap_err().kind(), ErrorKind::Runtime);

    let reread = device.allocate(4, true, DType::FLOAT32, true)?;
    assert_eq!(placement(&reread), (0, 4096));
    assert_eq!(values(&reread)?, expected);
    reread.release()?;
    // Without `empty`, the new extent is zeroed.
    let zeroed = device.allocate(4, true, DType::FLOAT32, false)?;
    assert_eq!(values(&zeroed)?, floats([0.0; 4]));
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn failed_transfers_fault_the_device_but_allow_release_and_close() -> Result<()> {
    let loop_device = make_loop_device(1 << 20, 512);
    // Two independent handles to the same device, each with its own allocator.
    let reader = BlockDevice::open(&loop_device.path)?;
    let writer = BlockDevice::open(&loop_device.path)?;
    let low_reader = reader.allocate(128 << 10, true, DType::FLOAT32, true)?;
    let high_reader = reader.allocate(128, true, DType::FLOAT32, true)?;
    let _low_writer = writer.allocate(128 << 10, true, DType::FLOAT32, true)?;
    let high_writer = writer.allocate(128, true, DType::FLOAT32, true)?;
    assert_eq!(placement(&high_reader), (512 << 10, 512));
    assert_eq!(high_reader.get(0)?, Value::Float(0.0));

    // Cut the device to 256 KiB underneath the open handles.
    loop_device
        .shrink(256 << 10)
        .map_err(io("shrinking the loop device"))?;

    // A read past the new end completes zero bytes: Runtime, and a fault.
    let error = high_reader.get(0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(
        error.to_string().contains(&format!(
            "reading 512 bytes at byte offset 524288 of block device {} completed zero bytes",
            loop_device.path
        )),
        "{error}"
    );
    assert!(reader.is_faulted());

    // A whole-block write past the new end fails in the OS: Io naming path and offset.
    let source = Cpu::from_f32(&[1.0; 128], true)?;
    let tensor = Tensor::new(source.clone(), 0, layout("128:1"))?;
    let error = move_to(&tensor, &high_writer).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Io, "{error}");
    assert!(
        error.to_string().contains(&format!(
            "writing 512 bytes at byte offset 524288 of block device {}",
            loop_device.path
        )),
        "{error}"
    );
    assert!(writer.is_faulted());
    assert!(!source.is_released(), "a failed move keeps its source");
    assert_eq!(high_writer.version(), 0);

    // Faulted: access and allocation are Runtime errors, even where the device still is.
    for error in [
        low_reader.get(0).unwrap_err(),
        high_writer.get(0).unwrap_err(),
        reader.allocate(1, true, DType::FLOAT32, true).unwrap_err(),
        writer.allocate(1, true, DType::FLOAT32, true).unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        assert!(error.to_string().contains("faulted"), "{error}");
    }

    // Release and close still work.
    low_reader.release()?;
    high_reader.release()?;
    assert_eq!(reader.live_carriers(), 0);
    reader.close()?;
    let error = writer.close().unwrap_err();
    assert!(
        error.to_string().contains("2 carriers are still live"),
        "{error}"
    );
    Ok(())
}

#[test]
#[ignore = "needs root and losetup: creates Linux loop devices"]
fn a_block_device_carrier_cannot_be_an_evictable_tier() -> Result<()> {
    use strideweave::carriers::{Cpu, Evictable};
    let loop_device = make_loop_device(64 << 10, 512);
    let device = BlockDevice::open(&loop_device.path)?;
    let block = device.allocate(4, true, DType::FLOAT32, false)?;
    let cpu = Cpu::carrier(4, DType::FLOAT32, true, false)?;
    for (primary, secondary) in [(&cpu, &block), (&block, &cpu)] {
        let error = Evictable::carrier(primary, secondary).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type, "{error}");
        assert!(error.to_string().contains("BlockDeviceCarrier"), "{error}");
    }
    assert!(
        !block.is_owned() && !cpu.is_owned(),
        "a refused construction owns nothing"
    );
    block.release()?;
    device.close()?;
    Ok(())
}
