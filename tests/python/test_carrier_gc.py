"""A carrier written in Python and its core carrier refer to each other; Python's garbage
collector sees that cycle and frees the carrier once nothing else holds it — no `release()`
needed. The storage provider is not called when that happens: the core drops the state of a
carrier that was never released without a callback, so `release` runs only for an explicit
`release()` (or a move, which releases its source)."""

import gc
import weakref
from typing import Any, List

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import F32, ListStorage, RingInterface, elementwise, neg_plan, new_class


class CountingStorage(ListStorage):
    """List slots that count the release callbacks and the instances `allocate` saw."""

    def __init__(self) -> None:
        super().__init__()
        self.releases: List[int] = []
        self.allocated: List[int] = []

    def allocate(self, carrier: Any, slots: int) -> None:
        self.allocated.append(id(carrier))
        super().allocate(carrier, slots)

    def release(self, carrier: Any) -> None:
        self.releases.append(id(carrier))
        super().release(carrier)


def registered(name: str, kernels: Any = None) -> Any:
    storage = CountingStorage()
    cls = new_class(name)
    sw.register_carrier_definition(cls, sw.CarrierDefinition(storage.provider(), kernels=kernels))
    return cls, storage


@pytest.fixture(autouse=True)
def collector_on() -> Any:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_an_unreferenced_python_carrier_is_collected_without_release() -> None:
    cls, storage = registered("CollectedCarrier")
    carrier = cls(3, dtype=F32)
    carrier.label = "mine"
    carrier.set_value(1, 2.5)
    alive = weakref.ref(carrier)
    del carrier
    gc.collect()
    assert alive() is None, "the cycle through the core carrier was collected"
    assert storage.releases == [], "collection calls no storage callback"


def test_a_carrier_that_refers_to_itself_is_collected_too() -> None:
    cls, _ = registered("SelfReferringCarrier")
    carrier = cls(2, dtype=F32)
    carrier.me = carrier
    carrier.friends = [carrier, {"again": carrier}]
    alive = weakref.ref(carrier)
    del carrier
    gc.collect()
    assert alive() is None


def test_a_tensor_keeps_its_carrier_and_the_carrier_works_after_a_collection() -> None:
    cls, storage = registered("TensorHeldCarrier")
    carrier = cls(2, dtype=F32)
    alive = weakref.ref(carrier)
    t = sw.Tensor.compact(carrier, (2,))
    t[0] = 4.0
    del carrier
    gc.collect()
    held = alive()
    assert held is not None, "the tensor's handle keeps the carrier and its object"
    assert t.carrier is held and held.slots == [4.0, 0.0]
    t[1] = 5.0
    assert t.to_list() == [4.0, 5.0] and t.version == 2
    del held, t
    gc.collect()
    assert alive() is None, "freed once the last tensor is gone"
    assert storage.releases == []


def test_an_explicitly_released_carrier_is_collected_and_released_once() -> None:
    cls, storage = registered("ReleasedThenCollectedCarrier")
    carrier = cls(2, dtype=F32)
    key = id(carrier)
    carrier.release()
    alive = weakref.ref(carrier)
    del carrier
    gc.collect()
    assert alive() is None
    assert storage.releases == [key], "release ran once, for the explicit release()"


def test_kernel_results_and_operands_are_collected() -> None:
    interface = RingInterface()
    pattern = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "neg.py", elementwise(lambda a: -a))
    cls, storage = registered("CollectedResultsCarrier", sw.KernelProvider(interface, [pattern]))
    x = sw.Tensor.compact(cls(2, dtype=F32), (2,))
    x[0], x[1] = 1.0, 2.0
    y = sw.neg(x)
    result = weakref.ref(y.carrier)
    operand = weakref.ref(x.carrier)
    assert y.to_list() == [-1.0, -2.0]
    del x, y
    gc.collect()
    assert result() is None and operand() is None
    assert storage.releases == []


def test_a_failed_construction_leaves_nothing_alive() -> None:
    raised: List[BaseException] = []

    def failing_allocate(carrier: Any, slots: int) -> None:
        error = MemoryError("the device is full")
        raised.append(error)
        raise error

    base = ListStorage()
    provider = sw.StorageProvider(
        base.supports_dtype, base.physical_size, failing_allocate, base.release, base.read, base.write
    )
    cls = new_class("FailedConstructionCarrier")
    sw.register_carrier_definition(cls, sw.CarrierDefinition(provider))
    instance = cls.__new__(cls)
    alive = weakref.ref(instance)
    with pytest.raises(MemoryError) as caught:
        instance.__init__(2, dtype=F32)
    assert caught.value is raised[0]
    del instance, caught
    raised.clear()
    gc.collect()
    assert alive() is None


class BackReferring(sw.ResidencyPolicy):
    """A residency policy that keeps its TiledEvictable (`self.carrier`) and records the
    tiles each plan was asked for."""

    carrier: Any

    def __init__(self) -> None:
        self.asked: List[Any] = []

    def plan(self, required: Any, purpose: str) -> sw.ResidencyPlan:
        self.asked.append((required, purpose, self.carrier.size()))
        return sw.ResidencyPlan(promote=required)


def tiled_with(policy: sw.ResidencyPolicy) -> sw.TiledEvictable:
    """A 2x2 tensor's carrier (values 1..4) in two 2x1 tiles on the secondary tier."""
    secondary = sw.CPU.from_values([1.0, 2.0, 3.0, 4.0])
    return sw.TiledEvictable(sw.CPU(0), secondary, [1, 2], [2, 1], residency_policy=policy)


def test_a_residency_policy_referring_back_to_its_tiled_evictable_is_collected() -> None:
    policy = BackReferring()
    carrier = tiled_with(policy)
    policy.carrier = carrier
    assert sw.reduce_sum(sw.Tensor.compact(carrier, (2, 2))).to_list() == [4.0, 6.0]
    assert policy.asked == [(((0, 0), (0, 1)), "operation", 4)]
    carrier_alive, policy_alive = weakref.ref(carrier), weakref.ref(policy)
    del carrier, policy
    gc.collect()
    assert carrier_alive() is None and policy_alive() is None


def test_a_tensor_keeps_the_cycle_alive_and_the_policy_still_plans_after_a_collection() -> None:
    policy = BackReferring()
    carrier = tiled_with(policy)
    policy.carrier = carrier
    t = sw.Tensor.compact(carrier, (2, 2))
    carrier_alive, policy_alive = weakref.ref(carrier), weakref.ref(policy)
    del carrier, policy
    gc.collect()
    assert carrier_alive() is not None and policy_alive() is not None
    assert t.carrier is carrier_alive()
    assert sw.reduce_sum(t).to_list() == [4.0, 6.0]
    assert [purpose for _, purpose, _ in policy_alive().asked] == ["operation"]  # type: ignore[union-attr]
    del t
    gc.collect()
    assert carrier_alive() is None and policy_alive() is None


def test_a_carrier_object_made_again_for_the_core_carrier_reports_the_policy_too() -> None:
    policy = BackReferring()
    t = sw.Tensor.compact(tiled_with(policy), (2, 2))
    first = weakref.ref(t.carrier)
    gc.collect()
    assert first() is None, "the first object died while the tensor kept the core carrier"
    policy.carrier = t.carrier
    again, policy_alive = weakref.ref(policy.carrier), weakref.ref(policy)
    del t, policy
    gc.collect()
    assert again() is None and policy_alive() is None
