"""Operation capabilities: the original's ``strideweave.carriers.operation_capability``.

The records (``OperationCapability`` and its ``OperandCapability`` operands),
``DependentCarrier``, the ``UnsupportedOperationPlan`` error and the class-level declaration
and queries (``register_operation_capabilities``, ``capabilities_for_carrier_class``,
``matching_capability``, ``supports_operation_plan``, ``unsupported_plan_reason``,
``require_capability``) are the native objects. The carrier-instance queries
(``carrier_operation_capabilities``, ``carrier_supports_operation_plan``,
``carrier_unsupported_plan_reason``, ``require_carrier_capability``) ask a carrier instance
and answer as its own methods do: from its exact class's declaration, or from a dependent
instance's frozen snapshot.
"""

from typing import Optional, Tuple, Union

from .._native import Carrier
from .._native import DependentCarrier as DependentCarrier
from .._native import OperandCapability as OperandCapability
from .._native import OperationCapability as OperationCapability
from .._native import OperationPlan
from .._native import UnsupportedOperationPlan as UnsupportedOperationPlan
from .._native import capabilities_for_carrier_class as capabilities_for_carrier_class
from .._native import matching_capability as matching_capability
from .._native import register_operation_capabilities as register_operation_capabilities
from .._native import require_capability as require_capability
from .._native import supports_operation_plan as supports_operation_plan
from .._native import unsupported_plan_reason as unsupported_plan_reason
from .operation_policy import _as_dataclass_record

__all__ = [
    "DependentCarrier",
    "OperandCapability",
    "OperationCapability",
    "UnsupportedOperationPlan",
    "capabilities_for_carrier_class",
    "carrier_operation_capabilities",
    "carrier_supports_operation_plan",
    "carrier_unsupported_plan_reason",
    "matching_capability",
    "register_operation_capabilities",
    "require_capability",
    "require_carrier_capability",
    "supports_operation_plan",
    "unsupported_plan_reason",
]

_Plan = Union[OperationPlan, OperationCapability]

_as_dataclass_record(OperandCapability, ("role", "dtype", "convert_to"))
_as_dataclass_record(
    OperationCapability,
    ("operation", "operands", "compute", "accumulation", "accumulator_dtype", "output"),
)


def _require_carrier(carrier: object) -> Carrier:
    """``carrier`` itself when it is a carrier instance; a class or other value is a TypeError."""
    if isinstance(carrier, type):
        raise TypeError(
            f"carrier must be a carrier instance, not a class (got the class {carrier.__name__})"
        )
    if not isinstance(carrier, Carrier):
        raise TypeError(f"carrier must be a Carrier instance, got {type(carrier).__name__}")
    return carrier


def carrier_operation_capabilities(
    carrier: object, operation: Optional[str] = None
) -> Tuple[OperationCapability, ...]:
    """The capabilities ``carrier`` executes (only ``operation``'s when given), in order."""
    return _require_carrier(carrier).operation_capabilities(operation)


def carrier_supports_operation_plan(carrier: object, plan: _Plan) -> bool:
    """Whether ``carrier`` executes exactly ``plan``."""
    return _require_carrier(carrier).supports_operation_plan(plan)


def carrier_unsupported_plan_reason(carrier: object, plan: _Plan) -> Optional[str]:
    """Why ``carrier`` cannot execute ``plan``, or ``None`` when it can."""
    return _require_carrier(carrier).unsupported_plan_reason(plan)


def require_carrier_capability(carrier: object, plan: _Plan) -> OperationCapability:
    """The capability ``carrier`` executes ``plan`` under; UnsupportedOperationPlan if none."""
    return _require_carrier(carrier).require_operation_plan(plan)
