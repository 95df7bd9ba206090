"""The two-tier carrier: the original's ``strideweave.carriers.evictable`` (the native
``Evictable``). The original's ``EvictableOperation`` is not here: it needs the native
legacy ``Operation`` class (docs/python.md, "Module layout")."""

from .._native import Evictable as Evictable

__all__ = ["Evictable"]
