"""The Generic carrier: the original's ``strideweave.carriers.generic`` (the native
``Generic``)."""

from .._native import Generic as Generic

__all__ = ["Generic"]
