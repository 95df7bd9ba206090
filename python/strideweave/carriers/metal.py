"""Apple GPUs: the original's ``strideweave.carriers.metal`` (the native ``Metal``).

``Metal(size, *, mutable=True, dtype=DType.Float32, empty=False)`` is closed and
definition-free. Its carriers keep their slots in a Gpu carrier on the Metal adapter; where
wgpu finds no Metal adapter (every machine but an Apple one) the constructor raises
``NotImplementedError`` after checking its arguments.
"""

from .._native import Metal as Metal

__all__ = ["Metal"]
