"""A custom operation defined from Python with a Python backward rule: `demo.softsign(x) =
x / (1 + |x|)`, executed by the Python kernel of a list-backed carrier, differentiated by a
rule that calls a second custom operation, and checked against finite differences. Run it
with `python examples/python/custom_operation.py`."""

from typing import Any, Callable, List, Optional, Sequence, Tuple

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.operation_policy import OperandRole

F32 = sw.DType.Float32


class ListCarrier(sw.Carrier):
    """Float32 slots in a Python list."""

    slots: List[float]


def allocate(carrier: ListCarrier, slots: int) -> None:
    carrier.slots = [0.0] * slots


def release(carrier: ListCarrier) -> None:
    carrier.slots = []


def write(carrier: ListCarrier, index: int, value: object) -> None:
    assert isinstance(value, float)
    carrier.slots[index] = value


STORAGE = sw.StorageProvider(
    lambda carrier, dtype: dtype is F32,
    lambda carrier: len(carrier.slots),
    allocate,
    release,
    lambda carrier, index: carrier.slots[index],
    write,
)


def plan(name: str, tensors: int) -> sw.OperationPlan:
    """The Float32 plan of `name` on `tensors` tensor operands."""
    operand = sw.OperandPlan(OperandRole.TENSOR, F32, F32)
    return sw.OperationPlan(name, [operand] * tensors, sw.Arithmetic.BINARY32, None, None, F32)


def elementwise(name: str, tensors: int, saved: Sequence[int] = ()) -> Callable[[sw.BoundOperationCall], sw.ResolvedInvocation]:
    """A resolver: one Float32 result of the first operand's shape."""

    def resolve(call: sw.BoundOperationCall) -> sw.ResolvedInvocation:
        x = call.operands[0]
        assert isinstance(x, sw.Tensor)
        return sw.ResolvedInvocation(call, plan(name, tensors), [sw.ResultSpec(F32, x.shape)], saved_operands=saved)

    return resolve


def kernel(function: Callable[..., float]) -> Callable[[sw.ResolvedInvocation, Any], ext.PreparedKernel]:
    """A Python kernel applying `function` elementwise to the operands' list slots."""

    def prepare(invocation: sw.ResolvedInvocation, interface: Any) -> ext.PreparedKernel:
        def submit() -> ext.ProviderResult:
            out = invocation.allocate_result(0)
            assert isinstance(out.carrier, ListCarrier)
            sources = []
            for t in invocation.operands:
                assert isinstance(t, sw.Tensor) and isinstance(t.carrier, ListCarrier)
                sources.append((t.carrier.slots, t.offset, t.layout.indices()))
            for k, j in enumerate(out.layout.indices()):
                out.carrier.slots[j] = function(*(s[o + ix[k]] for s, o, ix in sources))
            return ext.ProviderResult([out])

        return ext.PreparedKernel(interface, submit)

    return prepare


def filled(values: List[float]) -> sw.Tensor:
    t = sw.Tensor.compact(ListCarrier(len(values), dtype=F32), (len(values),))
    for i, v in enumerate(values):
        t[i] = v
    return t


def values(t: sw.Tensor) -> List[float]:
    out = []
    for i in range(t.size()):
        v = t[i]
        assert isinstance(v, float)
        out.append(v)
    return out


def main() -> None:
    differentiable = sw.OperandKind.TENSOR
    # d softsign / dx = 1 / (1 + |x|)^2, times the cotangent g: an operation of its own.
    softsign_grad = sw.define_operation(
        "demo.softsign_grad",
        sw.OperationSchema([sw.OperandSpec("g", differentiable), sw.OperandSpec("x", differentiable)]),
        elementwise("demo.softsign_grad", 2),
        vjp=sw.NON_DIFFERENTIABLE,
    )

    def vjp(ctx: sw.VJPContext, cotangents: Tuple[Optional[sw.Tensor], ...]) -> Tuple[Optional[sw.Tensor]]:
        (g,) = cotangents
        (x,) = ctx.saved_operands
        return (None if g is None else softsign_grad(g, x),)

    def reference(invocation: sw.ResolvedInvocation) -> sw.Tensor:
        # The carrier-neutral oracle a kernel is compared with: computed on the CPU.
        (x,) = invocation.operands
        assert isinstance(x, sw.Tensor)
        return sw.Tensor.compact(sw.CPU.from_values([v / (1 + abs(v)) for v in values(x)]), x.shape)

    softsign = sw.define_operation(
        "demo.softsign",
        sw.OperationSchema([sw.OperandSpec("x", differentiable, differentiable=True)]),
        elementwise("demo.softsign", 1, saved=(0,)),
        reference,
        vjp,
    )
    patterns = [
        sw.KernelPattern(softsign, [sw.OperationCapability.from_plan(plan(softsign.name, 1))], "list.softsign", kernel(lambda x: x / (1 + abs(x)))),
        sw.KernelPattern(
            softsign_grad,
            [sw.OperationCapability.from_plan(plan(softsign_grad.name, 2))],
            "list.softsign_grad",
            kernel(lambda g, x: g / (1 + abs(x)) ** 2),
        ),
    ]
    interface = sw.KernelExecutionInterface("1")
    definition = sw.CarrierDefinition(STORAGE, kernels=sw.KernelProvider(interface, patterns))
    sw.register_carrier_definition(ListCarrier, definition)

    xs = [-3.0, -0.5, 0.0, 1.0]
    x = filled(xs)
    x.requires_grad = True
    y = softsign(x)
    print("softsign", [round(v, 4) for v in values(y)], "grad_fn", y.grad_fn)
    y.backward(filled([1.0, 1.0, 1.0, 1.0]))
    assert x.grad is not None
    print("gradient", [round(v, 4) for v in values(x.grad)])

    h = 1e-3
    with sw.no_grad():
        slopes = []
        for i in range(len(xs)):
            up, down = list(xs), list(xs)
            up[i] += h
            down[i] -= h
            slopes.append((values(softsign(filled(up)))[i] - values(softsign(filled(down)))[i]) / (2 * h))
    worst = max(abs(a - b) for a, b in zip(values(x.grad), slopes))
    print("matches finite differences:", worst < 1e-2)
    with sw.no_grad():
        invocation = softsign.resolve_call(filled(xs))
        (expected,) = softsign.run_reference(invocation)
        actual = softsign(filled(xs))
    spec = invocation.results[0]
    close = all(abs(a - e) <= spec.atol + spec.rtol * abs(e) for a, e in zip(values(actual), values(expected)))
    print("the kernel matches the reference:", close)
    try:
        softsign(sw.Tensor.compact(sw.CPU.from_values([1.0]), (1,)))
    except sw.UnsupportedOperationPlan as error:
        print("on a CPU tensor:", type(error).__name__, error.operation)


if __name__ == "__main__":
    main()
