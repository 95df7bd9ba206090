"""Custom operations defined from Python with a Python backward rule: the schema and plan
records, `define_operation`, running the operation on a carrier whose kernel executes it,
gradients through the rule (checked against finite differences), and failures: an exception
in the resolver, the kernel or the rule propagates as the same object with nothing published
and no gradient assigned; a wrong return is a TypeError or ValueError naming the operation
and the field."""

import dataclasses
import itertools
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.operation_policy import OperandRole

from authoring_helpers import F32, ListStorage, RingInterface, elementwise, filled, new_class, run_bounded, values_of

_NEXT = itertools.count()

#: A Float32 tensor operand and a weak scalar converted to Float32, as plans list them.
TENSOR_F32 = sw.OperandPlan(OperandRole.TENSOR, F32, F32)
SCALAR_F32 = sw.OperandPlan(OperandRole.WEAK_SCALAR, None, F32)


def fresh(stem: str) -> str:
    """A name no other test defines (definitions live for the whole process)."""
    return f"pytests.{stem}_{next(_NEXT)}"


def tensor_plan(name: str, operands: int, scalars: int = 0) -> sw.OperationPlan:
    """The Float32 plan of `name` on `operands` tensors followed by `scalars` weak scalars."""
    plans = [TENSOR_F32] * operands + [SCALAR_F32] * scalars
    return sw.OperationPlan(name, plans, sw.Arithmetic.BINARY32, None, None, F32)


def same_shape_resolver(operands: int, scalars: int = 0, saved: Sequence[int] = ()) -> Callable[[Any], Any]:
    """A resolver giving one Float32 result of the first operand's shape."""

    def resolve(call: sw.BoundOperationCall) -> sw.ResolvedInvocation:
        x = call.operands[0]
        assert isinstance(x, sw.Tensor)
        plan = tensor_plan(call.definition.name, operands, scalars)
        return sw.ResolvedInvocation(call, plan, [sw.ResultSpec(F32, x.shape)], saved_operands=saved)

    return resolve


def schema(*names: str, scalars: Sequence[str] = (), options: Sequence[sw.OptionSpec] = ()) -> sw.OperationSchema:
    """Differentiable tensor operands `names`, then weak-scalar operands `scalars`."""
    specs = [sw.OperandSpec(n, sw.OperandKind.TENSOR, differentiable=True) for n in names]
    specs += [sw.OperandSpec(n, sw.OperandKind.WEAK_SCALAR) for n in scalars]
    return sw.OperationSchema(specs, options)


def carrier_running(*patterns: Tuple[sw.OperationDefinition, sw.OperationPlan, Any]) -> type:
    """A fresh list-backed class whose kernel provider runs each `(operation, plan, prepare)`."""
    cls = new_class("Lists")
    kernels = [
        sw.KernelPattern(op, [sw.OperationCapability.from_plan(plan)], op.name, prepare)
        for op, plan, prepare in patterns
    ]
    provider = sw.KernelProvider(RingInterface(), kernels)
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), kernels=provider))
    return cls


def leaf(cls: type, values: List[float]) -> sw.Tensor:
    t = filled(cls, values)
    t.requires_grad = True
    return t


def finite_difference(f: Callable[[sw.Tensor], sw.Tensor], cls: type, x: List[float], weights: List[float], h: float = 1e-2) -> List[float]:
    """d/dx_i of sum_k weights[k] * f(x)[k], by central differences evaluated under no_grad."""

    def value(point: List[float]) -> float:
        with sw.no_grad():
            out = f(filled(cls, point))
        return sum(w * v for w, v in zip(weights, values_of(out)))

    slopes = []
    for i in range(len(x)):
        up = list(x)
        down = list(x)
        up[i] += h
        down[i] -= h
        slopes.append((value(up) - value(down)) / (2 * h))
    return slopes


def assert_close(actual: Sequence[float], expected: Sequence[float], tolerance: float = 2e-2) -> None:
    assert len(actual) == len(expected), (actual, expected)
    for a, e in zip(actual, expected):
        assert abs(a - e) <= tolerance * max(1.0, abs(e)), (actual, expected)


# --- a unary operation whose backward rule is a second custom operation -------------------


def define_cube() -> Tuple[sw.OperationDefinition, type, List[Any]]:
    """`cube(x) = x**3` with the rule `g -> cube_grad(g, x) = 3 x**2 g`, both run by one list
    class's Python kernels; returns the operation, the class and the contexts the rule saw."""
    contexts: List[Any] = []
    cube_grad = sw.define_operation(
        fresh("cube_grad"), schema("g", "x"), same_shape_resolver(2), vjp=sw.NON_DIFFERENTIABLE
    )

    def vjp(ctx: sw.VJPContext, cotangents: Tuple[Optional[sw.Tensor], ...]) -> Tuple[Optional[sw.Tensor]]:
        contexts.append((ctx, cotangents))
        (g,) = cotangents
        (x,) = ctx.saved_operands
        assert g is not None
        return (cube_grad(g, x),)

    cube = sw.define_operation(fresh("cube"), schema("x"), same_shape_resolver(1, saved=(0,)), vjp=vjp)
    cls = carrier_running(
        (cube, tensor_plan(cube.name, 1), elementwise(lambda x: x**3)),
        (cube_grad, tensor_plan(cube_grad.name, 2), elementwise(lambda g, x: 3 * x * x * g)),
    )
    return cube, cls, contexts


def test_a_custom_operation_runs_on_the_carrier_whose_kernel_executes_it() -> None:
    cube, cls, _ = define_cube()
    assert cube.name.startswith("pytests.cube_") and cube.is_builtin is False
    assert sw.operation_definition(cube.name) == cube
    x = filled(cls, [1.0, -2.0, 0.5])
    y = cube(x)
    assert values_of(y) == [1.0, -8.0, 0.125]
    assert type(y.carrier) is cls and y.shape == (3,)
    (z,) = sw.call(cube.name, x)
    assert values_of(z) == [1.0, -8.0, 0.125]
    assert x.version == 3  # the three writes that filled it, none by the operation


def test_gradients_flow_through_the_python_rule_and_match_finite_differences() -> None:
    cube, cls, contexts = define_cube()
    xs = [1.0, -2.0, 0.5, 1.5]
    weights = [1.0, 0.5, -2.0, 3.0]
    x = leaf(cls, xs)
    y = cube(x)
    assert y.grad_fn == cube.name and y.requires_grad
    y.backward(filled(cls, weights))
    assert x.grad is not None and type(x.grad.carrier) is cls
    assert values_of(x.grad) == [3 * v * v * w for v, w in zip(xs, weights)]
    assert_close(values_of(x.grad), finite_difference(cube, cls, xs, weights))

    (ctx, cotangents) = contexts[-1]
    assert ctx.invocation.definition == cube and ctx.invocation.saved_operands == (0,)
    assert [values_of(t) for t in ctx.saved_operands] == [xs]
    assert [values_of(t) for t in ctx.outputs] == [[v**3 for v in xs]]
    assert ctx.outputs[0].grad_fn is None  # outputs are detached
    assert len(cotangents) == 1 and cotangents[0] is not None and values_of(cotangents[0]) == weights

    # grad() gives the same gradient without touching .grad.
    before = values_of(x.grad)
    (g,) = sw.grad(cube(x), [x], [filled(cls, weights)])
    assert g is not None and values_of(g) == before and values_of(x.grad) == before


def test_a_chain_of_custom_and_built_in_operations_differentiates_end_to_end() -> None:
    cube, cls, _ = define_cube()
    xs = [0.5, -1.0, 2.0]
    weights = [1.0, 1.0, 1.0]
    x = leaf(cls, xs)
    cube(cube(x)).backward(filled(cls, weights))  # x**9
    assert x.grad is not None
    assert_close(values_of(x.grad), [9 * v**8 for v in xs], 1e-5)
    assert_close(values_of(x.grad), finite_difference(lambda t: cube(cube(t)), cls, xs, weights, 1e-3), 2e-2)


# --- operands, weak scalars and options; a rule computing in Python -----------------------


def define_lerp() -> Tuple[sw.OperationDefinition, type]:
    """`lerp(a, b, t; scale=1.0) = scale * (a + t (b - a))`: two differentiable tensors, a
    weak scalar and an option; the rule computes its gradients in Python."""

    def resolve(call: sw.BoundOperationCall) -> sw.ResolvedInvocation:
        a = call.operands[0]
        assert isinstance(a, sw.Tensor)
        plan = tensor_plan(call.definition.name, 2, 1)
        return sw.ResolvedInvocation(call, plan, [sw.ResultSpec(F32, a.shape)], saved_operands=(0, 1))

    def prepare(invocation: sw.ResolvedInvocation, interface: Any) -> ext.PreparedKernel:
        a, b, t = invocation.operands
        scale = invocation.call.options["scale"]
        assert isinstance(a, sw.Tensor) and isinstance(b, sw.Tensor) and isinstance(t, float)
        assert isinstance(scale, float)

        def submit() -> ext.ProviderResult:
            out = invocation.allocate_result(0)
            values = [scale * (p + t * (q - p)) for p, q in zip(values_of(a), values_of(b))]
            for i, v in enumerate(values):
                out.carrier.slots[i] = v
            return ext.ProviderResult([out])

        return ext.PreparedKernel(interface, submit)

    holder: Dict[str, type] = {}

    def vjp(ctx: sw.VJPContext, cotangents: Tuple[Optional[sw.Tensor], ...]) -> List[Optional[sw.Tensor]]:
        (g,) = cotangents
        assert g is not None
        t = ctx.invocation.operands[2]
        scale = ctx.invocation.call.options["scale"]
        assert isinstance(t, float) and isinstance(scale, float)
        gs = values_of(g)
        cls = holder["cls"]
        return [filled(cls, [scale * (1 - t) * v for v in gs]), filled(cls, [scale * t * v for v in gs])]

    lerp = sw.define_operation(
        fresh("lerp"),
        schema("a", "b", scalars=["t"], options=[sw.OptionSpec("scale", 1.0)]),
        resolve,
        vjp=vjp,
    )
    holder["cls"] = carrier_running((lerp, tensor_plan(lerp.name, 2, 1), prepare))
    return lerp, holder["cls"]


def test_weak_scalar_operands_and_options_reach_the_resolver_kernel_and_rule() -> None:
    lerp, cls = define_lerp()
    a_values, b_values, weights = [1.0, 2.0, -1.0], [3.0, -2.0, 1.0], [1.0, 2.0, 0.5]
    a, b = leaf(cls, a_values), leaf(cls, b_values)
    y = lerp(a, b, 0.25)
    assert values_of(y) == [1.5, 1.0, -0.5]
    (y2,) = sw.call(lerp, a, b, 0.25, scale=2.0)
    assert values_of(y2) == [3.0, 2.0, -1.0]
    y2.backward(filled(cls, weights))
    assert a.grad is not None and b.grad is not None
    assert values_of(a.grad) == [2.0 * 0.75 * w for w in weights]
    assert values_of(b.grad) == [2.0 * 0.25 * w for w in weights]
    fd_a = finite_difference(lambda t: lerp(t, filled(cls, b_values), 0.25, scale=2.0), cls, a_values, weights)
    fd_b = finite_difference(lambda t: lerp(filled(cls, a_values), t, 0.25, scale=2.0), cls, b_values, weights)
    assert_close(values_of(a.grad), fd_a)
    assert_close(values_of(b.grad), fd_b)


def test_the_call_is_bound_against_the_schema_before_anything_resolves() -> None:
    lerp, cls = define_lerp()
    a, b = filled(cls, [1.0]), filled(cls, [2.0])
    with pytest.raises(TypeError, match=f"^'{lerp.name}' takes 3 operands, got 2$"):
        lerp(a, b)
    with pytest.raises(TypeError, match=f"^'{lerp.name}' has no option 'shift'$"):
        lerp(a, b, 0.5, shift=1.0)
    with pytest.raises(TypeError, match=f"^operand 1 of '{lerp.name}' must be a Tensor or a real Python number \\(bool, int or float\\), got str$"):
        lerp(a, "b", 0.5)
    with pytest.raises(TypeError, match=f"^option 'scale' of '{lerp.name}' must be None, a DType, or a bool, int or float, got list$"):
        lerp(a, b, 0.5, scale=[2.0])
    with pytest.raises(TypeError, match="^call operation must be an OperationDefinition or a str, got int$"):
        sw.call(3, a)  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="^no operation named 'pytests.never' is defined$"):
        sw.call("pytests.never", a)


def test_a_required_option_must_be_given() -> None:
    def resolve(call: sw.BoundOperationCall) -> sw.ResolvedInvocation:
        assert call.options == {"power": 3}
        x = call.operands[0]
        assert isinstance(x, sw.Tensor)
        return sw.ResolvedInvocation(call, tensor_plan(call.definition.name, 1), [sw.ResultSpec(F32, x.shape)])

    # The original's spelling: a missing default is REQUIRED; an explicit None is a default.
    assert sw.OptionSpec("power").default is sw.REQUIRED
    assert sw.OptionSpec("power", None).default is None and sw.OptionSpec("p", default=2).default == 2
    with pytest.raises(TypeError, match="^OptionSpec takes a name and at most one default$"):
        sw.OptionSpec("power", 1, 2)  # type: ignore[call-arg]
    option = sw.OptionSpec("power", sw.REQUIRED)
    assert option.name == "power" and option.default is sw.REQUIRED
    op = sw.define_operation(fresh("power"), schema("x", options=[option]), resolve, vjp=sw.NON_DIFFERENTIABLE)
    cls = carrier_running((op, tensor_plan(op.name, 1), elementwise(lambda x: x**3)))
    x = filled(cls, [2.0])
    with pytest.raises(TypeError, match=f"^'{op.name}' needs the option 'power'$"):
        op(x)
    assert values_of(op(x, power=3)) == [8.0]


def test_a_non_differentiable_operation_records_nothing() -> None:
    op = sw.define_operation(fresh("flat"), schema("x"), same_shape_resolver(1), vjp=sw.NON_DIFFERENTIABLE)
    cls = carrier_running((op, tensor_plan(op.name, 1), elementwise(lambda x: 2 * x)))
    x = leaf(cls, [1.0, 2.0])
    y = op(x)
    assert values_of(y) == [2.0, 4.0]
    assert y.grad_fn is None and y.requires_grad is False and y.is_leaf


# --- where it runs ------------------------------------------------------------------------


def test_a_carrier_without_a_kernel_for_it_raises_unsupported_operation_plan() -> None:
    cube, cls, _ = define_cube()
    cpu = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    with pytest.raises(sw.UnsupportedOperationPlan) as raised:
        cube(cpu)
    assert raised.value.operation == cube.name
    assert len(raised.value.reasons) == 1 and "CPU" in raised.value.reasons[0]
    other = carrier_running()
    with pytest.raises(sw.UnsupportedOperationPlan) as raised:
        cube(filled(other, [1.0]))
    assert raised.value.operation == cube.name


def test_backward_through_the_rule_on_another_thread_takes_the_gil_back() -> None:
    cube, cls, contexts = define_cube()
    x = leaf(cls, [1.0, 2.0])
    y = cube(x)
    seen: List[int] = []

    def backward() -> None:
        seen.append(threading.get_ident())
        y.backward(filled(cls, [1.0, 1.0]))

    run_bounded(backward)
    assert x.grad is not None and values_of(x.grad) == [3.0, 12.0]
    assert seen and seen[0] != threading.get_ident()


# --- failures -----------------------------------------------------------------------------


class Boom(Exception):
    pass


def test_an_exception_in_the_rule_propagates_as_the_same_object_and_assigns_no_gradient() -> None:
    raised = Boom("the rule failed")
    calls: List[int] = []

    def vjp(ctx: sw.VJPContext, cotangents: Tuple[Optional[sw.Tensor], ...]) -> Tuple[Optional[sw.Tensor]]:
        calls.append(1)
        if len(calls) == 1:
            raise raised
        (g,) = cotangents
        return (g,)

    op = sw.define_operation(fresh("fragile"), schema("x"), same_shape_resolver(1), vjp=vjp)
    cls = carrier_running((op, tensor_plan(op.name, 1), elementwise(lambda x: x + 1)))
    x = leaf(cls, [1.0, 2.0])
    y = op(x)
    with pytest.raises(Boom) as failure:
        y.backward(filled(cls, [1.0, 1.0]))
    assert failure.value is raised
    assert x.grad is None
    with pytest.raises(Boom) as failure:
        calls.clear()
        sw.grad(y, [x], [filled(cls, [1.0, 1.0])], retain_graph=True)
    assert failure.value is raised
    # The failed pass freed nothing: the graph still runs, and assigns the gradient once.
    y.backward(filled(cls, [2.0, 3.0]))
    assert x.grad is not None and values_of(x.grad) == [2.0, 3.0]


def test_an_exception_in_the_kernel_or_the_resolver_propagates_and_publishes_nothing() -> None:
    kernel_error = Boom("the kernel failed")
    resolve_error = KeyError("the resolver failed")
    mode = {"resolve": "ok"}

    def resolve(call: sw.BoundOperationCall) -> Any:
        if mode["resolve"] == "raise":
            raise resolve_error
        if mode["resolve"] == "int":
            return 7
        return same_shape_resolver(1, saved=(0,))(call)

    def failing(x: float) -> float:
        raise kernel_error

    op = sw.define_operation(fresh("broken"), schema("x"), resolve, vjp=lambda ctx, g: g)
    cls = carrier_running((op, tensor_plan(op.name, 1), elementwise(failing)))
    x = leaf(cls, [1.0, 2.0])
    with pytest.raises(Boom) as failure:
        op(x)
    assert failure.value is kernel_error
    mode["resolve"] = "raise"
    with pytest.raises(KeyError) as key_failure:
        op(x)
    assert key_failure.value is resolve_error
    mode["resolve"] = "int"
    with pytest.raises(TypeError, match=f"^'{op.name}' resolve must return a ResolvedInvocation, got int$"):
        op(x)
    assert x.version == 2 and values_of(x) == [1.0, 2.0] and x.grad is None


@pytest.mark.parametrize(
    "answer, error, message",
    [
        ("int", TypeError, "vjp must return a tuple or list of Tensor or None \\(one per differentiable operand\\), got int$"),
        ("two", ValueError, "vjp returned 2 gradients for 1 differentiable operands \\(x\\)$"),
        ("str", TypeError, "vjp gradient of operand 'x' must be a Tensor or None, got str$"),
        ("shape", ValueError, "vjp gradient of operand 'x' has Shape 3, the operand has Shape 2$"),
        ("dtype", TypeError, "vjp gradient of operand 'x' is Int32, the operand is Float32$"),
    ],
)
def test_a_wrong_return_of_the_rule_names_the_operation_and_the_field(answer: str, error: type, message: str) -> None:
    holder: Dict[str, type] = {}

    def vjp(ctx: sw.VJPContext, cotangents: Tuple[Optional[sw.Tensor], ...]) -> Any:
        (g,) = cotangents
        return {
            "int": 3,
            "two": (g, g),
            "str": ("gradient",),
            "shape": (filled(holder["cls"], [1.0, 2.0, 3.0]),),
            "dtype": (sw.Tensor.compact(sw.CPU.from_values([1, 2], dtype=sw.DType.Int32), (2,)),),
        }[answer]

    op = sw.define_operation(fresh("wrong"), schema("x"), same_shape_resolver(1), vjp=vjp)
    holder["cls"] = cls = carrier_running((op, tensor_plan(op.name, 1), elementwise(lambda x: x)))
    x = leaf(cls, [1.0, 2.0])
    with pytest.raises(error, match=f"^'{op.name}' " + message):
        op(x).backward(filled(cls, [1.0, 1.0]))
    assert x.grad is None


# --- the records and define_operation's checks --------------------------------------------


def test_the_schema_records_check_their_fields() -> None:
    spec = sw.OperandSpec("x", sw.OperandKind.TENSOR, differentiable=True)
    assert (spec.name, spec.kind, spec.differentiable) == ("x", sw.OperandKind.TENSOR, True)
    assert sw.OperandKind.WEAK_SCALAR.value == "weak_scalar" and sw.OperandKind.STRUCTURAL.value == "structural"
    with pytest.raises(TypeError, match="^OperandSpec kind must be an OperandKind, got str$"):
        sw.OperandSpec("x", "tensor")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^OperandSpec differentiable must be a bool, got int$"):
        sw.OperandSpec("x", sw.OperandKind.TENSOR, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="differentiable"):
        sw.OperandSpec("s", sw.OperandKind.WEAK_SCALAR, differentiable=True)
    with pytest.raises(ValueError, match="identifier"):
        sw.OperandSpec("not a name", sw.OperandKind.TENSOR)
    with pytest.raises(ValueError, match="^an operation schema needs at least one operand$"):
        sw.OperationSchema([])
    with pytest.raises(ValueError, match="^an operation schema names 'x' twice$"):
        sw.OperationSchema([spec, spec])
    with pytest.raises(TypeError, match="^OperationSchema operands must hold OperandSpec values, got str$"):
        sw.OperationSchema(["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="^OperationSchema options must hold OptionSpec values, got OperandSpec$"):
        sw.OperationSchema([spec], [spec])  # type: ignore[list-item]
    consumed = sw.OperationSchema(iter([spec]), options=iter([sw.OptionSpec("k", None)]))
    assert consumed.operands == (spec,) and [o.name for o in consumed.options] == ["k"]
    assert consumed.options[0].default is None
    with pytest.raises(TypeError, match="^OptionSpec default must be None, a DType, or a bool, int or float, got str$"):
        sw.OptionSpec("k", "x")  # type: ignore[arg-type]


def test_the_plan_records_check_their_fields() -> None:
    plan = sw.OperationPlan("mylib.op", [TENSOR_F32, SCALAR_F32], sw.Arithmetic.BINARY32, None, None, F32)
    assert plan.operation == "mylib.op" and plan.compute is sw.Arithmetic.BINARY32 and plan.output is F32
    assert plan.accumulation is None and plan.accumulator_dtype is None
    roles = [(p.role, p.role.value, p.dtype, p.convert_to) for p in plan.operands]
    assert roles == [(OperandRole.TENSOR, "tensor", F32, F32), (OperandRole.WEAK_SCALAR, "weak_scalar", None, F32)]
    twin = sw.OperationPlan(
        operation="mylib.op",
        operands=(TENSOR_F32, SCALAR_F32),
        compute=sw.Arithmetic.BINARY32,
        accumulation=None,
        accumulator_dtype=None,
        output=F32,
    )
    assert plan == twin and hash(plan) == hash(twin)
    assert str(plan) == "mylib.op with operands (tensor Float32->Float32, weak_scalar->Float32), binary32 compute, no accumulation, Float32 output"
    assert sw.OperationCapability.from_plan(plan) == sw.OperationCapability.from_plan(twin)
    reduce = sw.OperationPlan("mylib.sum", [TENSOR_F32], sw.Arithmetic.BINARY32, sw.Accumulation.FLOATING, F32, F32)
    assert reduce.accumulation is sw.Accumulation.FLOATING and reduce.accumulator_dtype is F32
    assert reduce.compute.value == "binary32" and reduce.accumulation.value == "floating"
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'output'"):
        sw.OperationPlan("mylib.op", [TENSOR_F32], sw.Arithmetic.BINARY32, None, None)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="^the plan for 'mylib.op' needs at least one operand$"):
        sw.OperationPlan("mylib.op", [], sw.Arithmetic.BINARY32, None, None, F32)
    with pytest.raises(TypeError, match="^OperationPlan compute must be an Arithmetic, got str$"):
        sw.OperationPlan("mylib.op", [TENSOR_F32], "binary32", None, None, F32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^OperationPlan operands must hold OperandPlan values, got DType$"):
        sw.OperationPlan("mylib.op", [F32], sw.Arithmetic.BINARY32, None, None, F32)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="^OperationPlan accumulation must be an Accumulation or None, got str$"):
        sw.OperationPlan("mylib.op", [TENSOR_F32], sw.Arithmetic.BINARY32, "floating", None, F32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^OperationPlan output must be a SimpleDType, got the category Floating$"):
        sw.OperationPlan("mylib.op", [TENSOR_F32], sw.Arithmetic.BINARY32, None, None, sw.DType.Floating)
    with pytest.raises(TypeError, match="^OperationCapability.from_plan plan must be an OperationPlan, got str$"):
        sw.OperationCapability.from_plan("add")  # type: ignore[arg-type]


def test_operand_plans_take_the_role_dtype_and_conversion() -> None:
    widened = sw.OperandPlan(OperandRole.TENSOR, sw.DType.Int32, F32)
    assert (widened.role, widened.dtype, widened.convert_to) == (OperandRole.TENSOR, sw.DType.Int32, F32)
    assert widened == sw.OperandPlan(role=OperandRole.TENSOR, dtype=sw.DType.Int32, convert_to=F32)
    assert hash(widened) == hash(sw.OperandPlan(OperandRole.TENSOR, sw.DType.Int32, F32))
    assert repr(SCALAR_F32) == "OperandPlan(role=OperandRole.WEAK_SCALAR, dtype=None, convert_to=Float32)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        widened.convert_to = sw.DType.Int32  # type: ignore[misc]
    with pytest.raises(TypeError, match="^OperandPlan role must be an OperandRole, got str$"):
        sw.OperandPlan("tensor", F32, F32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^a tensor operand plan needs a storage dtype: OperandPlan dtype is None$"):
        sw.OperandPlan(OperandRole.TENSOR, None, F32)
    with pytest.raises(TypeError, match="^a weak scalar operand plan has no storage dtype: OperandPlan dtype must be None, got Int32$"):
        sw.OperandPlan(OperandRole.WEAK_SCALAR, sw.DType.Int32, sw.DType.Int32)
    with pytest.raises(TypeError, match="^OperandPlan convert_to must be a SimpleDType, got the category Floating$"):
        sw.OperandPlan(OperandRole.TENSOR, F32, sw.DType.Floating)
    with pytest.raises(TypeError, match="^OperandPlan dtype must be a SimpleDType, got int$"):
        sw.OperandPlan(OperandRole.TENSOR, 3, F32)  # type: ignore[arg-type]


def test_result_specs_and_invocations_check_their_fields() -> None:
    spec = sw.ResultSpec(F32, (2, 3), atol=1e-6, rtol=0)
    assert spec.dtype is F32 and spec.shape == (2, 3) and str(spec.layout) == "(2,3):(1,2)"
    assert (spec.atol, spec.rtol, spec.alias_of) == (1e-6, 0.0, None)
    assert str(sw.ResultSpec(F32, (2, 3), sw.Layout("(2,3):(3,1)")).layout) == "(2,3):(3,1)"
    with pytest.raises(ValueError, match="^ResultSpec layout \\(3,2\\):\\(1,3\\) does not have the result Shape \\(2,3\\)$"):
        sw.ResultSpec(F32, (2, 3), sw.Layout((3, 2)))
    with pytest.raises(ValueError, match="^ResultSpec atol must be finite and >= 0, got -1$"):
        sw.ResultSpec(F32, (2,), atol=-1.0)
    with pytest.raises(TypeError, match="^ResultSpec rtol must be a finite int or float, got bool$"):
        sw.ResultSpec(F32, (2,), rtol=True)
    seen: List[str] = []

    def resolve(call: sw.BoundOperationCall) -> sw.ResolvedInvocation:
        plan = tensor_plan(call.definition.name, 1)
        result = [sw.ResultSpec(F32, (2,))]
        for attempt in [
            lambda: sw.ResolvedInvocation(call, plan, []),
            lambda: sw.ResolvedInvocation(call, plan, result, saved_operands=(1,)),
            lambda: sw.ResolvedInvocation(call, plan, result, kernel_id=""),
            lambda: sw.ResolvedInvocation(call, tensor_plan("pytests.other", 1), result),
            lambda: sw.ResolvedInvocation(call, tensor_plan(call.definition.name, 1, 1), result),
        ]:
            with pytest.raises(ValueError) as failure:
                attempt()
            seen.append(str(failure.value))
        with pytest.raises(TypeError, match="^ResolvedInvocation call must be a BoundOperationCall, got str$"):
            sw.ResolvedInvocation("call", plan, result)  # type: ignore[arg-type]
        invocation = sw.ResolvedInvocation(call, plan, result, saved_operands=[0], kernel_id="k")
        assert invocation.kernel_id == "k" and invocation.saved_operands == (0,)
        assert invocation.call.definition == call.definition
        return invocation

    op = sw.define_operation(fresh("checked"), schema("x"), resolve, vjp=sw.NON_DIFFERENTIABLE)
    cls = carrier_running((op, tensor_plan(op.name, 1), elementwise(lambda x: x)))
    assert values_of(op(filled(cls, [4.0, 5.0]))) == [4.0, 5.0]
    assert seen == [
        f"'{op.name}' must declare at least one result",
        f"saved_operands index 1 of '{op.name}' is not a tensor operand",
        f"the kernel id of '{op.name}' is empty",
        f"the plan of 'pytests.other' cannot resolve a call of '{op.name}'",
        f"the plan of '{op.name}' does not match the roles of the call's operands",
    ]


def test_define_operation_checks_the_name_the_schema_the_resolver_and_the_rule() -> None:
    good = schema("x")
    resolve = same_shape_resolver(1)
    with pytest.raises(ValueError, match="^a custom operation name needs at least two dot-separated identifiers"):
        sw.define_operation("foo", good, resolve, vjp=sw.NON_DIFFERENTIABLE)
    with pytest.raises(ValueError, match="reserved namespace 'strideweave'"):
        sw.define_operation("strideweave.x", good, resolve, vjp=sw.NON_DIFFERENTIABLE)
    with pytest.raises(ValueError, match="reserved namespace 'add'"):
        sw.define_operation("add.x", good, resolve, vjp=sw.NON_DIFFERENTIABLE)
    name = fresh("once")
    sw.define_operation(name, good, resolve, vjp=sw.NON_DIFFERENTIABLE)
    with pytest.raises(ValueError, match=f"^an operation named \"{name}\" is already defined$"):
        sw.define_operation(name, good, resolve, vjp=sw.NON_DIFFERENTIABLE)
    missing = fresh("novjp")
    with pytest.raises(ValueError, match=f"^define_operation '{missing}' needs a vjp: a callable backward rule, or NON_DIFFERENTIABLE$"):
        sw.define_operation(missing, good, resolve)
    with pytest.raises(TypeError, match="^define_operation vjp must be callable or NON_DIFFERENTIABLE, got int$"):
        sw.define_operation(missing, good, resolve, vjp=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^define_operation resolve must be callable, got int$"):
        sw.define_operation(missing, good, 3, vjp=sw.NON_DIFFERENTIABLE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^define_operation schema must be an OperationSchema, got tuple$"):
        sw.define_operation(missing, (), resolve, vjp=sw.NON_DIFFERENTIABLE)  # type: ignore[arg-type]
    # None of the refused definitions took the name.
    with pytest.raises(NotImplementedError):
        sw.operation_definition(missing)
    assert repr(sw.NON_DIFFERENTIABLE) == "NON_DIFFERENTIABLE" and repr(sw.REQUIRED) == "REQUIRED"


def test_a_registration_race_from_python_threads_has_one_winner() -> None:
    name = fresh("raced")
    outcomes: List[str] = []
    barrier = threading.Barrier(4)

    def register() -> None:
        barrier.wait(timeout=10)
        try:
            sw.define_operation(name, schema("x"), same_shape_resolver(1), vjp=sw.NON_DIFFERENTIABLE)
            outcomes.append("won")
        except ValueError as error:
            outcomes.append(str(error))

    threads = [threading.Thread(target=register) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == sorted(["won"] + [f'an operation named "{name}" is already defined'] * 3)
