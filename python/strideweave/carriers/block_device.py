"""Block devices: the original's ``strideweave.carriers.block_device`` (the native
``BlockDevice`` and ``BlockDeviceCarrier``)."""

from .._native import BlockDevice as BlockDevice
from .._native import BlockDeviceCarrier as BlockDeviceCarrier

__all__ = ["BlockDevice", "BlockDeviceCarrier"]
