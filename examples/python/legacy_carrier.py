"""A definition-free carrier class written in Python, as the original StrideWeave's users write
them: the storage hooks are its methods, `_dispatch_op` returns a fresh `Operation`, its
capabilities are declared by hand and a move operation is registered for one exact pair. Run
it with `python examples/python/legacy_carrier.py`."""

from typing import Iterable, List, Optional, Union

import strideweave as sw
from strideweave.carriers.move import MoveOperation, MoveOutput, register_move_operation
from strideweave.carriers.operation_capability import register_operation_capabilities
from strideweave.carriers.operation_policy import resolve_operation_plan
from strideweave.operation import Operation

F32 = sw.DType.Float32


class ListCarrier(sw.Carrier):
    """Float32 slots in a Python list."""

    def __init__(self, values: List[float], *, mutable: bool = True) -> None:
        self.values = [float(v) for v in values]
        self.mutable = mutable
        super().__init__()

    def size(self) -> int:
        return len(self.values)

    def dtype(self) -> sw.DType:
        return F32

    def get_value(self, index: int) -> float:
        return self.values[index]

    def set_value(self, index: int, value: float) -> None:
        self.values[index] = float(value)

    def _is_mutable(self) -> bool:
        return self.mutable

    def new_like(
        self, values: Iterable[Union[bool, int, float]], *, mutable: bool = True, dtype: Optional[sw.DType] = None
    ) -> "ListCarrier":
        return ListCarrier([float(v) for v in values], mutable=mutable)

    def allocate_like(
        self, size: int, *, mutable: bool = True, dtype: Optional[sw.DType] = None, empty: bool = False
    ) -> "ListCarrier":
        return ListCarrier([0.0] * size, mutable=mutable)

    def _dispatch_op(self, operation_name: str) -> Operation:
        if operation_name == "neg":
            return Negate()
        raise NotImplementedError(f"ListCarrier does not run {operation_name!r}")


class Negate(Operation):
    """`neg` on a ListCarrier tensor, into a fresh ListCarrier."""

    def _forward(self, x: sw.Tensor) -> sw.Tensor:
        out = sw.Tensor(ListCarrier([0.0] * x.size()), 0, x.layout)
        for i in range(x.size()):
            out[i] = -float(x[i])  # type: ignore[arg-type]
        return out


class Halving(MoveOperation):
    """Moves a ListCarrier tensor to the CPU at half its values."""

    def _copy(self, tensor: sw.Tensor, destination: sw.Carrier, output: MoveOutput, element_count: int) -> None:
        for i in range(tensor.size()):
            output[i] = float(tensor[i]) / 2  # type: ignore[arg-type]


def main() -> None:
    register_operation_capabilities(ListCarrier, [sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))])
    register_move_operation(ListCarrier, sw.CPU, Halving)

    carrier = ListCarrier([1.0, -2.0, 4.0])
    t = sw.Tensor.compact(carrier, (3,))
    t[0] = 3.0
    print("values", t.to_list(), "version", carrier.version, "list", carrier.values)
    y = sw.neg(t)
    print("neg", y.to_list(), "on a", type(y.carrier).__name__)
    operation = carrier.dispatch_op("neg")
    print("dispatched", type(operation).__name__, operation._operation_name, operation._dispatch_carrier_class is ListCarrier)
    try:
        sw.relu(t)
    except sw.UnsupportedOperationPlan as error:
        print("relu refused:", error.reasons[0])
    moved = sw.move(t, sw.CPU(3))
    print("moved to the CPU", moved.to_list(), "source released", carrier.is_released())


if __name__ == "__main__":
    main()
