"""The carrier-extension surface (the seed's ``strideweave.carriers.extension``).

Every name the seed lists for this module is here: the definition and provider records, the
prepared-work records, ``Unsupported``, ``ProviderResult``, ``TransferRequest``, the two
registration functions (the same objects as the top-level names), and the structural
``ProviderCompletion`` protocol. ``DependentCarrier``, ``OperationCapability``,
``OperationDefinition``, ``operation_definition``, ``ResolvedInvocation`` and ``ResultSpec``
are here too, since kernel and composite providers work with them.
"""

from typing import Protocol, TypeVar, runtime_checkable

from .._native import (
    CarrierDefinition as CarrierDefinition,
    CarrierFacet as CarrierFacet,
    StorageProvider as StorageProvider,
    register_carrier_definition as register_carrier_definition,
)
from .._native import (
    CompositeProvider as CompositeProvider,
    DependentCarrier as DependentCarrier,
    KernelPack as KernelPack,
    KernelPattern as KernelPattern,
    KernelProvider as KernelProvider,
    OperationCapability as OperationCapability,
    OperationDefinition as OperationDefinition,
    PreparedComposite as PreparedComposite,
    PreparedKernel as PreparedKernel,
    PreparedTransfer as PreparedTransfer,
    ProviderResult as ProviderResult,
    ResolvedInvocation as ResolvedInvocation,
    ResultSpec as ResultSpec,
    TransferProvider as TransferProvider,
    TransferRequest as TransferRequest,
    TransferRoute as TransferRoute,
    Unsupported as Unsupported,
    operation_definition as operation_definition,
    register_kernel_pack as register_kernel_pack,
)
from .._kernel_interface import KernelExecutionInterface as KernelExecutionInterface

T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class ProviderCompletion(Protocol[T_co]):
    """Work that completes later: a ``done`` flag and a blocking ``wait()``.

    Any object with both members satisfies it (``isinstance`` checks them structurally);
    there is no coroutine protocol. ``strideweave.AwaitMove`` is one.
    """

    @property
    def done(self) -> bool:
        """Whether the work reached its terminal outcome."""
        ...

    def wait(self) -> T_co:
        """Blocks until the work is terminal; its result, or its exception raised."""
        ...


__all__ = [
    "CarrierDefinition",
    "CarrierFacet",
    "ProviderCompletion",
    "StorageProvider",
    "register_carrier_definition",
]
__all__ += [
    "CompositeProvider",
    "DependentCarrier",
    "KernelExecutionInterface",
    "KernelPack",
    "KernelPattern",
    "KernelProvider",
    "OperationCapability",
    "OperationDefinition",
    "PreparedComposite",
    "PreparedKernel",
    "PreparedTransfer",
    "ProviderResult",
    "ResolvedInvocation",
    "ResultSpec",
    "TransferProvider",
    "TransferRequest",
    "TransferRoute",
    "Unsupported",
    "operation_definition",
    "register_kernel_pack",
]

from .operation_policy import _as_dataclass_record

# The original's ``StorageProvider`` is a frozen dataclass: ``dataclasses.replace`` builds a
# provider with one hook changed, through the constructor, which checks every field again.
_as_dataclass_record(
    StorageProvider,
    (
        "supports_dtype",
        "physical_size",
        "allocate",
        "release",
        "read",
        "write",
        "elementwise_fallback",
    ),
)
