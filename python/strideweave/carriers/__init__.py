"""The carrier classes: the base ``Carrier`` and the shipped carriers."""

from .._native import (
    CPU as CPU,
    Carrier as Carrier,
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
    "Evictable",
    "FileBacked",
    "Generic",
    "TiledEvictable",
    "TiledResidencyFacet",
    "TileState",
]
