"""The framework's share of a tiny operation on a carrier written in Python whose kernel is
written in Python, against calling the same Python prepare and submit functions directly, in
the same run.

Run it against a release build (`maturin develop --release`):
`python benches/python/python_kernel.py`. `sw.neg(x)` on a 4-element tensor of a list-backed
Python carrier runs the Python `prepare` and `submit` through the framework (dispatch, plan,
candidate selection, interface check, result validation and publication). The baseline
calls that very `prepare` with the same invocation and interface, then the returned record's
`submit`, as a direct caller would. The framework's share is the difference; the issue's
target is a share of at most 2x the direct cost.
"""

import timeit
from typing import Any, Callable, List, Tuple

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.operation_policy import resolve_operation_plan

F32 = sw.DType.Float32


class ListCarrier(sw.Carrier):
    slots: List[float]


def supports_dtype(carrier: Any, dtype: sw.DType) -> bool:
    return dtype is F32


def physical_size(carrier: Any) -> int:
    return len(carrier.slots)


def allocate(carrier: Any, slots: int) -> None:
    carrier.slots = [0.0] * slots


def release(carrier: Any) -> None:
    carrier.slots = []


def read(carrier: Any, index: int) -> float:
    return carrier.slots[index]


def write(carrier: Any, index: int, value: Any) -> None:
    carrier.slots[index] = value


def prepare(invocation: Any, interface: Any) -> Any:
    (x,) = invocation.operands

    def submit() -> Any:
        out = invocation.allocate_result(0)
        source, target = x.carrier.slots, out.carrier.slots
        for i in range(len(target)):
            target[i] = -source[i]
        return ext.ProviderResult((out,))

    return ext.PreparedKernel(interface, submit)


def best_pair_ns(first: Callable[[], object], second: Callable[[], object], number: int = 2000, repeat: int = 15) -> Tuple[float, float]:
    """The best per-call times of `first` and `second`, in nanoseconds, timed alternately
    (repeat after repeat) so that a change in the machine's load affects both alike."""
    times: Tuple[List[float], List[float]] = ([], [])
    for _ in range(repeat):
        for run, into in ((first, times[0]), (second, times[1])):
            into.append(timeit.timeit(run, number=number) / number * 1e9)
    return min(times[0]), min(times[1])


def registered(name: str, kernel: Any) -> Any:
    """A fresh list-backed class whose one kernel pattern runs `kernel`, and a 4-element
    tensor of it."""
    cls = type(name, (ListCarrier,), {})
    neg = sw.operation_definition("neg")
    plan = sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))
    provider = sw.KernelProvider(sw.KernelExecutionInterface("1"), [sw.KernelPattern(neg, [plan], "neg", kernel)])
    storage = sw.StorageProvider(supports_dtype, physical_size, allocate, release, read, write)
    sw.register_carrier_definition(cls, sw.CarrierDefinition(storage, kernels=provider))
    t = sw.Tensor.compact(cls(4, dtype=F32), (4,))
    for i, v in enumerate([1.0, -2.0, 3.0, -4.0]):
        t[i] = v
    return t


def main() -> None:
    captured: List[Any] = []

    def capturing(invocation: Any, interface: Any) -> Any:
        captured.append((invocation, interface))
        return prepare(invocation, interface)

    sw.neg(registered("CapturedCarrier", capturing))
    ((invocation, interface),) = captured
    y = registered("TimedCarrier", prepare)
    assert [sw.neg(y)[i] for i in range(4)] == [-1.0, 2.0, -3.0, 4.0]

    def direct() -> object:
        return prepare(invocation, interface).submit()

    def through_the_framework() -> object:
        return sw.neg(y)

    ours, base = best_pair_ns(through_the_framework, direct)
    share = ours - base
    print(f"{'case':<44} {'ns':>9}")
    print(f"{'sw.neg(x), Python carrier and kernel':<44} {ours:>9.0f}")
    print(f"{'the same prepare + submit called directly':<44} {base:>9.0f}")
    print(f"{'framework share':<44} {share:>9.0f}")
    print(f"framework share / direct cost: {share / base:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
