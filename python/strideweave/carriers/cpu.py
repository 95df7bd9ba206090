"""The CPU carrier: the original's ``strideweave.carriers.cpu`` (the native ``CPU``)."""

from .._native import CPU as CPU

__all__ = ["CPU"]
