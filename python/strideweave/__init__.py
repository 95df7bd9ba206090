"""StrideWeave: tensors that are (carrier, offset, layout, dtype), over a Rust core.

The names come from the extension module ``strideweave._native``; this package gathers
them under the original StrideWeave's module layout (``layout``, ``tensor``, ``operation``, ``carriers`` and its submodules) and adds the values the original
has in Python (``Shape``, ``Stride``, ``Node``, ``Tree``, the index maps, ``TileSet``,
``TileSelection``, ``AwaitResult``) and the typing-only ``Protocol`` classes of
``strideweave.carriers.extension``. See docs/python.md in the repository, "Module layout".
"""

from ._native import (
    CPU as CPU,
    AwaitMove as AwaitMove,
    AwaitProjection as AwaitProjection,
    AwaitResidency as AwaitResidency,
    Carrier as Carrier,
    CarrierDefinition as CarrierDefinition,
    CarrierFacet as CarrierFacet,
    Composition as Composition,
    DType as DType,
    Evictable as Evictable,
    FileBacked as FileBacked,
    Generic as Generic,
    GradMode as GradMode,
    Layout as Layout,
    OperandCapability as OperandCapability,
    OperationCapability as OperationCapability,
    ProviderContractError as ProviderContractError,
    Tensor as Tensor,
    TiledEvictable as TiledEvictable,
    TiledResidencyFacet as TiledResidencyFacet,
    TileState as TileState,
    UnsupportedOperationPlan as UnsupportedOperationPlan,
    abs as abs,
    add as add,
    copy as copy,
    div as div,
    elementwise_mul as elementwise_mul,
    eq as eq,
    exp as exp,
    grad as grad,
    is_grad_enabled as is_grad_enabled,
    le as le,
    log as log,
    lt as lt,
    matmul as matmul,
    maximum as maximum,
    minimum as minimum,
    move as move,
    move_async as move_async,
    mul as mul,
    neg as neg,
    no_grad as no_grad,
    reduce_max as reduce_max,
    reduce_sum as reduce_sum,
    relu as relu,
    register_carrier_definition as register_carrier_definition,
    select as select,
    set_grad_enabled as set_grad_enabled,
    sigmoid as sigmoid,
    sqrt as sqrt,
    StorageProvider as StorageProvider,
    sub as sub,
    tanh as tanh,
)
from ._native import (
    CompositeProvider as CompositeProvider,
    DependentCarrier as DependentCarrier,
    KernelPack as KernelPack,
    KernelPattern as KernelPattern,
    KernelProvider as KernelProvider,
    OperationDefinition as OperationDefinition,
    TransferRoute as TransferRoute,
    Unsupported as Unsupported,
    operation_definition as operation_definition,
    register_kernel_pack as register_kernel_pack,
)
from ._kernel_interface import KernelExecutionInterface as KernelExecutionInterface

__all__ = [
    "CPU",
    "AwaitMove",
    "AwaitProjection",
    "AwaitResidency",
    "Carrier",
    "CarrierDefinition",
    "CarrierFacet",
    "Composition",
    "DType",
    "Evictable",
    "FileBacked",
    "Generic",
    "GradMode",
    "Layout",
    "OperandCapability",
    "OperationCapability",
    "ProviderContractError",
    "Tensor",
    "TiledEvictable",
    "TiledResidencyFacet",
    "TileState",
    "UnsupportedOperationPlan",
    "abs",
    "add",
    "copy",
    "div",
    "elementwise_mul",
    "eq",
    "exp",
    "grad",
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
    "reduce_max",
    "reduce_sum",
    "relu",
    "register_carrier_definition",
    "select",
    "set_grad_enabled",
    "sigmoid",
    "sqrt",
    "StorageProvider",
    "sub",
    "tanh",
]

from ._native import BlockDevice as BlockDevice
from ._native import BlockDeviceCarrier as BlockDeviceCarrier
from ._native import ResidencyPlan as ResidencyPlan
from ._native import ResidencyPolicy as ResidencyPolicy
from ._native import from_numpy as from_numpy

__all__ += ["BlockDevice", "BlockDeviceCarrier", "ResidencyPlan", "ResidencyPolicy", "from_numpy"]
__all__ += [
    "CompositeProvider",
    "DependentCarrier",
    "KernelExecutionInterface",
    "KernelPack",
    "KernelPattern",
    "KernelProvider",
    "OperationDefinition",
    "TransferRoute",
    "Unsupported",
    "operation_definition",
    "register_kernel_pack",
]

from ._native import TileProgress as TileProgress

__all__ += ["TileProgress"]

from ._native import (
    NON_DIFFERENTIABLE as NON_DIFFERENTIABLE,
    REQUIRED as REQUIRED,
    Accumulation as Accumulation,
    Arithmetic as Arithmetic,
    BoundOperationCall as BoundOperationCall,
    OperandKind as OperandKind,
    OperandPlan as OperandPlan,
    OperandSpec as OperandSpec,
    OperationPlan as OperationPlan,
    OperationSchema as OperationSchema,
    OptionSpec as OptionSpec,
    ResolvedInvocation as ResolvedInvocation,
    ResultSpec as ResultSpec,
    VJPContext as VJPContext,
    call as call,
    define_operation as define_operation,
)

__all__ += [
    "NON_DIFFERENTIABLE",
    "REQUIRED",
    "Accumulation",
    "Arithmetic",
    "BoundOperationCall",
    "OperandKind",
    "OperandPlan",
    "OperandSpec",
    "OperationPlan",
    "OperationSchema",
    "OptionSpec",
    "ResolvedInvocation",
    "ResultSpec",
    "VJPContext",
    "call",
    "define_operation",
]

from ._native import from_dlpack as from_dlpack

__all__ += ["from_dlpack"]

# The GPU: the shipped Metal class (NotImplementedError without a Metal adapter) and
# strideweave-wgpu's Gpu class with its host staging class (docs/python.md, "Metal and the Gpu
# carrier").
from ._native import Gpu as Gpu
from ._native import GpuHost as GpuHost
from ._native import Metal as Metal

__all__ += ["Gpu", "GpuHost", "Metal"]

# The original's layout: the submodules and the Python-written names.
#
# `strideweave.layout`, `strideweave.tensor`, `strideweave.operation` and `strideweave.carriers`
# (with its submodules) load with the package. The names below are Python objects, so they
# are attributes of the package but not in `__all__`, which lists the native objects only
# (docs/python.md, "Module layout").
from . import carriers as carriers
from . import layout as layout
from . import operation as operation
from . import tensor as tensor
from .carriers.move import AwaitResult as AwaitResult
from .carriers.tiled_evictable import TileSelection as TileSelection
from .carriers.tiled_evictable import TileSet as TileSet
from .layout import IndexMap as IndexMap
from .layout import Node as Node
from .layout import Permutation as Permutation
from .layout import Product as Product
from .layout import Shape as Shape
from .layout import Stride as Stride
from .layout import Swizzle as Swizzle
from .layout import SwizzleStage as SwizzleStage
from .layout import Tiler as Tiler
from .layout import Tree as Tree
from .operation import broadcast_to as broadcast_to
from .operation import permute as permute
from .operation import reshape as reshape
from ._native import BlockDeviceToCpuMoveOperation as BlockDeviceToCpuMoveOperation
from ._native import CpuToBlockDeviceMoveOperation as CpuToBlockDeviceMoveOperation
from ._native import CpuToFileBackedMoveOperation as CpuToFileBackedMoveOperation
from ._native import FileBackedToCpuMoveOperation as FileBackedToCpuMoveOperation
from ._native import ElementwiseMoveOperation as ElementwiseMoveOperation
from ._native import MoveOperation as MoveOperation
from ._native import Operation as Operation

# The original's operation classes at the top level, as the native objects.
__all__ += [
    "BlockDeviceToCpuMoveOperation",
    "CpuToBlockDeviceMoveOperation",
    "CpuToFileBackedMoveOperation",
    "ElementwiseMoveOperation",
    "FileBackedToCpuMoveOperation",
    "MoveOperation",
    "Operation",
]

# `__all__` is the original's top-level list, as far as this package has its names: every
# public name, native or written in Python, except the operation-definition records the
# original keeps in `strideweave.operation` only.
_OPERATION_MODULE_ONLY = (
    "BoundOperationCall",
    "OperationCall",
    "OperationPlan",
    "ResolvedInvocation",
    "VJPContext",
)
__all__ = [name for name in __all__ if name not in _OPERATION_MODULE_ONLY]
__all__ += [
    "AwaitResult",
    "IndexMap",
    "Node",
    "Permutation",
    "Product",
    "Shape",
    "Stride",
    "Swizzle",
    "SwizzleStage",
    "TileSelection",
    "TileSet",
    "Tiler",
    "Tree",
    "broadcast_to",
    "permute",
    "reshape",
]
