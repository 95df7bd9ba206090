"""BlockDevice and BlockDeviceCarrier from Python, on real Linux loop devices.

The loop-device tests need root and `losetup`; like the Rust ones (`#[ignore]`d and run by
`.ci/run` with `--ignored`), they are marked `loop_device` and skipped unless pytest runs
with `--loop-devices`, which `.ci/run` passes as root. Run that way where no loop device can
be made, they fail saying why. The tests that need no device always run."""

import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Iterator

import pytest

import strideweave as sw


@pytest.fixture
def loop_device() -> Iterator[str]:
    """A 64 KiB loop device with 4096-byte sectors over a sparse file, detached afterwards."""
    losetup = shutil.which("losetup") or "/usr/sbin/losetup"
    if os.geteuid() != 0:
        pytest.fail("the loop-device tests need root (they run losetup)")
    with tempfile.TemporaryDirectory() as directory:
        backing = pathlib.Path(directory) / "backing.img"
        with open(backing, "wb") as file:
            file.truncate(64 << 10)
        made = subprocess.run(
            [losetup, "--find", "--show", "--sector-size", "4096", str(backing)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if made.returncode != 0 or not made.stdout.strip().startswith("/dev/"):
            pytest.fail(f"losetup could not make a loop device: {made.stderr.strip()}")
        path = made.stdout.strip()
        try:
            yield path
        finally:
            subprocess.run([losetup, "--detach", path], capture_output=True, timeout=60)


def test_open_refuses_what_is_not_a_block_device(tmp_path: pathlib.Path) -> None:
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"\0" * 4096)
    with pytest.raises(ValueError, match="is not a block device"):
        sw.BlockDevice.open(str(plain))
    with pytest.raises(OSError, match="opening block device"):
        sw.BlockDevice.open(str(tmp_path / "missing"))
    with pytest.raises(TypeError, match="BlockDevice path must be a str, got int"):
        sw.BlockDevice.open(3)
    with pytest.raises(TypeError, match="use BlockDevice.allocate"):
        sw.BlockDeviceCarrier()


@pytest.mark.loop_device
def test_geometry_allocation_and_close(loop_device: str) -> None:
    device = sw.BlockDevice.open(loop_device)
    assert device.path == loop_device
    assert (device.capacity_bytes, device.logical_block_size) == (64 << 10, 4096)
    assert device.allocation_alignment == 4096
    assert (device.free_bytes, device.live_carriers) == (64 << 10, 0)
    first = device.allocate(3)
    second = device.allocate(1025)
    assert isinstance(first, sw.BlockDeviceCarrier) and isinstance(first, sw.Carrier)
    assert (first.device_offset_bytes, first.extent_bytes) == (0, 4096)
    assert (second.device_offset_bytes, second.extent_bytes) == (4096, 8192)
    assert first.device.same_as(device)
    assert first.class_name == "BlockDeviceCarrier"
    assert device.live_carriers == 2
    with pytest.raises(RuntimeError, match="2 carriers are still live"):
        device.close()
    with pytest.raises(MemoryError, match="has no free extent"):
        device.allocate(64 << 10)
    with pytest.raises(ValueError, match="Int32"):
        device.allocate(2, dtype=sw.DType.Int32)
    first.release()
    second.release()
    assert device.free_bytes == 64 << 10
    device.close()
    assert device.is_closed


@pytest.mark.loop_device
def test_values_persist_on_the_device_and_move_to_and_from_cpu(loop_device: str) -> None:
    device = sw.BlockDevice.open(loop_device)
    carrier = device.allocate(4)
    carrier.set_value(2, 1.5)
    assert [carrier.get_value(i) for i in range(4)] == [0.0, 0.0, 1.5, 0.0]
    assert carrier.version == 1
    t = sw.Tensor.compact(carrier, (4,))
    assert t.carrier is carrier
    on_cpu = sw.move(t, sw.CPU(4))
    assert on_cpu.to_list() == [0.0, 0.0, 1.5, 0.0]
    assert carrier.is_released() and device.live_carriers == 0
    back = sw.move(on_cpu, device.allocate(4))
    assert back.to_list() == [0.0, 0.0, 1.5, 0.0]
    assert isinstance(back.carrier, sw.BlockDeviceCarrier)
    with pytest.raises(sw.UnsupportedOperationPlan):
        back + back
    back.carrier.release()
    device.close()
