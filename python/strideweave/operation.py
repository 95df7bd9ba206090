"""Operations: the original's ``strideweave.operation``.

The operation functions, the autograd switches, ``move``/``move_async`` and the
operation-definition records are the native objects (the same ones the top level names).
``permute``, ``reshape`` and ``broadcast_to`` are the original's function forms of the
native ``Tensor`` views, taking a ``Shape`` where the original does. ``Operation``,
``MoveOperation`` and ``ElementwiseMoveOperation`` are the native classes. The original's
``Generic*Operation`` and view operation classes and the functions this runtime has no
operation for need native support and are not here (docs/python.md, "Module layout").
"""

from ._native import BlockDeviceToCpuMoveOperation as BlockDeviceToCpuMoveOperation
from ._native import CpuToBlockDeviceMoveOperation as CpuToBlockDeviceMoveOperation
from ._native import CpuToFileBackedMoveOperation as CpuToFileBackedMoveOperation
from ._native import FileBackedToCpuMoveOperation as FileBackedToCpuMoveOperation
from ._native import ElementwiseMoveOperation as ElementwiseMoveOperation
from ._native import MoveOperation as MoveOperation
from ._native import Operation as Operation
from ._layout_values import Shape, _plain
from ._native import NON_DIFFERENTIABLE as NON_DIFFERENTIABLE
from ._native import REQUIRED as REQUIRED
from ._native import BoundOperationCall as BoundOperationCall
from ._native import OperandKind as OperandKind
from ._native import OperandSpec as OperandSpec
from ._native import OperationDefinition as OperationDefinition
from ._native import OperationPlan as OperationPlan
from ._native import OperationSchema as OperationSchema
from ._native import OptionSpec as OptionSpec
from ._native import ProviderContractError as ProviderContractError
from ._native import ResolvedInvocation as ResolvedInvocation
from ._native import ResultSpec as ResultSpec
from ._native import Tensor
from ._native import VJPContext as VJPContext
from ._native import abs as abs
from ._native import add as add
from ._native import define_operation as define_operation
from ._native import div as div
from ._native import elementwise_mul as elementwise_mul
from ._native import eq as eq
from ._native import exp as exp
from ._native import is_grad_enabled as is_grad_enabled
from ._native import le as le
from ._native import log as log
from ._native import lt as lt
from ._native import matmul as matmul
from ._native import maximum as maximum
from ._native import minimum as minimum
from ._native import move as move
from ._native import move_async as move_async
from ._native import mul as mul
from ._native import neg as neg
from ._native import no_grad as no_grad
from ._native import reduce_max as reduce_max
from ._native import reduce_sum as reduce_sum
from ._native import relu as relu
from ._native import select as select
from ._native import set_grad_enabled as set_grad_enabled
from ._native import sigmoid as sigmoid
from ._native import sqrt as sqrt
from ._native import sub as sub
from ._native import tanh as tanh


def _require_tensor(tensor: object) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"tensor must be a Tensor, got {type(tensor).__name__}")
    return tensor


def permute(tensor: Tensor, *order: int) -> Tensor:
    """A view of ``tensor`` with its top-level modes in ``order`` (``tensor.permute``)."""
    return _require_tensor(tensor).permute(*order)


def reshape(tensor: Tensor, shape: Shape) -> Tensor:
    """A view of ``tensor`` with the hierarchical ``shape`` (``tensor.reshape``)."""
    view = _require_tensor(tensor)
    if not isinstance(shape, Shape):
        raise TypeError(f"shape must be a Shape, got {type(shape).__name__}")
    return view.reshape(_plain(shape.top_level))


def broadcast_to(tensor: Tensor, target: Shape) -> Tensor:
    """A view of ``tensor`` whose extent-1 leaves widen (stride 0) to ``target``, a shape of
    the same profile (``tensor.broadcast_to``)."""
    view = _require_tensor(tensor)
    if not isinstance(target, Shape):
        raise TypeError(f"target must be a Shape, got {type(target).__name__}")
    return view.broadcast_to(_plain(target.top_level))


__all__ = [
    "NON_DIFFERENTIABLE",
    "REQUIRED",
    "BoundOperationCall",
    "OperandKind",
    "OperandSpec",
    "OperationDefinition",
    "OperationPlan",
    "OperationSchema",
    "OptionSpec",
    "ProviderContractError",
    "ResolvedInvocation",
    "ResultSpec",
    "VJPContext",
    "abs",
    "add",
    "broadcast_to",
    "define_operation",
    "div",
    "elementwise_mul",
    "eq",
    "exp",
    "is_grad_enabled",
    "le",
    "log",
    "lt",
    "matmul",
    "maximum",
    "minimum",
    "move",
    "move_async",
    "mul",
    "neg",
    "no_grad",
    "permute",
    "reduce_max",
    "reduce_sum",
    "relu",
    "reshape",
    "select",
    "set_grad_enabled",
    "sigmoid",
    "sqrt",
    "sub",
    "tanh",
]
__all__ += [
    "BlockDeviceToCpuMoveOperation",
    "CpuToBlockDeviceMoveOperation",
    "CpuToFileBackedMoveOperation",
    "ElementwiseMoveOperation",
    "FileBackedToCpuMoveOperation",
    "MoveOperation",
    "Operation",
]
