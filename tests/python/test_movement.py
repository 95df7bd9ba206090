"""move, move_async and copy from Python."""

import pytest

import strideweave as sw
from conftest import cpu_tensor


def test_move_releases_the_source_and_keeps_the_layout() -> None:
    source = cpu_tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3))
    destination = sw.FileBacked(dtype=sw.DType.Float32)
    moved = sw.move(source, destination)
    assert moved.carrier is destination
    assert source.carrier.is_released()
    assert moved.layout == source.layout and moved.offset == 0
    assert moved.to_list() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]


def test_move_async_waits_for_the_same_tensor_every_time() -> None:
    source = cpu_tensor([1.0, 2.0, 3.0], (3,))
    handle = sw.move_async(source, sw.CPU(3))
    first = handle.wait()
    assert handle.done
    assert handle.wait() is first
    assert first.to_list() == [1.0, 2.0, 3.0]


def test_move_errors_change_nothing() -> None:
    source = cpu_tensor([1.0, 2.0], (2,))
    with pytest.raises(TypeError, match="move_async tensor must be a Tensor, got list"):
        sw.move_async([source], sw.CPU(2))
    with pytest.raises(ValueError):
        sw.move(source, source.carrier)
    assert not source.carrier.is_released() and source.version == 0
    assert source.to_list() == [1.0, 2.0]


def test_copy_leaves_the_source_alive() -> None:
    source = cpu_tensor([1.0, 2.0], (2,))
    copied = sw.copy(source, sw.Generic([0.0, 0.0], dtype=sw.DType.Float32))
    assert copied.to_list() == [1.0, 2.0]
    assert not source.carrier.is_released()
