"""The rules every record of the Python surface keeps (issue: "Records are immutable
(assignment raises), iterables are consumed exactly once and exposed as tuples"): one
check across all of them, so a record added later without them is caught."""

import dataclasses
from typing import Any, Callable, Iterator, List, Tuple

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import F32, ListStorage, RingInterface, neg_plan, new_class


def nothing(*args: Any) -> None:
    return None


def records() -> List[Tuple[str, Any, str]]:
    """(name, record, one of its fields) for every record the surface constructs or hands
    out."""
    interface = RingInterface()
    neg = sw.operation_definition("neg")
    pattern = sw.KernelPattern(neg, [neg_plan()], "neg.k", nothing)
    cls = new_class("RecordRulesCarrier")
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), kernels=sw.KernelProvider(interface, [pattern])))
    transfer = ext.TransferProvider(nothing)
    tensor = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    return [
        ("StorageProvider", ListStorage().provider(), "read"),
        ("CarrierDefinition", sw.CarrierDefinition(ListStorage().provider()), "transfers"),
        ("KernelPattern", pattern, "preference"),
        ("KernelProvider", sw.KernelProvider(interface, [pattern]), "patterns"),
        ("KernelPack", sw.KernelPack("ns", "1", cls, interface, [sw.KernelPattern(neg, [neg_plan()], "neg.p", nothing)]), "patterns"),
        ("PreparedKernel", ext.PreparedKernel(interface, nothing), "submit"),
        ("PreparedTransfer", ext.PreparedTransfer(nothing), "submit"),
        ("PreparedComposite", ext.PreparedComposite(nothing), "submit"),
        ("ProviderResult", ext.ProviderResult([tensor]), "outputs"),
        ("Unsupported", sw.Unsupported("no"), "reason"),
        ("TransferProvider", transfer, "prepare"),
        ("TransferRoute", sw.TransferRoute(cls, sw.CPU, "r", transfer), "route_id"),
        ("CompositeProvider", sw.CompositeProvider(nothing, nothing, nothing), "prepare"),
        ("OperationCapability", neg_plan(), "operation"),
        ("OperationDefinition", neg, "name"),
        ("ResidencyPlan", sw.ResidencyPlan(promote=[(0,)]), "promote"),
        ("DType", F32, "name"),
        ("Layout", sw.Layout("(2,3):(1,2)"), "size"),
        ("TileState", sw.TiledEvictable(sw.CPU(0), sw.CPU(2), [1], [2]).tile_state([0]), "location"),
    ]


@pytest.mark.parametrize("name, record, field", records(), ids=[r[0] for r in records()])
def test_a_record_refuses_assignment_to_its_fields_and_new_attributes(name: str, record: Any, field: str) -> None:
    before = getattr(record, field)
    # The original's frozen dataclass records raise its FrozenInstanceError (an
    # AttributeError); the values DType, Layout and TileState raise AttributeError.
    refusal = AttributeError if name in ("DType", "Layout", "TileState") else dataclasses.FrozenInstanceError
    with pytest.raises(refusal):
        setattr(record, field, before)
    with pytest.raises(refusal):
        record.extra = 1
    with pytest.raises(refusal):
        delattr(record, field)
    assert getattr(record, field) == before or getattr(record, field) is before


def test_records_handed_to_callbacks_are_immutable_too() -> None:
    seen: List[Any] = []

    def prepare(request: Any) -> Any:
        seen.append(request)
        source = request.tensor.carrier.slots
        return ext.PreparedTransfer(lambda: request.write_slots(0, source[: request.physical_span]))

    cls = new_class("ImmutableRequestCarrier")
    sw.register_carrier_definition(
        cls,
        sw.CarrierDefinition(ListStorage().provider(), transfers=[sw.TransferRoute(cls, sw.CPU, "r", ext.TransferProvider(prepare))]),
    )
    t = sw.Tensor.compact(cls(1, dtype=F32), (1,))
    sw.move(t, sw.CPU(1))
    (request,) = seen
    for field in ["tensor", "destination", "source_class", "destination_class", "dtype", "layout", "physical_span"]:
        with pytest.raises(AttributeError):
            setattr(request, field, None)


class Once:
    """An iterable that counts how often it is iterated."""

    def __init__(self, items: List[Any]) -> None:
        self.items = items
        self.iterations = 0

    def __iter__(self) -> Iterator[Any]:
        self.iterations += 1
        return iter(self.items)


def one_shot_cases() -> List[Tuple[str, Callable[[Once], Any], Callable[[], List[Any]], str]]:
    interface = RingInterface()
    neg = sw.operation_definition("neg")
    cls = new_class("OneShotCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "once", ext.TransferProvider(nothing))

    def pattern() -> Any:
        return sw.KernelPattern(neg, [neg_plan()], "neg.once", nothing)

    return [
        ("KernelPattern plans", lambda it: sw.KernelPattern(neg, it, "k", nothing), lambda: [neg_plan()], "plans"),
        ("KernelProvider patterns", lambda it: sw.KernelProvider(interface, it), lambda: [pattern()], "patterns"),
        ("KernelPack patterns", lambda it: sw.KernelPack("ns", "1", cls, interface, it), lambda: [pattern()], "patterns"),
        ("CarrierDefinition transfers", lambda it: sw.CarrierDefinition(ListStorage().provider(), transfers=it), lambda: [route], "transfers"),
        ("CarrierDefinition facets", lambda it: sw.CarrierDefinition(ListStorage().provider(), facets=it), lambda: [sw.CarrierFacet()], "facets"),
        ("ProviderResult outputs", lambda it: ext.ProviderResult(it), lambda: [sw.Tensor.compact(sw.CPU(1), (1,))], "outputs"),
        ("ResidencyPlan promote", lambda it: sw.ResidencyPlan(promote=it), lambda: [(1,), (0,)], "promote"),
    ]


@pytest.mark.parametrize("name, make, items, field", one_shot_cases(), ids=[c[0] for c in one_shot_cases()])
def test_iterables_are_consumed_once_and_kept_as_tuples(name: str, make: Callable[[Once], Any], items: Callable[[], List[Any]], field: str) -> None:
    source = Once(items())
    record = make(source)
    kept = getattr(record, field)
    assert source.iterations == 1
    assert isinstance(kept, tuple) and len(kept) == len(source.items)
    assert getattr(record, field) == kept, "reading the field again gives the same values"
    assert source.iterations == 1
