"""Residency policies written in Python: TiledEvictable calls `plan`, the plan takes effect,
an exception in it propagates as the same object with nothing published."""

from typing import List, Tuple

import pytest

import strideweave as sw

Tiles = Tuple[Tuple[int, ...], ...]


def tiled(policy: sw.ResidencyPolicy) -> sw.TiledEvictable:
    """A 4x2 tensor's carrier (values 0..8) in two 4x1 tiles on the secondary tier."""
    secondary = sw.CPU.from_values([float(i) for i in range(8)])
    return sw.TiledEvictable(sw.CPU(0), secondary, [1, 2], [4, 1], residency_policy=policy)


class Recording(sw.ResidencyPolicy):
    """Promotes every required tile and records each call."""

    def __init__(self) -> None:
        self.calls: List[Tuple[Tiles, str]] = []

    def plan(self, required: Tiles, purpose: str) -> sw.ResidencyPlan:
        self.calls.append((required, purpose))
        return sw.ResidencyPlan(promote=required)


def test_a_python_policy_is_asked_for_every_tiled_operation_and_its_plan_runs() -> None:
    policy = Recording()
    carrier = tiled(policy)
    x = sw.Tensor.compact(carrier, (4, 2))
    assert sw.reduce_sum(x).to_list() == [4.0, 6.0, 8.0, 10.0]
    assert policy.calls == [(((0, 0), (0, 1)), "operation")]
    # The policy asked to promote what the operation streamed: both tiles are now primary.
    for tile in [(0, 0), (0, 1)]:
        assert carrier.tile_state(list(tile)).location == "primary"


def test_the_base_policy_plans_nothing() -> None:
    carrier = tiled(sw.ResidencyPolicy())
    x = sw.Tensor.compact(carrier, (4, 2))
    assert sw.reduce_sum(x).to_list() == [4.0, 6.0, 8.0, 10.0]
    assert carrier.tile_state([0, 1]).location == "secondary"
    plan = sw.ResidencyPolicy().plan((), "read")
    assert (plan.promote, plan.retain, plan.evict) == ((), (), ())


class Failing(sw.ResidencyPolicy):
    def __init__(self) -> None:
        self.raised: List[BaseException] = []

    def plan(self, required: Tiles, purpose: str) -> sw.ResidencyPlan:
        error = LookupError(f"no plan for {len(required)} tiles")
        self.raised.append(error)
        raise error


def test_an_exception_in_plan_propagates_as_the_same_object_and_publishes_nothing() -> None:
    policy = Failing()
    carrier = tiled(policy)
    x = sw.Tensor.compact(carrier, (4, 2))
    x.requires_grad = True
    with pytest.raises(LookupError, match="no plan for 2 tiles") as caught:
        sw.reduce_sum(x)
    assert caught.value is policy.raised[0]
    assert carrier.version == 0
    assert carrier.tile_state([0, 0]).location == "secondary"
    assert carrier.tile_state([0, 1]).location == "secondary"
    assert x.grad is None


class WrongAnswer(sw.ResidencyPolicy):
    def plan(self, required: Tiles, purpose: str) -> sw.ResidencyPlan:
        return 3  # type: ignore[return-value]


def test_a_plan_that_is_not_a_residency_plan_is_a_type_error() -> None:
    x = sw.Tensor.compact(tiled(WrongAnswer()), (4, 2))
    with pytest.raises(TypeError, match="ResidencyPolicy plan must return a ResidencyPlan, got int"):
        sw.reduce_sum(x)


class Bounded(Recording):
    def primary_capacity(self) -> int:
        return 1


def test_primary_capacity_is_read_and_results_stay_correct() -> None:
    carrier = tiled(Bounded())
    x = sw.Tensor.compact(carrier, (4, 2))
    assert sw.reduce_sum(x).to_list() == [4.0, 6.0, 8.0, 10.0]


class BadCapacity(sw.ResidencyPolicy):
    def primary_capacity(self) -> object:
        return "many"


def test_policy_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match=r"^TiledEvictable residency_policy must be a ResidencyPolicy or have a callable plan\(required, purpose\), got object$"):
        sw.TiledEvictable(sw.CPU(0), sw.CPU(8), [1, 2], [4, 1], residency_policy=object())
    not_callable = type("NotCallable", (), {"plan": 3})()
    with pytest.raises(TypeError, match="must be a ResidencyPolicy or have a callable plan"):
        sw.TiledEvictable(sw.CPU(0), sw.CPU(8), [1, 2], [4, 1], residency_policy=not_callable)
    with pytest.raises(TypeError, match="primary_capacity must return an int or None, got str"):
        tiled(BadCapacity())


def test_residency_plans_are_immutable_disjoint_records() -> None:
    plan = sw.ResidencyPlan([(1, 0), (0, 0)], [], [[2, 0]])
    assert plan.promote == ((0, 0), (1, 0))
    assert plan.evict == ((2, 0),)
    assert plan == sw.ResidencyPlan(promote=[(0, 0), (1, 0)], evict=[(2, 0)])
    assert repr(plan) == "ResidencyPlan(promote=((0, 0), (1, 0)), retain=(), evict=((2, 0),))"
    with pytest.raises(AttributeError):
        plan.promote = ()  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"tile \(0, 0\) is in both promote and evict"):
        sw.ResidencyPlan(promote=[(0, 0)], evict=[(0, 0)])
    with pytest.raises(TypeError, match="ResidencyPlan retain must be an iterable of tile coordinates, got int"):
        sw.ResidencyPlan(retain=5)


class PlanOnly:
    """A structural policy, as the original accepts: no ResidencyPolicy base, only `plan`."""

    def __init__(self, answer: object = None) -> None:
        self.calls: List[Tuple[Tiles, str]] = []
        self.answer = answer

    def plan(self, required: Tiles, purpose: str) -> object:
        self.calls.append((required, purpose))
        if isinstance(self.answer, Exception):
            raise self.answer
        return sw.ResidencyPlan(promote=required) if self.answer is None else self.answer


def test_any_object_with_a_callable_plan_is_a_policy() -> None:
    policy = PlanOnly()
    carrier = sw.TiledEvictable(sw.CPU(0), sw.CPU.from_values([float(i) for i in range(8)]), [1, 2], [4, 1], residency_policy=policy)  # type: ignore[arg-type]
    assert carrier.residency_policy is policy
    x = sw.Tensor.compact(carrier, (4, 2))
    assert sw.reduce_sum(x).to_list() == [4.0, 6.0, 8.0, 10.0]
    assert policy.calls == [(((0, 0), (0, 1)), "operation")]
    assert carrier.tile_state([0, 1]).location == "primary"


def test_a_structural_policys_failures_publish_nothing() -> None:
    failure = LookupError("policy failed")
    for answer, error, message in [(failure, LookupError, "^policy failed$"), (object(), TypeError, "^ResidencyPolicy plan must return a ResidencyPlan, got object$")]:
        policy = PlanOnly(answer)
        carrier = sw.TiledEvictable(sw.CPU(0), sw.CPU.from_values([float(i) for i in range(8)]), [1, 2], [4, 1], residency_policy=policy)  # type: ignore[arg-type]
        x = sw.Tensor.compact(carrier, (4, 2))
        with pytest.raises(error, match=message) as raised:
            sw.reduce_sum(x)
        if isinstance(answer, Exception):
            assert raised.value is answer
        assert carrier.tile_state([0, 1]).location == "secondary" and carrier.version == 0

