"""Operation capabilities: the original's ``strideweave.carriers.operation_capability``.

Every name is the native object: ``OperationCapability``, ``DependentCarrier``, the
``UnsupportedOperationPlan`` error, and the class-level declaration and queries
(``register_operation_capabilities``, ``capabilities_for_carrier_class``,
``matching_capability``, ``supports_operation_plan``, ``unsupported_plan_reason``,
``require_capability``). The original's ``OperandCapability`` needs native support and is not
here yet (docs/python.md, "Module layout").
"""

from .._adopt import adopt
from .._native import DependentCarrier as DependentCarrier
from .._native import OperationCapability as OperationCapability
from .._native import UnsupportedOperationPlan as UnsupportedOperationPlan

__all__ = ["DependentCarrier", "OperationCapability", "UnsupportedOperationPlan"]
__all__ += adopt(
    globals(),
    [
        "capabilities_for_carrier_class",
        "matching_capability",
        "register_operation_capabilities",
        "require_capability",
        "supports_operation_plan",
        "unsupported_plan_reason",
    ],
)
