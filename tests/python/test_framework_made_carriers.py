"""Carriers the framework makes of a Python class — `new_like`, `allocate_like`, an
operation's result (`invocation.allocate_result`) — are initialized like the ones a user
constructs: the class's `__init__` runs, as `cls(slots, dtype=dtype)` (plus `mutable=False`
for an immutable one), before any storage callback sees the instance (carrier-extension
spec: "Before the framework first invokes supports_dtype for an instance, that exact
instance SHALL have established every definition-required configuration"; the reference
implementation's factories call the class the same way)."""

import itertools
from typing import Any, Dict, List, Optional, Tuple

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import F32, RingInterface, neg_plan

NAMES = itertools.count()
Init = Tuple[int, sw.DType, bool]


class Device:
    """Buffers by owner, handed out to carriers configured with this device."""

    def __init__(self) -> None:
        self.buffers: Dict[int, List[float]] = {}


DEVICE = Device()


def device_storage(seen: List[Any]) -> sw.StorageProvider:
    """Storage on `carrier.device`, which only `__init__` sets: a callback on an instance
    whose `__init__` did not run raises AttributeError. `seen` records each instance
    `supports_dtype` is asked about."""

    def supports_dtype(carrier: Any, dtype: sw.DType) -> bool:
        seen.append(carrier)
        return carrier.device is DEVICE and dtype is F32

    def allocate(carrier: Any, slots: int) -> None:
        carrier.device.buffers[id(carrier)] = [0.0] * slots

    def write(carrier: Any, index: int, value: Any) -> None:
        carrier.device.buffers[id(carrier)][index] = value

    return sw.StorageProvider(
        supports_dtype,
        lambda carrier: len(carrier.device.buffers.get(id(carrier), [])),
        allocate,
        lambda carrier: carrier.device.buffers.pop(id(carrier)),
        lambda carrier, index: carrier.device.buffers[id(carrier)][index],
        write,
    )


def configured_class(kernels: Optional[sw.KernelProvider] = None) -> Tuple[type, List[Init], List[Any]]:
    """A class whose `__init__(slots, *, dtype, mutable=True)` sets its device, records its
    arguments, and calls `Carrier.__init__` with them."""
    inits: List[Init] = []
    seen: List[Any] = []

    class OnDevice(sw.Carrier):
        device: Device

        def __init__(self, slots: int, *, dtype: sw.DType, mutable: bool = True) -> None:
            inits.append((slots, dtype, mutable))
            self.device = DEVICE
            super().__init__(slots, dtype=dtype, mutable=mutable)

    OnDevice.__name__ = OnDevice.__qualname__ = f"OnDevice{next(NAMES)}"
    sw.register_carrier_definition(OnDevice, sw.CarrierDefinition(device_storage(seen), kernels=kernels))
    return OnDevice, inits, seen


def test_new_like_and_allocate_like_run_the_classs_init() -> None:
    cls, inits, seen = configured_class()
    prototype = cls(2, dtype=F32)
    assert inits == [(2, F32, True)]
    made = prototype.new_like([1.5, -2.0, 4.0])
    assert type(made) is cls and made is not prototype
    assert inits[1:] == [(3, F32, True)]
    assert seen[-1] is made, "supports_dtype saw the initialized fresh instance"
    assert [made.get(i) for i in range(3)] == [1.5, -2.0, 4.0]
    assert DEVICE.buffers[id(made)] == [1.5, -2.0, 4.0]
    frozen = prototype.allocate_like(4, mutable=False)
    assert inits[2:] == [(4, F32, False)]
    assert type(frozen) is cls and not frozen.is_mutable and frozen.size() == 4
    assert [frozen.get(i) for i in range(4)] == [0.0] * 4
    assert sw.Tensor.compact(made, (3,)).carrier is made


def test_an_operation_result_is_initialized_before_its_storage_is_used() -> None:
    def prepare(invocation: Any, interface: Any) -> Any:
        (operand,) = invocation.operands

        def submit() -> Any:
            out = invocation.allocate_result(0)
            source = DEVICE.buffers[id(operand.carrier)]
            target = DEVICE.buffers[id(out.carrier)]
            for k, j in enumerate(out.layout.indices()):
                target[j] = -source[operand.offset + operand.layout.indices()[k]]
            return ext.ProviderResult([out])

        return ext.PreparedKernel(interface, submit)

    interface = RingInterface()
    pattern = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "neg.device", prepare)
    cls, inits, _ = configured_class(sw.KernelProvider(interface, [pattern]))
    x = sw.Tensor.compact(cls(2, dtype=F32), (2,))
    x[0], x[1] = 1.0, -3.0
    y = sw.neg(x)
    assert y.to_list() == [-1.0, 3.0]
    assert type(y.carrier) is cls and y.carrier.device is DEVICE
    assert inits == [(2, F32, True), (2, F32, True)]


def test_an_exception_raised_by_init_propagates_as_itself_and_nothing_is_made() -> None:
    raised: List[BaseException] = []
    calls: List[str] = []

    class Picky(sw.Carrier):
        device: Device

        def __init__(self, slots: int, *, dtype: sw.DType, mutable: bool = True) -> None:
            self.device = DEVICE
            if calls:
                error = PermissionError("no more carriers on this device")
                raised.append(error)
                raise error
            calls.append("first")
            super().__init__(slots, dtype=dtype, mutable=mutable)

    sw.register_carrier_definition(Picky, sw.CarrierDefinition(device_storage([])))
    prototype = Picky(1, dtype=F32)
    buffers = len(DEVICE.buffers)
    with pytest.raises(PermissionError) as caught:
        prototype.allocate_like(2)
    assert caught.value is raised[0]
    assert len(DEVICE.buffers) == buffers, "nothing was allocated"


def test_an_init_with_another_signature_cannot_make_framework_carriers() -> None:
    class Positional(sw.Carrier):
        device: Device

        def __init__(self, device: Device, slots: int) -> None:
            self.device = device
            super().__init__(slots, dtype=F32)

    sw.register_carrier_definition(Positional, sw.CarrierDefinition(device_storage([])))
    prototype = Positional(DEVICE, 2)
    with pytest.raises(TypeError, match=r"__init__\(\) got an unexpected keyword argument 'dtype'"):
        prototype.new_like([1.0])


def test_init_must_reach_carrier_init_with_the_arguments_it_received() -> None:
    class Silent(sw.Carrier):
        device: Device

        def __init__(self, slots: int, *, dtype: sw.DType, mutable: bool = True) -> None:
            self.device = DEVICE
            if not hasattr(type(self), "made"):
                type(self).made = True  # type: ignore[attr-defined]
                super().__init__(slots, dtype=dtype, mutable=mutable)

    sw.register_carrier_definition(Silent, sw.CarrierDefinition(device_storage([])))
    with pytest.raises(
        TypeError,
        match=r"^Silent\.__init__ did not call Carrier\.__init__ for a carrier the framework makes: it must "
        r"call super\(\)\.__init__\(slots, dtype=dtype, mutable=mutable\)$",
    ):
        Silent(1, dtype=F32).allocate_like(3)

    class Resizing(sw.Carrier):
        device: Device

        def __init__(self, slots: int, *, dtype: sw.DType, mutable: bool = True) -> None:
            self.device = DEVICE
            super().__init__(slots + 1, dtype=dtype, mutable=mutable)

    sw.register_carrier_definition(Resizing, sw.CarrierDefinition(device_storage([])))
    prototype = Resizing(1, dtype=F32)
    assert prototype.size() == 2
    with pytest.raises(
        ValueError,
        match=r"^Resizing\.__init__ passed \(slots=4, dtype=Float32, mutable=True\) to Carrier\.__init__, but "
        r"the framework is constructing a Resizing of \(slots=3, dtype=Float32, mutable=True\): pass the "
        r"arguments it received on$",
    ):
        prototype.allocate_like(3)


def test_factory_arguments_are_checked() -> None:
    cls, _, _ = configured_class()
    prototype = cls(1, dtype=F32)
    with pytest.raises(TypeError, match="^new_like mutable must be a bool, got int$"):
        prototype.new_like([1.0], mutable=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^new_like dtype must be a DType, got str$"):
        prototype.new_like([1.0], dtype="f32")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^new_like values must be an iterable of bool, int or float, got int$"):
        prototype.new_like(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^allocate_like size must be a non-negative int, got -1$"):
        prototype.allocate_like(-1)
    with pytest.raises(TypeError, match="^allocate_like size must be an int, got float$"):
        prototype.allocate_like(2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^allocate_like empty must be a bool, got int$"):
        prototype.allocate_like(2, empty=0)  # type: ignore[arg-type]


def test_shipped_carriers_have_the_factories_too() -> None:
    cpu = sw.CPU.from_values([1.0, 2.0])
    made = cpu.new_like([3, 4], dtype=sw.DType.Int32)
    assert type(made) is sw.CPU and made.dtype is sw.DType.Int32 and [made.get(0), made.get(1)] == [3, 4]
    zeros = cpu.allocate_like(3)
    assert type(zeros) is sw.CPU and [zeros.get(i) for i in range(3)] == [0.0, 0.0, 0.0]
