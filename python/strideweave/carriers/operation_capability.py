"""Operation capabilities: the original's ``strideweave.carriers.operation_capability``.

Every name is the native object: ``OperationCapability``, ``DependentCarrier``, the
``UnsupportedOperationPlan`` error, and the class-level declaration and queries
(``register_operation_capabilities``, ``capabilities_for_carrier_class``,
``matching_capability``, ``supports_operation_plan``, ``unsupported_plan_reason``,
``require_capability``). The original's ``OperandCapability`` needs native support and is not
here yet (docs/python.md, "Module layout").
"""

from .._native import DependentCarrier as DependentCarrier
from .._native import OperationCapability as OperationCapability
from .._native import UnsupportedOperationPlan as UnsupportedOperationPlan
from .._native import capabilities_for_carrier_class as capabilities_for_carrier_class
from .._native import matching_capability as matching_capability
from .._native import register_operation_capabilities as register_operation_capabilities
from .._native import require_capability as require_capability
from .._native import supports_operation_plan as supports_operation_plan
from .._native import unsupported_plan_reason as unsupported_plan_reason

__all__ = [
    "DependentCarrier",
    "OperationCapability",
    "UnsupportedOperationPlan",
    "capabilities_for_carrier_class",
    "matching_capability",
    "register_operation_capabilities",
    "require_capability",
    "supports_operation_plan",
    "unsupported_plan_reason",
]
