"""A carrier written wholly in Python: list storage, an execution interface of its own, a
built-in kernel and a kernel pack (with an optimized kernel that declines what it cannot
do), and a transfer route to the CPU. Run it with `python examples/python/python_kernels.py`."""

import threading
from typing import Any, List, Optional

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.operation_policy import resolve_operation_plan

F32 = sw.DType.Float32


class ListCarrier(sw.Carrier):
    """Float32 slots in a Python list."""

    slots: List[float]


class ListInterface(sw.KernelExecutionInterface):
    """The execution context kernels of ListCarrier use: here, a record of what ran."""

    def __init__(self) -> None:
        self.log: List[str] = []
        super().__init__("1")


def supports_dtype(carrier: ListCarrier, dtype: sw.DType) -> bool:
    return dtype is F32


def physical_size(carrier: ListCarrier) -> int:
    return len(carrier.slots)


def allocate(carrier: ListCarrier, slots: int) -> None:
    carrier.slots = [0.0] * slots


def release(carrier: ListCarrier) -> None:
    carrier.slots = []


def read(carrier: ListCarrier, index: int) -> float:
    return carrier.slots[index]


def write(carrier: ListCarrier, index: int, value: object) -> None:
    assert isinstance(value, float)
    carrier.slots[index] = value


def unary(name: str, function: Any) -> Any:
    """A kernel preparation applying `function` to every element, run at submission."""

    def prepare(invocation: ext.ResolvedInvocation, interface: ListInterface) -> ext.PreparedKernel:
        (x,) = invocation.operands
        assert isinstance(x, sw.Tensor)

        def submit() -> ext.ProviderResult:
            out = invocation.allocate_result(0)
            source, target = x.carrier, out.carrier
            assert isinstance(source, ListCarrier) and isinstance(target, ListCarrier)
            for i, j in zip(x.layout.indices(), out.layout.indices()):
                target.slots[j] = function(source.slots[x.offset + i])
            interface.log.append(name)
            return ext.ProviderResult([out])

        return ext.PreparedKernel(interface, submit)

    return prepare


def vectorized_relu(invocation: ext.ResolvedInvocation, interface: ListInterface) -> Any:
    """The pack's optimized relu: it only takes whole blocks of 4, and finishes on a thread
    of its own, returning a completion."""
    (x,) = invocation.operands
    assert isinstance(x, sw.Tensor)
    if x.size() % 4 != 0:
        interface.log.append("vectorized relu declined")
        return sw.Unsupported("vectorized relu needs a multiple of 4 elements")

    class Done:
        def __init__(self) -> None:
            self.finished = threading.Event()
            self.result: Optional[ext.ProviderResult] = None

        @property
        def done(self) -> bool:
            return self.finished.is_set()

        def wait(self) -> ext.ProviderResult:
            self.finished.wait(timeout=30)
            assert self.result is not None
            return self.result

    def submit() -> Done:
        out = invocation.allocate_result(0)
        completion = Done()

        def work() -> None:
            source, target = x.carrier, out.carrier
            assert isinstance(source, ListCarrier) and isinstance(target, ListCarrier)
            for i, j in zip(x.layout.indices(), out.layout.indices()):
                target.slots[j] = max(source.slots[x.offset + i], 0.0)
            interface.log.append("vectorized relu")
            completion.result = ext.ProviderResult([out])
            completion.finished.set()

        threading.Thread(target=work).start()
        return completion

    return ext.PreparedKernel(interface, submit)


def to_cpu(request: ext.TransferRequest) -> ext.PreparedTransfer:
    source = request.tensor.carrier
    assert isinstance(source, ListCarrier)

    def submit() -> None:
        offset = request.tensor.offset
        request.write_slots(0, source.slots[offset : offset + request.physical_span])

    return ext.PreparedTransfer(submit)


def main() -> None:
    interface = ListInterface()
    relu = sw.operation_definition("relu")
    relu_plan = sw.OperationCapability.from_plan(resolve_operation_plan("relu", F32))
    neg_plan = sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))
    provider = sw.KernelProvider(
        interface,
        [
            sw.KernelPattern(sw.operation_definition("neg"), [neg_plan], "list.neg", unary("neg", lambda v: -v)),
            sw.KernelPattern(relu, [relu_plan], "list.relu", unary("relu", lambda v: max(v, 0.0))),
        ],
    )
    route = sw.TransferRoute(ListCarrier, sw.CPU, "list-to-cpu", ext.TransferProvider(to_cpu))
    storage = sw.StorageProvider(supports_dtype, physical_size, allocate, release, read, write)
    sw.register_carrier_definition(ListCarrier, sw.CarrierDefinition(storage, kernels=provider, transfers=[route]))
    pack = sw.KernelPack("fast", "1", ListCarrier, interface, [sw.KernelPattern(relu, [relu_plan], "fast.relu", vectorized_relu, preference=10)])
    sw.register_kernel_pack(pack)

    x = sw.Tensor.compact(ListCarrier(4, dtype=F32), (4,))
    for i, v in enumerate([-2.0, -1.0, 1.0, 2.0]):
        x[i] = v
    print("capabilities", sorted(c.operation for c in x.carrier.operation_capabilities()))
    print("neg", sw.neg(x).to_list())
    print("relu of 4", sw.relu(x).to_list())
    half = x[0:2]
    assert isinstance(half, sw.Tensor)
    print("relu of 2", sw.relu(half).to_list())
    print("ran", interface.log)
    print("on the cpu", sw.move(x, sw.CPU(4)).to_list())


if __name__ == "__main__":
    main()
