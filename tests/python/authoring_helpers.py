"""Shared pieces of the kernel, route and composite tests: a list-backed storage provider,
execution interfaces, plans, simple Python kernels, and completion objects."""

import threading
from typing import Any, Callable, List, Optional

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.operation_policy import resolve_operation_plan

F32 = sw.DType.Float32


class ListStorage:
    """Float32 slots in `carrier.slots`, a Python list; records every write it is asked for."""

    def __init__(self) -> None:
        self.writes: List[tuple] = []

    def supports_dtype(self, carrier: Any, dtype: sw.DType) -> bool:
        return dtype is F32

    def physical_size(self, carrier: Any) -> int:
        return len(carrier.slots)

    def allocate(self, carrier: Any, slots: int) -> None:
        carrier.slots = [0.0] * slots

    def release(self, carrier: Any) -> None:
        carrier.slots = []

    def read(self, carrier: Any, index: int) -> float:
        return float(carrier.slots[index])

    def write(self, carrier: Any, index: int, value: Any) -> None:
        self.writes.append((index, value))
        carrier.slots[index] = float(value)

    def provider(self, elementwise_fallback: bool = False) -> sw.StorageProvider:
        return sw.StorageProvider(
            self.supports_dtype,
            self.physical_size,
            self.allocate,
            self.release,
            self.read,
            self.write,
            elementwise_fallback=elementwise_fallback,
        )


class RingInterface(sw.KernelExecutionInterface):
    """An execution interface with a facility of its own (a stream number)."""

    def __init__(self, version: str = "1", stream: int = 0) -> None:
        self.stream = stream
        super().__init__(version)


class OtherInterface(sw.KernelExecutionInterface):
    """A sibling interface type: same version, different identity."""


def neg_plan() -> sw.OperationCapability:
    return sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))


def add_plan() -> sw.OperationCapability:
    return sw.OperationCapability.from_plan(resolve_operation_plan("add", F32, F32))


def new_class(name: str) -> type:
    """A fresh Carrier subclass (not registered)."""
    return type(name, (sw.Carrier,), {})


def values_of(t: sw.Tensor) -> List[float]:
    """The values of a 1-D tensor in element order."""
    return [float(t[i]) for i in range(t.size())]  # type: ignore[arg-type]


def filled(cls: type, values: List[float]) -> sw.Tensor:
    """A compact 1-D tensor of `cls` holding `values` (written through the framework)."""
    t = sw.Tensor.compact(cls(len(values), dtype=F32), (len(values),))
    for i, v in enumerate(values):
        t[i] = v
    return t


def elementwise(function: Callable[..., float]) -> Callable[[Any, Any], Any]:
    """A kernel `prepare` computing `function` elementwise over the invocation's tensor
    operands (reading and writing the list slots directly), submitted synchronously."""

    def prepare(invocation: Any, interface: Any) -> Any:
        operands = invocation.operands

        def submit() -> Any:
            out = invocation.allocate_result(0)
            sources = [(t.carrier.slots, t.offset, t.layout.indices()) for t in operands]
            slots = out.carrier.slots
            for k, j in enumerate(out.layout.indices()):
                slots[j] = function(*(s[o + ix[k]] for s, o, ix in sources))
            return ext.ProviderResult([out])

        return ext.PreparedKernel(interface, submit)

    return prepare


class ThreadCompletion:
    """A ProviderCompletion whose value is produced by `work` on a Python thread of its own;
    records the threads `wait` was called on."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._event = threading.Event()
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self.wait_threads: List[int] = []

        def run() -> None:
            try:
                self._value = work()
            except BaseException as error:  # handed to wait()
                self._error = error
            self._event.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self) -> Any:
        self.wait_threads.append(threading.get_ident())
        if not self._event.wait(timeout=30):
            raise TimeoutError("the completion's work did not finish in 30 s")
        if self._error is not None:
            raise self._error
        return self._value


class ReadyCompletion:
    """A completion that is terminal from the start, with `value` or `error`."""

    def __init__(self, value: Any = None, error: Optional[BaseException] = None, done: Any = True) -> None:
        self.value = value
        self.error = error
        self._done = done

    @property
    def done(self) -> Any:
        return self._done

    def wait(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def run_bounded(function: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Runs `function` on a daemon thread and returns its result; fails instead of hanging
    when it does not finish within `timeout` seconds."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = function()
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"did not finish within {timeout} s (deadlock?)"
    if "error" in box:
        raise box["error"]
    return box["value"]
