"""numpy interop: `np.asarray(t)` views a CPU tensor without a copy (read-only, the slots
frozen while the array lives), and `from_numpy` shares an array's memory where it can."""

import gc
import weakref

import numpy as np
import pytest

import strideweave as sw


def cpu(values: "list[float]", dtype: sw.DType = sw.DType.Float32) -> sw.CPU:
    carrier = sw.CPU.from_values(values, dtype=dtype)
    assert isinstance(carrier, sw.CPU)
    return carrier


def row_major(carrier: sw.Carrier, rows: int, cols: int, offset: int = 0) -> sw.Tensor:
    return sw.Tensor(carrier, offset, sw.Layout((rows, cols), (cols, 1)))


@pytest.mark.parametrize("count", [6, 40])  # inline slots and a heap buffer
def test_asarray_views_the_slots_without_a_copy(count: int) -> None:
    carrier = cpu([float(i) for i in range(count)])
    t = row_major(carrier, 2, count // 2)
    a = np.asarray(t)
    assert a.dtype == np.float32
    assert a.shape == (2, count // 2)
    assert a.ctypes.data == carrier.pointer()
    assert a.tolist() == t.to_list()
    assert not a.flags.writeable
    assert not a.flags.owndata


def test_views_follow_offsets_strides_permutes_and_broadcasts() -> None:
    carrier = cpu([float(i) for i in range(12)])
    t = sw.Tensor(carrier, 2, sw.Layout((3,), (2,)))
    a = np.asarray(t)
    assert a.tolist() == [2.0, 4.0, 6.0]
    assert a.ctypes.data == carrier.pointer() + 8
    assert a.strides == (8,)

    m = row_major(carrier, 3, 4)
    for view in (m[1, :], m.permute(1, 0), m[:, 1:3]):
        assert isinstance(view, sw.Tensor)
        assert np.asarray(view).tolist() == view.to_list()
        assert np.shares_memory(np.asarray(view), np.asarray(m))

    one = sw.Tensor(cpu([7.0]), 0, sw.Layout((3,), (0,)))
    b = np.asarray(one)
    assert b.tolist() == [7.0, 7.0, 7.0]
    assert b.strides == (0,)

    scalar = sw.Tensor(cpu([2.5]), 0, sw.Layout(()))
    s = np.asarray(scalar)
    assert s.shape == () and float(s) == 2.5


def test_int32_tensors_are_viewed_as_int32() -> None:
    carrier = cpu([1, -2, 3, 2**31 - 1], dtype=sw.DType.Int32)
    a = np.asarray(sw.Tensor.compact(carrier, (4,)))
    assert a.dtype == np.int32
    assert a.tolist() == [1, -2, 3, 2**31 - 1]
    assert a.ctypes.data == carrier.pointer()


def test_numpy_writes_are_refused_by_numpy() -> None:
    t = sw.Tensor.compact(cpu([1.0, 2.0]), (2,))
    a = np.asarray(t)
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        a[0] = 5.0
    with pytest.raises(ValueError, match="cannot set WRITEABLE flag to True"):
        a.flags.writeable = True
    assert t.to_list() == [1.0, 2.0]
    assert t.version == 0


def test_tensor_writes_are_refused_while_a_view_lives_and_the_version_stays() -> None:
    carrier = cpu([1.0, 2.0, 3.0])
    t = sw.Tensor.compact(carrier, (3,))
    a = np.asarray(t)
    second = np.asarray(t)
    message = (
        r"cannot write the CPU carrier: its slots are exported to 2 live view\(s\) "
        r"\(such as a numpy array\); writes are refused until every view is dropped"
    )
    with pytest.raises(RuntimeError, match=message):
        t[0] = 9.0
    with pytest.raises(RuntimeError, match="exported to 2 live view"):
        carrier.set_value(1, 9.0)
    assert (t.version, carrier.version) == (0, 0)
    assert a.tolist() == [1.0, 2.0, 3.0]
    # Operations read the frozen slots and write fresh carriers.
    assert (t + t).to_list() == [2.0, 4.0, 6.0]
    del a
    gc.collect()
    with pytest.raises(RuntimeError, match="exported to 1 live view"):
        t[0] = 9.0
    del second
    gc.collect()
    t[0] = 9.0
    assert t.version == 1
    assert t.to_list() == [9.0, 2.0, 3.0]


def test_slices_of_a_view_keep_the_export_alive() -> None:
    t = sw.Tensor.compact(cpu([1.0, 2.0, 3.0, 4.0]), (4,))
    part = np.asarray(t)[1:3]
    gc.collect()
    with pytest.raises(RuntimeError, match="exported to 1 live view"):
        t[0] = 0.0
    assert part.tolist() == [2.0, 3.0]
    del part
    gc.collect()
    t[0] = 0.0


@pytest.mark.parametrize("count", [4, 1000])
def test_a_release_while_viewed_is_deferred_and_the_array_stays_valid(count: int) -> None:
    values = [float(i) * 0.5 for i in range(count)]
    carrier = cpu(values)
    t = sw.Tensor.compact(carrier, (count,))
    a = np.asarray(t)
    carrier.release()
    assert carrier.is_released()
    with pytest.raises(RuntimeError, match="released"):
        t.to_list()
    assert a.tolist() == values
    with pytest.raises(RuntimeError, match="cannot export the CPU carrier: it is released"):
        np.asarray(t)


def test_a_move_of_a_viewed_tensor_succeeds_and_the_array_keeps_the_values() -> None:
    t = sw.Tensor.compact(cpu([1.0, 2.0, 3.0, 4.0, 5.0]), (5,))
    a = np.asarray(t)
    moved = sw.move(t, sw.Generic([0.0] * 5, dtype=sw.DType.Float32))
    assert t.carrier.is_released()
    assert moved.to_list() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_layout_that_does_not_flatten_is_a_value_error_naming_it() -> None:
    carrier = sw.CPU(20)
    t = sw.Tensor(carrier, 0, sw.Layout("((2,2),3):((1,6),2)"))
    message = (
        r"the tensor's layout \(\(2,2\),3\):\(\(1,6\),2\) does not flatten to one stride "
        r"per mode \(mode 0 is \(2,2\):\(1,6\)\), so numpy cannot view it; "
        r"np.array\(t\) copies it"
    )
    with pytest.raises(ValueError, match=message):
        np.asarray(t)
    with pytest.raises(ValueError, match="does not flatten"):
        np.asarray(t, copy=False)
    copy = np.array(t)
    assert copy.shape == (4, 3)
    assert copy.tolist() == t.to_list()
    t[(1, 1), 2] = 5.0  # the copy froze nothing
    assert copy[3, 2] == 0.0


def test_a_nested_mode_that_chains_flattens_to_one_axis() -> None:
    carrier = cpu([float(i) for i in range(12)])
    t = sw.Tensor(carrier, 0, sw.Layout("((2,3),2):((1,2),6)"))
    a = np.asarray(t)
    assert a.shape == (6, 2)
    assert a.strides == (4, 24)
    assert a.tolist() == t.to_list()


def test_other_carriers_and_dtypes_are_copied_unless_copy_is_false() -> None:
    g = sw.Tensor.compact(sw.Generic([1.0, 2.0, 3.0], dtype=sw.DType.Float32), (3,))
    a = np.asarray(g)
    assert a.dtype == np.float32
    assert a.tolist() == [1.0, 2.0, 3.0]
    g[0] = 7.0  # a copy: the tensor stays writable and the array unchanged
    assert a[0] == 1.0
    with pytest.raises(ValueError, match="a tensor on a Generic carrier has no host memory"):
        np.asarray(g, copy=False)

    flags = sw.Tensor.compact(sw.CPU.from_values([True, False], dtype=sw.DType.Bool), (2,))
    b = np.asarray(flags)
    assert b.dtype == np.bool_ and b.tolist() == [True, False]
    with pytest.raises(ValueError, match="numpy views Float32 and Int32 CPU tensors, not Bool"):
        np.asarray(flags, copy=False)


def test_copy_true_and_a_dtype_give_independent_arrays() -> None:
    t = sw.Tensor.compact(cpu([1.0, 2.0]), (2,))
    a = np.array(t, copy=True)
    assert a.flags.writeable and a.flags.owndata
    a[0] = 3.0
    t[1] = 4.0  # nothing is exported any more
    assert t.to_list() == [1.0, 4.0]
    d = np.asarray(t, dtype=np.float64)
    assert d.dtype == np.float64 and d.tolist() == [1.0, 4.0]
    t[0] = 0.0
    with pytest.raises(ValueError, match="needs a copy, which copy=False forbids"):
        t.__array__(np.float64, copy=False)


def test_from_numpy_shares_aligned_arrays_and_keeps_them_alive() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = sw.from_numpy(x)
    assert t.to_list() == x.tolist()
    assert t.shape == (3, 4)
    assert t.dtype() is sw.DType.Float32
    assert isinstance(t.carrier, sw.CPU)
    assert t.carrier.pointer() == x.ctypes.data
    assert not t.carrier.is_mutable()
    with pytest.raises(RuntimeError, match="cannot write a slot: the CPU carrier is immutable"):
        t[0, 0] = 1.0

    alive = weakref.ref(x)
    del x
    gc.collect()
    assert alive() is not None
    assert t[2, 3] == 11.0
    del t
    gc.collect()
    assert alive() is None


def test_from_numpy_shares_strided_views_and_operations_run_on_them() -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (x.T, x[::2, 1::3], x[1]):
        t = sw.from_numpy(view)
        assert t.carrier.pointer() == view.ctypes.data
        assert t.to_list() == view.tolist()
    a = sw.from_numpy(x[:, :2])
    assert (a + a).to_list() == (x[:, :2] * 2).tolist()
    assert np.shares_memory(np.asarray(sw.from_numpy(x.T)), x)
    ints = np.array([[1, 2], [3, 4]], dtype=np.int32)
    assert sw.from_numpy(ints).to_list() == [[1, 2], [3, 4]]
    scalar = sw.from_numpy(np.full((), 4.5, dtype=np.float32))
    assert scalar.to_list() == 4.5


def test_numpy_writes_to_a_shared_array_bypass_the_version() -> None:
    x = np.zeros(3, dtype=np.float32)
    t = sw.from_numpy(x)
    x[1] = 2.0
    assert t.to_list() == [0.0, 2.0, 0.0]
    assert t.version == 0


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: np.arange(6, dtype=np.float32)[::-1], "byte stride -4 is negative"),
        (lambda: np.arange(4, dtype=">f4"), "not in native byte order"),
        (
            lambda: np.frombuffer(bytes(17), dtype=np.float32, offset=1, count=4),
            "not 4-byte aligned",
        ),
        (lambda: np.array([True, False, True]), "bool arrays are copied"),
    ],
)
def test_from_numpy_copies_what_it_cannot_share(make: "object", reason: str) -> None:
    x = make()  # type: ignore[operator]
    t = sw.from_numpy(x)
    assert t.to_list() == x.tolist()
    assert t.carrier.is_mutable()
    with pytest.raises(ValueError, match=f"cannot share the array's memory: .*{reason}"):
        sw.from_numpy(x, copy=False)


@pytest.mark.parametrize("copy", [None, True, False])
@pytest.mark.parametrize(
    "array, written, axis",
    [
        (np.zeros((0,), dtype=np.float32), "(0,)", 0),
        (np.zeros((2, 0), dtype=np.int32), "(2, 0)", 1),
        (np.zeros((0, 3), dtype=np.bool_), "(0, 3)", 0),
        (np.arange(6, dtype=np.float32)[3:3], "(0,)", 0),
    ],
)
def test_an_empty_array_has_no_tensor(array: "np.ndarray", written: str, axis: int, copy: "bool | None") -> None:
    # The seed: a Shape's extents are at least 1 ("Extent <1 raises ValueError"), shared or copied.
    with pytest.raises(ValueError) as caught:
        sw.from_numpy(array, copy=copy)
    assert str(caught.value) == (
        f"from_numpy cannot make a tensor of the empty array of shape {written}: axis {axis} has extent 0, "
        "and every extent of a tensor's Shape is at least 1"
    )


def test_from_numpy_copy_true_is_independent() -> None:
    x = np.array([1.0, 2.0], dtype=np.float32)
    t = sw.from_numpy(x, copy=True)
    assert t.carrier.pointer() != x.ctypes.data
    x[0] = 5.0
    assert t.to_list() == [1.0, 2.0]
    t[1] = 3.0
    assert t.version == 1


def test_from_numpy_rejects_other_objects_and_dtypes() -> None:
    with pytest.raises(TypeError, match="from_numpy takes a numpy.ndarray, got list"):
        sw.from_numpy([1.0, 2.0])
    with pytest.raises(TypeError, match="float32, int32 or bool arrays, got float64"):
        sw.from_numpy(np.zeros(2))


def test_a_round_trip_shares_one_buffer() -> None:
    x = np.linspace(0.0, 1.0, 50, dtype=np.float32).reshape(5, 10)
    back = np.asarray(sw.from_numpy(x))
    assert np.shares_memory(back, x)
    assert back.tolist() == x.tolist()
