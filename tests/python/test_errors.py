"""Every core ErrorKind raises the seed's exception class, with the core's message."""

import pytest

import strideweave as sw
from strideweave import _native


@pytest.mark.parametrize(
    "kind, cls",
    [
        ("Type", TypeError),
        ("Value", ValueError),
        ("Index", IndexError),
        ("Runtime", RuntimeError),
        ("NotImplemented", NotImplementedError),
        ("Overflow", OverflowError),
        ("Key", KeyError),
        ("Lookup", LookupError),
        ("Memory", MemoryError),
    ],
)
def test_each_kind_maps_to_its_class_without_the_kind_prefix(kind: str, cls: type) -> None:
    with pytest.raises(cls) as info:
        _native._raise_core_error(kind, "the field at fault")
    assert type(info.value) is cls
    text = str(info.value)
    # KeyError quotes its argument in str().
    assert text.strip("'") == "the field at fault"


def test_io_errors_are_os_errors_with_the_context() -> None:
    with pytest.raises(OSError) as info:
        _native._raise_core_error("Io", "opening the slot file")
    assert str(info.value) == "opening the slot file: injected"


def test_provider_contract_error_is_a_runtime_error() -> None:
    assert issubclass(sw.ProviderContractError, RuntimeError)
    with pytest.raises(sw.ProviderContractError) as info:
        _native._raise_core_error("ProviderContract", "allocate returned 3")
    assert str(info.value) == "provider contract violated: allocate returned 3"


def test_unsupported_operation_plan_carries_ordered_reasons() -> None:
    assert issubclass(sw.UnsupportedOperationPlan, NotImplementedError)
    with pytest.raises(sw.UnsupportedOperationPlan) as info:
        _native._raise_core_error("UnsupportedOperationPlan", "matmul")
    assert info.value.operation == "matmul"
    assert info.value.reasons == ("first reason", "second reason")
    assert str(info.value) == "unsupported operation plan for 'matmul': first reason; second reason"


def test_unknown_kind_of_the_hook_is_a_value_error() -> None:
    with pytest.raises(ValueError, match='unknown error kind "Nope"'):
        _native._raise_core_error("Nope", "x")


def test_real_type_error() -> None:
    with pytest.raises(TypeError, match="^CPU size must be an int, got float$"):
        sw.CPU(2.5)


def test_real_index_error() -> None:
    with pytest.raises(IndexError, match="^slot 5 is out of range for a CPU carrier of size 2$"):
        sw.CPU(2).get_value(5)


def test_real_runtime_error_for_a_released_carrier() -> None:
    carrier = sw.CPU(2)
    carrier.release()
    with pytest.raises(RuntimeError, match="^cannot read a slot: CPU is released$"):
        carrier.get_value(0)


def test_real_overflow_error() -> None:
    with pytest.raises(OverflowError, match="out of range for dtype Int32"):
        sw.Generic([2**40], dtype=sw.DType.Int32)


def test_real_lookup_error() -> None:
    with pytest.raises(LookupError, match="^no dtype named 'Nope' is registered$"):
        sw.DType.from_name("Nope")


def test_real_memory_error() -> None:
    with pytest.raises(MemoryError, match=r"^a CPU carrier of Float32 slots needs 1152921504606846976 elements \(4611686018427387904 bytes\), more than this process's (physical memory|address-space limit \(RLIMIT_AS\)) of [0-9]+ bytes can hold$"):
        sw.CPU(2**60)


def test_real_unsupported_operation_plan() -> None:
    hierarchy = sw.Evictable(sw.CPU(4), sw.FileBacked(dtype=sw.DType.Float32))
    x = sw.Tensor.compact(hierarchy, (4,))
    version = x.version
    with pytest.raises(sw.UnsupportedOperationPlan) as info:
        sw.eq(x, x)
    assert info.value.operation == "eq"
    assert info.value.reasons == ("Evictable declares no operation-plan capability for 'eq'",)
    assert x.version == version
