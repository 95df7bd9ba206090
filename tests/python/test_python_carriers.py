"""Carriers written in Python: StorageProvider, CarrierDefinition, register_carrier_definition."""

import threading
from typing import Any, Callable, Dict, List, Optional

import pytest

import strideweave as sw
from strideweave.carriers import extension


class Recorder:
    """A storage provider over Python lists that records which instance each call got."""

    def __init__(self) -> None:
        self.calls: List[tuple] = []
        self.fail: Dict[str, BaseException] = {}
        self.returns: Dict[str, Any] = {}

    def _hook(self, name: str, carrier: Any, *rest: Any) -> Any:
        self.calls.append((name, carrier) + rest)
        if name in self.fail:
            raise self.fail[name]
        if name in self.returns:
            return self.returns[name]
        return None

    def supports_dtype(self, carrier: Any, dtype: sw.DType) -> Any:
        hooked = self._hook("supports_dtype", carrier, dtype)
        if hooked is not None:
            return hooked
        return dtype is sw.DType.Float32 or dtype is sw.DType.Int32

    def physical_size(self, carrier: Any) -> Any:
        hooked = self._hook("physical_size", carrier)
        if hooked is not None:
            return hooked
        return len(carrier.slots)

    def allocate(self, carrier: Any, slots: int) -> Any:
        hooked = self._hook("allocate", carrier, slots)
        carrier.slots = [0.0] * slots
        return hooked

    def release(self, carrier: Any) -> Any:
        hooked = self._hook("release", carrier)
        carrier.slots = []
        return hooked

    def read(self, carrier: Any, index: int) -> Any:
        hooked = self._hook("read", carrier, index)
        if hooked is not None:
            return hooked
        return carrier.slots[index]

    def write(self, carrier: Any, index: int, value: Any) -> Any:
        hooked = self._hook("write", carrier, index, value)
        carrier.slots[index] = value
        return hooked

    def provider(self, elementwise_fallback: bool = False) -> sw.StorageProvider:
        return sw.StorageProvider(
            self.supports_dtype,
            self.physical_size,
            self.allocate,
            self.release,
            self.read,
            self.write,
            elementwise_fallback=elementwise_fallback,
        )


def new_class(name: str = "ListCarrier") -> type:
    return type(name, (sw.Carrier,), {})


def registered(recorder: Recorder, name: str = "ListCarrier", facets: tuple = ()) -> type:
    cls = new_class(name)
    sw.register_carrier_definition(cls, sw.CarrierDefinition(recorder.provider(), facets=facets))
    return cls


def test_the_surface_names_the_same_objects() -> None:
    for name in ["StorageProvider", "CarrierDefinition", "register_carrier_definition", "CarrierFacet"]:
        assert getattr(extension, name) is getattr(sw, name)


def test_storage_provider_is_immutable_and_checks_its_fields() -> None:
    recorder = Recorder()
    provider = recorder.provider()
    assert provider.read == recorder.read and provider.elementwise_fallback is False
    with pytest.raises(AttributeError):
        provider.read = recorder.write  # type: ignore[misc]
    with pytest.raises(TypeError, match="^StorageProvider supports_dtype must be callable, got int$"):
        sw.StorageProvider(1, recorder.physical_size, recorder.allocate, recorder.release, recorder.read, recorder.write)
    with pytest.raises(TypeError, match="^StorageProvider write must be callable, got str$"):
        sw.StorageProvider(recorder.supports_dtype, recorder.physical_size, recorder.allocate, recorder.release, recorder.read, "w")
    with pytest.raises(TypeError, match="^StorageProvider elementwise_fallback must be a bool, got int$"):
        recorder.provider(elementwise_fallback=1)  # type: ignore[arg-type]


def test_carrier_definition_materializes_its_iterables_once() -> None:
    class Residency(sw.CarrierFacet):
        pass

    facet = Residency()
    consumed: List[int] = []

    def facets() -> Any:
        consumed.append(1)
        yield facet

    definition = sw.CarrierDefinition(Recorder().provider(), facets=facets())
    assert definition.facets == (facet,) and consumed == [1]
    assert definition.transfers == () and definition.kernels is None and definition.composite is None
    with pytest.raises(AttributeError):
        definition.facets = ()  # type: ignore[misc]
    with pytest.raises(TypeError, match="^CarrierDefinition storage must be a StorageProvider, got int$"):
        sw.CarrierDefinition(3)
    with pytest.raises(TypeError, match="CarrierDefinition facets must hold CarrierFacet instances, got int"):
        sw.CarrierDefinition(Recorder().provider(), facets=[1])
    with pytest.raises(ValueError, match="two facets of the exact class Residency"):
        sw.CarrierDefinition(Recorder().provider(), facets=[Residency(), Residency()])
    with pytest.raises(TypeError, match="CarrierDefinition facets must be an iterable, got int"):
        sw.CarrierDefinition(Recorder().provider(), facets=5)


def test_register_checks_its_arguments() -> None:
    definition = sw.CarrierDefinition(Recorder().provider())
    with pytest.raises(TypeError, match="concrete Carrier subclass other than Carrier, got Carrier"):
        sw.register_carrier_definition(sw.Carrier, definition)
    with pytest.raises(TypeError, match="carrier_class must be a Carrier subclass, got int"):
        sw.register_carrier_definition(3, definition)
    with pytest.raises(TypeError, match="got int"):
        sw.register_carrier_definition(int, definition)
    with pytest.raises(TypeError, match="CPU is a shipped carrier class"):
        sw.register_carrier_definition(sw.CPU, definition)
    with pytest.raises(TypeError, match="definition must be a CarrierDefinition, got dict"):
        sw.register_carrier_definition(new_class(), {})
    cls = new_class()
    assert sw.register_carrier_definition(cls, definition) is None
    with pytest.raises(TypeError, match="already has a CarrierDefinition"):
        sw.register_carrier_definition(cls, definition)


def test_every_callback_receives_the_exact_instance() -> None:
    recorder = Recorder()
    cls = registered(recorder)

    class Marker:
        pass

    carrier = cls(3, dtype=sw.DType.Float32)
    assert type(carrier) is cls and isinstance(carrier, sw.Carrier)
    assert carrier.size() == 3 and carrier.dtype() is sw.DType.Float32
    t = sw.Tensor.compact(carrier, (3,))
    t[1] = 2.5
    assert t[1] == 2.5 and t.version == 1
    assert t.carrier is carrier
    carrier.release()
    names = [call[0] for call in recorder.calls]
    assert names[:3] == ["supports_dtype", "allocate", "physical_size"]
    assert "write" in names and "read" in names and names[-1] == "release"
    assert all(call[1] is carrier for call in recorder.calls)
    assert recorder.calls[0][2] is sw.DType.Float32
    assert recorder.calls[1][2] == 3


def test_instances_keep_their_own_attributes() -> None:
    recorder = Recorder()
    cls = registered(recorder)

    carrier = cls(2, dtype=sw.DType.Float32)
    carrier.label = "device 0"
    assert carrier.label == "device 0" and carrier.slots == [0.0, 0.0]


def test_an_unregistered_subclass_cannot_be_constructed() -> None:
    cls = new_class("Unregistered")
    with pytest.raises(TypeError, match="^Unregistered has no carrier definition"):
        cls(2, dtype=sw.DType.Float32)


def test_a_subclass_of_a_registered_class_acquires_nothing() -> None:
    recorder = Recorder()
    base = registered(recorder, "Base")
    sub = type("Sub", (base,), {})
    with pytest.raises(TypeError, match="^Sub has no carrier definition"):
        sub(2, dtype=sw.DType.Float32)
    assert recorder.calls == []


def test_supports_dtype_rejects_construction_with_a_value_error() -> None:
    recorder = Recorder()
    cls = registered(recorder, "OnlyNumbers")
    with pytest.raises(ValueError, match="OnlyNumbers carriers cannot store dtype Bool"):
        cls(2, dtype=sw.DType.Bool)
    assert [c[0] for c in recorder.calls] == ["supports_dtype"]


@pytest.mark.parametrize(
    "callback, value, message",
    [
        ("supports_dtype", 1, "StorageProvider supports_dtype must return a bool, got int"),
        ("physical_size", True, "StorageProvider physical_size must return an int, got bool"),
        ("physical_size", "3", "StorageProvider physical_size must return an int, got str"),
        ("allocate", 3, "StorageProvider allocate must return None, got int"),
    ],
)
def test_wrong_return_types_fail_construction_with_type_error(callback: str, value: Any, message: str) -> None:
    recorder = Recorder()
    recorder.returns[callback] = value
    cls = registered(recorder)
    with pytest.raises(TypeError, match=f"^{message}$"):
        cls(2, dtype=sw.DType.Float32)


def test_a_negative_physical_size_is_a_value_error() -> None:
    recorder = Recorder()
    recorder.returns["physical_size"] = -1
    cls = registered(recorder)
    with pytest.raises(ValueError, match="returned a negative physical_size -1"):
        cls(2, dtype=sw.DType.Float32)


def test_wrong_read_and_write_returns_fail_without_publishing() -> None:
    recorder = Recorder()
    cls = registered(recorder)
    carrier = cls(2, dtype=sw.DType.Float32)
    recorder.returns["read"] = "x"
    with pytest.raises(TypeError, match="^StorageProvider read must return a bool, int or float, got str$"):
        carrier.get_value(0)
    del recorder.returns["read"]
    recorder.returns["write"] = 0
    with pytest.raises(TypeError, match="^StorageProvider write must return None, got int$"):
        carrier.set_value(0, 1.0)
    assert carrier.version == 0


@pytest.mark.parametrize("callback", ["supports_dtype", "allocate", "physical_size"])
def test_a_construction_callback_exception_propagates_as_the_same_object(callback: str) -> None:
    recorder = Recorder()
    boom = LookupError("device lost")
    recorder.fail[callback] = boom
    cls = registered(recorder)
    with pytest.raises(LookupError) as info:
        cls(2, dtype=sw.DType.Float32)
    assert info.value is boom


def test_read_and_write_exceptions_propagate_and_publish_nothing() -> None:
    recorder = Recorder()
    cls = registered(recorder)
    carrier = cls(2, dtype=sw.DType.Float32)
    t = sw.Tensor.compact(carrier, (2,))
    t[0] = 1.0
    failure = KeyError("write refused")
    recorder.fail["write"] = failure
    with pytest.raises(KeyError) as info:
        t[1] = 5.0
    assert info.value is failure
    assert t.version == 1
    del recorder.fail["write"]
    custom = type("DeviceError", (Exception,), {})("bus fault")
    recorder.fail["read"] = custom
    with pytest.raises(Exception) as raised:
        t.to_list()
    assert raised.value is custom
    del recorder.fail["read"]
    assert t.to_list() == [1.0, 0.0] and t.version == 1


def test_a_storage_only_carrier_moves_by_elementwise_fallback_and_has_no_capability() -> None:
    source_class = new_class("SourceStore")
    sw.register_carrier_definition(
        source_class, sw.CarrierDefinition(Recorder().provider(elementwise_fallback=True))
    )
    target_class = new_class("TargetStore")
    sw.register_carrier_definition(
        target_class, sw.CarrierDefinition(Recorder().provider(elementwise_fallback=True))
    )
    source = sw.Tensor.compact(source_class(3, dtype=sw.DType.Float32), (3,))
    for i, value in enumerate([1.0, 2.0, 3.0]):
        source[i] = value
    destination = target_class(3, dtype=sw.DType.Float32)
    moved = sw.move(source, destination)
    assert moved.carrier is destination
    assert moved.to_list() == [1.0, 2.0, 3.0]
    assert source.carrier.is_released()
    assert destination.operation_capabilities() == ()
    with pytest.raises(sw.UnsupportedOperationPlan) as info:
        sw.add(moved, moved)
    assert info.value.operation == "add"


def test_a_move_without_a_route_or_permission_changes_nothing() -> None:
    cls = registered(Recorder(), "Closed")
    source = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    destination = cls(2, dtype=sw.DType.Float32)
    with pytest.raises(NotImplementedError, match="no move route from CPU to Closed"):
        sw.move(source, destination)
    assert not source.carrier.is_released() and destination.version == 0
    assert source.to_list() == [1.0, 2.0]


def test_a_resource_stays_a_distinct_object() -> None:
    class Device:
        def __init__(self) -> None:
            self.buffers: Dict[int, List[float]] = {}

    device = Device()
    cls = new_class("OnDevice")

    def allocate(carrier: Any, slots: int) -> None:
        device.buffers[id(carrier)] = [0.0] * slots

    provider = sw.StorageProvider(
        lambda carrier, dtype: dtype is sw.DType.Float32,
        lambda carrier: len(device.buffers.get(id(carrier), [])),
        allocate,
        lambda carrier: device.buffers.pop(id(carrier)) and None,
        lambda carrier, index: device.buffers[id(carrier)][index],
        lambda carrier, index, value: device.buffers[id(carrier)].__setitem__(index, value),
    )
    sw.register_carrier_definition(cls, sw.CarrierDefinition(provider))
    t = sw.Tensor.compact(cls(2, dtype=sw.DType.Float32), (2,))
    t[1] = 4.0
    assert type(t.carrier) is cls and t.carrier is not device
    assert not isinstance(device, sw.Carrier) and not isinstance(device, sw.StorageProvider)
    assert list(device.buffers.values()) == [[0.0, 4.0]]


def test_python_facets_are_found_by_exact_type() -> None:
    class Telemetry(sw.CarrierFacet):
        def temperature(self) -> int:
            return 41

    class Other(sw.CarrierFacet):
        pass

    telemetry = Telemetry()
    cls = registered(Recorder(), "WithFacet", facets=(telemetry,))
    carrier = cls(1, dtype=sw.DType.Float32)
    assert carrier.facet(Telemetry) is telemetry
    assert carrier.require_facet(Telemetry).temperature() == 41
    assert carrier.facet(Other) is None
    with pytest.raises(NotImplementedError, match="register no Other facet"):
        carrier.require_facet(Other)


def test_a_registration_race_has_exactly_one_winner() -> None:
    cls = new_class("Raced")
    definition = sw.CarrierDefinition(Recorder().provider())
    outcomes: List[Optional[BaseException]] = []
    barrier = threading.Barrier(8)

    def register() -> None:
        barrier.wait(timeout=10)
        try:
            sw.register_carrier_definition(cls, definition)
            outcomes.append(None)
        except TypeError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=register) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert outcomes.count(None) == 1
    assert all("already has a CarrierDefinition" in str(e) for e in outcomes if e is not None)


def test_a_callback_that_reenters_its_own_carrier_gets_an_error_not_a_deadlock() -> None:
    raised: List[BaseException] = []

    def allocate(carrier: Any, slots: int) -> None:
        carrier.slots = [1.0] * slots

    def write(carrier: Any, index: int, value: Any) -> None:
        try:
            carrier.get_value(1)
        except RuntimeError as error:
            raised.append(error)
            raise

    provider = sw.StorageProvider(
        lambda carrier, dtype: True,
        lambda carrier: len(carrier.slots),
        allocate,
        lambda carrier: None,
        lambda carrier, index: carrier.slots[index],
        write,
    )
    cls = new_class("SelfWriting")
    sw.register_carrier_definition(cls, sw.CarrierDefinition(provider))
    carrier = cls(2, dtype=sw.DType.Float32)
    with pytest.raises(RuntimeError, match="accessed again on this thread while its storage provider writes it") as info:
        carrier.set_value(0, 2.0)
    assert raised == [info.value]
    assert info.value is raised[0]
    assert carrier.version == 0 and carrier.get_value(0) == 1.0


def test_a_factory_of_another_dtype_allocates_storage_for_that_dtype() -> None:
    """`new_like` and `allocate_like` with a dtype make a carrier of that dtype, and the
    provider's `allocate` receives that carrier (so it sees the dtype it allocates for)."""
    recorder = Recorder()
    cls = registered(recorder, "TwoDtypes")
    floats = cls(2, dtype=sw.DType.Float32)
    ints = floats.new_like([7, -3, 5], dtype=sw.DType.Int32)
    empty_ints = floats.allocate_like(4, dtype=sw.DType.Int32, empty=True)
    assert type(ints) is cls and type(empty_ints) is cls
    assert ints.dtype() is sw.DType.Int32 and empty_ints.dtype() is sw.DType.Int32
    assert floats.dtype() is sw.DType.Float32
    allocations = [(c[1].dtype(), c[2]) for c in recorder.calls if c[0] == "allocate"]
    assert allocations == [(sw.DType.Float32, 2), (sw.DType.Int32, 3), (sw.DType.Int32, 4)]
    assert [c[1] for c in recorder.calls if c[0] == "allocate"][1] is ints
    t = sw.Tensor.compact(ints, (3,))
    assert [t[i] for i in range(3)] == [7, -3, 5]
    assert ints.size() == 3 and empty_ints.size() == 4
