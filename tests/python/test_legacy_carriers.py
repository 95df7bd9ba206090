"""Definition-free carrier classes written in Python (seed: "Definition-free carriers retain
the existing extension path", scenarios "Run a legacy custom carrier" and "Reject mixed
authority"): the storage hooks, the dispatch hook, manual capability declaration and movement
registration, with failures injected in each hook leaving nothing published, and both
authoring paths in one process."""

import threading
from typing import Any, List, Optional

import pytest

import strideweave as sw
from strideweave.carriers.extension import ProviderResult, PreparedKernel
from strideweave.carriers.move import (
    ElementwiseMoveOperation,
    MoveOperation,
    dispatch_move,
    register_move_operation,
    unregister_move_operation,
)
from strideweave.carriers.operation_capability import (
    capabilities_for_carrier_class,
    register_operation_capabilities,
    supports_operation_plan,
    unsupported_plan_reason,
)
from strideweave.carriers.operation_policy import resolve_operation_plan
from strideweave.operation import Operation

from authoring_helpers import ListStorage, RingInterface

F32 = sw.DType.Float32
NEG = sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))
ADD = sw.OperationCapability.from_plan(resolve_operation_plan("add", F32, F32))


class Faults:
    """Where a legacy carrier's hooks raise: the hook names in `at`."""

    def __init__(self) -> None:
        self.at: List[str] = []

    def check(self, hook: str) -> None:
        if hook in self.at:
            raise OSError(f"injected in {hook}")


def legacy_class(name: str, faults: Optional[Faults] = None, dispatch: bool = True) -> Any:
    """A fresh definition-free class keeping Float32 values in a Python list."""
    faults = faults or Faults()

    class Legacy(sw.Carrier):
        released: List[str] = []

        def __init__(self, values: List[float], *, mutable: bool = True) -> None:
            self.values = [float(v) for v in values]
            self.mutable = mutable
            super().__init__()

        def size(self) -> int:
            return len(self.values)

        def dtype(self) -> sw.DType:
            return F32

        def get_value(self, index: int) -> float:
            faults.check("get_value")
            return self.values[index]

        def set_value(self, index: int, value: float) -> None:
            faults.check("set_value")
            self.values[index] = float(value)

        def _is_mutable(self) -> bool:
            return self.mutable

        def new_like(self, values: List[float], *, mutable: bool = True, dtype: Any = None) -> "Legacy":
            faults.check("new_like")
            return type(self)(values, mutable=mutable)

        def allocate_like(self, size: int, *, mutable: bool = True, dtype: Any = None, empty: bool = False) -> "Legacy":
            faults.check("allocate_like")
            return type(self)([0.0] * size, mutable=mutable)

        def scatter(self, to_scatter: Any, scatter_onto: Any, mapping: Any, mapping_offset: int = 0) -> None:
            raise NotImplementedError("the framework scatters through set_value")

        def _release(self) -> None:
            faults.check("_release")
            Legacy.released.append(name)
            self.values = []

        def _dispatch_op(self, operation_name: str) -> Operation:
            faults.check("_dispatch_op")
            if dispatch and operation_name in ("neg", "add"):
                return Elementwise(operation_name, faults)
            raise NotImplementedError(f"{name} does not support {operation_name!r}")

    Legacy.__name__ = Legacy.__qualname__ = name
    return Legacy


class Elementwise(Operation):
    """`neg` or `add` computed on the legacy carrier through its own factory."""

    def __init__(self, operation_name: str, faults: Faults) -> None:
        self.operation_name = operation_name
        self.faults = faults

    def _forward(self, *operands: sw.Tensor) -> sw.Tensor:
        self.faults.check("_forward")
        first = operands[0]
        out = sw.Tensor(first.carrier.allocate_like(first.size()), 0, first.layout)
        for i in range(first.size()):
            values = [float(t[i]) for t in operands]  # type: ignore[arg-type]
            out[i] = -values[0] if self.operation_name == "neg" else sum(values)
        return out


def compact(cls: Any, values: List[float]) -> sw.Tensor:
    return sw.Tensor.compact(cls(values), (len(values),))


def test_the_storage_hooks_are_the_carriers_methods_and_the_framework_owns_the_version() -> None:
    cls = legacy_class("HookedCarrier")
    carrier = cls([1.0, 2.0])
    t = sw.Tensor.compact(carrier, (2,))
    assert t.to_list() == [1.0, 2.0] and carrier.version == 0
    t[1] = 5.0
    assert carrier.values == [1.0, 5.0] and carrier.version == 1 and t.version == 1
    frozen = cls([1.0], mutable=False)
    with pytest.raises(RuntimeError):
        sw.Tensor.compact(frozen, (1,))[0] = 2.0
    assert frozen.values == [1.0] and frozen.version == 0
    assert frozen.supports_storage_dtype(F32) and not frozen.supports_storage_dtype(sw.DType.Int32)
    carrier.release()
    assert cls.released == ["HookedCarrier"] and carrier.values == []


def test_a_failing_storage_hook_propagates_as_itself_and_publishes_nothing() -> None:
    faults = Faults()
    cls = legacy_class("FailingStorageCarrier", faults)
    t = compact(cls, [1.0, 2.0])
    faults.at = ["set_value"]
    with pytest.raises(OSError, match="injected in set_value"):
        t[0] = 9.0
    assert t.carrier.values == [1.0, 2.0] and t.version == 0
    faults.at = ["get_value"]
    with pytest.raises(OSError, match="injected in get_value"):
        t.to_list()
    faults.at = ["_release"]
    with pytest.raises(OSError, match="injected in _release"):
        t.carrier.release()
    faults.at = []
    assert t.to_list() == [1.0, 2.0], "a failed release leaves the carrier live"


def test_dispatch_runs_the_hooks_operation_through_the_declared_capabilities() -> None:
    cls = legacy_class("DispatchingCarrier")
    register_operation_capabilities(cls, [NEG, ADD])
    x, y = compact(cls, [1.0, -2.0]), compact(cls, [10.0, 20.0])
    assert sw.neg(x).to_list() == [-1.0, 2.0]
    total = sw.add(x, y)
    assert total.to_list() == [11.0, 18.0] and type(total.carrier) is cls
    operation = x.carrier.dispatch_op("neg")
    assert isinstance(operation, Elementwise)
    assert operation._operation_name == "neg" and operation._dispatch_carrier_class is cls
    assert operation.forward(x).to_list() == [-1.0, 2.0]
    with pytest.raises(NotImplementedError, match="DispatchingCarrier does not support 'relu'"):
        x.carrier.dispatch_op("relu")
    with pytest.raises(sw.UnsupportedOperationPlan, match="DispatchingCarrier declares no operation-plan capability for 'relu'"):
        sw.relu(x)
    assert capabilities_for_carrier_class(cls) == x.carrier.operation_capabilities()
    assert [c.operation for c in capabilities_for_carrier_class(cls, "add")] == ["add"]
    assert supports_operation_plan(cls, NEG) and unsupported_plan_reason(cls, NEG) is None


def test_a_dispatch_hook_must_return_a_fresh_operation() -> None:
    class Cached(legacy_class("CachingCarrier")):  # type: ignore[misc]
        cached = Elementwise("neg", Faults())

        def _dispatch_op(self, operation_name: str) -> Any:
            return self.cached if operation_name == "neg" else 42

    carrier = Cached([1.0])
    carrier.dispatch_op("neg")
    with pytest.raises(TypeError, match="must return a fresh Operation instance"):
        carrier.dispatch_op("neg")
    with pytest.raises(TypeError, match="_dispatch_op must return an Operation, got int"):
        carrier.dispatch_op("abs")


@pytest.mark.parametrize("hook", ["_dispatch_op", "_forward", "allocate_like"])
def test_a_failing_dispatch_step_publishes_nothing(hook: str) -> None:
    faults = Faults()
    cls = legacy_class(f"Failing{hook.strip('_').title()}Carrier", faults)
    register_operation_capabilities(cls, [NEG])
    x = compact(cls, [3.0])
    x.requires_grad = True
    faults.at = [hook]
    with pytest.raises(OSError, match=f"injected in {hook}"):
        sw.neg(x)
    faults.at = []
    assert x.version == 0 and x.carrier.values == [3.0] and x.grad is None
    assert sw.neg(x).to_list() == [-3.0]


def test_a_factory_must_make_a_fresh_carrier_of_the_asked_extent() -> None:
    class Short(legacy_class("ShortCarrier")):  # type: ignore[misc]
        def allocate_like(self, size: int, **options: Any) -> Any:
            return type(self)([0.0] * (size - 1))

    hierarchy = sw.Evictable(Short([1.0, 2.0]), sw.CPU(2))
    t = sw.Tensor.compact(hierarchy, (2,))
    hierarchy.evict()
    # Promoting makes a fresh primary tier through the legacy class's own allocate_like.
    with pytest.raises(sw.ProviderContractError, match="Short.allocate_like was asked for a fresh mutable Float32 carrier of 2 slots but made a carrier of 1 slots"):
        hierarchy.promote()
    assert hierarchy.is_evicted(), "a refused promotion leaves the hierarchy as it was"
    assert hierarchy.secondary.get_value(0) == 1.0 and hierarchy.secondary.get_value(1) == 2.0
    with pytest.raises(RuntimeError, match="evicted"):
        t.to_list()


def test_capabilities_are_declared_once_before_the_class_is_observed() -> None:
    cls = legacy_class("DeclaredOnceCarrier")
    register_operation_capabilities(cls, [NEG])
    with pytest.raises(TypeError):
        register_operation_capabilities(cls, [ADD])
    late = legacy_class("LateCarrier")
    late([1.0])
    with pytest.raises(TypeError, match="LateCarrier"):
        register_operation_capabilities(late, [NEG])
    assert capabilities_for_carrier_class(late) == ()


class Doubling(MoveOperation):
    """Moves by writing twice each value."""

    fail = False

    def _copy(self, tensor: sw.Tensor, destination: sw.Carrier, output: Any, element_count: int) -> None:
        for i in range(tensor.size()):
            output[i] = 2 * float(tensor[i])  # type: ignore[arg-type]
            if Doubling.fail:
                raise OSError("injected in _copy")


def test_a_registered_move_operation_moves_the_exact_pair() -> None:
    source, target = legacy_class("MoveSource"), legacy_class("MoveTarget")
    assert dispatch_move(source, target) is ElementwiseMoveOperation
    register_move_operation(source, target, Doubling)
    assert dispatch_move(source, target) is Doubling
    with pytest.raises(ValueError, match="already registered"):
        register_move_operation(source, target, Doubling)
    moved = sw.move(compact(source, [1.0, 2.5]), target([0.0, 0.0]))
    assert moved.to_list() == [2.0, 5.0] and moved.carrier.version == 1
    back = sw.move(moved, source([0.0, 0.0]))
    assert back.to_list() == [2.0, 5.0], "the reverse pair moves elementwise"
    assert unregister_move_operation(source, target) is Doubling
    assert dispatch_move(source, target) is ElementwiseMoveOperation
    with pytest.raises(KeyError):
        unregister_move_operation(source, target)
    with pytest.raises(TypeError, match="operation_class must be a MoveOperation subclass, got int"):
        register_move_operation(source, target, int)


def test_a_failing_move_operation_leaves_both_carriers_as_they_were() -> None:
    source, target = legacy_class("FailingMoveSource"), legacy_class("FailingMoveTarget")
    register_move_operation(source, target, Doubling)
    t = compact(source, [1.0, 2.0])
    destination = target([7.0, 8.0])
    Doubling.fail = True
    try:
        with pytest.raises(OSError, match="injected in _copy"):
            sw.move(t, destination)
    finally:
        Doubling.fail = False
    assert not t.carrier.is_released() and t.to_list() == [1.0, 2.0]
    assert destination.values == [7.0, 8.0] and destination.version == 0
    handle = sw.move_async(t, destination)
    assert handle.wait().to_list() == [2.0, 4.0] and t.carrier.is_released()


def test_evictable_and_tiled_evictable_compose_legacy_carriers() -> None:
    cls = legacy_class("TierCarrier")
    hierarchy = sw.Evictable(cls([1.0, 2.0, 3.0, 4.0]), sw.CPU(4))
    t = sw.Tensor.compact(hierarchy, (4,))
    assert t.to_list() == [1.0, 2.0, 3.0, 4.0]
    hierarchy.evict()
    assert hierarchy.is_evicted() and hierarchy.secondary.get_value(3) == 4.0
    hierarchy.promote()
    assert t.to_list() == [1.0, 2.0, 3.0, 4.0] and type(hierarchy.primary) is cls
    tiled = sw.TiledEvictable(sw.CPU(0), cls([1.0, 2.0, 3.0, 4.0]), [2], [2])
    tiled_tensor = sw.Tensor.compact(tiled, (4,))
    assert (tiled_tensor + tiled_tensor).to_list() == [2.0, 4.0, 6.0, 8.0]
    assert tiled.tile_state([1]).location == "secondary"


def test_a_definition_backed_class_refuses_manual_authority_without_changing_its_answer() -> None:
    defined = type("DefinedCarrier", (sw.Carrier,), {})
    pattern = sw.KernelPattern(
        sw.operation_definition("neg"), [NEG], "neg", lambda invocation, interface: PreparedKernel(interface, lambda: ProviderResult([invocation.allocate_result(0)]))
    )
    sw.register_carrier_definition(defined, sw.CarrierDefinition(ListStorage().provider(), kernels=sw.KernelProvider(RingInterface(), [pattern])))
    before = capabilities_for_carrier_class(defined)
    with pytest.raises(TypeError, match="definition-backed"):
        register_operation_capabilities(defined, [ADD])
    legacy = legacy_class("PairedLegacy")
    for pair in [(defined, legacy), (legacy, defined)]:
        with pytest.raises(RuntimeError, match="TransferRoute"):
            register_move_operation(*pair, Doubling)
    assert capabilities_for_carrier_class(defined) == before == (NEG,)


def test_a_definition_cannot_be_registered_for_a_class_already_observed() -> None:
    storage = ListStorage().provider()
    constructed = legacy_class("ConstructedFirst")
    constructed([1.0])
    queried = legacy_class("QueriedFirst")
    capabilities_for_carrier_class(queried)
    refused = type("RefusedFirst", (sw.Carrier,), {})
    with pytest.raises(TypeError, match="has no carrier definition"):
        refused(2, dtype=F32)
    for cls in (constructed, queried, refused):
        with pytest.raises(TypeError, match="already observed"):
            sw.register_carrier_definition(cls, sw.CarrierDefinition(storage))


def test_both_paths_race_for_one_class_and_exactly_one_wins() -> None:
    for round in range(20):
        cls = type(f"Contested{round}", (sw.Carrier,), {})
        outcomes: List[str] = []
        barrier = threading.Barrier(2)

        def define() -> None:
            barrier.wait()
            try:
                sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider()))
                outcomes.append("definition")
            except TypeError:
                outcomes.append("refused")

        def declare() -> None:
            barrier.wait()
            try:
                register_operation_capabilities(cls, [NEG])
                outcomes.append("declaration")
            except TypeError:
                outcomes.append("refused")

        threads = [threading.Thread(target=define), threading.Thread(target=declare)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) in (["definition", "refused"], ["declaration", "refused"]), outcomes


def test_both_paths_run_the_same_operations_in_one_process() -> None:
    legacy = legacy_class("SideBySideLegacy")
    register_operation_capabilities(legacy, [NEG])
    defined = type("SideBySideDefined", (sw.Carrier,), {})

    def prepare(invocation: Any, interface: Any) -> Any:
        (x,) = invocation.operands

        def submit() -> Any:
            out = invocation.allocate_result(0)
            for i, v in enumerate(x.carrier.slots):
                out.carrier.slots[i] = -v
            return ProviderResult([out])

        return PreparedKernel(interface, submit)

    pattern = sw.KernelPattern(sw.operation_definition("neg"), [NEG], "neg", prepare)
    sw.register_carrier_definition(defined, sw.CarrierDefinition(ListStorage().provider(), kernels=sw.KernelProvider(RingInterface(), [pattern])))
    on_defined = sw.Tensor.compact(defined(2, dtype=F32), (2,))
    on_defined[0], on_defined[1] = 1.0, 2.0
    assert sw.neg(compact(legacy, [1.0, 2.0])).to_list() == sw.neg(on_defined).to_list() == [-1.0, -2.0]


def test_a_class_without_a_dispatch_hook_runs_no_operation() -> None:
    class StorageOnly(sw.Carrier):
        def __init__(self) -> None:
            super().__init__()

        def size(self) -> int:
            return 1

        def dtype(self) -> sw.DType:
            return F32

        def get_value(self, index: int) -> float:
            return 0.5

    carrier = StorageOnly()
    with pytest.raises(NotImplementedError, match="StorageOnly does not support operation 'neg': it defines no _dispatch_op"):
        carrier.dispatch_op("neg")
    assert sw.Tensor.compact(carrier, (1,)).to_list() == [0.5]


def test_carrier_indexing_reads_and_writes_slots_and_refuses_out_of_range() -> None:
    carrier = sw.CPU.from_values([1.0, 2.0])
    carrier[1] = 5.0
    assert (carrier[0], carrier[1], carrier.version) == (1.0, 5.0, 1)
    for index in (-1, 2):
        with pytest.raises(IndexError, match="out of range"):
            carrier[index]
    with pytest.raises(TypeError):
        carrier["0"]  # type: ignore[index]
    frozen = sw.CPU.from_values([1.0], mutable=False)
    with pytest.raises(RuntimeError):
        frozen[0] = 2.0
    assert frozen.version == 0
