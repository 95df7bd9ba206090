"""The wgpu carrier: ``strideweave-wgpu``'s ``Gpu`` class and its host staging class
``GpuHost`` (the native objects; no module of the original).

``Gpu`` runs on the adapter wgpu finds (a GPU through Vulkan, Metal or DX12, or Mesa's
software Vulkan driver); without one its constructor raises ``NotImplementedError``.
"""

from .._native import Gpu as Gpu
from .._native import GpuHost as GpuHost

__all__ = ["Gpu", "GpuHost"]
