"""An exception raised in a Python callback on a framework worker thread is delivered later,
when the caller waits: every delivery through one handle raises the same exception object,
to every waiter, and the binding keeps it no longer than the handle."""

import gc
import re
import threading
import time
import weakref
from typing import Any, List

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import F32, ListStorage, filled, new_class, run_bounded

KEPT = 256  # how many undelivered exceptions the binding keeps, the most recently parked

class LateFailure:
    """A route whose submitted transfer returns a completion whose `wait` — called on the
    framework's move worker thread — raises `error`."""

    def __init__(self, name: str) -> None:
        self.error = OSError(f"{name}: the device went away during the transfer")
        self.wait_threads: List[int] = []
        self.cls = new_class(name)
        route = sw.TransferRoute(self.cls, sw.CPU, "late", ext.TransferProvider(self.prepare))
        sw.register_carrier_definition(self.cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))

    def prepare(self, request: Any) -> Any:
        failure = self

        class Completion:
            @property
            def done(self) -> bool:
                return False

            def wait(self) -> None:
                failure.wait_threads.append(threading.get_ident())
                raise failure.error

        return ext.PreparedTransfer(lambda: Completion())


def test_every_wait_of_a_failed_move_raises_the_same_exception_object() -> None:
    failure = LateFailure("LateFailureCarrier")
    t = filled(failure.cls, [1.0, 2.0])
    destination = sw.CPU(2)
    handle = sw.move_async(t, destination)
    for _ in range(3):
        with pytest.raises(OSError) as raised:
            run_bounded(handle.wait)
        assert raised.value is failure.error
    assert handle.done
    assert failure.wait_threads and threading.get_ident() not in failure.wait_threads
    assert destination.version == 0 and not t.carrier.is_released()


def test_concurrent_waiters_of_one_failed_move_all_receive_the_same_object() -> None:
    failure = LateFailure("ConcurrentLateFailureCarrier")
    handle = sw.move_async(filled(failure.cls, [1.0]), sw.CPU(1))
    received: List[BaseException] = []
    lock = threading.Lock()

    def waiter() -> None:
        try:
            handle.wait()
        except OSError as error:
            with lock:
                received.append(error)

    threads = [threading.Thread(target=waiter, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive(), "a waiter did not return within 30 s"
    assert len(received) == 4 and all(error is failure.error for error in received)


class Traced(OSError):
    """An OSError that can be watched with a weak reference."""


def test_a_delivered_exception_lives_as_long_as_its_handle() -> None:
    failure = LateFailure("ShortLivedFailureCarrier")
    failure.error = Traced("the device went away")
    handle = sw.move_async(filled(failure.cls, [1.0]), sw.CPU(1))
    with pytest.raises(OSError) as caught:
        run_bounded(handle.wait)
    gone = weakref.ref(caught.value)
    assert caught.value is failure.error
    del caught, handle
    failure.error = OSError("replaced")
    gc.collect()
    assert gone() is None, "the binding keeps no delivered exception beyond its handle"


def test_a_promotion_whose_transfer_fails_raises_the_callbacks_exception() -> None:
    failure = LateFailure("UnreachableTierCarrier")
    tier = failure.cls(4, dtype=F32)
    carrier = sw.TiledEvictable(sw.CPU(0), tier, [2], [2])
    facet = carrier.require_facet(sw.TiledResidencyFacet)
    for _ in range(2):
        with pytest.raises(OSError) as caught:
            run_bounded(lambda: facet.promote_async([(0,)]).wait())
        assert caught.value is failure.error
    assert facet.tile_state([0]).location == "secondary" and carrier.version == 0


class CountedFailure(LateFailure):
    """A LateFailure whose every transfer raises a new LookupError, numbered."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.raised: List[BaseException] = []

    def prepare(self, request: Any) -> Any:
        failure = self

        class Completion:
            @property
            def done(self) -> bool:
                return False

            def wait(self) -> None:
                error = LookupError(f"transfer {len(failure.raised)} lost its device")
                failure.raised.append(error)
                raise error

        return ext.PreparedTransfer(lambda: Completion())


def failed_move(failure: CountedFailure) -> Any:
    """A move of `failure`'s class whose transfer has failed on the worker thread, not waited
    on: its exception is parked, undelivered."""
    handle = sw.move_async(filled(failure.cls, [1.0]), sw.CPU(1))
    deadline = time.monotonic() + 30
    while not handle.done:
        assert time.monotonic() < deadline, "the move did not fail within 30 s"
        time.sleep(0.0005)
    return handle


@pytest.mark.parametrize("newer", [KEPT - 1, KEPT])
def test_an_undelivered_exception_is_dropped_once_256_newer_ones_were_parked(newer: int) -> None:
    failure = CountedFailure(f"ParkedTableCarrier{newer}")
    first = failed_move(failure)
    original = failure.raised[0]
    for _ in range(newer):
        failed_move(failure)  # dropped without a wait: its exception is never delivered
    assert len(failure.raised) == newer + 1
    with pytest.raises(LookupError) as caught:
        first.wait()
    if newer < KEPT:
        assert caught.value is original, "the exception was still parked"
    else:
        assert caught.value is not original and type(caught.value) is LookupError
        assert re.search(
            r"raised LookupError: transfer 0 lost its device \[python exception #\d+\]$", str(caught.value)
        ), str(caught.value)
    with pytest.raises(LookupError) as again:
        first.wait()
    assert again.value is caught.value, "the handle delivers what it raised first"
