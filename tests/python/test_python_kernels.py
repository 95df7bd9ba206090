"""Kernels written in Python: KernelExecutionInterface, KernelPattern, PreparedKernel,
ProviderResult, Unsupported, KernelProvider, KernelPack and register_kernel_pack
(carrier-extension spec: kernel execution interfaces, kernel packs, kernel patterns,
provider completion and prepared work)."""

import threading
from typing import Any, List, Optional, Tuple

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.operation_policy import resolve_operation_plan

from authoring_helpers import (
    F32,
    ListStorage,
    OtherInterface,
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

NEG = sw.operation_definition("neg")
ADD = sw.operation_definition("add")


def kernel_class(
    name: str,
    patterns: Any,
    interface: Optional[sw.KernelExecutionInterface] = None,
) -> Tuple[type, sw.KernelExecutionInterface]:
    """A fresh Carrier subclass registered with list storage and a kernel provider."""
    cls = new_class(name)
    interface = interface if interface is not None else RingInterface()
    provider = sw.KernelProvider(interface, patterns)
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), kernels=provider))
    return cls, interface


def neg_pattern(kernel_id: str = "neg", preference: int = 0, prepare: Any = None) -> sw.KernelPattern:
    return sw.KernelPattern(NEG, [neg_plan()], kernel_id, prepare or elementwise(lambda x: -x), preference)


# --- the import surface -------------------------------------------------------------------

SEED_MODULE_NAMES = [
    "CarrierDefinition", "StorageProvider", "KernelProvider", "TransferProvider", "TransferRoute",
    "CompositeProvider", "CarrierFacet", "KernelExecutionInterface", "KernelPack", "KernelPattern",
    "Unsupported", "PreparedKernel", "PreparedTransfer", "PreparedComposite", "ProviderResult",
    "ProviderCompletion", "TransferRequest", "register_carrier_definition", "register_kernel_pack",
]
SEED_TOP_LEVEL_NAMES = [
    "CarrierDefinition", "StorageProvider", "KernelProvider", "TransferRoute", "CompositeProvider",
    "CarrierFacet", "KernelExecutionInterface", "KernelPack", "KernelPattern", "Unsupported",
    "register_carrier_definition", "register_kernel_pack",
]


def test_every_seed_name_is_importable_and_the_top_level_names_the_same_objects() -> None:
    for name in SEED_MODULE_NAMES:
        assert name in ext.__all__, name
        assert getattr(ext, name) is not None
    for name in SEED_TOP_LEVEL_NAMES:
        assert name in sw.__all__, name
        assert getattr(sw, name) is getattr(ext, name), name
    assert sw.DependentCarrier is ext.DependentCarrier is sw.carriers.DependentCarrier


# --- KernelExecutionInterface -------------------------------------------------------------


def test_an_execution_interface_checks_its_version_and_has_a_type_and_version_identity() -> None:
    base = sw.KernelExecutionInterface("1")
    assert base.version == "1" and base.compatibility_identity == (sw.KernelExecutionInterface, "1")
    ring = RingInterface("2", stream=7)
    assert ring.compatibility_identity == (RingInterface, "2") and ring.stream == 7
    assert OtherInterface("2").compatibility_identity != ring.compatibility_identity
    with pytest.raises(TypeError, match="^KernelExecutionInterface version must be a string \\(str\\), got int$"):
        sw.KernelExecutionInterface(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^KernelExecutionInterface version must not be empty \\(a non-empty str\\)$"):
        sw.KernelExecutionInterface("")
    with pytest.raises(AttributeError, match=r"version is immutable \(read-only\)"):
        ring.version = "3"  # type: ignore[misc]
    with pytest.raises(TypeError, match="already initialized"):
        ring.__init__("9")  # type: ignore[misc]
    assert ring.version == "2"


def test_an_interface_subclass_that_skips_the_base_initializer_is_refused() -> None:
    class Forgetful(sw.KernelExecutionInterface):
        def __init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="never initialized: a subclass's __init__ must call super"):
        Forgetful().version
    with pytest.raises(TypeError, match="never initialized"):
        sw.KernelProvider(Forgetful())


def test_an_interface_is_immutable_once_a_provider_holds_it() -> None:
    ring = RingInterface("1", stream=1)
    ring.stream = 2
    sw.KernelProvider(ring)
    with pytest.raises(AttributeError, match="^RingInterface is immutable: a KernelProvider or KernelPack holds it$"):
        ring.stream = 3
    with pytest.raises(AttributeError, match="RingInterface is immutable"):
        del ring.stream
    assert ring.stream == 2


# --- the records --------------------------------------------------------------------------


def test_unsupported_and_provider_result_are_immutable_checked_records() -> None:
    rejection = sw.Unsupported("needs 16-byte alignment")
    assert rejection.reason == "needs 16-byte alignment" and rejection == sw.Unsupported("needs 16-byte alignment")
    with pytest.raises(AttributeError):
        rejection.reason = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="^Unsupported reason must be a string \\(str\\), got int$"):
        sw.Unsupported(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^Unsupported reason must not be empty \\(a non-empty str\\)$"):
        sw.Unsupported("")

    t = sw.Tensor.compact(sw.CPU(2), (2,))
    consumed: List[int] = []

    def outputs() -> Any:
        consumed.append(1)
        yield t

    result = ext.ProviderResult(outputs())
    assert isinstance(result.outputs, tuple) and len(result.outputs) == 1 and consumed == [1]
    assert result.outputs[0].carrier is t.carrier
    with pytest.raises(AttributeError):
        result.outputs = ()  # type: ignore[misc]
    with pytest.raises(ValueError, match="^ProviderResult outputs must not be empty: give a non-empty sequence of Tensor values$"):
        ext.ProviderResult([])
    with pytest.raises(TypeError, match="^ProviderResult outputs must hold Tensor values, got int$"):
        ext.ProviderResult([t, 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="^ProviderResult outputs must be an iterable, got int$"):
        ext.ProviderResult(3)  # type: ignore[arg-type]


def test_prepared_kernel_requires_an_interface_and_a_callable() -> None:
    ring = RingInterface()
    record = ext.PreparedKernel(ring, lambda: None)
    assert record.interface is ring
    with pytest.raises(AttributeError):
        record.submit = print  # type: ignore[misc]
    with pytest.raises(TypeError, match="^PreparedKernel interface must be a KernelExecutionInterface, got str$"):
        ext.PreparedKernel("ring", lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^PreparedKernel submit must be callable, got int$"):
        ext.PreparedKernel(ring, 5)  # type: ignore[arg-type]


def test_kernel_pattern_checks_every_field() -> None:
    prepare = elementwise(lambda x: -x)
    consumed: List[int] = []

    def plans() -> Any:
        consumed.append(1)
        yield neg_plan()

    pattern = sw.KernelPattern(NEG, plans(), "neg", prepare)
    assert pattern.plans == (neg_plan(),) and consumed == [1]
    assert pattern.preference == 0 and pattern.kernel_id == "neg" and pattern.operation == NEG
    assert pattern.prepare is prepare
    with pytest.raises(AttributeError):
        pattern.preference = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="^KernelPattern operation must be an OperationDefinition, got str$"):
        sw.KernelPattern("neg", [neg_plan()], "neg", prepare)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^KernelPattern plans must hold OperationCapability values, got str$"):
        sw.KernelPattern(NEG, ["neg"], "neg", prepare)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="^KernelPattern plans must be an iterable, got int$"):
        sw.KernelPattern(NEG, 1, "neg", prepare)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^KernelPattern 'neg' needs at least one plan$"):
        sw.KernelPattern(NEG, [], "neg", prepare)
    with pytest.raises(ValueError, match="KernelPattern 'neg' has a duplicate plan"):
        sw.KernelPattern(NEG, [neg_plan(), neg_plan()], "neg", prepare)
    with pytest.raises(ValueError, match="KernelPattern 'neg' of 'neg' has a plan of 'add'"):
        sw.KernelPattern(NEG, [add_plan()], "neg", prepare)
    with pytest.raises(TypeError, match="^KernelPattern kernel_id must be a str, got int$"):
        sw.KernelPattern(NEG, [neg_plan()], 7, prepare)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^KernelPattern kernel_id must be a non-empty string$"):
        sw.KernelPattern(NEG, [neg_plan()], "", prepare)
    with pytest.raises(TypeError, match="^KernelPattern prepare must be callable, got NoneType$"):
        sw.KernelPattern(NEG, [neg_plan()], "neg", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^KernelPattern preference must be an int other than bool, got bool$"):
        sw.KernelPattern(NEG, [neg_plan()], "neg", prepare, True)
    with pytest.raises(TypeError, match="preference must be an int other than bool, got float"):
        sw.KernelPattern(NEG, [neg_plan()], "neg", prepare, 1.0)  # type: ignore[arg-type]
    assert sw.KernelPattern(NEG, [neg_plan()], "neg", prepare, -4).preference == -4


def test_operation_capability_and_definition_values() -> None:
    assert neg_plan() == sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))
    assert neg_plan().operation == "neg"
    assert hash(neg_plan()) == hash(sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32)))
    by_scalar = sw.OperationCapability.from_plan(resolve_operation_plan("mul", F32, 2.0))
    assert by_scalar != sw.OperationCapability.from_plan(resolve_operation_plan("mul", F32, F32))
    with pytest.raises(TypeError, match="^resolve_operation_plan operation must be a str, got int$"):
        resolve_operation_plan(1, F32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^resolve_operation_plan operand 0 must be a DType \\(a tensor operand\\) or a real Python number \\(a weak scalar\\), got str$"):
        resolve_operation_plan("neg", "f")  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="^no dtype plan is defined for 'frobnicate': it is not a built-in operation"):
        resolve_operation_plan("frobnicate", F32)
    assert NEG.name == "neg" and NEG.is_builtin and NEG == sw.operation_definition("neg") and NEG != ADD
    with pytest.raises(NotImplementedError, match="no operation named"):
        sw.operation_definition("frobnicate")
    with pytest.raises(TypeError, match="^operation_definition name must be a str, got int$"):
        sw.operation_definition(3)  # type: ignore[arg-type]


def test_kernel_provider_materializes_its_patterns_and_refuses_duplicates() -> None:
    ring = RingInterface()
    pattern = neg_pattern()
    provider = sw.KernelProvider(ring, iter([pattern]))
    assert provider.patterns == (pattern,) and provider.interface is ring
    assert sw.KernelProvider(RingInterface()).patterns == ()
    with pytest.raises(TypeError, match="^KernelProvider interface must be a KernelExecutionInterface, got int$"):
        sw.KernelProvider(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^KernelProvider patterns must hold KernelPattern values, got str$"):
        sw.KernelProvider(RingInterface(), ["neg"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="^KernelProvider has a duplicate kernel_id 'neg'$"):
        sw.KernelProvider(RingInterface(), [neg_pattern(), neg_pattern()])
    with pytest.raises(TypeError, match="^CarrierDefinition kernels must be a KernelProvider or None, got int$"):
        sw.CarrierDefinition(ListStorage().provider(), kernels=1)  # type: ignore[arg-type]


# --- running Python kernels ---------------------------------------------------------------


def test_a_python_kernel_runs_an_operation_on_a_python_carrier() -> None:
    seen: List[Any] = []
    inner = elementwise(lambda x: -x)

    def prepare(invocation: Any, interface: Any) -> Any:
        seen.append((invocation, interface))
        return inner(invocation, interface)

    cls, ring = kernel_class("NegCarrier", [neg_pattern(prepare=prepare)])
    x = filled(cls, [1.0, -2.5, 3.0])
    version = x.version
    y = sw.neg(x)
    assert values_of(y) == [-1.0, 2.5, -3.0]
    assert type(y.carrier) is cls and y.carrier is not x.carrier and y.dtype() is F32
    assert x.version == version and values_of(x) == [1.0, -2.5, 3.0]
    ((invocation, interface),) = seen
    assert interface is ring
    assert invocation.definition == NEG and invocation.plan == neg_plan() and invocation.kernel_id == "neg"
    (operand,) = invocation.operands
    assert operand.carrier is x.carrier
    (spec,) = invocation.results
    assert spec.dtype is F32 and spec.layout == x.layout and spec.alias_of is None
    assert x.carrier.operation_capabilities() == (neg_plan(),)
    with pytest.raises(sw.UnsupportedOperationPlan, match="NegCarrier declares no operation-plan capability for 'add'"):
        x + x


def test_capabilities_are_the_union_of_the_patterns_plans() -> None:
    both = sw.KernelPattern(ADD, [add_plan()], "add", elementwise(lambda a, b: a + b))
    cls, _ = kernel_class("UnionCarrier", [neg_pattern("neg-a"), neg_pattern("neg-b"), both])
    x = filled(cls, [1.0, 2.0])
    assert set(x.carrier.operation_capabilities()) == {neg_plan(), add_plan()}
    assert len(x.carrier.operation_capabilities()) == 2
    assert values_of(x + x) == [2.0, 4.0]


def test_a_declining_optimized_kernel_falls_back_to_the_general_one() -> None:
    order: List[str] = []

    def optimized(invocation: Any, interface: Any) -> Any:
        order.append("optimized")
        (x,) = invocation.operands
        if x.size() % 4 != 0:
            return sw.Unsupported("needs a multiple of 4 elements")
        return elementwise(lambda v: -v * 1.0)(invocation, interface)

    def general(invocation: Any, interface: Any) -> Any:
        order.append("general")
        return elementwise(lambda v: -v)(invocation, interface)

    cls, _ = kernel_class(
        "FallbackCarrier",
        [neg_pattern("general", 0, general), neg_pattern("optimized", 10, optimized)],
    )
    x = filled(cls, [1.0, 2.0, 3.0])
    before = x.carrier.operation_capabilities()
    assert values_of(sw.neg(x)) == [-1.0, -2.0, -3.0]
    assert order == ["optimized", "general"]
    assert x.carrier.operation_capabilities() == before == (neg_plan(),)
    order.clear()
    sw.neg(filled(cls, [1.0, 2.0, 3.0, 4.0]))
    assert order == ["optimized"]


def test_every_candidate_declining_is_an_unsupported_plan_with_the_ordered_reasons() -> None:
    def declining(reason: str) -> Any:
        return lambda invocation, interface: sw.Unsupported(reason)

    cls, _ = kernel_class(
        "DecliningCarrier",
        [neg_pattern("low", -1, declining("too small")), neg_pattern("high", 5, declining("no device"))],
    )
    x = filled(cls, [1.0])
    version = x.version
    with pytest.raises(sw.UnsupportedOperationPlan) as raised:
        sw.neg(x)
    assert raised.value.reasons == ("high: no device", "low: too small")
    assert raised.value.operation == "neg" and x.version == version


def test_a_preparation_exception_is_terminal_and_propagates_as_the_same_object() -> None:
    error = LookupError("the device lost the module")
    later: List[str] = []

    def raising(invocation: Any, interface: Any) -> Any:
        raise error

    def fallback(invocation: Any, interface: Any) -> Any:
        later.append("prepared")
        return elementwise(lambda v: -v)(invocation, interface)

    cls, _ = kernel_class("TerminalCarrier", [neg_pattern("first", 1, raising), neg_pattern("second", 0, fallback)])
    x = filled(cls, [1.0, 2.0])
    version = x.version
    with pytest.raises(LookupError) as raised:
        sw.neg(x)
    assert raised.value is error and later == [] and x.version == version
    assert values_of(x) == [1.0, 2.0]


def test_equal_preferences_prepare_in_built_in_then_sorted_pack_order() -> None:
    order: List[str] = []

    def declining(name: str) -> Any:
        def prepare(invocation: Any, interface: Any) -> Any:
            order.append(name)
            return sw.Unsupported(f"{name} declines")

        return prepare

    ring = RingInterface()
    cls, _ = kernel_class("TieCarrier", [neg_pattern("builtin-1", 0, declining("builtin-1")),
                                         neg_pattern("builtin-2", 0, declining("builtin-2"))], ring)
    for namespace, version in [("zeta", "1"), ("alpha", "2"), ("alpha", "1")]:
        kernel_id = f"{namespace}-{version}"
        sw.register_kernel_pack(sw.KernelPack(namespace, version, cls, ring, [neg_pattern(kernel_id, 0, declining(kernel_id))]))
    x = filled(cls, [1.0])
    with pytest.raises(sw.UnsupportedOperationPlan) as raised:
        sw.neg(x)
    expected = ["builtin-1", "builtin-2", "alpha-1", "alpha-2", "zeta-1"]
    assert order == expected
    assert raised.value.reasons == tuple(f"{name}: {name} declines" for name in expected)


# --- malformed returns --------------------------------------------------------------------


def test_a_prepare_returning_another_type_is_a_type_error() -> None:
    cls, _ = kernel_class("BadPrepareCarrier", [neg_pattern("bad", 0, lambda i, f: 3)])
    x = filled(cls, [1.0])
    with pytest.raises(TypeError, match="^KernelPattern 'bad' prepare must return a PreparedKernel or Unsupported, got int$"):
        sw.neg(x)


def test_a_submit_returning_a_tensor_is_a_type_error_before_publication() -> None:
    def prepare(invocation: Any, interface: Any) -> Any:
        return ext.PreparedKernel(interface, lambda: invocation.allocate_result(0))

    cls, _ = kernel_class("TensorSubmitCarrier", [neg_pattern("tensor", 0, prepare)])
    x = filled(cls, [1.0])
    with pytest.raises(TypeError, match=r"^PreparedKernel submit of kernel 'tensor' must return a ProviderResult or a ProviderCompletion \(a done property and a wait\(\) method\), got Tensor$"):
        sw.neg(x)


def test_a_completion_with_a_non_bool_done_is_a_type_error_naming_done() -> None:
    def prepare(invocation: Any, interface: Any) -> Any:
        def submit() -> Any:
            out = invocation.allocate_result(0)
            return ReadyCompletion(ext.ProviderResult([out]), done=1)

        return ext.PreparedKernel(interface, submit)

    cls, _ = kernel_class("IntDoneCarrier", [neg_pattern("int-done", 0, prepare)])
    with pytest.raises(TypeError, match="^PreparedKernel submit of kernel 'int-done' returned a ProviderCompletion whose done is int: done must be a bool$"):
        sw.neg(filled(cls, [1.0]))


def test_a_completion_waiting_to_another_type_is_a_type_error() -> None:
    def prepare(invocation: Any, interface: Any) -> Any:
        return ext.PreparedKernel(interface, lambda: ReadyCompletion([invocation.allocate_result(0)]))

    cls, _ = kernel_class("ListWaitCarrier", [neg_pattern("list-wait", 0, prepare)])
    with pytest.raises(TypeError, match="must wait\\(\\) to a ProviderResult, got list$"):
        sw.neg(filled(cls, [1.0]))


def test_work_prepared_for_another_interface_identity_fails_before_submission() -> None:
    submitted: List[int] = []

    def prepare(invocation: Any, interface: Any) -> Any:
        return ext.PreparedKernel(OtherInterface("1"), lambda: submitted.append(1))

    cls, _ = kernel_class("ForeignInterfaceCarrier", [neg_pattern("foreign", 0, prepare)])
    with pytest.raises(TypeError, match=r"^kernel 'foreign' prepared work for interface \(OtherInterface, '1'\), but the provider's interface is \(RingInterface, '1'\)$"):
        sw.neg(filled(cls, [1.0]))
    assert submitted == []


def test_work_prepared_for_an_equal_identity_runs() -> None:
    def prepare(invocation: Any, interface: Any) -> Any:
        same_identity = RingInterface(interface.version, stream=99)
        return elementwise(lambda v: -v)(invocation, same_identity)

    cls, _ = kernel_class("EqualIdentityCarrier", [neg_pattern("equal", 0, prepare)])
    assert values_of(sw.neg(filled(cls, [2.0]))) == [-2.0]


def test_a_prepared_record_is_submitted_at_most_once() -> None:
    holder: List[Any] = []

    def prepare(invocation: Any, interface: Any) -> Any:
        if not holder:
            holder.append(elementwise(lambda v: -v)(invocation, interface))
        return holder[0]

    cls, _ = kernel_class("ReusedRecordCarrier", [neg_pattern("reused", 0, prepare)])
    x = filled(cls, [1.0])
    assert values_of(sw.neg(x)) == [-1.0]
    with pytest.raises(sw.ProviderContractError, match="this PreparedKernel was already submitted"):
        sw.neg(x)


# --- completions --------------------------------------------------------------------------


def test_an_incomplete_completion_is_waited_on_and_its_result_published() -> None:
    completions: List[ThreadCompletion] = []
    release = threading.Event()

    def prepare(invocation: Any, interface: Any) -> Any:
        (x,) = invocation.operands

        def submit() -> Any:
            out = invocation.allocate_result(0)
            source, target = x.carrier.slots, out.carrier.slots

            def work() -> Any:
                assert release.wait(timeout=30)
                for i in range(len(target)):
                    target[i] = -source[i]
                return ext.ProviderResult([out])

            completion = ThreadCompletion(work)
            completions.append(completion)
            assert isinstance(completion, ext.ProviderCompletion)
            assert completion.done is False
            threading.Timer(0.05, release.set).start()
            return completion

        return ext.PreparedKernel(interface, submit)

    cls, _ = kernel_class("AsyncKernelCarrier", [neg_pattern("async", 0, prepare)])
    x = filled(cls, [1.0, 2.0])
    y = run_bounded(lambda: sw.neg(x))
    assert values_of(y) == [-1.0, -2.0]
    (completion,) = completions
    assert completion.done is True and not isinstance(y, ThreadCompletion)
    assert completion.wait_threads == [completion.wait_threads[0]]


def test_a_completion_finished_by_a_thread_that_calls_into_strideweave_does_not_deadlock() -> None:
    """The worker computes the result with strideweave operations on CPU tensors while the
    calling thread waits inside the operation: the GIL must be free for it."""

    def prepare(invocation: Any, interface: Any) -> Any:
        (x,) = invocation.operands

        def submit() -> Any:
            out = invocation.allocate_result(0)

            def work() -> Any:
                cpu = sw.Tensor.compact(sw.CPU.from_values(list(x.carrier.slots)), (x.size(),))
                negated = sw.neg(cpu)
                for i in range(x.size()):
                    out.carrier.slots[i] = negated[i]
                return ext.ProviderResult([out])

            return ThreadCompletion(work)

        return ext.PreparedKernel(interface, submit)

    cls, _ = kernel_class("ReentrantWorkerCarrier", [neg_pattern("worker", 0, prepare)])
    x = filled(cls, [3.0, 4.0])
    assert values_of(run_bounded(lambda: sw.neg(x))) == [-3.0, -4.0]


# --- failure injection --------------------------------------------------------------------


class Failing:
    """A negating kernel that raises `error` at `point`: prepare, submit (before or after
    writing part of the result), or the completion's done or wait."""

    def __init__(self, point: str, error: BaseException) -> None:
        self.point = point
        self.error = error
        self.results: List[sw.Tensor] = []

    def prepare(self, invocation: Any, interface: Any) -> Any:
        if self.point == "prepare":
            raise self.error
        (x,) = invocation.operands

        def submit() -> Any:
            if self.point == "submit-before-writes":
                raise self.error
            out = invocation.allocate_result(0)
            self.results.append(out)
            out.carrier.slots[0] = -x.carrier.slots[0]
            if self.point == "submit-after-writes":
                raise self.error
            result = ext.ProviderResult([out])
            if self.point == "wait":
                return ReadyCompletion(error=self.error)
            if self.point == "done":
                return RaisingDone(self.error)
            return ReadyCompletion(result)

        return ext.PreparedKernel(interface, submit)


class RaisingDone:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    @property
    def done(self) -> bool:
        raise self.error

    def wait(self) -> Any:
        raise AssertionError("not reached")


@pytest.mark.parametrize("point", ["prepare", "submit-before-writes", "submit-after-writes", "wait", "done"])
def test_an_exception_at_any_kernel_callback_propagates_with_nothing_published(point: str) -> None:
    error = OSError(f"injected at {point}")
    failing = Failing(point, error)
    cls, _ = kernel_class(f"Failing{point.title().replace('-', '')}Carrier", [neg_pattern("failing", 0, failing.prepare)])
    x = filled(cls, [1.0, 2.0])
    version = x.version
    with pytest.raises(OSError) as raised:
        sw.neg(x)
    assert raised.value is error
    assert x.version == version and values_of(x) == [1.0, 2.0] and not x.carrier.is_released()
    for result in failing.results:
        assert result.version == 0
    # The class still runs the kernel afterwards: nothing was left claimed.
    failing.point = "none"
    assert values_of(sw.neg(x))[0] == -1.0


# --- kernel packs -------------------------------------------------------------------------


def test_a_pack_registered_before_observation_joins_the_execution_set() -> None:
    ring = RingInterface()
    cls, _ = kernel_class("PackedCarrier", [neg_pattern()], ring)
    add = sw.KernelPattern(ADD, [add_plan()], "pack-add", elementwise(lambda a, b: a + b))
    consumed: List[int] = []

    def patterns() -> Any:
        consumed.append(1)
        yield add

    pack = sw.KernelPack("acme", "1.0", cls, ring, patterns())
    assert pack.patterns == (add,) and consumed == [1] and pack.carrier_class is cls
    assert pack.execution_interface is ring and pack.namespace == "acme" and pack.version == "1.0"
    with pytest.raises(AttributeError):
        pack.version = "2"  # type: ignore[misc]
    assert sw.register_kernel_pack(pack) is None
    x = filled(cls, [1.0, 2.0])
    assert set(x.carrier.operation_capabilities()) == {neg_plan(), add_plan()}
    assert values_of(x + x) == [2.0, 4.0]


def test_a_pack_after_observation_is_refused_and_changes_nothing() -> None:
    ring = RingInterface()
    cls, _ = kernel_class("LatePackCarrier", [neg_pattern()], ring)
    x = filled(cls, [1.0])
    before = x.carrier.operation_capabilities()
    late = sw.KernelPack("late", "1", cls, ring, [sw.KernelPattern(ADD, [add_plan()], "late-add", elementwise(lambda a, b: a + b))])
    with pytest.raises(TypeError, match="^KernelPack 'late' 1: LatePackCarrier was already observed"):
        sw.register_kernel_pack(late)
    assert x.carrier.operation_capabilities() == before == (neg_plan(),)
    with pytest.raises(sw.UnsupportedOperationPlan):
        x + x


def test_a_capability_query_is_an_observation_that_seals_the_packs() -> None:
    ring = RingInterface()
    cls, _ = kernel_class("QueriedCarrier", [neg_pattern()], ring)
    filled(cls, [1.0]).carrier.operation_capabilities()
    pack = sw.KernelPack("q", "1", cls, ring, [neg_pattern("q-neg")])
    with pytest.raises(TypeError, match="already observed"):
        sw.register_kernel_pack(pack)


def test_pack_construction_checks_its_fields() -> None:
    ring = RingInterface()
    cls, _ = kernel_class("PackFieldsCarrier", [neg_pattern()], ring)
    patterns = [neg_pattern("p")]
    with pytest.raises(TypeError, match="^KernelPack namespace must be a string \\(str\\), got int$"):
        sw.KernelPack(1, "1", cls, ring, patterns)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^KernelPack namespace must not be empty \\(a non-empty str\\)$"):
        sw.KernelPack("", "1", cls, ring, patterns)
    with pytest.raises(ValueError, match="^KernelPack version must not be empty \\(a non-empty str\\)$"):
        sw.KernelPack("ns", "", cls, ring, patterns)
    with pytest.raises(TypeError, match="^KernelPack carrier_class must be a Carrier class, got str$"):
        sw.KernelPack("ns", "1", "cls", ring, patterns)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^KernelPack execution_interface must be a KernelExecutionInterface, got int$"):
        sw.KernelPack("ns", "1", cls, 1, patterns)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^KernelPack patterns must hold KernelPattern values, got int$"):
        sw.KernelPack("ns", "1", cls, ring, [1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="^KernelPack 'ns' 1 patterns must not be empty$"):
        sw.KernelPack("ns", "1", cls, ring, [])
    with pytest.raises(ValueError, match="^KernelPack 'ns' 1 has a duplicate kernel_id 'p'$"):
        sw.KernelPack("ns", "1", cls, ring, [neg_pattern("p"), neg_pattern("p")])
    with pytest.raises(TypeError, match="^register_kernel_pack pack must be a KernelPack, got int$"):
        sw.register_kernel_pack(1)  # type: ignore[arg-type]


def test_register_kernel_pack_refuses_every_ineligible_target() -> None:
    ring = RingInterface()
    patterns = [neg_pattern("x")]
    storage_only = new_class("StorageOnlyTarget")
    sw.register_carrier_definition(storage_only, sw.CarrierDefinition(ListStorage().provider()))
    undefined = new_class("UndefinedTarget")
    dependent = type("DependentTarget", (sw.DependentCarrier,), {})
    cases = [
        (sw.Carrier, "carrier_class must be an exact Carrier subclass, not Carrier itself"),
        (int, "carrier_class must be a Carrier subclass, got the unrelated class int"),
        (sw.CPU, "CPU is a shipped definition-free carrier class and takes no kernel packs"),
        (sw.TiledEvictable, "TiledEvictable is a dependent carrier class; it derives execution from its dependencies"),
        (sw.Evictable, "Evictable is a dependent carrier class; it derives execution from its dependencies"),
        (sw.BlockDeviceCarrier, "BlockDeviceCarrier is a shipped definition-free carrier class"),
        (dependent, "DependentTarget is a dependent carrier class"),
        (undefined, "UndefinedTarget has no carrier definition; a pack needs an exact CarrierDefinition with a kernel provider"),
        (storage_only, "StorageOnlyTarget is a storage-only carrier class"),
    ]
    for target, message in cases:
        with pytest.raises(TypeError, match=message):
            sw.register_kernel_pack(sw.KernelPack("ns", "1", target, ring, patterns))


def test_a_pack_for_another_interface_identity_is_refused() -> None:
    ring = RingInterface("1")
    cls, _ = kernel_class("InterfaceMatchCarrier", [neg_pattern()], ring)
    for interface, shown in [(OtherInterface("1"), "(OtherInterface, '1')"), (RingInterface("2"), "(RingInterface, '2')")]:
        pack = sw.KernelPack("other", "1", cls, interface, [neg_pattern("other")])
        with pytest.raises(TypeError, match=f"execution interface {shown.replace('(', '[(]').replace(')', '[)]')} does not match the InterfaceMatchCarrier provider's"):
            sw.register_kernel_pack(pack)
    sw.register_kernel_pack(sw.KernelPack("same", "1", cls, RingInterface("1", stream=5), [neg_pattern("same")]))


def test_duplicate_pack_identities_and_kernel_ids_are_value_errors() -> None:
    ring = RingInterface()
    cls, _ = kernel_class("DuplicatePackCarrier", [neg_pattern("builtin")], ring)
    sw.register_kernel_pack(sw.KernelPack("ns", "1", cls, ring, [neg_pattern("a")]))
    with pytest.raises(ValueError, match="^KernelPack 'ns' 1 is already registered on DuplicatePackCarrier$"):
        sw.register_kernel_pack(sw.KernelPack("ns", "1", cls, ring, [neg_pattern("b")]))
    with pytest.raises(ValueError, match="kernel_id 'builtin' is already in the execution set"):
        sw.register_kernel_pack(sw.KernelPack("ns", "2", cls, ring, [neg_pattern("builtin")]))
    with pytest.raises(ValueError, match="kernel_id 'a' is already in the execution set"):
        sw.register_kernel_pack(sw.KernelPack("ns", "3", cls, ring, [neg_pattern("a")]))
    assert filled(cls, [1.0]).carrier.operation_capabilities() == (neg_plan(),)


def test_a_pack_attaches_to_its_exact_class_only() -> None:
    ring = RingInterface()
    base, _ = kernel_class("PackBase", [neg_pattern()], ring)
    sibling, _ = kernel_class("PackSibling", [neg_pattern()], RingInterface())
    sub = type("PackSub", (base,), {})
    add = sw.KernelPattern(ADD, [add_plan()], "base-add", elementwise(lambda a, b: a + b))
    sw.register_kernel_pack(sw.KernelPack("base", "1", base, ring, [add]))
    assert filled(sibling, [1.0]).carrier.operation_capabilities() == (neg_plan(),)
    assert set(filled(base, [1.0]).carrier.operation_capabilities()) == {neg_plan(), add_plan()}
    with pytest.raises(TypeError, match="PackSub has no carrier definition"):
        sub(1, dtype=F32)


def test_kernel_definitions_are_refused_on_a_dependent_class_with_nothing_published() -> None:
    dependent = type("KernelDependent", (sw.DependentCarrier,), {})
    provider = sw.KernelProvider(RingInterface(), [neg_pattern()])
    with pytest.raises(TypeError, match="KernelDependent is a dependent carrier class: it derives execution from its dependencies, so its definition forbids kernels"):
        sw.register_carrier_definition(dependent, sw.CarrierDefinition(ListStorage().provider(), kernels=provider))
    with pytest.raises(TypeError, match="has no carrier definition"):
        dependent(1, dtype=F32)


def test_a_pack_registration_race_has_exactly_one_winner() -> None:
    ring = RingInterface()
    cls, _ = kernel_class("RacedPackCarrier", [neg_pattern()], ring)
    barrier = threading.Barrier(6)
    outcomes: List[Any] = []
    lock = threading.Lock()

    def register(k: int) -> None:
        pack = sw.KernelPack("race", "1", cls, ring, [neg_pattern(f"race-{k}")])
        barrier.wait(timeout=30)
        try:
            sw.register_kernel_pack(pack)
            outcome: Any = "won"
        except ValueError as error:
            outcome = error
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=register, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert outcomes.count("won") == 1
    losers = [o for o in outcomes if o != "won"]
    assert len(losers) == 5 and all("is already registered on RacedPackCarrier" in str(o) for o in losers)
    assert len(filled(cls, [1.0]).carrier.operation_capabilities()) == 1



class AllocateFailsOnce(ListStorage):
    """List storage whose first `allocate` raises `error`."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error: Optional[BaseException] = error

    def allocate(self, carrier: Any, slots: int) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        super().allocate(carrier, slots)


def test_a_refused_construction_leaves_the_class_open_to_packs() -> None:
    """A construction refused for an unstorable dtype, or by an exception in a provider
    callback, constructs nothing and so does not observe the class: a pack may still
    follow, and the first carrier made afterwards runs it."""
    ring = RingInterface()
    error = OSError("allocation refused")
    cls = new_class("RefusedThenPacked")
    provider = sw.KernelProvider(ring, [neg_pattern("builtin")])
    sw.register_carrier_definition(cls, sw.CarrierDefinition(AllocateFailsOnce(error).provider(), kernels=provider))
    with pytest.raises(ValueError, match="^RefusedThenPacked carriers cannot store dtype Bool"):
        cls(2, dtype=sw.DType.Bool)
    with pytest.raises(OSError) as raised:
        cls(2, dtype=F32)
    assert raised.value is error
    ran: List[str] = []
    negate = elementwise(lambda x: -x)

    def late(invocation: Any, interface: Any) -> Any:
        ran.append("late")
        return negate(invocation, interface)

    sw.register_kernel_pack(sw.KernelPack("late", "1", cls, ring, [neg_pattern("late", 5, late)]))
    x = filled(cls, [1.0, -2.0])
    assert values_of(sw.neg(x)) == [-1.0, 2.0]
    assert ran == ["late"]
