"""More of the original StrideWeave's spellings: list coordinate keys on tensors, the
enum-like `DType.value`, weak references to move handles, and `OperationDefinition.bind`
with the bound call's `operand_kinds`."""

import gc
import weakref

import pytest

import strideweave as sw


def grid() -> sw.Tensor:
    return sw.Tensor(sw.CPU.from_values([float(i) for i in range(40)]), 1, sw.Layout((3, (2, 2)), (1, (3, 12))))


def test_a_list_key_is_the_coordinate_a_tuple_key_is() -> None:
    t = grid()
    assert t[[2, [1, 1]]] == t[2, [1, 1]] == t[2, (1, 1)] == 1 + 2 + 3 + 12
    assert t[[1, 3]] == t[1, 3], "an int entry stands for a whole subtree"
    version = t.carrier.version
    t[[0, [1, 0]]] = -5.0
    assert t[0, (1, 0)] == -5.0 and t.carrier.version == version + 1
    with pytest.raises(ValueError, match="coordinate 3 is out of range"):
        t[[3, 0]]
    with pytest.raises(TypeError, match="a tensor key holds ints, int tuples and slices, got str"):
        t[["x", 0]]


def test_dtype_value_is_its_name() -> None:
    for dtype in (sw.DType.Float32, sw.DType.Int32, sw.DType.Bool, sw.DType.Any, sw.DType.Floating):
        assert dtype.value == dtype.name
    assert sw.DType.Float32.value == "Float32"


def test_a_move_handle_can_be_weakly_referenced() -> None:
    source = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    handle = sw.move_async(source, sw.CPU(2))
    reference = weakref.ref(handle)
    assert reference() is handle
    assert handle.wait().to_list() == [1.0, 2.0]
    del handle
    gc.collect()
    assert reference() is None


def test_bind_checks_a_call_against_the_schema_without_running_it() -> None:
    t = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    call = sw.operation_definition("add").bind(t, t)
    assert isinstance(call, sw.operation.BoundOperationCall)
    assert call.definition == sw.operation_definition("add")
    assert len(call.operands) == 2 and all(o.carrier is t.carrier for o in call.operands)
    assert call.options == {}
    assert call.operand_kinds == (sw.OperandKind.TENSOR, sw.OperandKind.TENSOR)
    assert t.carrier.version == 0
    with pytest.raises(TypeError, match="^'add' takes 2 operands, got 1$"):
        sw.operation_definition("add").bind(t)

    def resolve(bound: sw.operation.BoundOperationCall) -> sw.operation.ResolvedInvocation:
        raise AssertionError("bind never resolves")

    scaled = sw.define_operation(
        "spellings.scale",
        sw.OperationSchema((sw.OperandSpec("x", sw.OperandKind.TENSOR), sw.OperandSpec("k", sw.OperandKind.WEAK_SCALAR))),
        resolve,
        vjp=sw.NON_DIFFERENTIABLE,
    )
    assert scaled.bind(t, 2.5).operand_kinds == (sw.OperandKind.TENSOR, sw.OperandKind.WEAK_SCALAR)
    with pytest.raises(TypeError, match="^operand 'k' of 'spellings.scale' must be a WeakScalar operand$"):
        scaled.bind(t, t)


def test_carrier_scatter_writes_through_a_mapping_atomically() -> None:
    source = sw.Tensor.compact(sw.Generic([10, 20, 30], dtype=sw.DType.Int32), (3,))
    receiver = sw.Generic([0] * 52, dtype=sw.DType.Int32)
    onto = sw.Tensor(receiver, 2, sw.Layout((5, 10), (1, 5)))
    receiver.scatter(source, onto, sw.Layout(3, 5), 10)
    assert [receiver[i] for i in (12, 17, 22)] == [10, 20, 30] and receiver.version == 1
    assert sum(receiver[i] for i in range(52)) == 60
    receiver.scatter(source, onto, sw.Layout(3, 1))
    assert [receiver[i] for i in (2, 3, 4)] == [10, 20, 30] and receiver.version == 2
    refusals = [
        (lambda: receiver.scatter(source, onto, sw.Layout(4, 5), 10), ValueError,
         "^scatter mapping shape must match the source shape: the source shape 3 differs from the mapping shape 4$"),
        (lambda: receiver.scatter(source, source, sw.Layout(3, 5)), ValueError,
         "^scatter destination is backed by another Generic carrier, not the receiver$"),
        (lambda: receiver.scatter(source, onto, sw.Layout(3, 0)), ValueError, "is not injective"),
        (lambda: receiver.scatter(source, onto, sw.Layout(3, 5), 40), ValueError, "out of range|outside"),
        (lambda: receiver.scatter([1, 2, 3], onto, sw.Layout(3, 5)), TypeError, "scatter to_scatter must be a Tensor, got list"),
    ]
    for attempt, error, message in refusals:
        with pytest.raises(error, match=message):
            attempt()
    assert receiver.version == 2 and sum(receiver[i] for i in range(52)) == 120
    frozen = sw.Generic([0] * 8, dtype=sw.DType.Int32, mutable=False)
    with pytest.raises(RuntimeError, match="^cannot scatter: the Generic carrier is immutable$"):
        frozen.scatter(source, sw.Tensor(frozen, 0, sw.Layout(8, 1)), sw.Layout(3, 1))
    on_disk = sw.FileBacked(dtype=sw.DType.Int32)
    staged = sw.move(sw.Tensor.compact(sw.CPU(4, dtype=sw.DType.Int32), (4,)), on_disk)
    with pytest.raises(NotImplementedError, match="^FileBacked carriers do not support scatter$"):
        on_disk.scatter(source, staged, sw.Layout(3, 1))


def test_a_result_spec_takes_the_packages_shape_values() -> None:
    shape = sw.Shape(2, 3)
    layout = sw.Layout(shape, sw.Stride(1, 2))
    spec = sw.ResultSpec(sw.DType.Float32, shape, layout)
    assert spec.shape == (2, 3) and spec.layout == layout
    assert sw.ResultSpec(sw.DType.Float32, shape).layout == sw.Layout((2, 3))
    with pytest.raises(ValueError, match=r"^ResultSpec layout 6:1 does not have the result Shape \(2,3\)$"):
        sw.ResultSpec(sw.DType.Float32, shape, sw.Layout(sw.Shape(6), sw.Stride(1)))
    with pytest.raises(TypeError, match="^ResultSpec atol must be a finite int or float, got bool$"):
        sw.ResultSpec(sw.DType.Float32, shape, layout, atol=True)


def test_a_move_operation_runs_directly_on_its_exact_pair() -> None:
    from strideweave.carriers.move import ElementwiseMoveOperation

    t = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    with pytest.raises(TypeError, match="^CpuToFileBackedMoveOperation requires a FileBacked destination, got CPU$"):
        sw.CpuToFileBackedMoveOperation().forward(t, sw.CPU(2))
    g = sw.Tensor.compact(sw.Generic([3.0, 4.0], dtype=sw.DType.Float32), (2,))
    with pytest.raises(TypeError, match="^CpuToFileBackedMoveOperation requires a CPU source, got a tensor on Generic$"):
        sw.CpuToFileBackedMoveOperation().forward(g, sw.FileBacked(dtype=sw.DType.Float32))
    assert not t.carrier.is_released() and not g.carrier.is_released()
    moved = sw.CpuToFileBackedMoveOperation().forward(t, sw.FileBacked(dtype=sw.DType.Float32))
    assert moved.to_list() == [1.0, 2.0] and type(moved.carrier) is sw.FileBacked and t.carrier.is_released()
    anywhere = ElementwiseMoveOperation().forward(g, sw.CPU(2))
    assert anywhere.to_list() == [3.0, 4.0] and g.carrier.is_released()
