"""Definition-free `DependentCarrier` classes written in Python (seed: "Definition-free
carriers retain the existing extension path", scenario "Run a legacy custom carrier", for the
dependent category): capabilities generated and frozen per instance by
`_finalize_dependent_capabilities()`, the storage hooks behind them, failures injected in each
hook leaving nothing published, and both paths for dependent classes in one process."""

from typing import Any, Iterable, List, Optional

import pytest

import strideweave as sw
from strideweave.carriers.extension import PreparedComposite, ProviderResult, Unsupported
from strideweave.carriers.move import register_move_operation
from strideweave.carriers.operation_capability import (
    capabilities_for_carrier_class,
    register_operation_capabilities,
)
from strideweave.carriers.operation_policy import resolve_operation_plan
from strideweave.operation import Operation

from authoring_helpers import ListStorage

F32 = sw.DType.Float32
NEG = sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))
ADD = sw.OperationCapability.from_plan(resolve_operation_plan("add", F32, F32))
RELU = sw.OperationCapability.from_plan(resolve_operation_plan("relu", F32))

NOT_FINALIZED = "instance has not finalized its operation capabilities"


class Negation(Operation):
    """`neg` computed on the dependency's class, wrapped back into a fresh mirror."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def _forward(self, operand: sw.Tensor) -> sw.Tensor:
        if self.fail:
            raise OSError("injected in _forward")
        mirror = operand.carrier
        values = [-float(mirror[i]) for i in range(mirror.size())]  # type: ignore[arg-type]
        return sw.Tensor(type(mirror)(sw.CPU.from_values(values), mirror.entries), 0, operand.layout)


def mirror_class(name: str, faults: Optional[List[str]] = None) -> Any:
    """A fresh dependent class holding its values in the CPU carrier it composes; its
    instances execute the capabilities they are given. `faults` names the hooks that raise."""
    at: List[str] = faults if faults is not None else []

    def check(hook: str) -> None:
        if hook in at:
            raise OSError(f"injected in {hook}")

    class Mirror(sw.DependentCarrier):
        def __init__(self, inner: sw.Carrier, entries: Iterable[sw.OperationCapability]) -> None:
            super().__init__()
            self.inner = inner
            self.entries = entries
            self._finalize_dependent_capabilities()

        def _generate_operation_capabilities(self) -> Iterable[sw.OperationCapability]:
            check("_generate_operation_capabilities")
            return self.entries

        def size(self) -> int:
            check("size")
            return self.inner.size()

        def dtype(self) -> sw.DType:
            check("dtype")
            return self.inner.dtype()

        def _is_mutable(self) -> bool:
            return True

        def get_value(self, index: int) -> float:
            check("get_value")
            return float(self.inner[index])  # type: ignore[arg-type]

        def set_value(self, index: int, value: float) -> None:
            check("set_value")
            self.inner[index] = value

        def new_like(self, values: List[float], *, mutable: bool = True, dtype: Any = None) -> Any:
            return type(self)(sw.CPU.from_values(values), self.entries)

        def allocate_like(self, size: int, *, mutable: bool = True, dtype: Any = None, empty: bool = False) -> Any:
            return type(self)(sw.CPU(size), self.entries)

        def _dispatch_op(self, operation_name: str) -> Operation:
            check("_dispatch_op")
            if operation_name in ("neg", "add"):
                return Negation("_forward" in at)
            raise NotImplementedError(f"{name} does not support {operation_name!r}")

    Mirror.__name__ = Mirror.__qualname__ = name
    return Mirror


def bare_class(name: str, generate: Any = None) -> Any:
    """A dependent class without storage hooks, finalized by the caller."""
    body = {} if generate is None else {"_generate_operation_capabilities": generate}
    return type(name, (sw.DependentCarrier,), body)


def test_an_instance_answers_with_the_capabilities_it_generated_not_its_class() -> None:
    cls = mirror_class("Answering")
    negating = cls(sw.CPU.from_values([1.0]), [NEG])
    both = cls(sw.CPU.from_values([1.0]), iter([NEG, ADD]))
    assert negating.operation_capabilities() == (NEG,)
    assert both.operation_capabilities() == (ADD, NEG), "sorted, not in generation order"
    assert both.operation_capabilities("neg") == (NEG,)
    assert both.operation_capabilities("relu") == ()
    assert capabilities_for_carrier_class(cls) == ()
    assert negating.require_operation_plan(NEG) is NEG, "the generated object itself"
    assert both.supports_operation_plan(ADD) and not negating.supports_operation_plan(ADD)
    assert negating.unsupported_plan_reason(NEG) is None
    assert negating.unsupported_plan_reason(ADD) == "Answering declares no operation-plan capability for 'add'"
    relu_int = sw.OperationCapability.from_plan(resolve_operation_plan("relu", sw.DType.Int32))
    assert cls(sw.CPU.from_values([1.0]), [RELU]).unsupported_plan_reason(relu_int) == (
        f"Answering declares no operation-plan capability for this 'relu' plan: {relu_int}"
    )
    with pytest.raises(sw.UnsupportedOperationPlan, match="Answering declares no operation-plan capability for 'add'"):
        negating.require_operation_plan(ADD)


def test_the_generator_runs_once_and_a_second_finalization_changes_nothing() -> None:
    calls: List[int] = []

    def generate(self: Any) -> Iterable[sw.OperationCapability]:
        calls.append(1)
        return iter([NEG])

    carrier = bare_class("OnceOnly", generate)()
    carrier._finalize_dependent_capabilities()
    assert calls == [1] and carrier.operation_capabilities() == (NEG,)
    with pytest.raises(RuntimeError, match="this OnceOnly instance has already finalized its operation capabilities"):
        carrier._finalize_dependent_capabilities()
    assert calls == [1] and carrier.operation_capabilities() == (NEG,)


def test_an_unfinalized_instance_answers_nothing_and_holds_nothing() -> None:
    carrier = bare_class("NotYet")()
    queries = [
        lambda: carrier.operation_capabilities(),
        lambda: carrier.supports_operation_plan(NEG),
        lambda: carrier.unsupported_plan_reason(NEG),
        lambda: carrier.require_operation_plan(NEG),
        lambda: carrier.size(),
        lambda: carrier.get_value(0),
    ]
    for query in queries:
        with pytest.raises(RuntimeError, match=f"this NotYet {NOT_FINALIZED}"):
            query()


def test_the_base_generator_is_unimplemented_and_leaves_the_instance_unfinalized() -> None:
    carrier = bare_class("NoGenerator")()
    with pytest.raises(NotImplementedError, match=r"NoGenerator must implement _generate_operation_capabilities\(\)"):
        carrier._finalize_dependent_capabilities()
    with pytest.raises(RuntimeError, match=NOT_FINALIZED):
        carrier.operation_capabilities()


@pytest.mark.parametrize(
    ("generated", "error", "message"),
    [
        ([NEG, "neg"], TypeError, "the capabilities Invalid generated must be OperationCapability entries, got str"),
        ([NEG, NEG], ValueError, "this Invalid instance generated two capabilities for neg with operands"),
        (7, TypeError, r"Invalid._generate_operation_capabilities\(\) must be an iterable, got int"),
    ],
    ids=["not-a-capability", "duplicate", "not-iterable"],
)
def test_an_invalid_generated_set_publishes_nothing(generated: Any, error: type, message: str) -> None:
    carrier = bare_class("Invalid", lambda self: generated)()
    with pytest.raises(error, match=message):
        carrier._finalize_dependent_capabilities()
    with pytest.raises(RuntimeError, match=NOT_FINALIZED):
        carrier.operation_capabilities()


def test_a_class_without_storage_hooks_finalizes_capabilities_and_holds_no_values() -> None:
    carrier = bare_class("CapabilitiesOnly", lambda self: [NEG])()
    carrier._finalize_dependent_capabilities()
    assert carrier.operation_capabilities() == (NEG,)
    with pytest.raises(TypeError, match="this CapabilitiesOnly instance holds no storage: its class defines no storage hooks"):
        carrier.size()


def test_the_storage_hooks_hold_the_values_and_the_framework_owns_the_version() -> None:
    inner = sw.CPU.from_values([1.0, 2.0])
    carrier = mirror_class("Storing")(inner, [NEG])
    assert (carrier.size(), carrier.dtype(), carrier.is_mutable()) == (2, F32, True)
    carrier[1] = 5.0
    assert (carrier[1], inner[1], carrier.version) == (5.0, 5.0, 1)
    t = sw.Tensor.compact(carrier, (2,))
    assert t.to_list() == [1.0, 5.0]


def test_dispatch_is_gated_by_the_instance_snapshot() -> None:
    cls = mirror_class("Gated")
    negating = sw.Tensor.compact(cls(sw.CPU.from_values([1.0, -2.0]), [NEG]), (2,))
    result = -negating
    assert result.to_list() == [-1.0, 2.0] and type(result.carrier) is cls
    assert result.carrier.operation_capabilities() == (NEG,)
    storage_only = sw.Tensor.compact(cls(sw.CPU.from_values([1.0, -2.0]), []), (2,))
    with pytest.raises(sw.UnsupportedOperationPlan, match="Gated declares no operation-plan capability for 'neg'"):
        -storage_only
    with pytest.raises(sw.UnsupportedOperationPlan, match="Gated declares no operation-plan capability for 'relu'"):
        sw.relu(negating)


@pytest.mark.parametrize("hook", ["_generate_operation_capabilities", "size", "dtype"])
def test_a_failing_finalization_hook_publishes_nothing_and_can_be_retried(hook: str) -> None:
    faults = [hook]
    cls = mirror_class(f"FailingAt{hook}", faults)
    inner = sw.CPU.from_values([3.0])
    with pytest.raises(OSError, match=f"injected in {hook}"):
        cls(inner, [NEG])
    carrier = cls.__new__(cls)
    sw.DependentCarrier.__init__(carrier)
    carrier.inner, carrier.entries = inner, [NEG]
    with pytest.raises(OSError, match=f"injected in {hook}"):
        carrier._finalize_dependent_capabilities()
    with pytest.raises(RuntimeError, match=NOT_FINALIZED):
        carrier.operation_capabilities()
    faults.clear()
    carrier._finalize_dependent_capabilities()
    assert carrier.operation_capabilities() == (NEG,) and carrier[0] == 3.0


@pytest.mark.parametrize("hook", ["get_value", "set_value", "_dispatch_op", "_forward"])
def test_a_failing_storage_or_dispatch_hook_publishes_nothing(hook: str) -> None:
    faults: List[str] = []
    cls = mirror_class(f"Failing{hook}", faults)
    inner = sw.CPU.from_values([1.0, 2.0])
    carrier = cls(inner, [NEG])
    t = sw.Tensor.compact(carrier, (2,))
    faults.append(hook)
    with pytest.raises(OSError, match=f"injected in {hook}") as raised:
        if hook == "get_value":
            carrier[0]
        elif hook == "set_value":
            carrier[0] = 9.0
        else:
            -t
    assert str(raised.value) == f"injected in {hook}"
    faults.clear()
    assert t.to_list() == [1.0, 2.0] and carrier.version == 0 and inner.version == 0


def test_a_dependent_class_cannot_declare_capabilities_and_its_answer_stays() -> None:
    cls = mirror_class("Undeclarable")
    with pytest.raises(TypeError, match=r"Undeclarable is a DependentCarrier implementation \(a dependent carrier class\): its capabilities derive from each instance.s dependencies"):
        register_operation_capabilities(cls, [NEG])
    assert capabilities_for_carrier_class(cls) == ()
    assert cls(sw.CPU.from_values([1.0]), [ADD]).operation_capabilities() == (ADD,)


def test_a_definition_cannot_be_registered_once_an_instance_was_made() -> None:
    cls = bare_class("ObservedDependent")
    cls()
    composite = sw.CompositeProvider(lambda c: (), lambda c, i: (), lambda c, i: Unsupported("no"))
    with pytest.raises(TypeError, match="already observed"):
        sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), composite=composite))


def test_both_paths_for_dependent_classes_in_one_process() -> None:
    generated: List[Any] = []

    class Defined(sw.DependentCarrier):
        def __init__(self, slots: int) -> None:
            super().__init__(slots, dtype=F32)
            self._finalize_dependent_capabilities()

        def configure_like(self, prototype: "Defined") -> None:
            pass

        def _generate_operation_capabilities(self) -> Iterable[sw.OperationCapability]:
            generated.append(self)
            return [ADD]

    def prepare(carrier: Any, invocation: Any) -> Any:
        def submit() -> Any:
            out = invocation.allocate_result(0)
            source = invocation.call.operands[0]
            for i in range(source.size()):
                out[i] = -float(source[i])
            return ProviderResult([out])

        return PreparedComposite(submit)

    composite = sw.CompositeProvider(lambda c: [NEG], lambda c, i: (Defined,), prepare)
    sw.register_carrier_definition(Defined, sw.CarrierDefinition(ListStorage().provider(), composite=composite))
    defined = Defined(2)
    assert generated == [], "a definition-backed instance finalized at construction"
    assert defined.operation_capabilities() == (NEG,)
    legacy = mirror_class("LegacyBeside")(sw.CPU.from_values([4.0, 5.0]), [NEG])
    assert (-sw.Tensor.compact(legacy, (2,))).to_list() == [-4.0, -5.0]
    t = sw.Tensor.compact(defined, (2,))
    t[0], t[1] = 1.0, 2.0
    assert (-t).to_list() == [-1.0, -2.0]


def test_a_legacy_dependent_carrier_moves_and_composes() -> None:
    cls = mirror_class("Composed")
    t = sw.Tensor.compact(cls(sw.CPU.from_values([1.0, 2.0]), [NEG]), (2,))
    moved = sw.move(t, sw.CPU(2))
    assert moved.to_list() == [1.0, 2.0] and t.carrier.is_released()
    back = sw.move(moved, cls(sw.CPU(2), [NEG]))
    assert back.to_list() == [1.0, 2.0] and type(back.carrier) is cls
    hierarchy = sw.Evictable(cls(sw.CPU.from_values([3.0, 4.0]), [NEG]), sw.CPU(2))
    hierarchy.evict()
    hierarchy.promote()
    assert sw.Tensor.compact(hierarchy, (2,)).to_list() == [3.0, 4.0]
    with pytest.raises(TypeError, match="operation_class must be a MoveOperation subclass"):
        register_move_operation(cls, sw.CPU, int)
