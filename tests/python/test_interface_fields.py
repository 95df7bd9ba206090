"""`KernelExecutionInterface` subclasses that set their own fields with `object.__setattr__`
(a subclass declaring `__slots__`, as the original's kernel interfaces do), under the seed's
rule that the interface is an immutable compatibility base whose identity is
`(type(interface), interface.version)`."""

from typing import Any, List

import pytest

import strideweave as sw
import strideweave._native as native
from strideweave.carriers import extension as ext

from authoring_helpers import ListStorage, elementwise, filled, neg_plan, values_of


class SlottedInterface(sw.KernelExecutionInterface):
    __slots__ = ("label",)

    def __init__(self, version: str, label: str = "slotted") -> None:
        super().__init__(version)
        object.__setattr__(self, "label", label)


class SiblingInterface(sw.KernelExecutionInterface):
    __slots__ = ("label",)


def test_a_slotted_subclass_sets_its_fields_with_object_setattr() -> None:
    interface = SlottedInterface("v1", label="stream 3")
    assert interface.label == "stream 3" and interface.version == "v1"
    assert interface.compatibility_identity == (SlottedInterface, "v1")
    interface.label = "stream 4"
    assert interface.label == "stream 4", "assignment is open until a provider holds it"
    with pytest.raises(AttributeError, match="'SlottedInterface' object has no attribute 'other'"):
        interface.other = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"^KernelExecutionInterface version is immutable \(read-only\)$"):
        interface.version = "v2"  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"^KernelExecutionInterface version is immutable \(read-only\)$"):
        del interface.version
    assert interface.version == "v1"


def test_a_held_slotted_interface_refuses_assignment_and_keeps_its_identity() -> None:
    interface = SlottedInterface("v1", label="fixed")
    sw.KernelProvider(interface)
    with pytest.raises(AttributeError, match="^SlottedInterface is immutable: a KernelProvider or KernelPack holds it$"):
        interface.label = "changed"
    with pytest.raises(AttributeError, match="^SlottedInterface is immutable: a KernelProvider or KernelPack holds it$"):
        del interface.label
    assert interface.label == "fixed"
    object.__setattr__(interface, "__class__", SiblingInterface)
    assert type(interface) is SiblingInterface
    assert interface.compatibility_identity == (SlottedInterface, "v1"), "the identity it was sealed with"


def test_the_native_base_is_not_constructed_directly() -> None:
    with pytest.raises(TypeError, match="^strideweave._native.KernelExecutionInterface is the native base: construct strideweave.KernelExecutionInterface or a subclass of it$"):
        native.KernelExecutionInterface("v1")
    assert issubclass(sw.KernelExecutionInterface, native.KernelExecutionInterface)
    assert sw.KernelExecutionInterface is ext.KernelExecutionInterface is sw.carriers.KernelExecutionInterface
    assert isinstance(sw.KernelExecutionInterface("v1"), native.KernelExecutionInterface)


def test_a_slotted_interface_reaches_the_kernels_of_its_carrier() -> None:
    seen: List[Any] = []
    negate = elementwise(lambda x: -x)

    def prepare(invocation: Any, interface: Any) -> Any:
        seen.append((interface, interface.label))
        return negate(invocation, interface)

    interface = SlottedInterface("v1", label="device 0")
    cls = type("SlottedCarrier", (sw.Carrier,), {})
    pattern = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "neg.slotted", prepare)
    provider = sw.KernelProvider(interface, [pattern])
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), kernels=provider))
    assert values_of(-filled(cls, [1.0, -2.0])) == [-1.0, 2.0]
    assert seen == [(interface, "device 0")]
    assert provider.interface is interface
