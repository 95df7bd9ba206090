"""DLPack: `np.from_dlpack(t)` views a CPU tensor without a copy through `Tensor.__dlpack__`
(read-only, the slots frozen while the consumer holds them, the memory kept alive), and
`sw.from_dlpack(x)` makes a tensor over another library's CPU memory."""

import gc
import re
from typing import Any, List, Optional, Tuple

import numpy as np
import pytest

import strideweave as sw


def cpu(values: List[Any], dtype: sw.DType = sw.DType.Float32) -> sw.CPU:
    carrier = sw.CPU.from_values(values, dtype=dtype)
    assert isinstance(carrier, sw.CPU)
    return carrier


def test_numpy_consumes_a_cpu_tensor_without_a_copy_and_read_only() -> None:
    carrier = cpu([float(i) for i in range(6)])
    t = sw.Tensor(carrier, 0, sw.Layout((2, 3), (3, 1)))
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert a.dtype == np.float32 and a.shape == (2, 3) and a.strides == (12, 4)
    assert a.ctypes.data == carrier.pointer()
    assert a.tolist() == t.to_list()
    assert not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1.0
    ints = cpu([1, -2, 3], dtype=sw.DType.Int32)
    b = np.from_dlpack(sw.Tensor.compact(ints, (3,)))
    assert b.dtype == np.int32 and b.tolist() == [1, -2, 3] and b.ctypes.data == ints.pointer()


def test_views_offsets_permutes_broadcasts_and_scalars_keep_their_strides() -> None:
    carrier = cpu([float(i) for i in range(12)])
    m = sw.Tensor(carrier, 0, sw.Layout((3, 4), (4, 1)))
    for view in (m[1, :], m.permute(1, 0), m[:, 1:3], sw.Tensor(carrier, 2, sw.Layout((3,), (2,)))):
        assert isinstance(view, sw.Tensor)
        a = np.from_dlpack(view)
        assert a.tolist() == view.to_list()
        assert np.shares_memory(a, np.from_dlpack(m))
    broadcast = np.from_dlpack(sw.Tensor(cpu([7.0]), 0, sw.Layout((3,), (0,))))
    assert broadcast.tolist() == [7.0, 7.0, 7.0] and broadcast.strides == (0,)
    scalar = np.from_dlpack(sw.Tensor(cpu([2.5]), 0, sw.Layout(())))
    assert scalar.shape == () and float(scalar) == 2.5


def test_the_slots_are_frozen_while_the_consumer_holds_them() -> None:
    carrier = cpu([1.0, 2.0, 3.0])
    t = sw.Tensor.compact(carrier, (3,))
    a = np.from_dlpack(t)
    with pytest.raises(RuntimeError, match=r"exported to 1 live view"):
        t[0] = 9.0
    assert t.version == 0 and a.tolist() == [1.0, 2.0, 3.0]
    capsule = t.__dlpack__(max_version=(1, 0))
    with pytest.raises(RuntimeError, match=r"exported to 2 live view"):
        t[0] = 9.0
    del capsule  # an unconsumed capsule ends its export when it is freed
    gc.collect()
    with pytest.raises(RuntimeError, match=r"exported to 1 live view"):
        t[0] = 9.0
    del a
    gc.collect()
    t[0] = 9.0
    assert t.version == 1 and t.to_list() == [9.0, 2.0, 3.0]


def test_the_memory_outlives_the_tensor_and_a_release() -> None:
    values = [float(i) for i in range(100)]
    carrier = cpu(values)
    t = sw.Tensor.compact(carrier, (100,))
    a = np.from_dlpack(t)
    carrier.release()
    del t, carrier
    gc.collect()
    assert a.tolist() == values


def test_what_cannot_be_exported_without_a_copy_is_a_buffer_error() -> None:
    tiled = sw.Tensor(sw.CPU(20), 0, sw.Layout("((2,2),3):((1,6),2)"))
    with pytest.raises(BufferError, match=r"does not flatten to one stride per mode \(mode 0 is \(2,2\):\(1,6\)\)"):
        np.from_dlpack(tiled)
    generic = sw.Tensor.compact(sw.Generic([1.0], dtype=sw.DType.Float32), (1,))
    with pytest.raises(BufferError, match="^a tensor on a Generic carrier has no memory DLPack can describe$"):
        generic.__dlpack_device__()
    with pytest.raises(BufferError, match="no memory DLPack can describe"):
        np.from_dlpack(generic)
    flags = sw.Tensor.compact(cpu([True], dtype=sw.DType.Bool), (1,))
    with pytest.raises(BufferError, match="^DLPack exports Float32 and Int32 CPU tensors, not Bool$"):
        np.from_dlpack(flags)
    t = sw.Tensor.compact(cpu([1.0]), (1,))
    with pytest.raises(BufferError, match="only a versioned DLPack capsule can mark: the consumer must pass max_version"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="max_version"):
        t.__dlpack__(max_version=(0, 8))
    with pytest.raises(BufferError, match="never copies"):
        t.__dlpack__(max_version=(1, 0), copy=True)
    with pytest.raises(BufferError, match=r"to the CPU device \(1, 0\), not \(2, 0\)"):
        t.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(ValueError, match="without a stream"):
        t.__dlpack__(max_version=(1, 0), stream=1)
    with pytest.raises(TypeError, match="max_version must be a \\(major, minor\\) tuple of ints, got str"):
        t.__dlpack__(max_version="1.0")
    carrier = cpu([1.0])
    released = sw.Tensor.compact(carrier, (1,))
    carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        np.from_dlpack(released)
    # Nothing was left exported by the refusals.
    t[0] = 2.0
    assert t.version == 1


def test_from_dlpack_shares_aligned_numpy_memory_and_keeps_it_alive() -> None:
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = sw.from_dlpack(array)
    assert t.shape == (2, 3) and t.dtype() is sw.DType.Float32
    assert t.to_list() == array.tolist()
    assert t.carrier.pointer() == array.ctypes.data  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="immutable"):
        t[0, 0] = 5.0
    transposed = sw.from_dlpack(array.T)
    assert transposed.to_list() == array.T.tolist()
    ints = sw.from_dlpack(np.array([1, 2, 3], dtype=np.int32))
    assert ints.dtype() is sw.DType.Int32 and ints.to_list() == [1, 2, 3]
    del array
    gc.collect()
    assert t.to_list() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert (t + t).to_list() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


def test_from_dlpack_copies_what_it_cannot_share() -> None:
    array = np.arange(5, dtype=np.float32)
    reversed_view = array[::-1]
    t = sw.from_dlpack(reversed_view)
    assert t.to_list() == [4.0, 3.0, 2.0, 1.0, 0.0]
    t[0] = 9.0  # a copy on a fresh mutable carrier
    assert array[4] == 4.0
    with pytest.raises(ValueError, match="copy=False forbids the copy"):
        sw.from_dlpack(reversed_view, copy=False)
    copied = sw.from_dlpack(array, copy=True)
    copied[0] = 7.0
    assert array[0] == 0.0 and copied.to_list() == [7.0, 1.0, 2.0, 3.0, 4.0]


class KeptCapsule:
    """A DLPack producer that hands out one capsule of `array` and keeps it, so a test can
    see whether the consumer took it."""

    def __init__(self, array: Any) -> None:
        self.array = array
        self.capsule: Any = None

    def __dlpack__(self, **kwargs: Any) -> Any:
        if self.capsule is None:
            self.capsule = self.array.__dlpack__(**kwargs)
        return self.capsule

    def __dlpack_device__(self) -> Any:
        return self.array.__dlpack_device__()


@pytest.mark.parametrize("copy", [None, True, False])
@pytest.mark.parametrize("shape, axis", [((0,), 0), ((0, 2), 0), ((3, 0), 1), ((2, 3, 0), 2)])
def test_from_dlpack_of_an_empty_tensor_is_a_value_error_and_consumes_nothing(
    shape: Tuple[int, ...], axis: int, copy: Optional[bool]
) -> None:
    # The seed: a Shape's extents are at least 1 ("Extent <1 raises ValueError").
    producer = KeptCapsule(np.zeros(shape, dtype=np.float32))
    written = "(0,)" if shape == (0,) else "(" + ", ".join(map(str, shape)) + ")"
    with pytest.raises(
        ValueError,
        match=rf"^from_dlpack cannot make a tensor of the empty DLPack tensor of shape {re.escape(written)}: "
        rf"axis {axis} has extent 0, and every extent of a tensor's Shape is at least 1$",
    ):
        sw.from_dlpack(producer, copy=copy)
    assert producer.capsule is not None
    assert np.from_dlpack(producer).shape == shape, "the capsule was left unconsumed"


def test_from_dlpack_round_trips_a_tensor() -> None:
    source = sw.Tensor(cpu([float(i) for i in range(6)]), 0, sw.Layout((2, 3), (3, 1)))
    back = sw.from_dlpack(source)
    assert back.to_list() == source.to_list()
    assert back.carrier.pointer() == source.carrier.pointer()  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="exported to 1 live view"):
        source[0, 0] = 1.0
    del back
    gc.collect()
    source[0, 0] = 1.0


def test_from_dlpack_refuses_other_dtypes_and_objects() -> None:
    with pytest.raises(TypeError, match="^from_dlpack takes float32 or int32 data, got DLPack type code 2 with 64 bits and 1 lane\\(s\\)$"):
        sw.from_dlpack(np.zeros(2))
    with pytest.raises(TypeError, match="^from_dlpack takes an object with a __dlpack__ method, got list$"):
        sw.from_dlpack([1.0])

    class Liar:
        def __dlpack__(self, **kwargs: Any) -> Any:
            return 3

    with pytest.raises(TypeError, match="^Liar.__dlpack__ returned int, not an unconsumed DLPack capsule$"):
        sw.from_dlpack(Liar())

    class Legacy:
        """A producer that only knows the unversioned protocol."""

        def __init__(self) -> None:
            self.array = np.arange(3, dtype=np.float32)

        def __dlpack__(self, stream: Any = None) -> Any:
            return self.array.__dlpack__(stream=stream)

    legacy = sw.from_dlpack(Legacy())
    assert legacy.to_list() == [0.0, 1.0, 2.0]
