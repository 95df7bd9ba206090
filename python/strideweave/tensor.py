"""The tensor class: the original's ``strideweave.tensor`` (the native ``Tensor``)."""

from ._native import Tensor as Tensor

__all__ = ["Tensor"]
