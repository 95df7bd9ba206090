"""StrideWeave: tensors that are (carrier, offset, layout, dtype), over a Rust core.

Every name here is the object of the extension module ``strideweave._native``; this package
only gathers them (and adds the typing-only ``Protocol`` classes of
``strideweave.carriers.extension``). See docs/python.md in the repository.
"""

from ._native import (
    CPU as CPU,
    AwaitMove as AwaitMove,
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
    KernelExecutionInterface as KernelExecutionInterface,
    KernelPack as KernelPack,
    KernelPattern as KernelPattern,
    KernelProvider as KernelProvider,
    OperationDefinition as OperationDefinition,
    TransferRoute as TransferRoute,
    Unsupported as Unsupported,
    operation_definition as operation_definition,
    register_kernel_pack as register_kernel_pack,
)

__all__ = [
    "CPU",
    "AwaitMove",
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
