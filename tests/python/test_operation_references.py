"""The reference implementation of a custom operation (the design's `define_operation(name,
schema, resolve, reference=None, vjp=...)`): an optional carrier-neutral oracle computing an
invocation's results, against which a carrier's kernel is compared within each ResultSpec's
`atol` and `rtol`. `define_operation` takes it (by position or keyword), the definition keeps
it as the core's reference callback and exposes it as `reference`; `resolve_call` gives the
invocation a provider would receive and `run_reference` runs the reference on it through the
core, checking its results as the framework checks a kernel's."""

from typing import Any, List

import pytest

import strideweave as sw

from authoring_helpers import F32, elementwise, filled, values_of
from test_custom_operations import carrier_running, fresh, same_shape_resolver, schema, tensor_plan


def on_cpu(values: List[float]) -> sw.Tensor:
    return sw.Tensor.compact(sw.CPU.from_values(values), (len(values),))


def cube_reference(seen: List[Any]) -> Any:
    """x**3 of the invocation's operand, computed on the CPU whatever carrier `x` is on."""

    def reference(invocation: sw.ResolvedInvocation) -> sw.Tensor:
        seen.append(invocation)
        (x,) = invocation.operands
        assert isinstance(x, sw.Tensor)
        return on_cpu([float(x[i]) ** 3 for i in range(x.size())])  # type: ignore[arg-type]

    return reference


def test_define_operation_keeps_the_reference_and_runs_it_on_a_resolved_call() -> None:
    seen: List[Any] = []
    reference = cube_reference(seen)
    cube = sw.define_operation(
        fresh("ref_cube"), schema("x"), same_shape_resolver(1), reference=reference, vjp=sw.NON_DIFFERENTIABLE
    )
    assert cube.reference is reference
    cls = carrier_running((cube, tensor_plan(cube.name, 1), elementwise(lambda v: v**3)))
    x = filled(cls, [1.0, -2.0, 0.5])
    invocation = cube.resolve_call(x)
    assert isinstance(invocation, sw.ResolvedInvocation)
    (operand,) = invocation.operands
    assert invocation.definition == cube and isinstance(operand, sw.Tensor) and operand.carrier is x.carrier
    assert seen == [], "resolving runs no reference and no kernel"
    (expected,) = cube.run_reference(invocation)
    assert len(seen) == 1 and seen[0].definition == cube and seen[0].operands[0].carrier is x.carrier
    assert type(expected.carrier) is sw.CPU and expected.to_list() == [1.0, -8.0, 0.125]
    spec = invocation.results[0]
    actual = cube(x)
    assert type(actual.carrier) is cls and len(seen) == 1, "running the operation calls no reference"
    for a, e in zip(values_of(actual), values_of(expected)):
        assert abs(a - e) <= spec.atol + spec.rtol * abs(e)


def test_the_reference_may_be_given_by_position_and_is_none_otherwise() -> None:
    reference = cube_reference([])
    positional = sw.define_operation(
        fresh("ref_positional"), schema("x"), same_shape_resolver(1), reference, sw.NON_DIFFERENTIABLE
    )
    assert positional.reference is reference
    assert sw.operation_definition(positional.name).reference is reference
    none = sw.define_operation(fresh("ref_none"), schema("x"), same_shape_resolver(1), vjp=sw.NON_DIFFERENTIABLE)
    assert none.reference is None
    assert sw.operation_definition("neg").reference is None
    invocation = none.resolve_call(on_cpu([1.0]))
    with pytest.raises(NotImplementedError, match=rf"^'{none.name}' has no reference implementation: "
                       "define_operation was given none$"):
        none.run_reference(invocation)
    with pytest.raises(ValueError, match=rf"^'{positional.name}' run_reference received an invocation of "
                       rf"'{none.name}'$"):
        positional.run_reference(invocation)
    with pytest.raises(TypeError, match="^run_reference invocation must be a ResolvedInvocation, got int$"):
        positional.run_reference(3)  # type: ignore[arg-type]


def test_a_reference_that_is_not_callable_defines_nothing() -> None:
    name = fresh("ref_not_callable")
    with pytest.raises(TypeError, match="^define_operation reference must be callable or None, got int$"):
        sw.define_operation(name, schema("x"), same_shape_resolver(1), reference=3, vjp=sw.NON_DIFFERENTIABLE)
    with pytest.raises(NotImplementedError, match="no operation named"):
        sw.operation_definition(name)


def test_an_exception_in_the_reference_propagates_as_itself() -> None:
    raised: List[BaseException] = []

    def reference(invocation: sw.ResolvedInvocation) -> Any:
        error = ArithmeticError("the oracle diverged")
        raised.append(error)
        raise error

    op = sw.define_operation(fresh("ref_raises"), schema("x"), same_shape_resolver(1), reference, sw.NON_DIFFERENTIABLE)
    with pytest.raises(ArithmeticError) as caught:
        op.run_reference(op.resolve_call(on_cpu([1.0])))
    assert caught.value is raised[0]


@pytest.mark.parametrize(
    "answer, kind, message",
    [
        (lambda x: 3, TypeError, "reference must return a Tensor or a tuple of Tensors, got int"),
        (lambda x: [x * 1.0, "y"], TypeError, "reference result 1 must be a Tensor, got str"),
        (lambda x: (x * 1.0, x * 2.0), sw.ProviderContractError, "reference returned 2 results for 1 result specs"),
        (lambda x: (), sw.ProviderContractError, "reference returned 0 results for 1 result specs"),
        (
            lambda x: on_cpu([1.0]),
            sw.ProviderContractError,
            "reference result 0 has Shape 1, its spec says 2",
        ),
        (
            lambda x: sw.Tensor.compact(sw.CPU.from_values([1, 2], dtype=sw.DType.Int32), (2,)),
            sw.ProviderContractError,
            "reference result 0 is Int32, its spec says Float32",
        ),
        (
            lambda x: sw.Tensor(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), 0, sw.Layout((2,), (2,))),
            sw.ProviderContractError,
            r"reference result 0 has layout 2:2, its spec says 2:1",
        ),
        (lambda x: x, sw.ProviderContractError, "reference result 0 shares storage with operand 0, but its spec aliases none"),
    ],
)
def test_a_reference_result_that_breaks_its_spec_is_named(answer: Any, kind: type, message: str) -> None:
    op = sw.define_operation(
        fresh("ref_wrong"),
        schema("x"),
        same_shape_resolver(1),
        reference=lambda invocation: answer(invocation.operands[0]),
        vjp=sw.NON_DIFFERENTIABLE,
    )
    with pytest.raises(kind) as caught:
        op.run_reference(op.resolve_call(on_cpu([1.0, 2.0])))
    prefix = "provider contract violated: " if kind is sw.ProviderContractError else ""
    assert str(caught.value) == f"{prefix}'{op.name}' {message}"
