"""Definition-free independent carriers written as the original's are: `super().__init__()`
first, then the state the storage hooks read; the hooks are read when the carrier is first
used (seed: "Definition-free carriers retain the existing extension path")."""

from typing import Any, List

import pytest

import strideweave as sw
from strideweave.carriers.operation_policy import resolve_operation_plan
from strideweave.carriers.operation_capability import (
    capabilities_for_carrier_class,
    matching_capability,
    register_operation_capabilities,
    supports_operation_plan,
    unsupported_plan_reason,
)

I32 = sw.DType.Int32
NEG = sw.OperationCapability.from_plan(resolve_operation_plan("neg", I32))


def composing_class(name: str, calls: List[str]) -> Any:
    """A class over a CPU carrier it creates after `super().__init__()`."""

    class Composing(sw.Carrier):
        def __init__(self, size: int) -> None:
            super().__init__()
            self._inner = sw.CPU(size, dtype=I32)

        def size(self) -> int:
            calls.append("size")
            return self._inner.size()

        def dtype(self) -> sw.DType:
            calls.append("dtype")
            return self._inner.dtype()

        def _is_mutable(self) -> bool:
            return True

        def get_value(self, index: int) -> int:
            return int(self._inner[index])  # type: ignore[call-overload]

        def set_value(self, index: int, value: int) -> None:
            self._inner[index] = value

    Composing.__name__ = Composing.__qualname__ = name
    return Composing


def test_the_hooks_may_read_state_set_after_the_base_initializer() -> None:
    calls: List[str] = []
    cls = composing_class("Composing", calls)
    carrier = cls(3)
    assert calls == [], "nothing is read at construction"
    assert carrier.is_mutable() and carrier.version == 0
    assert "dtype" in calls and "size" in calls, "read at the first use of the carrier"
    assert carrier.size() == 3 and carrier.dtype() is I32
    carrier[2] = 7
    assert carrier[2] == 7 and carrier._inner[2] == 7 and carrier.version == 1
    t = sw.Tensor.compact(carrier, (3,))
    assert t.carrier is carrier and t.to_list() == [0, 0, 7]


def test_a_class_without_hooks_answers_capability_queries_from_its_declaration() -> None:
    declared = type("DeclaredOnly", (sw.Carrier,), {})
    register_operation_capabilities(declared, [NEG])
    carrier = declared()
    assert carrier.operation_capabilities() == (NEG,)
    assert carrier.operation_capabilities("relu") == ()
    assert carrier.supports_operation_plan(NEG)
    assert carrier.require_operation_plan(NEG) == NEG
    add = sw.OperationCapability.from_plan(resolve_operation_plan("add", I32, I32))
    assert carrier.unsupported_plan_reason(add) == "DeclaredOnly declares no operation-plan capability for 'add'"
    with pytest.raises(sw.UnsupportedOperationPlan, match="DeclaredOnly declares no operation-plan capability for 'add'"):
        carrier.require_operation_plan(add)
    with pytest.raises(TypeError, match="^DeclaredOnly defines no storage hooks: a definition-free carrier defines size\\(\\), dtype\\(\\), get_value\\(\\) and set_value\\(\\) to hold values$"):
        carrier.size()


def test_constructing_seals_the_declaration_as_before() -> None:
    cls = composing_class("SealedAtConstruction", [])
    cls(1)
    with pytest.raises(TypeError, match="^SealedAtConstruction was already observed: it was first observed without a declaration"):
        register_operation_capabilities(cls, [NEG])
    assert capabilities_for_carrier_class(cls) == ()


def test_a_failing_first_use_publishes_nothing_and_the_next_use_builds() -> None:
    calls: List[str] = []
    cls = composing_class("NotReadyYet", calls)
    carrier = cls.__new__(cls)
    sw.Carrier.__init__(carrier)
    with pytest.raises(AttributeError, match="_inner"):
        carrier.size()
    with pytest.raises(AttributeError, match="_inner"):
        sw.Tensor.compact(carrier, (2,))
    carrier._inner = sw.CPU(2, dtype=I32)
    assert carrier.size() == 2 and carrier.version == 0


def test_a_hook_that_uses_the_carrier_while_it_is_built_is_refused() -> None:
    class Recursive(sw.Carrier):
        def __init__(self) -> None:
            super().__init__()

        def size(self) -> int:
            return 1

        def dtype(self) -> sw.DType:
            return I32

        def _is_mutable(self) -> bool:
            return self.is_released()

        def get_value(self, index: int) -> int:
            return 0

        def set_value(self, index: int, value: int) -> None:
            pass

    carrier = Recursive()
    with pytest.raises(TypeError, match="Recursive.s storage hooks \\(dtype\\(\\), size\\(\\), _is_mutable\\(\\), _supports_storage_dtype\\(\\)\\) used the carrier while it was being built from them$"):
        carrier.version


def test_class_queries_answer_for_any_class_and_registration_names_the_wrong_ones() -> None:
    for target in (object, type("Unrelated", (), {}), sw.Carrier, sw.DependentCarrier):
        assert capabilities_for_carrier_class(target) == ()
        assert matching_capability(target, NEG) is None
        assert not supports_operation_plan(target, NEG)
        assert unsupported_plan_reason(target, NEG) == f"{target.__name__} declares no operation-plan capability for 'neg'"
    with pytest.raises(TypeError, match="^register_operation_capabilities: object is not a Carrier implementation$"):
        register_operation_capabilities(object, [NEG])
    with pytest.raises(TypeError, match="^register_operation_capabilities: capabilities cannot be declared for the Carrier base class"):
        register_operation_capabilities(sw.Carrier, [NEG])
    with pytest.raises(TypeError, match="capabilities_for_carrier_class carrier_class must be"):
        capabilities_for_carrier_class(3)  # type: ignore[arg-type]
    assert supports_operation_plan(sw.CPU, resolve_operation_plan("add", I32, I32))


def test_queries_answer_with_the_declared_objects_themselves() -> None:
    declared = type("IdentityCarrier", (sw.Carrier,), {})
    entry = sw.OperationCapability.from_plan(resolve_operation_plan("neg", I32))
    register_operation_capabilities(declared, [entry])
    assert capabilities_for_carrier_class(declared)[0] is entry
    assert matching_capability(declared, entry) is entry
    instance = declared()
    assert instance.operation_capabilities()[0] is entry
    assert instance.require_operation_plan(entry) is entry
