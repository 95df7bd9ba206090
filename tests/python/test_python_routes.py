"""Transfer routes written in Python: TransferRoute, TransferProvider, TransferRequest and
PreparedTransfer, and move / move_async from a Python carrier to the CPU through them
(carrier-extension spec: transfer routes expose exact preparation and submission)."""

import threading
import time
from typing import Any, Callable, List, Optional

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import F32, ListStorage, ReadyCompletion, ThreadCompletion, filled, new_class, run_bounded, values_of


class Copying:
    """A route provider copying the source's list slots into the destination in one
    `request.write_slots` call; `fail_at` injects an exception at one point ("after-writes":
    once one slot is written through `request.write`)."""

    def __init__(self, fail_at: Optional[str] = None, error: Optional[BaseException] = None) -> None:
        self.fail_at = fail_at
        self.error = error or OSError(f"injected at {fail_at}")
        self.requests: List[Any] = []
        self.submit_threads: List[int] = []
        self.asynchronous = False
        self.decline: Optional[str] = None

    def prepare(self, request: Any) -> Any:
        self.requests.append(request)
        if self.fail_at == "prepare":
            raise self.error
        if self.decline is not None:
            return sw.Unsupported(self.decline)
        source = request.tensor.carrier.slots
        offset = request.tensor.offset

        def copy() -> None:
            if self.fail_at == "after-writes":
                request.write(0, source[offset])
                raise self.error
            request.write_slots(0, source[offset : offset + request.physical_span])

        def submit() -> Any:
            self.submit_threads.append(threading.get_ident())
            if self.fail_at == "before-writes":
                raise self.error
            if self.asynchronous:
                return ThreadCompletion(copy)
            copy()
            if self.fail_at == "wait":
                return ReadyCompletion(error=self.error)
            return None

        return ext.PreparedTransfer(submit)

    def route(self, source: type, destination: type = sw.CPU, route_id: str = "to-cpu") -> sw.TransferRoute:
        return sw.TransferRoute(source, destination, route_id, ext.TransferProvider(self.prepare))


def routed_class(name: str, copying: Copying, destination: type = sw.CPU, fallback: bool = False) -> type:
    cls = new_class(name)
    definition = sw.CarrierDefinition(ListStorage().provider(fallback), transfers=[copying.route(cls, destination)])
    sw.register_carrier_definition(cls, definition)
    return cls


# --- the records --------------------------------------------------------------------------


def test_transfer_route_and_provider_check_their_fields() -> None:
    cls = new_class("RouteFieldsCarrier")
    provider = ext.TransferProvider(lambda request: None)
    route = sw.TransferRoute(cls, sw.CPU, "to-cpu", provider)
    assert route.source_class is cls and route.destination_class is sw.CPU
    assert route.route_id == "to-cpu" and route.provider is provider
    with pytest.raises(AttributeError):
        route.route_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="^TransferRoute source_class must be a concrete Carrier subclass, got int$"):
        sw.TransferRoute(1, sw.CPU, "r", provider)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^TransferRoute source_class must be a concrete Carrier subclass, got Carrier$"):
        sw.TransferRoute(sw.Carrier, sw.CPU, "r", provider)
    with pytest.raises(TypeError, match="^TransferRoute destination_class must be a concrete Carrier subclass, got DependentCarrier$"):
        sw.TransferRoute(cls, sw.DependentCarrier, "r", provider)
    with pytest.raises(TypeError, match="^TransferRoute destination_class must be a concrete Carrier subclass, got str$"):
        sw.TransferRoute(cls, str, "r", provider)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^TransferRoute route_id must be a string \\(str\\), got int$"):
        sw.TransferRoute(cls, sw.CPU, 1, provider)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^TransferRoute route_id must not be empty \\(a non-empty str\\)$"):
        sw.TransferRoute(cls, sw.CPU, "", provider)
    with pytest.raises(TypeError, match="^TransferRoute provider must be a TransferProvider, got function$"):
        sw.TransferRoute(cls, sw.CPU, "r", lambda request: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^TransferProvider prepare must be callable, got int$"):
        ext.TransferProvider(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^PreparedTransfer submit must be callable, got str$"):
        ext.PreparedTransfer("go")  # type: ignore[arg-type]


def test_a_definition_materializes_routes_once_and_refuses_duplicate_pairs() -> None:
    cls = new_class("DuplicateRouteCarrier")
    copying = Copying()
    routes = iter([copying.route(cls)])
    definition = sw.CarrierDefinition(ListStorage().provider(), transfers=routes)
    assert len(definition.transfers) == 1 and isinstance(definition.transfers, tuple)
    with pytest.raises(ValueError, match="^CarrierDefinition transfers hold duplicate exact transfer routes: two from DuplicateRouteCarrier to CPU$"):
        sw.CarrierDefinition(ListStorage().provider(), transfers=[copying.route(cls), copying.route(cls, route_id="again")])
    with pytest.raises(TypeError, match="^CarrierDefinition transfers must hold TransferRoute values, got int$"):
        sw.CarrierDefinition(ListStorage().provider(), transfers=[1])  # type: ignore[list-item]


def test_a_route_from_another_class_fails_registration_with_nothing_published() -> None:
    cls = new_class("RouteOwnerCarrier")
    other = new_class("RouteStrangerCarrier")
    copying = Copying()
    bad = sw.CarrierDefinition(ListStorage().provider(), transfers=[copying.route(other)])
    with pytest.raises(TypeError, match="^the transfer route to-cpu starts at RouteStrangerCarrier, but the definition is registered for RouteOwnerCarrier: every route's exact source_class must be the registered class$"):
        sw.register_carrier_definition(cls, bad)
    # Nothing was published or sealed: the class takes a correct definition afterwards.
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[copying.route(cls)]))
    assert values_of(sw.move(filled(cls, [4.0]), sw.CPU(1))) == [4.0]


# --- moving through a route ---------------------------------------------------------------


def test_move_to_the_cpu_runs_the_route_with_an_exact_request() -> None:
    copying = Copying()
    cls = routed_class("MovingCarrier", copying)
    t = filled(cls, [1.0, 2.0, 3.0])
    source = t.carrier
    destination = sw.CPU(3)
    moved = sw.move(t, destination)
    assert values_of(moved) == [1.0, 2.0, 3.0]
    assert moved.carrier is destination and destination.version == 1
    assert source.is_released()
    (request,) = copying.requests
    assert request.destination is destination
    assert request.source_class is cls and request.destination_class is sw.CPU
    assert request.dtype is F32 and request.layout == t.layout
    assert request.physical_span == t.layout.cosize == 3
    assert request.tensor.carrier is source and request.tensor.layout == t.layout
    with pytest.raises(AttributeError):
        request.physical_span = 4  # type: ignore[misc]


def test_a_view_moves_its_physical_span() -> None:
    copying = Copying()
    cls = routed_class("ViewMovingCarrier", copying)
    t = filled(cls, [1.0, 2.0, 3.0, 4.0])
    view = sw.Tensor(t.carrier, 1, sw.Layout(2, 1))
    moved = sw.move(view, sw.CPU(2))
    assert values_of(moved) == [2.0, 3.0]
    assert copying.requests[0].physical_span == 2


def test_a_write_during_preparation_is_refused() -> None:
    def prepare(request: Any) -> Any:
        request.write(0, 1.0)
        return ext.PreparedTransfer(lambda: None)

    cls = new_class("EagerWriterCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "eager", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    t = filled(cls, [5.0])
    destination = sw.CPU(1)
    with pytest.raises(RuntimeError, match="cannot write the destination during preparation"):
        sw.move(t, destination)
    assert destination.version == 0 and destination.get_value(0) == 0.0 and not t.carrier.is_released()


def test_move_async_returns_a_completion_and_waits_for_the_route_on_a_worker_thread() -> None:
    copying = Copying()
    copying.asynchronous = True
    cls = routed_class("AsyncMovingCarrier", copying)
    t = filled(cls, [7.0, 8.0])
    destination = sw.CPU(2)
    handle = sw.move_async(t, destination)
    assert isinstance(handle, ext.ProviderCompletion)
    deadline = time.monotonic() + 30
    while not handle.done:
        assert time.monotonic() < deadline, "the move did not finish"
        time.sleep(0.005)
    moved = handle.wait()
    assert moved is handle.wait() and values_of(moved) == [7.0, 8.0]
    assert moved.carrier is destination and destination.version == 1


def test_the_completion_of_a_route_is_waited_on_a_framework_worker_thread() -> None:
    waits: List[int] = []

    def prepare(request: Any) -> Any:
        source = request.tensor.carrier.slots

        def submit() -> Any:
            class Completion:
                @property
                def done(self) -> bool:
                    return False

                def wait(self) -> None:
                    waits.append(threading.get_ident())
                    request.write_slots(0, source[: request.physical_span])

            return Completion()

        return ext.PreparedTransfer(submit)

    cls = new_class("WorkerWaitCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "worker", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    t = filled(cls, [1.5, 2.5])
    handle = sw.move_async(t, sw.CPU(2))
    moved = run_bounded(handle.wait)
    assert values_of(moved) == [1.5, 2.5]
    assert len(waits) == 1 and waits[0] != threading.get_ident()


def test_a_declined_route_without_fallback_is_not_implemented_and_changes_nothing() -> None:
    copying = Copying()
    copying.decline = "only contiguous layouts"
    cls = routed_class("DecliningRouteCarrier", copying, fallback=True)
    t = filled(cls, [1.0, 2.0])
    destination = sw.CPU(2)
    with pytest.raises(NotImplementedError, match="only contiguous layouts"):
        sw.move(t, destination)
    assert destination.version == 0 and not t.carrier.is_released() and values_of(t) == [1.0, 2.0]


def test_a_declined_route_between_two_opted_in_python_classes_falls_back_elementwise() -> None:
    target = new_class("FallbackTarget")
    sw.register_carrier_definition(target, sw.CarrierDefinition(ListStorage().provider(elementwise_fallback=True)))
    copying = Copying()
    copying.decline = "not this layout"
    cls = routed_class("FallbackSource", copying, destination=target, fallback=True)
    moved = sw.move(filled(cls, [3.0, 4.0]), target(0, dtype=F32))
    assert values_of(moved) == [3.0, 4.0] and type(moved.carrier) is target
    assert len(copying.requests) == 1


def test_a_route_between_two_python_classes_runs() -> None:
    target = new_class("RouteTarget")
    sw.register_carrier_definition(target, sw.CarrierDefinition(ListStorage().provider()))
    copying = Copying()
    cls = routed_class("RouteSource", copying, destination=target)
    destination = target(0, dtype=F32)
    moved = sw.move(filled(cls, [9.0]), destination)
    assert values_of(moved) == [9.0] and moved.carrier is destination
    assert copying.requests[0].destination_class is target


@pytest.mark.parametrize("point", ["prepare", "before-writes", "after-writes", "wait"])
def test_an_exception_at_any_route_callback_propagates_with_nothing_published(point: str) -> None:
    copying = Copying(fail_at=point)
    cls = routed_class(f"FailingRoute{point.title().replace('-', '')}", copying)
    t = filled(cls, [1.0, 2.0, 3.0])
    destination = sw.CPU.from_values([10.0, 20.0, 30.0])
    with pytest.raises(OSError) as raised:
        sw.move(t, destination)
    assert raised.value is copying.error
    assert destination.version == 0 and [destination.get_value(i) for i in range(3)] == [10.0, 20.0, 30.0]
    assert not t.carrier.is_released() and values_of(t) == [1.0, 2.0, 3.0]
    copying.fail_at = None
    assert values_of(sw.move(t, destination)) == [1.0, 2.0, 3.0]


def test_a_route_submit_returning_another_type_is_a_type_error() -> None:
    def prepare(request: Any) -> Any:
        return ext.PreparedTransfer(lambda: 0)

    cls = new_class("ZeroSubmitCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "zero", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    t = filled(cls, [1.0])
    with pytest.raises(TypeError, match=r"^PreparedTransfer submit of route 'zero' must return None or a ProviderCompletion \(a done property and a wait\(\) method\), got int$"):
        sw.move(t, sw.CPU(1))
    assert not t.carrier.is_released()


def test_a_route_prepare_returning_another_type_is_a_type_error() -> None:
    cls = new_class("NonePrepareCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "none", ext.TransferProvider(lambda request: None))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    with pytest.raises(TypeError, match="^TransferProvider prepare of route 'none' must return a PreparedTransfer or Unsupported, got NoneType$"):
        sw.move(filled(cls, [1.0]), sw.CPU(1))


def test_a_class_without_a_route_to_the_cpu_cannot_move_there() -> None:
    cls = new_class("UnroutedCarrier")
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(elementwise_fallback=True)))
    with pytest.raises(NotImplementedError, match="UnroutedCarrier"):
        sw.move(filled(cls, [1.0]), sw.CPU(1))


def test_a_move_from_the_cpu_into_a_python_class_has_no_route() -> None:
    """Route sources are exactly the defining class: a Python class routing to the CPU (with
    fallback allowed) gives no CPU → class route, so the move is a NotImplementedError naming
    the pair and changes neither carrier."""
    copying = Copying()
    cls = routed_class("RoutesBackOnly", copying, fallback=True)
    destination = filled(cls, [5.0, 6.0]).carrier
    before = (destination.version, list(destination.slots))
    source = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    with pytest.raises(NotImplementedError, match="CPU.*RoutesBackOnly"):
        sw.move(source, destination)
    assert (destination.version, list(destination.slots)) == before
    assert source.carrier.version == 0 and source.to_list() == [1.0, 2.0]
    assert copying.requests == []
