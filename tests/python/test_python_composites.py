"""Dependent carriers written in Python: DependentCarrier, CompositeProvider and
PreparedComposite, and CarrierFacet subclasses (carrier-extension spec: independent and
dependent definitions have distinct execution ownership; definition sealing for dependent
carriers; carrier-specific facets are typed and semantically isolated)."""

from typing import Any, List, Optional

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import (
    F32,
    ListStorage,
    ReadyCompletion,
    RingInterface,
    ThreadCompletion,
    add_plan,
    elementwise,
    filled,
    neg_plan,
    new_class,
    run_bounded,
    values_of,
)


class TierStorage:
    """Storage of a dependent carrier: its slots live in a CPU carrier (`carrier.inner`);
    dtype support is the configured dependency's."""

    def supports_dtype(self, carrier: Any, dtype: sw.DType) -> bool:
        return bool(carrier.dependency.supports_storage_dtype(dtype))

    def physical_size(self, carrier: Any) -> int:
        return int(carrier.inner.size())

    def allocate(self, carrier: Any, slots: int) -> None:
        carrier.inner = sw.CPU(slots)

    def release(self, carrier: Any) -> None:
        carrier.inner.release()

    def read(self, carrier: Any, index: int) -> Any:
        return carrier.inner.get_value(index)

    def write(self, carrier: Any, index: int, value: Any) -> None:
        carrier.inner.set_value(index, value)

    def provider(self) -> sw.StorageProvider:
        return sw.StorageProvider(
            self.supports_dtype, self.physical_size, self.allocate, self.release, self.read, self.write
        )


class Delegating:
    """A composite provider running every operation on the instance's dependency through
    strideweave's public dispatch; records its calls and can inject failures."""

    def __init__(self) -> None:
        self.calls: List[tuple] = []
        self.fail_at: Optional[str] = None
        self.error: BaseException = OSError("injected")
        self.result_classes: Any = None
        self.decline: Optional[str] = None
        self.asynchronous = False

    def capabilities(self, carrier: Any) -> Any:
        self.calls.append(("capabilities", carrier))
        if self.fail_at == "capabilities":
            raise self.error
        reach = carrier.dependency.operation_capabilities()
        return (plan for plan in carrier.offered if plan in reach)

    def result_carriers(self, carrier: Any, invocation: Any) -> Any:
        self.calls.append(("result_carriers", carrier, invocation))
        if self.fail_at == "result_carriers":
            raise self.error
        if self.result_classes is not None:
            return self.result_classes
        return tuple(type(carrier.dependency) for _ in invocation.results)

    def prepare(self, carrier: Any, invocation: Any) -> Any:
        self.calls.append(("prepare", carrier, invocation))
        if self.fail_at == "prepare":
            raise self.error
        if self.decline is not None:
            return sw.Unsupported(self.decline)
        views = [
            sw.Tensor(t.carrier.inner, t.offset, t.layout) if isinstance(t, sw.Tensor) else t
            for t in invocation.operands
        ]
        function = getattr(sw, invocation.definition.name)

        def run() -> Any:
            if self.fail_at == "submit-after-work":
                function(*views)
                raise self.error
            return ext.ProviderResult([function(*views)])

        def submit() -> Any:
            if self.fail_at == "submit":
                raise self.error
            if self.fail_at == "wait":
                return ReadyCompletion(error=self.error)
            if self.asynchronous:
                return ThreadCompletion(run)
            return run()

        return ext.PreparedComposite(submit)

    def provider(self) -> sw.CompositeProvider:
        return sw.CompositeProvider(self.capabilities, self.result_carriers, self.prepare)


def composite_class(name: str, delegating: Delegating, facets: tuple = (), configure: bool = False) -> type:
    """A dependent class constructed as `cls(dependency, slots, offered=None)`; with
    `configure`, it also defines `configure_like`, taking the prototype's dependency and
    offered plans."""

    def init(self: Any, dependency: sw.Carrier, slots: int, offered: Any = None) -> None:
        self.dependency = dependency
        self.offered = list(offered if offered is not None else [neg_plan(), add_plan()])
        sw.DependentCarrier.__init__(self, slots, dtype=F32)

    def configure_like(self: Any, prototype: Any) -> None:
        self.dependency = prototype.dependency
        self.offered = list(prototype.offered)

    methods = {"__init__": init, "configure_like": configure_like} if configure else {"__init__": init}
    cls = type(name, (sw.DependentCarrier,), methods)
    definition = sw.CarrierDefinition(TierStorage().provider(), composite=delegating.provider(), facets=facets)
    sw.register_carrier_definition(cls, definition)
    return cls


def tensor_of(cls: type, values: List[float], dependency: Optional[sw.Carrier] = None, offered: Any = None) -> sw.Tensor:
    carrier = cls(dependency if dependency is not None else sw.CPU(0), len(values), offered)
    t = sw.Tensor.compact(carrier, (len(values),))
    for i, v in enumerate(values):
        t[i] = v
    return t


# --- the records and registration ---------------------------------------------------------


def test_dependent_carrier_is_an_abstract_base() -> None:
    assert issubclass(sw.DependentCarrier, sw.Carrier)
    with pytest.raises(TypeError, match="^DependentCarrier cannot be constructed directly"):
        sw.DependentCarrier(1, dtype=F32)
    with pytest.raises(TypeError, match="not DependentCarrier itself"):
        sw.register_carrier_definition(sw.DependentCarrier, sw.CarrierDefinition(TierStorage().provider(), composite=Delegating().provider()))


def test_composite_provider_checks_its_three_callables() -> None:
    d = Delegating()
    provider = d.provider()
    assert provider.capabilities == d.capabilities and provider.prepare == d.prepare
    with pytest.raises(AttributeError):
        provider.prepare = d.prepare  # type: ignore[misc]
    with pytest.raises(TypeError, match="^CompositeProvider capabilities must be callable, got int$"):
        sw.CompositeProvider(1, d.result_carriers, d.prepare)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^CompositeProvider result_carriers must be callable, got str$"):
        sw.CompositeProvider(d.capabilities, "x", d.prepare)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^CompositeProvider prepare must be callable, got NoneType$"):
        sw.CompositeProvider(d.capabilities, d.result_carriers, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^PreparedComposite submit must be callable, got int$"):
        ext.PreparedComposite(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^CarrierDefinition composite must be a CompositeProvider or None, got int$"):
        sw.CarrierDefinition(TierStorage().provider(), composite=1)  # type: ignore[arg-type]


def test_invalid_combinations_fail_registration_with_nothing_published() -> None:
    dependent = type("NoCompositeDependent", (sw.DependentCarrier,), {})
    with pytest.raises(TypeError, match="NoCompositeDependent is a dependent carrier class: its definition requires composite \\(a CompositeProvider\\)"):
        sw.register_carrier_definition(dependent, sw.CarrierDefinition(TierStorage().provider()))
    independent = new_class("CompositeIndependent")
    with pytest.raises(TypeError, match="CompositeIndependent is an independent carrier class: its definition must not supply a composite provider"):
        sw.register_carrier_definition(independent, sw.CarrierDefinition(ListStorage().provider(), composite=Delegating().provider()))
    # Nothing was published: both classes still take a valid definition.
    sw.register_carrier_definition(dependent, sw.CarrierDefinition(TierStorage().provider(), composite=Delegating().provider()))
    sw.register_carrier_definition(independent, sw.CarrierDefinition(ListStorage().provider()))


# --- execution through the dependency -----------------------------------------------------


def test_a_composite_derives_reach_and_runs_through_a_definition_free_dependency() -> None:
    d = Delegating()
    cls = composite_class("CpuTiered", d)
    x = tensor_of(cls, [1.0, -2.0, 3.0])
    carrier = x.carrier
    assert set(carrier.operation_capabilities()) == {neg_plan(), add_plan()}
    assert [call[1] for call in d.calls] == [carrier]
    y = sw.neg(x)
    assert values_of(y) == [-1.0, 2.0, -3.0] and type(y.carrier) is sw.CPU
    names = [call[0] for call in d.calls[1:]]
    assert names == ["result_carriers", "prepare"]
    assert all(call[1] is carrier for call in d.calls)
    invocation = d.calls[-1][2]
    assert invocation.definition == sw.operation_definition("neg") and invocation.plan == neg_plan()
    assert values_of(x + x) == [2.0, -4.0, 6.0]
    assert values_of(x) == [1.0, -2.0, 3.0]


def test_a_dependent_class_taking_dependencies_configures_the_instances_the_framework_makes() -> None:
    d = Delegating()
    cls = composite_class("ConfiguredTiered", d, configure=True)
    dependency = sw.CPU(0)
    x = tensor_of(cls, [1.0, -2.0], dependency=dependency, offered=[neg_plan()])
    made = x.carrier.new_like([4.0, 5.0])
    assert type(made) is cls and made is not x.carrier
    assert made.dependency is dependency and made.offered == [neg_plan()]
    assert made.offered is not x.carrier.offered
    assert ("capabilities", made) in d.calls, "the fresh instance's reach was derived from it"
    assert made.operation_capabilities() == (neg_plan(),)
    assert [made.get_value(0), made.get_value(1)] == [4.0, 5.0] and type(made.inner) is sw.CPU
    zeros = x.carrier.allocate_like(3, mutable=False)
    assert (type(zeros), zeros.size(), zeros.is_mutable()) == (cls, 3, False)
    assert [zeros.get_value(i) for i in range(3)] == [0.0, 0.0, 0.0] and zeros.dependency is dependency
    assert values_of(sw.neg(sw.Tensor.compact(made, (2,)))) == [-4.0, -5.0]

    unconfigured = composite_class("UnconfiguredTiered", Delegating())
    carrier = tensor_of(unconfigured, [1.0]).carrier
    with pytest.raises(TypeError, match=r"^UnconfiguredTiered\.__init__ cannot be called as UnconfiguredTiered"
                       r"\(slots, dtype=\.\.\., mutable=\.\.\.\) \(.*\), so the framework cannot make a UnconfiguredTiered like an existing one: "):
        carrier.new_like([1.0])


def test_the_capability_snapshot_is_taken_once_and_frozen_per_instance() -> None:
    d = Delegating()
    cls = composite_class("SnapshotTiered", d)
    narrow = tensor_of(cls, [1.0], offered=[neg_plan()])
    wide = tensor_of(cls, [1.0])
    assert narrow.carrier.operation_capabilities() == (neg_plan(),)
    assert set(wide.carrier.operation_capabilities()) == {neg_plan(), add_plan()}
    narrow.carrier.offered.append(add_plan())
    assert narrow.carrier.operation_capabilities() == (neg_plan(),)
    assert [c[0] for c in d.calls].count("capabilities") == 2
    prepared = len(d.calls)
    with pytest.raises(sw.UnsupportedOperationPlan):
        narrow + narrow
    assert "prepare" not in [c[0] for c in d.calls[prepared:]]


def test_a_declining_composite_is_an_unsupported_plan_with_its_reason() -> None:
    d = Delegating()
    d.decline = "the tiers disagree on alignment"
    cls = composite_class("DecliningTiered", d)
    x = tensor_of(cls, [1.0])
    with pytest.raises(sw.UnsupportedOperationPlan) as raised:
        sw.neg(x)
    assert raised.value.reasons == ("DecliningTiered: the tiers disagree on alignment",)


def test_result_carriers_are_validated_before_prepare() -> None:
    d = Delegating()
    cls = composite_class("ResultClassTiered", d)
    x = tensor_of(cls, [1.0])
    cases = [
        ((sw.CPU, sw.CPU), ValueError, "named 2 result carrier classes for 'neg', expected 1"),
        ([sw.CPU], TypeError, "^CompositeProvider result_carriers must return a tuple of Carrier classes, got list$"),
        ((3,), TypeError, "^each of CompositeProvider result_carriers must be a concrete Carrier subclass, got int$"),
        ((sw.Carrier,), TypeError, "must be a concrete Carrier subclass, got Carrier$"),
    ]
    for classes, kind, message in cases:
        d.result_classes = classes
        before = len(d.calls)
        with pytest.raises(kind, match=message):
            sw.neg(x)
        assert [c[0] for c in d.calls[before:]] == ["result_carriers"]


@pytest.mark.parametrize(
    "answer, kind, message",
    [
        (lambda c: [neg_plan(), neg_plan()], ValueError, "reported a duplicate capability"),
        (lambda c: ["neg"], TypeError, "^CompositeProvider capabilities must yield OperationCapability values, got str$"),
        (lambda c: 3, TypeError, "^CompositeProvider capabilities must return an iterable of OperationCapability values, got int$"),
    ],
)
def test_an_invalid_capability_answer_fails_construction(answer: Any, kind: type, message: str) -> None:
    d = Delegating()
    provider = sw.CompositeProvider(answer, d.result_carriers, d.prepare)
    cls = type("InvalidReach", (sw.DependentCarrier,), {})
    sw.register_carrier_definition(cls, sw.CarrierDefinition(TierStorage().provider(), composite=provider))
    instance = cls.__new__(cls)
    instance.dependency = sw.CPU(0)
    with pytest.raises(kind, match=message):
        sw.DependentCarrier.__init__(instance, 2, dtype=F32)
    assert instance.inner.is_released()


@pytest.mark.parametrize("point", ["capabilities", "result_carriers", "prepare", "submit", "submit-after-work", "wait"])
def test_an_exception_at_any_composite_callback_propagates_with_nothing_published(point: str) -> None:
    d = Delegating()
    d.error = LookupError(f"injected at {point}")
    cls = composite_class(f"Failing{point.title().replace('-', '').replace('_', '')}Tiered", d)
    if point == "capabilities":
        d.fail_at = point
        with pytest.raises(LookupError) as raised:
            tensor_of(cls, [1.0])
        assert raised.value is d.error
        return
    x = tensor_of(cls, [1.0, 2.0])
    version = x.version
    d.fail_at = point
    with pytest.raises(LookupError) as raised:
        sw.neg(x)
    assert raised.value is d.error
    assert x.version == version and values_of(x) == [1.0, 2.0] and not x.carrier.is_released()
    d.fail_at = None
    assert values_of(sw.neg(x)) == [-1.0, -2.0]


def test_a_composite_submit_returning_another_type_is_a_type_error() -> None:
    def prepare(carrier: Any, invocation: Any) -> Any:
        return ext.PreparedComposite(lambda: "done")

    d = Delegating()
    cls = type("StrSubmitTiered", (sw.DependentCarrier,), {})
    provider = sw.CompositeProvider(lambda c: [neg_plan()], d.result_carriers, prepare)
    sw.register_carrier_definition(cls, sw.CarrierDefinition(TierStorage().provider(), composite=provider))
    instance = cls.__new__(cls)
    instance.dependency = sw.CPU(0)
    sw.DependentCarrier.__init__(instance, 1, dtype=F32)
    with pytest.raises(TypeError, match="^PreparedComposite submit must return a ProviderResult or a ProviderCompletion"):
        sw.neg(sw.Tensor.compact(instance, (1,)))
    with pytest.raises(TypeError, match="^CompositeProvider prepare must return a PreparedComposite or Unsupported, got int$"):
        bad = sw.CompositeProvider(lambda c: [neg_plan()], d.result_carriers, lambda c, i: 1)
        other = type("IntPrepareTiered", (sw.DependentCarrier,), {})
        sw.register_carrier_definition(other, sw.CarrierDefinition(TierStorage().provider(), composite=bad))
        made = other.__new__(other)
        made.dependency = sw.CPU(0)
        sw.DependentCarrier.__init__(made, 1, dtype=F32)
        sw.neg(sw.Tensor.compact(made, (1,)))


def test_a_composite_completion_finished_on_another_thread() -> None:
    d = Delegating()
    d.asynchronous = True
    cls = composite_class("AsyncTiered", d)
    x = tensor_of(cls, [2.0, 3.0])
    assert values_of(run_bounded(lambda: x + x)) == [4.0, 6.0]


def test_a_composite_over_a_python_kernel_carrier_derives_reach_without_owning_its_packs() -> None:
    ring = RingInterface()
    compute = new_class("KernelTier")
    neg = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "neg", elementwise(lambda v: -v))
    sw.register_carrier_definition(compute, sw.CarrierDefinition(ListStorage().provider(), kernels=sw.KernelProvider(ring, [neg])))
    add = sw.KernelPattern(sw.operation_definition("add"), [add_plan()], "add", elementwise(lambda a, b: a + b))
    sw.register_kernel_pack(sw.KernelPack("tier", "1", compute, ring, [add]))

    def init(self: Any, dependency: Any, slots: int) -> None:
        self.dependency = dependency
        sw.DependentCarrier.__init__(self, slots, dtype=F32)

    def capabilities(carrier: Any) -> Any:
        return carrier.dependency.operation_capabilities()

    def result_carriers(carrier: Any, invocation: Any) -> Any:
        return (type(carrier.dependency),) * len(invocation.results)

    def prepare(carrier: Any, invocation: Any) -> Any:
        views = []
        for t in invocation.operands:
            tier = filled(compute, [float(t[i]) for i in range(t.size())])
            views.append(tier)
        function = getattr(sw, invocation.definition.name)
        return ext.PreparedComposite(lambda: ext.ProviderResult([function(*views)]))

    cls = type("OverKernels", (sw.DependentCarrier,), {"__init__": init})
    sw.register_carrier_definition(cls, sw.CarrierDefinition(TierStorage().provider(), composite=sw.CompositeProvider(capabilities, result_carriers, prepare)))
    dependency = compute(0, dtype=F32)
    carrier = cls(dependency, 2)
    assert set(carrier.operation_capabilities()) == {neg_plan(), add_plan()}
    t = sw.Tensor.compact(carrier, (2,))
    t[0], t[1] = 1.0, 5.0
    assert values_of(t + t) == [2.0, 10.0]
    with pytest.raises(TypeError, match="OverKernels is a dependent carrier class"):
        sw.register_kernel_pack(sw.KernelPack("tier", "2", cls, ring, [neg]))


def test_a_subclass_of_a_dependent_class_acquires_nothing() -> None:
    cls = composite_class("BaseTiered", Delegating())
    sub = type("SubTiered", (cls,), {})
    with pytest.raises(TypeError, match="SubTiered has no carrier definition"):
        sub(sw.CPU(0), 1)


# --- facets -------------------------------------------------------------------------------


class Residency(sw.CarrierFacet):
    def __init__(self, tiles: int) -> None:
        self.tiles = tiles


class DetailedResidency(Residency):
    pass


class Telemetry(sw.CarrierFacet):
    pass


def test_facets_are_found_by_exact_type_on_a_dependent_carrier() -> None:
    residency = Residency(4)
    telemetry = Telemetry()
    cls = composite_class("FacetedTiered", Delegating(), facets=(residency, telemetry))
    carrier = tensor_of(cls, [1.0]).carrier
    assert carrier.facet(Residency) is residency and carrier.require_facet(Telemetry) is telemetry
    assert carrier.facet(DetailedResidency) is None
    assert carrier.facet(sw.TiledResidencyFacet) is None
    with pytest.raises(NotImplementedError, match="FacetedTiered carriers register no DetailedResidency facet"):
        carrier.require_facet(DetailedResidency)
    with pytest.raises(TypeError, match="^facet_type must be a CarrierFacet subclass, got int$"):
        carrier.facet(int)  # type: ignore[type-var]
    with pytest.raises(TypeError, match="^facet_type must be a CarrierFacet subclass, got CarrierFacet$"):
        carrier.facet(sw.CarrierFacet)


def test_an_absent_facet_on_a_storage_only_carrier() -> None:
    cls = new_class("FacetlessCarrier")
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider()))
    carrier = cls(1, dtype=F32)
    assert carrier.facet(sw.TiledResidencyFacet) is None
    with pytest.raises(NotImplementedError, match="register no TiledResidencyFacet facet"):
        carrier.require_facet(sw.TiledResidencyFacet)


def test_a_facet_widens_no_route_and_no_capability() -> None:
    class MoveHelper(sw.CarrierFacet):
        """Claims to know how to move to the CPU; the framework must not care."""

        destinations = (sw.CPU,)

    cls = new_class("FacetOnlyCarrier")
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(elementwise_fallback=True), facets=[MoveHelper()]))
    t = filled(cls, [1.0])
    assert t.carrier.operation_capabilities() == ()
    with pytest.raises(NotImplementedError, match="FacetOnlyCarrier"):
        sw.move(t, sw.CPU(1))
    with pytest.raises(sw.UnsupportedOperationPlan):
        sw.neg(t)
    assert not t.carrier.is_released() and values_of(t) == [1.0]
