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
