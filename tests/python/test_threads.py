"""The GIL is released while the core works, and callbacks re-enter safely (bounded)."""

import sys
import threading
from typing import Any, Iterator, List

import pytest

import strideweave as sw


@pytest.fixture
def no_preemption() -> Iterator[None]:
    """Makes the interpreter hand the GIL over only when its holder gives it up, so another
    thread runs during a call exactly when that call released the GIL."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def spin_while(run: Any) -> int:
    """Runs `run()` while a second thread counts; the count made during the call."""
    count = [0]
    stop = threading.Event()
    started = threading.Event()

    def counter() -> None:
        started.set()
        # Each wait gives the GIL back, so the calling thread can always retake it.
        while not stop.wait(0.0005):
            count[0] += 1

    thread = threading.Thread(target=counter, daemon=True)
    thread.start()
    started.wait(timeout=10)
    before = count[0]
    run()
    during = count[0] - before
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    return during


def another_thread_ran(run: Any, attempts: int = 20) -> bool:
    """Whether the counting thread ran during one of up to `attempts` calls of `run()`. On a
    loaded machine the counting thread may not be scheduled inside one call although the
    GIL was free; with the GIL held (and no preemption) it can never run, in any attempt."""
    return any(spin_while(run) > 0 for _ in range(attempts))


def test_a_long_operation_lets_other_threads_run(no_preemption: None) -> None:
    n = 256
    a = sw.Tensor.compact(sw.CPU(n * n), (n, n))
    b = sw.Tensor.compact(sw.CPU(n * n), (n, n))
    result: List[sw.Tensor] = []
    assert another_thread_ran(lambda: result.append(sw.matmul(a, b)))
    assert result[0].shape == (n, n)


def test_a_callback_that_reenters_from_another_thread_does_not_deadlock() -> None:
    other = sw.Tensor.compact(sw.CPU.from_values([7.0]), (1,))
    seen: List[float] = []

    def read(carrier: Any, index: int) -> float:
        worker = threading.Thread(target=lambda: seen.append(other[0]))  # type: ignore[arg-type]
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive()
        return float(carrier.slots[index])

    def allocate(carrier: Any, slots: int) -> None:
        carrier.slots = [1.5] * slots

    provider = sw.StorageProvider(
        lambda carrier, dtype: dtype is sw.DType.Float32,
        lambda carrier: len(carrier.slots),
        allocate,
        lambda carrier: None,
        read,
        lambda carrier, index, value: None,
    )
    cls = type("Reentrant", (sw.Carrier,), {})
    sw.register_carrier_definition(cls, sw.CarrierDefinition(provider))
    t = sw.Tensor.compact(cls(2, dtype=sw.DType.Float32), (2,))
    assert t.to_list() == [1.5, 1.5]
    assert seen == [7.0, 7.0]


def test_callbacks_from_python_threads_run_concurrently_with_correct_instances() -> None:
    cls = type("Shared", (sw.Carrier,), {})

    def allocate(carrier: Any, slots: int) -> None:
        carrier.slots = [0.0] * slots

    def write(carrier: Any, index: int, value: float) -> None:
        carrier.slots[index] = value

    provider = sw.StorageProvider(
        lambda carrier, dtype: dtype is sw.DType.Float32,
        lambda carrier: len(carrier.slots),
        allocate,
        lambda carrier: None,
        lambda carrier, index: carrier.slots[index],
        write,
    )
    sw.register_carrier_definition(cls, sw.CarrierDefinition(provider))
    tensors = [sw.Tensor.compact(cls(8, dtype=sw.DType.Float32), (8,)) for _ in range(4)]

    def fill(k: int) -> None:
        for i in range(8):
            tensors[k][i] = float(k * 10 + i)

    threads = [threading.Thread(target=fill, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    for k, t in enumerate(tensors):
        assert t.to_list() == [float(k * 10 + i) for i in range(8)]
        assert t.version == 8
