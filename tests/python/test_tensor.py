"""Tensor: construction, element access, views, versions, operations and to_list."""

import pytest

import strideweave as sw
from conftest import cpu_tensor


def test_construction_validates_its_fields() -> None:
    carrier = sw.CPU(10)
    t = sw.Tensor(carrier, 0, sw.Layout("(2,3):(1,4)"))
    assert t.shape == (2, 3) and t.size() == 6 and t.offset == 0
    assert t.carrier is carrier
    assert t.layout == sw.Layout("(2,3):(1,4)")
    with pytest.raises(ValueError, match="Tensor needs slots 0..0\\+10 .* has 9"):
        sw.Tensor(sw.CPU(9), 0, sw.Layout("(2,3):(1,4)"))
    with pytest.raises(TypeError, match="Tensor offset must be an int, got float"):
        sw.Tensor(carrier, 0.0, sw.Layout(6))
    with pytest.raises(ValueError, match="Tensor offset must be a non-negative int, got -1"):
        sw.Tensor(carrier, -1, sw.Layout(6))
    with pytest.raises(TypeError, match="Tensor carrier must be a Carrier instance, got list"):
        sw.Tensor([1.0], 0, sw.Layout(1))


def test_element_writes_bump_the_version_seen_by_views(matrix: sw.Tensor) -> None:
    assert matrix[1, 2] == 6.0
    assert matrix.version == 0
    row = matrix[1, :]
    assert row.to_list() == [2.0, 4.0, 6.0]
    row[2] = -1.0
    assert matrix[1, 2] == -1.0
    assert (matrix.version, row.version, matrix.carrier.version) == (1, 1, 1)


def test_failed_writes_change_nothing(matrix: sw.Tensor) -> None:
    with pytest.raises(TypeError, match="the written value must be a bool, int or float, got str"):
        matrix[0, 0] = "x"
    with pytest.raises(ValueError, match="coordinate 5 is out of range"):
        matrix[5, 0] = 1.0
    assert matrix.version == 0
    assert matrix.to_list() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]


def test_slices_are_zero_copy_views(matrix: sw.Tensor) -> None:
    view = matrix[:, 1:3]
    assert view.shape == (2, 2)
    assert view.carrier is matrix.carrier
    assert view.to_list() == [[3.0, 5.0], [4.0, 6.0]]
    wide = cpu_tensor([float(i) for i in range(8)], (2, 4))
    assert wide[0, ::2].to_list() == [0.0, 4.0]
    with pytest.raises(ValueError, match="does not divide evenly"):
        matrix[0, ::2]
    assert matrix[3] == matrix[1, 1], "one int is an ordinal, first mode fastest"
    with pytest.raises(ValueError, match="needs one key per mode"):
        matrix[0:1]
    with pytest.raises(TypeError, match="a tensor assignment writes one element"):
        matrix[0, :] = 1.0


def test_to_list_nests_by_top_level_mode(matrix: sw.Tensor) -> None:
    assert matrix.to_list() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]
    assert matrix.permute(1, 0).to_list() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    scalar = sw.Tensor(sw.CPU.from_values([7.0]), 0, sw.Layout(()))
    assert scalar.to_list() == 7.0
    ints = cpu_tensor([1, 2, 3], (3,), sw.DType.Int32)
    assert ints.to_list() == [1, 2, 3] and all(type(v) is int for v in ints.to_list())


def test_operators_call_the_builtin_operations(matrix: sw.Tensor) -> None:
    other = cpu_tensor([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], (2, 3))
    assert (matrix + other).to_list() == [[11.0, 33.0, 55.0], [22.0, 44.0, 66.0]]
    assert (other - matrix).to_list() == [[9.0, 27.0, 45.0], [18.0, 36.0, 54.0]]
    assert (matrix * other).to_list() == [[10.0, 90.0, 250.0], [40.0, 160.0, 360.0]]
    assert (matrix * 2).to_list() == [[2.0, 6.0, 10.0], [4.0, 8.0, 12.0]]
    assert (2 * matrix).to_list() == [[2.0, 6.0, 10.0], [4.0, 8.0, 12.0]]
    assert (matrix / 2).to_list() == [[0.5, 1.5, 2.5], [1.0, 2.0, 3.0]]
    assert (-matrix).to_list() == [[-1.0, -3.0, -5.0], [-2.0, -4.0, -6.0]]
    assert abs(-matrix).to_list() == matrix.to_list()
    # (N,K)@(M,K) -> (N,M): mode 1 of both is contracted.
    assert (matrix @ matrix).to_list() == [[35.0, 44.0], [44.0, 56.0]]
    with pytest.raises(TypeError, match="unsupported operand type"):
        matrix + 1.0
    with pytest.raises(ValueError, match="ambiguous"):
        bool(matrix)


def test_operation_functions(matrix: sw.Tensor) -> None:
    assert sw.reduce_sum(matrix).to_list() == [9.0, 12.0]
    accumulated = sw.reduce_sum(matrix, sw.DType.Float64)
    assert accumulated.dtype() is sw.DType.Float32 and accumulated.to_list() == [9.0, 12.0]
    # The original's keyword spelling.
    assert sw.reduce_sum(matrix, accumulator_dtype=sw.DType.Float64).to_list() == [9.0, 12.0]
    assert sw.matmul(matrix, matrix, accumulator_dtype=sw.DType.Float64).to_list() == sw.matmul(matrix, matrix).to_list()
    with pytest.raises(TypeError):
        sw.reduce_sum(matrix, accumulator=sw.DType.Float64)  # type: ignore[call-arg]
    y = sw.neg(matrix)
    y.retain_grad(retain=True)
    with pytest.raises(ValueError, match="retain_grad\\(retain=False\\) is not supported"):
        y.retain_grad(retain=False)
    assert sw.reduce_max(matrix).to_list() == [5.0, 6.0]
    assert sw.relu(matrix - matrix * 2).to_list() == [[0.0] * 3, [0.0] * 3]
    assert sw.lt(matrix, 3.0).to_list() == [[True, False, False], [True, False, False]]
    assert sw.select(sw.lt(matrix, 3.0), 0.0, matrix).to_list() == [[0.0, 3.0, 5.0], [0.0, 4.0, 6.0]]
    assert sw.maximum(matrix, 4.0).to_list() == [[4.0, 4.0, 5.0], [4.0, 4.0, 6.0]]
    assert sw.sqrt(cpu_tensor([4.0, 9.0], (2,))).to_list() == [2.0, 3.0]
    with pytest.raises(TypeError, match="add rhs must be a Tensor, got float"):
        sw.add(matrix, 1.0)
    with pytest.raises(TypeError, match="accumulator must be a DType, got str"):
        sw.reduce_sum(matrix, "f64")


def test_int32_overflow_is_checked_and_publishes_nothing() -> None:
    big = cpu_tensor([2**31 - 1], (1,), sw.DType.Int32)
    one = cpu_tensor([1], (1,), sw.DType.Int32)
    with pytest.raises(OverflowError, match="^'add' overflows Int32: 2147483647 \\+ 1$"):
        big + one
    assert big.version == 0 and big[0] == 2**31 - 1


def test_a_tensor_keeps_one_layout_object() -> None:
    layout = sw.Layout(sw.Shape(2, 3), sw.Stride(1, 2))
    tensor = sw.Tensor(sw.CPU(6, dtype=sw.DType.Float32), 0, layout)
    assert tensor.layout is layout and tensor.layout is tensor.layout
    result = sw.relu(tensor)
    assert result.layout is result.layout and result.layout == layout and result.layout is not layout
    compact = sw.Tensor.compact(sw.CPU(6, dtype=sw.DType.Float32), (2, 3))
    assert compact.layout is compact.layout and compact.layout == layout
