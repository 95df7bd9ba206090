"""An exception raised in a Python callback on a framework worker thread is delivered later,
when the caller waits: every delivery raises the same exception object, to every waiter,
for as long as the binding keeps it (its 256 most recently parked exceptions)."""

import threading
from typing import Any, List

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import F32, ListStorage, filled, new_class, run_bounded

KEPT = 256


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
    assert destination.version == 0 and not t.carrier.is_released


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


def test_an_exception_older_than_the_kept_ones_is_raised_afresh_with_its_class_and_message() -> None:
    failure = LateFailure("AgedLateFailureCarrier")
    handle = sw.move_async(filled(failure.cls, [1.0]), sw.CPU(1))
    with pytest.raises(OSError) as first:
        run_bounded(handle.wait)
    assert first.value is failure.error

    def failing_write(carrier: Any, index: int, value: Any) -> None:
        raise KeyError(index)

    noisy = new_class("NoisyWriteCarrier")
    storage = ListStorage()
    provider = sw.StorageProvider(
        storage.supports_dtype, storage.physical_size, storage.allocate, storage.release, storage.read, failing_write
    )
    sw.register_carrier_definition(noisy, sw.CarrierDefinition(provider))
    target = sw.Tensor.compact(noisy(1, dtype=F32), (1,))
    for _ in range(KEPT):
        with pytest.raises(KeyError):
            target[0] = 1.0
    with pytest.raises(OSError) as late:
        handle.wait()
    assert late.value is not failure.error
    assert "raised OSError: AgedLateFailureCarrier: the device went away during the transfer" in str(late.value)
