"""The carrier classes and the carrier-extension surface: the original's
``strideweave.carriers``.

Every name is the native object, except ``TileSet`` and ``TileSelection`` (Python values,
``strideweave.carriers.tiled_evictable``); the top level names the same objects. The
submodules follow the original's layout: ``cpu``, ``generic``, ``file_backed``,
``evictable``, ``block_device``, ``tiled_evictable``, ``extension``, ``move``,
``operation_capability``, ``operation_policy``, ``metal`` and ``gpu`` (docs/python.md,
"Module layout").
"""

from .._native import (
    CPU as CPU,
    Carrier as Carrier,
    DependentCarrier as DependentCarrier,
    Evictable as Evictable,
    FileBacked as FileBacked,
    Generic as Generic,
    TiledEvictable as TiledEvictable,
    TiledResidencyFacet as TiledResidencyFacet,
    TileState as TileState,
)
from .._native import (
    AwaitProjection as AwaitProjection,
    AwaitResidency as AwaitResidency,
    BlockDevice as BlockDevice,
    BlockDeviceCarrier as BlockDeviceCarrier,
    CarrierDefinition as CarrierDefinition,
    CarrierFacet as CarrierFacet,
    CompositeProvider as CompositeProvider,
    DType as DType,
    KernelPack as KernelPack,
    KernelPattern as KernelPattern,
    KernelProvider as KernelProvider,
    OperandCapability as OperandCapability,
    OperationCapability as OperationCapability,
    ResidencyPlan as ResidencyPlan,
    ResidencyPolicy as ResidencyPolicy,
    StorageProvider as StorageProvider,
    TransferRoute as TransferRoute,
    Unsupported as Unsupported,
    UnsupportedOperationPlan as UnsupportedOperationPlan,
    register_carrier_definition as register_carrier_definition,
    register_kernel_pack as register_kernel_pack,
)
from .._kernel_interface import KernelExecutionInterface as KernelExecutionInterface
from .._native import Gpu as Gpu
from .._native import GpuHost as GpuHost
from .._native import Metal as Metal
from ._tiles import TileSelection as TileSelection
from ._tiles import TileSet as TileSet

__all__ = [
    "CPU",
    "Carrier",
    "DependentCarrier",
    "Evictable",
    "FileBacked",
    "Generic",
    "TiledEvictable",
    "TiledResidencyFacet",
    "TileState",
]
__all__ += ["Gpu", "GpuHost", "Metal"]
__all__ += [
    "AwaitProjection",
    "AwaitResidency",
    "BlockDevice",
    "BlockDeviceCarrier",
    "CarrierDefinition",
    "CarrierFacet",
    "CompositeProvider",
    "DType",
    "KernelExecutionInterface",
    "KernelPack",
    "KernelPattern",
    "KernelProvider",
    "OperandCapability",
    "OperationCapability",
    "ResidencyPlan",
    "ResidencyPolicy",
    "StorageProvider",
    "TileSelection",
    "TileSet",
    "TransferRoute",
    "Unsupported",
    "UnsupportedOperationPlan",
    "register_carrier_definition",
    "register_kernel_pack",
]

# The submodules load with the package, as the original's do, so `strideweave.carriers.move`
# and the others are attributes after `import strideweave`.
from . import (
    block_device,
    cpu,
    evictable,
    extension,
    file_backed,
    generic,
    gpu,
    metal,
    move,
    operation_capability,
    operation_policy,
    tiled_evictable,
)
