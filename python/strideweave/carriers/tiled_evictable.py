"""The tiled tier carrier: the original's ``strideweave.carriers.tiled_evictable``.

``TiledEvictable``, its residency facet, ``ResidencyPlan``, ``ResidencyPolicy`` and the
``AwaitResidency`` and ``AwaitProjection`` handles are the native objects; ``TileSet`` and
``TileSelection`` are Python values (``strideweave.carriers._tiles``).
"""

from .._native import AwaitProjection as AwaitProjection
from .._native import AwaitResidency as AwaitResidency
from .._native import ResidencyPlan as ResidencyPlan
from .._native import ResidencyPolicy as ResidencyPolicy
from .._native import TiledEvictable as TiledEvictable
from .._native import TiledResidencyFacet as TiledResidencyFacet
from ._tiles import TileSelection as TileSelection
from ._tiles import TileSet as TileSet

__all__ = [
    "AwaitProjection",
    "AwaitResidency",
    "ResidencyPlan",
    "ResidencyPolicy",
    "TileSelection",
    "TileSet",
    "TiledEvictable",
    "TiledResidencyFacet",
]
