"""Carriers the framework makes of a Python class — `new_like`, `allocate_like`, an
operation's result (`invocation.allocate_result`) — are initialized like the ones a user
constructs: before any storage callback sees the instance, the class's `configure_like(self,
prototype)` runs if it defines one, otherwise its `__init__` runs as `cls(slots, dtype=dtype)`
(plus `mutable=False` for an immutable one) (carrier-extension
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
        return isinstance(carrier.device, Device) and dtype is F32

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
    assert [made.get_value(i) for i in range(3)] == [1.5, -2.0, 4.0]
    assert DEVICE.buffers[id(made)] == [1.5, -2.0, 4.0]
    frozen = prototype.allocate_like(4, mutable=False)
    assert inits[2:] == [(4, F32, False)]
    assert type(frozen) is cls and not frozen.is_mutable() and frozen.size() == 4
    assert [frozen.get_value(i) for i in range(4)] == [0.0] * 4
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


def test_an_init_with_another_signature_is_told_to_define_configure_like() -> None:
    class Positional(sw.Carrier):
        device: Device

        def __init__(self, device: Device, slots: int) -> None:
            self.device = device
            super().__init__(slots, dtype=F32)

    sw.register_carrier_definition(Positional, sw.CarrierDefinition(device_storage([])))
    prototype = Positional(DEVICE, 2)
    buffers = dict(DEVICE.buffers)
    refusal = f"{Positional.__qualname__}.__init__() got an unexpected keyword argument 'dtype'"
    with pytest.raises(TypeError) as caught:
        prototype.new_like([1.0])
    assert str(caught.value) == (
        "Positional.__init__ cannot be called as Positional(slots, dtype=..., mutable=...) "
        f"({refusal}), so the framework "
        "cannot make a Positional like an existing one: define configure_like(self, prototype) "
        "on Positional to set a fresh instance's configuration from the prototype"
    )
    cause = caught.value.__cause__
    assert type(cause) is TypeError
    assert str(cause) == refusal
    assert DEVICE.buffers == buffers, "nothing was allocated"


def test_a_type_error_raised_inside_init_still_propagates_as_itself() -> None:
    raised: List[BaseException] = []

    class Refusing(sw.Carrier):
        device: Device

        def __init__(self, slots: int, *, dtype: sw.DType, mutable: bool = True) -> None:
            self.device = DEVICE
            if raised or slots != 1:
                error = TypeError("Refusing takes one slot")
                raised.append(error)
                raise error
            super().__init__(slots, dtype=dtype, mutable=mutable)

    sw.register_carrier_definition(Refusing, sw.CarrierDefinition(device_storage([])))
    with pytest.raises(TypeError) as caught:
        Refusing(1, dtype=F32).allocate_like(2)
    assert caught.value is raised[0] and caught.value.__cause__ is None


class Positional(sw.Carrier):
    """The shape of `ListCarrier` in examples/python/custom_carrier.py: `__init__(device,
    slots)`, configured for framework-made instances by `configure_like`."""

    device: Device
    configured: List[Tuple[Any, Any]] = []

    def __init__(self, device: Device, slots: int, *, mutable: bool = True) -> None:
        self.device = device
        super().__init__(slots, dtype=F32, mutable=mutable)

    def configure_like(self, prototype: "Positional") -> None:
        type(self).configured.append((self, prototype))
        self.device = prototype.device


SEEN_BY_POSITIONAL: List[Any] = []


def neg_kernel_on_device() -> sw.KernelProvider:
    """A `neg` kernel over `carrier.device` buffers, its result from `allocate_result`."""

    def prepare(invocation: Any, interface: Any) -> Any:
        (operand,) = invocation.operands

        def submit() -> Any:
            out = invocation.allocate_result(0)
            source = operand.carrier.device.buffers[id(operand.carrier)]
            target = out.carrier.device.buffers[id(out.carrier)]
            for k, j in enumerate(out.layout.indices()):
                target[j] = -source[operand.offset + operand.layout.indices()[k]]
            return ext.ProviderResult([out])

        return ext.PreparedKernel(interface, submit)

    pattern = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "neg.positional", prepare)
    return sw.KernelProvider(RingInterface(), [pattern])


sw.register_carrier_definition(
    Positional, sw.CarrierDefinition(device_storage(SEEN_BY_POSITIONAL), kernels=neg_kernel_on_device())
)


def test_configure_like_configures_factory_made_carriers_of_another_init_signature() -> None:
    device = Device()
    prototype = Positional(device, 2)
    Positional.configured.clear()
    made = prototype.new_like([1.5, -2.0, 4.0])
    assert type(made) is Positional and made is not prototype
    assert Positional.configured == [(made, prototype)]
    assert SEEN_BY_POSITIONAL[-1] is made, "supports_dtype saw the configured instance"
    assert made.device is device and device.buffers[id(made)] == [1.5, -2.0, 4.0]
    assert [made.get_value(i) for i in range(3)] == [1.5, -2.0, 4.0]
    frozen = prototype.allocate_like(4, mutable=False)
    assert Positional.configured[1:] == [(frozen, prototype)]
    assert (frozen.device, frozen.size(), frozen.is_mutable()) == (device, 4, False)
    assert device.buffers[id(frozen)] == [0.0] * 4
    assert sw.Tensor.compact(made, (3,)).carrier is made


def test_configure_like_configures_an_operation_result() -> None:
    device = Device()
    x = sw.Tensor.compact(Positional(device, 2), (2,))
    x[0], x[1] = 1.0, -3.0
    Positional.configured.clear()
    y = sw.neg(x)
    assert y.to_list() == [-1.0, 3.0]
    assert type(y.carrier) is Positional and y.carrier.device is device
    assert Positional.configured == [(y.carrier, x.carrier)]
    assert device.buffers[id(y.carrier)] == [-1.0, 3.0]


def test_configure_like_configures_the_tiers_an_evictable_makes_when_it_moves() -> None:
    class Tier(Positional):
        configured: List[Tuple[Any, Any]] = []

    storage = device_storage([])
    fallback = sw.StorageProvider(
        storage.supports_dtype,
        storage.physical_size,
        storage.allocate,
        lambda carrier: carrier.device.buffers.pop(id(carrier)) and None,
        storage.read,
        storage.write,
        elementwise_fallback=True,
    )
    sw.register_carrier_definition(Tier, sw.CarrierDefinition(fallback))
    device = Device()
    primary, secondary = Tier(device, 2), Tier(device, 0)
    hierarchy = sw.Evictable(primary, secondary)
    hierarchy.set_value(0, 5.0)
    hierarchy.set_value(1, -1.0)
    hierarchy.evict()
    assert hierarchy.is_evicted()
    (evicted, from_secondary), = Tier.configured
    assert from_secondary is secondary and evicted.device is device
    assert device.buffers[id(evicted)] == [5.0, -1.0]
    hierarchy.promote()
    assert [hierarchy.get_value(0), hierarchy.get_value(1)] == [5.0, -1.0]
    assert len(Tier.configured) == 2 and Tier.configured[1][1] is primary
    assert type(hierarchy.primary) is Tier and hierarchy.primary.device is device


def test_configure_like_wins_over_init_and_its_failures_are_the_factorys() -> None:
    inits: List[int] = []
    raised: List[BaseException] = []
    answer: List[Any] = [None]

    class Both(sw.Carrier):
        device: Device

        def __init__(self, slots: int, *, dtype: sw.DType, mutable: bool = True) -> None:
            inits.append(slots)
            self.device = DEVICE
            super().__init__(slots, dtype=dtype, mutable=mutable)

        def configure_like(self, prototype: "Both") -> Any:
            if raised:
                raise raised[0]
            self.device = prototype.device
            return answer[0]

    sw.register_carrier_definition(Both, sw.CarrierDefinition(device_storage([])))
    prototype = Both(1, dtype=F32)
    made = prototype.allocate_like(3)
    assert inits == [1], "__init__ ran for the user's instance only"
    assert made.device is DEVICE and made.size() == 3
    buffers = dict(DEVICE.buffers)
    answer[0] = "configured"
    with pytest.raises(TypeError, match="^Both.configure_like must return None, got str$"):
        prototype.new_like([1.0])
    raised.append(LookupError("no such device"))
    with pytest.raises(LookupError) as caught:
        prototype.new_like([1.0])
    assert caught.value is raised[0]
    assert DEVICE.buffers == buffers, "a failed configure_like allocates nothing"


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
        r"call super\(\)\.__init__\(slots, dtype=dtype, mutable=mutable\), or the class must define "
        r"configure_like\(self, prototype\)$",
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
    assert type(made) is sw.CPU and made.dtype() is sw.DType.Int32 and [made.get_value(0), made.get_value(1)] == [3, 4]
    zeros = cpu.allocate_like(3)
    assert type(zeros) is sw.CPU and [zeros.get_value(i) for i in range(3)] == [0.0, 0.0, 0.0]
