"""A Python residency policy sees everything the core passes it: every purpose of a plan
("operation", "backward", and "read" / "write" through the facet's `plan_residency`) and a
`TileProgress` after every work item of a tiled operation; an exception in either
propagates as the same object with nothing published."""

from typing import List, Optional, Tuple

import pytest

import strideweave as sw

Tiles = Tuple[Tuple[int, ...], ...]
Report = Tuple[str, int, int, int, float]


class Observing(sw.ResidencyPolicy):
    """Plans nothing, bounds the primary tier at `capacity` tiles and records every call;
    `fail_on` names an operation whose `fail_at`-th progress report raises."""

    def __init__(self, capacity: Optional[int] = 2, fail_on: str = "", fail_at: int = 0) -> None:
        self.capacity = capacity
        self.fail_on = fail_on
        self.fail_at = fail_at
        self.plans: List[Tuple[Tiles, str]] = []
        self.reports: List[Report] = []
        self.records: List[sw.TileProgress] = []
        self.raised: List[BaseException] = []

    def plan(self, required: Tiles, purpose: str) -> sw.ResidencyPlan:
        self.plans.append((required, purpose))
        return sw.ResidencyPlan()

    def primary_capacity(self) -> Optional[int]:
        return self.capacity

    def on_progress(self, progress: sw.TileProgress) -> None:
        self.records.append(progress)
        self.reports.append(
            (progress.operation, progress.completed, progress.total, progress.staged_tiles, progress.fraction)
        )
        if progress.operation == self.fail_on and progress.completed == self.fail_at:
            error = RuntimeError(f"stop {progress.operation} at item {progress.completed}")
            self.raised.append(error)
            raise error


def streamed(policy: sw.ResidencyPolicy) -> sw.TiledEvictable:
    """A 4x4 tensor's carrier (values 0..16) in four 4x1 tiles on a FileBacked secondary
    tier: with a capacity below four tiles, operations stream it tile by tile."""
    secondary = sw.FileBacked(dtype=sw.DType.Float32)
    sw.move(sw.Tensor.compact(sw.CPU.from_values([float(i) for i in range(16)]), (16,)), secondary)
    return sw.TiledEvictable(sw.CPU(0), secondary, [1, 4], [4, 1], residency_policy=policy)


def ones(n: int) -> sw.Tensor:
    return sw.Tensor.compact(sw.CPU.from_values([1.0] * n), (n,))


def locations(carrier: sw.TiledEvictable) -> List[str]:
    return [carrier.tile_state([0, k]).location for k in range(4)]


def test_on_progress_receives_every_work_item_of_a_streamed_operation_and_its_backward() -> None:
    policy = Observing()
    carrier = streamed(policy)
    x = sw.Tensor.compact(carrier, (4, 4))
    x.requires_grad = True
    y = sw.reduce_sum(x)
    assert y.to_list() == [24.0, 28.0, 32.0, 36.0]
    assert policy.reports == [
        ("reduce_sum", 1, 4, 1, 0.25),
        ("reduce_sum", 2, 4, 2, 0.5),
        ("reduce_sum", 3, 4, 3, 0.75),
        ("reduce_sum", 4, 4, 4, 1.0),
    ]
    assert policy.plans == [(((0, 0), (0, 1), (0, 2), (0, 3)), "operation")]
    last = policy.records[-1]
    # A capacity of 2 tiles is 8 slots: one staged 4-slot tile and the 4-slot partial output
    # block the forward holds fill it, so the core prefetches one item at a time.
    assert (last.staged_slots, last.prefetch_depth) == (16, 1)
    assert last.staged_peak >= 1 and last.allocated_buffers >= 1
    del policy.reports[:]
    y.backward(ones(4))
    assert [r[:3] for r in policy.reports] == [("reduce_sum.backward", k, 4) for k in range(1, 5)]
    # The saved operand's streamed plan, then the plan of the gradient's fresh carrier.
    assert policy.plans[1:] == [(((0, 0), (0, 1), (0, 2), (0, 3)), "backward")] * 2
    assert x.grad is not None and x.grad.to_list() == [[1.0] * 4] * 4


def test_a_tensor_within_the_capacity_reports_its_one_whole_call() -> None:
    policy = Observing(capacity=None)
    x = sw.Tensor.compact(streamed(policy), (4, 4))
    assert sw.reduce_sum(x).to_list() == [24.0, 28.0, 32.0, 36.0]
    assert [r[:3] for r in policy.reports] == [("reduce_sum", 1, 1)]


def test_progress_records_are_immutable_values() -> None:
    policy = Observing()
    sw.reduce_sum(sw.Tensor.compact(streamed(policy), (4, 4)))
    first = policy.records[0]
    with pytest.raises(AttributeError):
        first.completed = 9  # type: ignore[misc]
    assert first == first and first != policy.records[1]
    assert repr(first).startswith("TileProgress('reduce_sum', 1/4, staged_tiles=1")


@pytest.mark.parametrize("at", [1, 3, 4])
def test_an_exception_in_on_progress_stops_the_operation_and_publishes_nothing(at: int) -> None:
    policy = Observing(fail_on="reduce_sum", fail_at=at)
    carrier = streamed(policy)
    x = sw.Tensor.compact(carrier, (4, 4))
    x.requires_grad = True
    with pytest.raises(RuntimeError, match=f"stop reduce_sum at item {at}") as caught:
        sw.reduce_sum(x)
    assert caught.value is policy.raised[0]
    assert len(policy.reports) == at, "no item after the failing report"
    assert carrier.version == 0 and not carrier.is_released()
    assert locations(carrier) == ["secondary"] * 4
    assert x.grad is None
    # The carrier is intact: the same operation runs once the observer stops failing.
    policy.fail_on = ""
    assert sw.reduce_sum(x).to_list() == [24.0, 28.0, 32.0, 36.0]


def test_an_exception_in_on_progress_during_backward_leaves_no_gradient() -> None:
    policy = Observing(fail_on="reduce_sum.backward", fail_at=2)
    carrier = streamed(policy)
    x = sw.Tensor.compact(carrier, (4, 4))
    x.requires_grad = True
    y = sw.reduce_sum(x)
    with pytest.raises(RuntimeError, match="stop reduce_sum.backward at item 2") as caught:
        y.backward(ones(4), retain_graph=True)
    assert caught.value is policy.raised[0]
    assert x.grad is None
    assert carrier.version == 0 and locations(carrier) == ["secondary"] * 4
    policy.fail_on = ""
    y.backward(ones(4))
    assert x.grad is not None and x.grad.to_list() == [[1.0] * 4] * 4


class Chatty(Observing):
    def on_progress(self, progress: sw.TileProgress) -> None:
        return 3  # type: ignore[return-value]


def test_on_progress_must_return_none() -> None:
    x = sw.Tensor.compact(streamed(Chatty()), (4, 4))
    with pytest.raises(TypeError, match="^ResidencyPolicy on_progress must return None, got int$"):
        sw.reduce_sum(x)


def test_the_base_policy_ignores_progress() -> None:
    class OnlyCapacity(sw.ResidencyPolicy):
        def primary_capacity(self) -> int:
            return 1

    x = sw.Tensor.compact(streamed(OnlyCapacity()), (4, 4))
    assert sw.reduce_sum(x).to_list() == [24.0, 28.0, 32.0, 36.0]
    assert sw.ResidencyPolicy().on_progress(None) is None  # type: ignore[arg-type,func-returns-value]


@pytest.mark.parametrize("purpose", ["read", "write"])
def test_read_and_write_plans_reach_the_python_policy(purpose: str) -> None:
    class Suggesting(Observing):
        def plan(self, required: Tiles, purpose: str) -> sw.ResidencyPlan:
            self.plans.append((required, purpose))
            return sw.ResidencyPlan(promote=[(0, 3)], evict=[(0, 0)])

    policy = Suggesting()
    carrier = streamed(policy)
    facet = carrier.require_facet(sw.TiledResidencyFacet)
    plan = facet.plan_residency([(0, 1), (0, 2)], purpose)
    assert policy.plans == [(((0, 1), (0, 2)), purpose)]
    # Corrected: every required non-resident tile is promoted, with the policy's other valid
    # suggestion; a tile not on the primary tier cannot be evicted.
    assert (plan.promote, plan.retain, plan.evict) == (((0, 1), (0, 2), (0, 3)), (), ())
    assert locations(carrier) == ["secondary"] * 4, "planning moves nothing"
    facet.promote_async(plan.promote).wait()
    assert locations(carrier) == ["secondary", "primary", "primary", "primary"]


def test_plan_residency_checks_its_purpose_and_propagates_the_policys_exception() -> None:
    class Refusing(Observing):
        def plan(self, required: Tiles, purpose: str) -> sw.ResidencyPlan:
            error = KeyError(purpose)
            self.raised.append(error)
            raise error

    policy = Refusing()
    facet = streamed(policy).require_facet(sw.TiledResidencyFacet)
    with pytest.raises(KeyError) as caught:
        facet.plan_residency([(0, 0)], "write")
    assert caught.value is policy.raised[0]
    with pytest.raises(ValueError, match="^plan_residency purpose must be 'read', 'write', 'operation' or 'backward', got 'scan'$"):
        facet.plan_residency([(0, 0)], "scan")
    with pytest.raises(TypeError, match="^plan_residency purpose must be a str, got int$"):
        facet.plan_residency([(0, 0)], 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^tile coordinate \(0, 9\) is outside the TiledEvictable grid \[1, 4\]$"):
        facet.plan_residency([(0, 9)], "read")
    assert len(policy.raised) == 1, "refused before the policy is asked"
