"""Central dtype planning: the original's ``strideweave.carriers.operation_policy``.

The plan records (``OperationPlan``, ``OperandPlan``), ``OperandRole``, the ``Arithmetic``
and ``Accumulation`` enumerations and ``resolve_operation_plan`` are the native objects: every
plan is the core planner's (docs/operations.md, Dtype planning). ``OperationSpec`` and
``OperationOverload`` describe the planner's accepted operand-role signatures;
``registered_operations()`` lists one spec per built-in operation, its overloads found by
asking the planner itself. The constants state what the planner does (the tests check each
against it).
"""

from dataclasses import dataclass, make_dataclass
from functools import lru_cache, partial
from typing import Any, Callable, FrozenSet, Optional, Sequence, Tuple

from .._native import Accumulation as Accumulation
from .._native import Arithmetic as Arithmetic
from .._native import DType
from .._native import OperandPlan as OperandPlan
from .._native import OperandRole as OperandRole
from .._native import OperationPlan as OperationPlan
from .._native import _plan_signatures
from .._native import resolve_operation_plan as resolve_operation_plan

__all__ = [
    "ACCUMULATOR_CONFIGURABLE_OPERATIONS",
    "INT32_MAX",
    "INT32_MIN",
    "SUPPORTED_ACCUMULATOR_DTYPES",
    "SUPPORTED_TENSOR_DTYPES",
    "Accumulation",
    "Arithmetic",
    "OperandPlan",
    "OperandRole",
    "OperationOverload",
    "OperationPlan",
    "OperationSpec",
    "registered_operations",
    "resolve_operation_plan",
]


def _as_dataclass_record(record: type, fields: Sequence[str]) -> None:
    """Gives the native immutable ``record`` the dataclass field table of ``fields`` (its
    keyword constructor's parameters), so that ``dataclasses.fields``, ``asdict`` and
    ``replace`` treat it as the original's frozen dataclass of the same fields: ``replace``
    builds a new record through the constructor, which checks every field again."""
    shape = make_dataclass(record.__name__, [(name, Any) for name in fields], frozen=True)
    setattr(record, "__dataclass_fields__", getattr(shape, "__dataclass_fields__"))


_as_dataclass_record(OperandPlan, ("role", "dtype", "convert_to"))
_as_dataclass_record(
    OperationPlan,
    ("operation", "operands", "compute", "accumulation", "accumulator_dtype", "output"),
)

#: The Int32 range; a checked Int32 result outside it is an ``OverflowError``.
INT32_MIN: int = -(2**31)
INT32_MAX: int = 2**31 - 1

#: The simple dtypes planning computes arithmetic on (Bool never promotes).
SUPPORTED_TENSOR_DTYPES: Tuple[DType, ...] = (DType.Float32, DType.Int32)

#: The operations whose floating accumulator a caller may choose (their ``accumulator``).
ACCUMULATOR_CONFIGURABLE_OPERATIONS: FrozenSet[str] = frozenset({"reduce_sum", "matmul"})

#: The accumulator dtypes a floating accumulation may use, widest last.
SUPPORTED_ACCUMULATOR_DTYPES: Tuple[DType, ...] = (DType.Float32, DType.Float64)


@dataclass(frozen=True)
class OperationOverload:
    """One operand-role signature an operation accepts, and the rule resolving its plan.

    ``roles`` are the positional ``OperandRole`` values; ``rule(*operands)`` returns the
    ``OperationPlan`` for operands of those roles (a ``DType`` per tensor, a Python number
    per weak scalar). ``tensor_domains``, when given, is the dtypes each tensor position
    accepts, one non-empty tuple per tensor role.
    """

    roles: Tuple[OperandRole, ...]
    rule: Callable[..., OperationPlan]
    tensor_domains: Optional[Tuple[Tuple[DType, ...], ...]] = None

    def __post_init__(self) -> None:
        roles = tuple(self.roles)
        for position, role in enumerate(roles):
            if not isinstance(role, OperandRole):
                raise TypeError(
                    f"OperationOverload roles[{position}] must be an OperandRole, "
                    f"got {type(role).__name__}"
                )
        object.__setattr__(self, "roles", roles)
        if not callable(self.rule):
            raise TypeError(
                f"OperationOverload rule must be callable, got {type(self.rule).__name__}"
            )
        if self.tensor_domains is not None:
            domains = tuple(tuple(domain) for domain in self.tensor_domains)
            tensor_count = sum(role is OperandRole.TENSOR for role in roles)
            if len(domains) != tensor_count:
                raise ValueError(
                    f"OperationOverload tensor_domains must contain one dtype domain per "
                    f"tensor role ({tensor_count}), got {len(domains)}"
                )
            if any(not domain for domain in domains):
                raise ValueError("OperationOverload: a tensor dtype domain must not be empty")
            object.__setattr__(self, "tensor_domains", domains)


@dataclass(frozen=True)
class OperationSpec:
    """One planned operation and every operand-role signature (overload) it accepts.

    ``overloads`` is non-empty and no two share a role signature. ``public`` says whether
    the name is a public function. ``dtype_operand_positions``, when given, are the
    positions of the forward call's arguments that take part in planning (unique,
    increasing, non-negative, one per role of every overload); ``None`` means all of them.
    """

    name: str
    overloads: Tuple[OperationOverload, ...]
    public: bool = True
    dtype_operand_positions: Optional[Tuple[int, ...]] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"OperationSpec name must be a str, got {type(self.name).__name__}")
        overloads = tuple(self.overloads)
        object.__setattr__(self, "overloads", overloads)
        if not overloads:
            raise ValueError(
                f"operation {self.name!r}: an OperationSpec must declare at least one overload"
            )
        for position, overload in enumerate(overloads):
            if not isinstance(overload, OperationOverload):
                raise TypeError(
                    f"OperationSpec overloads[{position}] must be an OperationOverload, "
                    f"got {type(overload).__name__}"
                )
        signatures = [overload.roles for overload in overloads]
        if len(set(signatures)) != len(signatures):
            raise ValueError(
                f"operation {self.name!r} declares one operand-role signature twice"
            )
        positions = self.dtype_operand_positions
        if positions is not None:
            positions = tuple(positions)
            object.__setattr__(self, "dtype_operand_positions", positions)
            if any(position < 0 for position in positions):
                raise ValueError(
                    f"operation {self.name!r}: dtype operand positions must be non-negative, "
                    f"got {positions}"
                )
            if tuple(sorted(set(positions))) != positions:
                raise ValueError(
                    f"operation {self.name!r}: dtype operand positions must be unique and "
                    f"increasing, got {positions}"
                )
            if {len(overload.roles) for overload in overloads} != {len(positions)}:
                raise ValueError(
                    f"operation {self.name!r}: dtype operand positions {positions} must match "
                    f"every overload arity"
                )

    @property
    def roles(self) -> Tuple[OperandRole, ...]:
        """The roles of the only overload (an operation with several raises AttributeError)."""
        return self._only_overload().roles

    @property
    def rule(self) -> Callable[..., OperationPlan]:
        """The rule of the only overload (an operation with several raises AttributeError)."""
        return self._only_overload().rule

    def _only_overload(self) -> OperationOverload:
        if len(self.overloads) != 1:
            raise AttributeError(
                f"operation {self.name!r} has {len(self.overloads)} overloads; iterate overloads"
            )
        return self.overloads[0]


def _resolve_named(operation: str, *operands: Any) -> OperationPlan:
    """The plan of the built-in ``operation`` on ``operands`` (an overload's rule)."""
    return resolve_operation_plan(operation, *operands)


@lru_cache(maxsize=1)
def registered_operations() -> Tuple[OperationSpec, ...]:
    """One ``OperationSpec`` per built-in operation the planner plans, in its order.

    Each overload is a role signature some operands resolve under, with the tensor dtypes
    each tensor position takes; its rule resolves through ``resolve_operation_plan``.
    """
    specs = []
    for name, signatures in _plan_signatures():
        overloads = tuple(
            OperationOverload(roles, partial(_resolve_named, name), domains)
            for roles, domains in signatures
        )
        specs.append(OperationSpec(name, overloads))
    return tuple(specs)
