"""The carrier classes: the base ``Carrier`` and the shipped carriers."""

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
