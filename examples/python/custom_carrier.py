"""A carrier class written in Python: its slots live in a Python list owned by a separate
"device" object, and the framework calls its storage provider with the carrier instance
itself. Run it with `python examples/python/custom_carrier.py`."""

from typing import Dict, List

import strideweave as sw


class Device:
    """A stand-in for a device runtime: it hands out buffers by owner."""

    def __init__(self) -> None:
        self.buffers: Dict[int, List[float]] = {}


class ListCarrier(sw.Carrier):
    """Slots in a list on `device`; the instance keeps its own attributes."""

    device: Device

    def __init__(self, device: Device, slots: int) -> None:
        self.device = device
        super().__init__(slots, dtype=sw.DType.Float32)

    def configure_like(self, prototype: "ListCarrier") -> None:
        """Configures a carrier the framework makes like `prototype` (`new_like`,
        `allocate_like`, an operation's result): this class's `__init__` takes a device,
        so the framework calls this instead, before any storage callback sees the instance."""
        self.device = prototype.device


def supports_dtype(carrier: ListCarrier, dtype: sw.DType) -> bool:
    return dtype is sw.DType.Float32


def physical_size(carrier: ListCarrier) -> int:
    return len(carrier.device.buffers.get(id(carrier), []))


def allocate(carrier: ListCarrier, slots: int) -> None:
    carrier.device.buffers[id(carrier)] = [0.0] * slots


def release(carrier: ListCarrier) -> None:
    del carrier.device.buffers[id(carrier)]


def read(carrier: ListCarrier, index: int) -> float:
    return carrier.device.buffers[id(carrier)][index]


def write(carrier: ListCarrier, index: int, value: object) -> None:
    assert isinstance(value, float)
    carrier.device.buffers[id(carrier)][index] = value


def main() -> None:
    storage = sw.StorageProvider(supports_dtype, physical_size, allocate, release, read, write)
    sw.register_carrier_definition(ListCarrier, sw.CarrierDefinition(storage))

    device = Device()
    carrier = ListCarrier(device, 4)
    t = sw.Tensor.compact(carrier, (2, 2))
    t[1, 0] = 2.5
    print("values", t.to_list(), "version", t.version)
    print("the device holds", list(device.buffers.values()))
    print("t.carrier is carrier:", t.carrier is carrier)
    made = carrier.new_like([1.0, 2.0])
    print("new_like made a", type(made).__name__, "on the same device:", made.device is device)
    print("the device holds", sorted(device.buffers.values()))

    def failing_write(carrier: ListCarrier, index: int, value: object) -> None:
        raise OSError("the device is gone")

    broken = sw.StorageProvider(supports_dtype, physical_size, allocate, release, read, failing_write)

    class Broken(sw.Carrier):
        device: Device

        def __init__(self, device: Device, slots: int) -> None:
            self.device = device
            super().__init__(slots, dtype=sw.DType.Float32)

    sw.register_carrier_definition(Broken, sw.CarrierDefinition(broken))
    u = sw.Tensor.compact(Broken(device, 2), (2,))
    try:
        u[0] = 1.0
    except OSError as error:
        print("the write failed with", repr(error), "and the version stayed", u.version)


if __name__ == "__main__":
    main()
