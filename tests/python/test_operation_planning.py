"""The planner and capability records as the original spells them: `OperandRole`,
`OperandPlan(role, dtype, convert_to)`, `OperationPlan` in the original's field order,
`resolve_operation_plan(operation, *operands, accumulator_dtype=None)`, the
`registered_operations()` specs, `OperandCapability`, the fields and `matches` of
`OperationCapability`, and the carrier-instance capability queries."""

import dataclasses
from typing import Any, Tuple

import pytest

import strideweave as sw
from strideweave.carriers import operation_capability as capability_module
from strideweave.carriers.operation_capability import (
    OperandCapability,
    OperationCapability,
    carrier_operation_capabilities,
    carrier_supports_operation_plan,
    carrier_unsupported_plan_reason,
    require_carrier_capability,
)
from strideweave.carriers.operation_policy import (
    Accumulation,
    Arithmetic,
    OperandPlan,
    OperandRole,
    OperationOverload,
    OperationPlan,
    OperationSpec,
    registered_operations,
    resolve_operation_plan,
)

F32 = sw.DType.Float32
F64 = sw.DType.Float64
I32 = sw.DType.Int32
BOOL = sw.DType.Bool
TENSOR = OperandRole.TENSOR
SCALAR = OperandRole.WEAK_SCALAR


def conversions(plan: OperationPlan) -> Tuple[Any, ...]:
    return tuple((operand.role, operand.dtype, operand.convert_to) for operand in plan.operands)


def test_operand_roles_are_enum_members_with_the_original_values() -> None:
    assert [TENSOR.value, SCALAR.value] == ["tensor", "weak_scalar"]
    assert TENSOR is OperandRole.TENSOR and TENSOR != SCALAR
    assert {TENSOR: 1}[OperandRole.TENSOR] == 1
    assert sw.OperandPlan is OperandPlan and sw.operation.OperationPlan is OperationPlan


def test_resolve_operation_plan_gives_the_planners_plans() -> None:
    mixed = resolve_operation_plan("add", I32, F32)
    assert mixed.operation == "add"
    assert conversions(mixed) == ((TENSOR, I32, F32), (TENSOR, F32, F32))
    assert (mixed.compute, mixed.accumulation, mixed.output) == (Arithmetic.BINARY32, None, F32)

    scaled = resolve_operation_plan("mul", I32, 3)
    assert conversions(scaled) == ((TENSOR, I32, I32), (SCALAR, None, I32))
    assert scaled.compute is Arithmetic.INT32_EXACT_CHECKED and scaled.output is I32
    reversed_order = resolve_operation_plan("mul", 0.5, I32)
    assert [operand.role for operand in reversed_order.operands] == [SCALAR, TENSOR]
    assert reversed_order.output is F32
    assert resolve_operation_plan("mul", I32, True).output is F32

    summed = resolve_operation_plan("reduce_sum", I32)
    assert (summed.compute, summed.accumulation) == (
        Arithmetic.INT32_EXACT_CHECKED,
        Accumulation.EXACT_INTEGER,
    )
    widened = resolve_operation_plan("reduce_sum", F32, accumulator_dtype=F64)
    assert widened.accumulator_dtype is F64 and widened != resolve_operation_plan("reduce_sum", F32)
    assert resolve_operation_plan("select", BOOL, F32, 1).output is F32
    assert hash(mixed) == hash(resolve_operation_plan("add", I32, F32))
    with pytest.raises(dataclasses.FrozenInstanceError):
        mixed.output = I32  # type: ignore[misc]


@pytest.mark.parametrize(
    ("operation", "operands", "error", "message"),
    [
        ("floor_div", (I32, I32), NotImplementedError, "^no dtype plan is defined for 'floor_div': it is not a built-in operation"),
        ("add", (F32,), TypeError, r"^'add' takes 2 operands: two tensors; got 1 operand\(s\) \(tensor Float32\)$"),
        ("add", ("Float32", F32), TypeError, r"^resolve_operation_plan operand 0 must be a DType \(a tensor operand\) or a real Python number \(a weak scalar\), got str$"),
        ("mul", (F32, None), TypeError, "operand 1 must be a DType .* or a real Python number .*, got NoneType$"),
        ("add", (sw.DType.Any, F32), TypeError, "^'add' needs tensors of a simple dtype, got a tensor of the category Any$"),
        ("add", (sw.DType.Int8, I32), NotImplementedError, r"^'add': no backend implements operations on Int8 tensors \(plans compute on Float32, Int32 and Bool\)$"),
        ("mul", (I32, 2**31), OverflowError, r"^'mul': weak scalar 2147483648 meets an Int32 plan and is out of int32 range \[-2147483648, 2147483647\]$"),
    ],
)
def test_resolve_operation_plan_refusals_name_the_operand(
    operation: str, operands: Tuple[Any, ...], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        resolve_operation_plan(operation, *operands)


def test_resolve_operation_plan_checks_its_name_and_accumulator() -> None:
    with pytest.raises(TypeError, match="^resolve_operation_plan operation must be a str, got int$"):
        resolve_operation_plan(7, F32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^resolve_operation_plan accumulator_dtype must be a DType or None, got str$"):
        resolve_operation_plan("reduce_sum", F32, accumulator_dtype="Float64")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes no accumulator dtype"):
        resolve_operation_plan("add", F32, F32, accumulator_dtype=F64)
    assert resolve_operation_plan("mul", F32, 2**31).output is F32


def test_registered_operations_list_each_builtins_signatures() -> None:
    specs = {spec.name: spec for spec in registered_operations()}
    assert len(specs) == 22 and registered_operations() is registered_operations()
    assert {"add", "mul", "relu", "reduce_sum", "matmul", "select"} <= set(specs)
    (add,) = specs["add"].overloads
    assert add.roles == (TENSOR, TENSOR) and add.tensor_domains == ((F32, I32), (F32, I32))
    assert specs["add"].roles == (TENSOR, TENSOR)
    assert specs["add"].rule(I32, I32) == resolve_operation_plan("add", I32, I32)
    assert {overload.roles for overload in specs["mul"].overloads} == {
        (TENSOR, TENSOR),
        (TENSOR, SCALAR),
        (SCALAR, TENSOR),
    }
    with pytest.raises(AttributeError, match="^operation 'mul' has 3 overloads; iterate overloads$"):
        specs["mul"].roles
    (select_tensors,) = [o for o in specs["select"].overloads if o.roles == (TENSOR, TENSOR, TENSOR)]
    assert select_tensors.tensor_domains is not None and select_tensors.tensor_domains[0] == (BOOL,)
    for spec in specs.values():
        assert spec.public and spec.dtype_operand_positions is None
        for overload in spec.overloads:
            assert overload.tensor_domains is not None
            assert len(overload.tensor_domains) == overload.roles.count(TENSOR)


def test_operation_specs_validate_their_overloads() -> None:
    relu = OperationOverload((TENSOR,), lambda dtype: resolve_operation_plan("relu", dtype))
    assert OperationSpec("mine", (relu,)).rule(F32).operation == "relu"
    with pytest.raises(ValueError, match="^operation 'twice' declares one operand-role signature twice$"):
        OperationSpec("twice", (relu, relu))
    with pytest.raises(ValueError, match="^operation 'none': an OperationSpec must declare at least one overload$"):
        OperationSpec("none", ())
    cases = [
        ((-1,), r"must be non-negative, got \(-1,\)$"),
        ((1, 0), r"must be unique and increasing, got \(1, 0\)$"),
        ((0, 0), "must be unique and increasing"),
        ((0, 1), r"dtype operand positions \(0, 1\) must match every overload arity$"),
    ]
    for positions, message in cases:
        with pytest.raises(ValueError, match=message):
            OperationSpec("positions", (relu,), dtype_operand_positions=positions)
    with pytest.raises(TypeError, match="^OperationOverload roles\\[0\\] must be an OperandRole, got str$"):
        OperationOverload(("tensor",), relu.rule)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"one dtype domain per tensor role \(1\), got 2$"):
        OperationOverload((TENSOR,), relu.rule, ((F32,), (F32,)))
    with pytest.raises(ValueError, match="a tensor dtype domain must not be empty$"):
        OperationOverload((TENSOR,), relu.rule, ((),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        relu.roles = ()  # type: ignore[misc]


def test_operand_capabilities_check_their_fields() -> None:
    scalar = OperandCapability(SCALAR, None, I32)
    assert (scalar.role, scalar.dtype, scalar.convert_to) == (SCALAR, None, I32)
    assert scalar == OperandCapability(role=SCALAR, dtype=None, convert_to=I32)
    assert repr(scalar) == "OperandCapability(role=OperandRole.WEAK_SCALAR, dtype=None, convert_to=Int32)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        scalar.dtype = I32  # type: ignore[misc]
    cases = [
        ((TENSOR, None, F32), "^a tensor operand capability needs a storage dtype: OperandCapability dtype is None$"),
        ((SCALAR, I32, I32), "^a weak scalar operand capability has no storage dtype: OperandCapability dtype must be None, got Int32$"),
        (("tensor", F32, F32), "^OperandCapability role must be an OperandRole, got str$"),
        ((TENSOR, F32, sw.DType.Floating), "^OperandCapability convert_to must be a SimpleDType, got the category Floating$"),
    ]
    for fields, message in cases:
        with pytest.raises(TypeError, match=message):
            OperandCapability(*fields)  # type: ignore[arg-type]


def test_operation_capabilities_expose_and_match_their_plan() -> None:
    plan = resolve_operation_plan("mul", I32, 3)
    entry = OperationCapability.from_plan(plan)
    assert entry.operation == "mul" and entry.compute is plan.compute and entry.output is I32
    assert entry.accumulation is None and entry.accumulator_dtype is None
    assert [(o.role, o.dtype, o.convert_to) for o in entry.operands] == [(TENSOR, I32, I32), (SCALAR, None, I32)]
    assert all(isinstance(operand, OperandCapability) for operand in entry.operands)
    assert entry.matches(plan) and not entry.matches(resolve_operation_plan("mul", I32, 0.5))
    built = OperationCapability(
        operation="mul",
        operands=(OperandCapability(TENSOR, I32, I32), OperandCapability(SCALAR, None, I32)),
        compute=Arithmetic.INT32_EXACT_CHECKED,
        accumulation=None,
        accumulator_dtype=None,
        output=I32,
    )
    assert built == entry and hash(built) == hash(entry) and built.matches(plan)
    reduce = OperationCapability.from_plan(resolve_operation_plan("reduce_sum", F32, accumulator_dtype=F64))
    assert reduce.accumulation is Accumulation.FLOATING and reduce.accumulator_dtype is F64
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.output = F32  # type: ignore[misc]
    with pytest.raises(TypeError, match="^OperationCapability.matches plan must be an OperationPlan, got str$"):
        entry.matches("mul")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("operands", (), ValueError, "^the plan for 'add' needs at least one operand$"),
        ("operands", (F32,), TypeError, "^OperationCapability operands must hold OperandCapability values, got DType$"),
        ("compute", "binary32", TypeError, "^OperationCapability compute must be an Arithmetic, got str$"),
        ("accumulation", "floating", TypeError, "^OperationCapability accumulation must be an Accumulation or None, got str$"),
        ("accumulator_dtype", sw.DType.Floating, TypeError, "^OperationCapability accumulator_dtype must be a SimpleDType or None, got the category Floating$"),
        ("output", sw.DType.Any, TypeError, "^OperationCapability output must be a SimpleDType, got the category Any$"),
        ("operation", 7, TypeError, "^OperationCapability operation must be a str, got int$"),
    ],
)
def test_a_malformed_operation_capability_names_its_field(
    field: str, value: Any, error: type, message: str
) -> None:
    fields: dict = {
        "operation": "add",
        "operands": (OperandCapability(TENSOR, F32, F32),),
        "compute": Arithmetic.BINARY32,
        "accumulation": None,
        "accumulator_dtype": None,
        "output": F32,
    }
    fields[field] = value
    with pytest.raises(error, match=message):
        OperationCapability(**fields)


def test_carrier_instance_queries_answer_as_the_carrier_does() -> None:
    carrier = sw.CPU(1, dtype=F32)
    relu_int = resolve_operation_plan("relu", I32)
    assert carrier_operation_capabilities(carrier, "relu") == carrier.operation_capabilities("relu")
    assert len(carrier_operation_capabilities(carrier, "relu")) == 2
    assert carrier_supports_operation_plan(carrier, relu_int)
    assert carrier_unsupported_plan_reason(carrier, relu_int) is None
    assert require_carrier_capability(carrier, relu_int).matches(relu_int)
    assert "carrier_operation_capabilities" in capability_module.__all__
    with pytest.raises(TypeError, match="^carrier must be a carrier instance, not a class \\(got the class CPU\\)$"):
        carrier_operation_capabilities(sw.CPU)
    with pytest.raises(TypeError, match="^carrier must be a Carrier instance, got object$"):
        carrier_supports_operation_plan(object(), relu_int)


def test_plan_and_capability_records_are_dataclasses_of_their_fields() -> None:
    plan = resolve_operation_plan("reduce_sum", I32)
    assert dataclasses.is_dataclass(plan) and dataclasses.is_dataclass(plan.operands[0])
    assert [f.name for f in dataclasses.fields(plan)] == [
        "operation", "operands", "compute", "accumulation", "accumulator_dtype", "output",
    ]
    stripped = dataclasses.replace(plan, accumulation=None)
    assert stripped.accumulation is None and stripped.compute is plan.compute
    assert stripped != plan and plan.accumulation is Accumulation.EXACT_INTEGER
    assert dataclasses.asdict(plan)["operands"] == ({"role": TENSOR, "dtype": I32, "convert_to": I32},)
    entry = OperationCapability.from_plan(plan)
    widened = dataclasses.replace(entry, output=F32)
    assert isinstance(widened, OperationCapability) and widened.output is F32 and entry.output is I32
    assert dataclasses.replace(entry.operands[0], convert_to=F32).convert_to is F32
    with pytest.raises(TypeError, match="^OperationPlan compute must be an Arithmetic, got str$"):
        dataclasses.replace(plan, compute="binary32")


def test_enum_members_and_dtypes_copy_to_themselves() -> None:
    import copy

    for member in (TENSOR, Arithmetic.BINARY32, Accumulation.MAXIMUM, F32):
        assert copy.copy(member) is member and copy.deepcopy(member) is member
