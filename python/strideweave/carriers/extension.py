"""The carrier-extension surface (the seed's ``strideweave.carriers.extension``).

This module holds the parts of the surface the package provides so far: ``CarrierDefinition``,
``StorageProvider``, ``register_carrier_definition`` and the ``CarrierFacet`` marker base (the
same objects as the top-level names), and the structural ``ProviderCompletion`` protocol. The
kernel, transfer, composite and prepared-work records and ``register_kernel_pack`` are not
provided yet (docs/python.md lists what is missing).
"""

from typing import Protocol, TypeVar, runtime_checkable

from .._native import (
    CarrierDefinition as CarrierDefinition,
    CarrierFacet as CarrierFacet,
    StorageProvider as StorageProvider,
    register_carrier_definition as register_carrier_definition,
)

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
