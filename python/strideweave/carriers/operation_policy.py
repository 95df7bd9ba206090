"""Central dtype planning: the original's ``strideweave.carriers.operation_policy``.

The plan records (``OperationPlan``, ``OperandPlan``) and the ``Arithmetic`` and
``Accumulation`` enumerations are the native objects. The constants below state what the
core's planning does (the tests check each against it). The resolver and the registry of
operation specs (``resolve_operation_plan``, ``registered_operations``, ...) need native
support and are not here yet (docs/python.md, "Module layout").
"""

from typing import FrozenSet, Tuple

from .._native import Accumulation as Accumulation
from .._native import Arithmetic as Arithmetic
from .._native import DType
from .._native import OperandPlan as OperandPlan
from .._native import OperationPlan as OperationPlan

__all__ = [
    "ACCUMULATOR_CONFIGURABLE_OPERATIONS",
    "INT32_MAX",
    "INT32_MIN",
    "SUPPORTED_ACCUMULATOR_DTYPES",
    "SUPPORTED_TENSOR_DTYPES",
    "Accumulation",
    "Arithmetic",
    "OperandPlan",
    "OperationPlan",
]

#: The Int32 range; a checked Int32 result outside it is an ``OverflowError``.
INT32_MIN: int = -(2**31)
INT32_MAX: int = 2**31 - 1

#: The simple dtypes planning computes arithmetic on (Bool never promotes).
SUPPORTED_TENSOR_DTYPES: Tuple[DType, ...] = (DType.Float32, DType.Int32)

#: The operations whose floating accumulator a caller may choose (their ``accumulator``).
ACCUMULATOR_CONFIGURABLE_OPERATIONS: FrozenSet[str] = frozenset({"reduce_sum", "matmul"})

#: The accumulator dtypes a floating accumulation may use, widest last.
SUPPORTED_ACCUMULATOR_DTYPES: Tuple[DType, ...] = (DType.Float32, DType.Float64)
