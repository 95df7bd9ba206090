"""`TransferRequest.write_slots(start, values)`: a route fills a run of destination slots in
one call, with the one-slot `write`'s checks — every value normalized to the destination
dtype, the run inside the destination, writes only while the transfer is submitted — made
before any slot is written (carrier-extension spec: TransferRequest, transfer routes)."""

import array
import itertools
import re
from typing import Any, Callable, List, Optional

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers import extension as ext


class TypedStorage:
    """Slots of one dtype in `carrier.slots`, a Python list."""

    def __init__(self, dtype: sw.DType, zero: Any) -> None:
        self.dtype = dtype
        self.zero = zero

    def provider(self) -> sw.StorageProvider:
        def allocate(carrier: Any, slots: int) -> None:
            carrier.slots = [self.zero] * slots

        def write(carrier: Any, index: int, value: Any) -> None:
            carrier.slots[index] = value

        return sw.StorageProvider(
            lambda carrier, dtype: dtype is self.dtype,
            lambda carrier: len(carrier.slots),
            allocate,
            lambda carrier: None,
            lambda carrier, index: carrier.slots[index],
            write,
        )


Fill = Callable[[Any, List[Any]], None]


def routed(name: str, dtype: sw.DType, zero: Any, fill: Fill) -> type:
    """A Python carrier class of `dtype` with a route to the CPU whose submit calls
    `fill(request, source_values)`; the request's write errors are left to `fill`."""
    cls = type(name, (sw.Carrier,), {})

    def prepare(request: Any) -> Any:
        source = request.tensor.carrier.slots
        offset = request.tensor.offset
        values = source[offset : offset + request.physical_span]

        def submit() -> None:
            fill(request, values)

        return ext.PreparedTransfer(submit)

    route = sw.TransferRoute(cls, sw.CPU, f"{name}-to-cpu", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(TypedStorage(dtype, zero).provider(), transfers=[route]))
    return cls


def tensor_of(cls: type, dtype: sw.DType, values: List[Any]) -> sw.Tensor:
    t = sw.Tensor.compact(cls(len(values), dtype=dtype), (len(values),))
    for i, v in enumerate(values):
        t[i] = v
    return t


NAMES = itertools.count()
F32 = sw.DType.Float32
I32 = sw.DType.Int32
BOOL = sw.DType.Bool


@pytest.mark.parametrize(
    "form",
    [
        pytest.param(list, id="list"),
        pytest.param(tuple, id="tuple"),
        pytest.param(lambda vs: (v for v in vs), id="generator"),
        pytest.param(lambda vs: array.array("f", vs), id="array.array"),
        pytest.param(lambda vs: np.array(vs, dtype=np.float32), id="numpy"),
        pytest.param(lambda vs: np.array([vs[:2], vs[2:]], dtype=np.float32), id="numpy-2d"),
    ],
)
def test_one_bulk_write_moves_every_slot(form: Callable[[List[float]], Any]) -> None:
    calls: List[int] = []

    def fill(request: Any, values: List[Any]) -> None:
        calls.append(len(values))
        request.write_slots(0, form(values))

    cls = routed(f"Bulk{next(NAMES)}", F32, 0.0, fill)
    t = tensor_of(cls, F32, [1.5, -2.0, 3.25, 4.0])
    destination = sw.CPU(4)
    moved = sw.move(t, destination)
    assert moved.to_list() == [1.5, -2.0, 3.25, 4.0]
    assert calls == [4], "one call wrote all four slots"
    assert destination.version == 1, "published once, at commit"
    assert t.carrier.is_released()


def test_a_run_can_start_anywhere_and_int32_runs_are_checked_for_range() -> None:
    def fill(request: Any, values: List[Any]) -> None:
        request.write_slots(2, values[2:])
        request.write_slots(0, values[:2])

    cls = routed("BulkInt", I32, 0, fill)
    assert sw.move(tensor_of(cls, I32, [7, -8, 9, 10]), sw.CPU(4, dtype=I32)).to_list() == [7, -8, 9, 10]

    def overflowing(request: Any, values: List[Any]) -> None:
        request.write_slots(0, [1, 2**40])

    big = routed("BulkIntOverflow", I32, 0, overflowing)
    source = tensor_of(big, I32, [1, 2])
    destination = sw.CPU(2, dtype=I32)
    with pytest.raises(OverflowError, match=r"^TransferRequest\.write_slots value 1: "):
        sw.move(source, destination)
    assert destination.version == 0 and [destination.get_value(i) for i in range(2)] == [0, 0]
    assert not source.carrier.is_released()


def refused_then_partial(bad_call: Callable[[Any, List[Any]], None], caught: List[BaseException]) -> Fill:
    """A fill that makes `bad_call`, keeps its exception, then writes every slot but the
    last one: the last slot shows whether the refused call wrote anything."""

    def fill(request: Any, values: List[Any]) -> None:
        try:
            bad_call(request, values)
        except Exception as error:  # noqa: BLE001 - the test inspects it
            caught.append(error)
        request.write_slots(0, values[:-1])

    return fill


@pytest.mark.parametrize(
    "bad_call, kind, message",
    [
        (
            lambda request, values: request.write_slots(1, values),
            IndexError,
            r"^move writes slots 1\.\.1\+3 of a CPU carrier of size 3$",
        ),
        (
            lambda request, values: request.write_slots(0, [9.0, "x", 9.0]),
            TypeError,
            r"^TransferRequest\.write_slots value 1 must be a bool, int or float, got str$",
        ),
        (
            lambda request, values: request.write_slots(0, [9.0, 9.0, True]),
            TypeError,
            r"^TransferRequest\.write_slots value 2: dtype Float32 does not accept bool value true$",
        ),
        (
            lambda request, values: request.write_slots(0, np.array([9.0, 9.0, 9.0])),
            TypeError,
            r"^TransferRequest\.write_slots takes a numpy array of the destination's dtype Float32 "
            r"\(float32\), got float64$",
        ),
        (
            lambda request, values: request.write_slots(0, 9.0),
            TypeError,
            r"^TransferRequest\.write_slots values must be an iterable of bool, int or float or a numpy "
            r"array, got float$",
        ),
        (
            lambda request, values: request.write_slots(-1, values),
            ValueError,
            r"^TransferRequest\.write_slots start must be a non-negative int, got -1$",
        ),
    ],
    ids=["out-of-range", "not-a-number", "bool-into-float32", "numpy-of-another-dtype", "not-iterable", "negative-start"],
)
def test_a_refused_bulk_write_writes_nothing(bad_call: Any, kind: type, message: str) -> None:
    caught: List[BaseException] = []
    cls = routed(f"BulkRefused{next(NAMES)}", F32, 0.0, refused_then_partial(bad_call, caught))
    moved = sw.move(tensor_of(cls, F32, [1.0, 2.0, 3.0]), sw.CPU(3))
    assert len(caught) == 1 and type(caught[0]) is kind
    assert re.search(message, str(caught[0])), str(caught[0])
    # The refused call wrote no slot: the last one still holds the destination's zero.
    assert moved.to_list() == [1.0, 2.0, 0.0]


def test_bool_runs_are_written_slot_by_slot_with_the_same_checks() -> None:
    caught: List[BaseException] = []
    cls = routed(
        "BulkBool",
        BOOL,
        False,
        refused_then_partial(lambda request, values: request.write_slots(2, [True, True]), caught),
    )
    moved = sw.move(tensor_of(cls, BOOL, [True, False, True]), sw.CPU(3, dtype=BOOL))
    assert moved.to_list() == [True, False, False]
    assert isinstance(caught[0], IndexError)
    assert str(caught[0]) == "TransferRequest.write_slots writes slots 2..2+2 of a destination of 3 slots"


def test_a_bulk_write_outside_the_submitted_transfer_is_refused() -> None:
    kept: List[Any] = []
    refusals: List[str] = []
    cls = type("BulkOutside", (sw.Carrier,), {})

    def prepare(request: Any) -> Any:
        kept.append(request)
        try:
            request.write_slots(0, [1.0])
        except RuntimeError as error:
            refusals.append(str(error))
        return ext.PreparedTransfer(lambda: request.write_slots(0, [5.0, 6.0]))

    route = sw.TransferRoute(cls, sw.CPU, "outside", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(TypedStorage(F32, 0.0).provider(), transfers=[route]))
    assert sw.move(tensor_of(cls, F32, [5.0, 6.0]), sw.CPU(2)).to_list() == [5.0, 6.0]
    assert len(refusals) == 1 and "cannot write the destination during preparation" in refusals[0]
    with pytest.raises(RuntimeError, match="is terminal; its destination is no longer writable"):
        kept[0].write_slots(0, [1.0])


def test_an_immutable_destination_is_refused_before_the_route_runs() -> None:
    calls: List[Optional[int]] = []

    def fill(request: Any, values: List[Any]) -> None:
        calls.append(len(values))
        request.write_slots(0, values)

    cls = routed("BulkImmutable", F32, 0.0, fill)
    source = tensor_of(cls, F32, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="^cannot move into the destination: the CPU carrier is immutable$"):
        sw.move(source, sw.CPU(2, mutable=False))
    assert calls == [] and not source.carrier.is_released()
