"""The import surface: one object per name, the shipped classes closed, the protocols."""

import strideweave as sw
import strideweave._native as native
import strideweave.carriers as carriers
from strideweave.carriers import extension

import pytest


# The names of `__all__` written in Python over a native base of the same name.
PYTHON_OVER_NATIVE = {"KernelExecutionInterface"}


def test_top_level_names_are_the_native_objects() -> None:
    for name in sw.__all__:
        value = getattr(sw, name)
        if name in PYTHON_OVER_NATIVE:
            assert issubclass(value, getattr(native, name)), name
        elif hasattr(native, name):
            assert value is getattr(native, name), name
        elif name == "Tiler":
            assert value is sw.layout.Tiler, "a typing alias: Sequence[Layout]"
        else:
            assert getattr(value, "__module__", "").startswith("strideweave."), name


def test_top_level_all_keeps_the_operation_records_in_their_module() -> None:
    for name in ("BoundOperationCall", "OperationPlan", "ResolvedInvocation", "VJPContext"):
        assert name not in sw.__all__ and name in sw.operation.__all__, name
        assert getattr(sw, name) is getattr(sw.operation, name), name
    for name in ("Shape", "Stride", "Tree", "TileSet", "AwaitResult", "permute", "KernelExecutionInterface"):
        assert name in sw.__all__, name


def test_carriers_module_names_the_same_objects_as_the_top_level() -> None:
    for name in carriers.__all__:
        assert getattr(carriers, name) is getattr(sw, name), name


def test_extension_module_facet_base_is_the_top_level_object() -> None:
    assert extension.CarrierFacet is sw.CarrierFacet


@pytest.mark.parametrize(
    "cls",
    [sw.CPU, sw.Generic, sw.FileBacked, sw.Evictable, sw.TiledEvictable, sw.BlockDeviceCarrier, sw.Metal, sw.Gpu, sw.GpuHost],
)
def test_shipped_carriers_are_closed_and_carriers(cls: type) -> None:
    from strideweave.carriers.base import CLOSED_CARRIER_MESSAGE, reject_carrier_subclass

    assert issubclass(cls, sw.Carrier)
    with pytest.raises(TypeError) as refusal:
        type("Sub", (cls,), {})
    assert str(refusal.value) == CLOSED_CARRIER_MESSAGE.format(name=cls.__name__)
    assert str(refusal.value).startswith(f"{cls.__name__} is a closed carrier implementation and cannot be subclassed")
    with pytest.raises(TypeError) as stated:
        reject_carrier_subclass(cls.__name__)
    assert str(stated.value) == str(refusal.value)


def test_carrier_base_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError, match="Carrier cannot be constructed directly"):
        sw.Carrier()


def test_carrier_base_is_open_for_subclassing() -> None:
    sub = type("MyCarrier", (sw.Carrier,), {})
    assert issubclass(sub, sw.Carrier)


def test_move_handle_is_a_provider_completion_and_no_coroutine() -> None:
    source = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    handle = sw.move_async(source, sw.CPU(2))
    assert isinstance(handle, extension.ProviderCompletion)
    assert not hasattr(handle, "__await__")
    assert handle.wait().to_list() == [1.0, 2.0]


def test_provider_completion_is_structural() -> None:
    class Done:
        @property
        def done(self) -> bool:
            return True

        def wait(self) -> int:
            return 7

    class MissingWait:
        done = True

    assert isinstance(Done(), extension.ProviderCompletion)
    assert not isinstance(MissingWait(), extension.ProviderCompletion)
    assert not hasattr(extension.ProviderCompletion, "__await__")
