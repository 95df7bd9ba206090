"""The layout algebra: the original's ``strideweave.layout``.

``Layout`` is the native class (CuTe notation or integer trees; see docs/python.md).
``Shape``, ``Stride``, ``Node``, ``Tree``, the ``Tiler`` alias and the index maps
(``IndexMap``, ``Permutation``, ``Product``, ``Swizzle``, ``SwizzleStage``) are Python
values written after the original's; ``Shape.top_level`` and ``Stride.top_level`` are integer
trees the native ``Layout`` accepts.
"""

from typing import Sequence

from ._index_maps import IndexMap as IndexMap
from ._index_maps import Permutation as Permutation
from ._index_maps import Product as Product
from ._index_maps import Swizzle as Swizzle
from ._index_maps import SwizzleStage as SwizzleStage
from ._layout_values import Node as Node
from ._layout_values import Shape as Shape
from ._layout_values import Stride as Stride
from ._layout_values import Tree as Tree
from ._native import Layout as Layout

#: A tiler: one tile ``Layout`` per leading top-level mode (``Layout.divide_tiler``,
#: ``Layout.zipped_divide``).
Tiler = Sequence[Layout]

__all__ = [
    "IndexMap",
    "Layout",
    "Node",
    "Permutation",
    "Product",
    "Shape",
    "Stride",
    "Swizzle",
    "SwizzleStage",
    "Tiler",
    "Tree",
]
