"""Where a provider's reach ends, from Python: factories check the extent a provider made as
construction does, a result over an operand's storage is the provider's violation unless
declared, an exact alias leaves its operand alone, operations a provider runs inside its
callbacks record no graph, pending moves keep their prepared work alive, completions are not
awaitables, and gradients keep their leaf's dtype."""

import gc
import threading
from typing import Any, List

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

from authoring_helpers import F32, ListStorage, RingInterface, elementwise, filled, neg_plan, new_class, values_of
from test_custom_operations import fresh, schema, tensor_plan


@pytest.mark.parametrize("lie", [1, -1, -3])
def test_factories_refuse_a_provider_reporting_another_extent(lie: int) -> None:
    released: List[int] = []
    lying = {"on": False}

    class Liar(sw.Carrier):
        def __init__(self, slots: int, **kwargs: Any) -> None:
            self.slots: List[float] = []
            super().__init__(slots, **kwargs)

    def physical_size(carrier: Any) -> int:
        return len(carrier.slots) + (lie if lying["on"] else 0)

    def allocate(carrier: Any, slots: int) -> None:
        carrier.slots = [0.0] * slots

    def release(carrier: Any) -> None:
        released.append(id(carrier))

    def write(carrier: Any, index: int, value: Any) -> None:
        carrier.slots[index] = value

    storage = sw.StorageProvider(
        lambda c, d: d is F32, physical_size, allocate, release, lambda c, i: c.slots[i], write
    )
    sw.register_carrier_definition(Liar, sw.CarrierDefinition(storage))
    template = Liar(2, dtype=F32)
    t = sw.Tensor.compact(template, (2,))
    t[0] = 1.5
    version = t.version
    lying["on"] = True
    expected = f"Liar was asked to allocate 5 slots but its physical_size reports {5 + lie}"
    for make in (lambda: template.new_like([1.0] * 5), lambda: template.allocate_like(5)):
        with pytest.raises(sw.ProviderContractError) as raised:
            make()
        message = str(raised.value)
        assert expected in message and "_native" not in message, message
    # Construction refuses the same way, with the same words.
    with pytest.raises(sw.ProviderContractError, match="asked to allocate 3 slots but its physical_size reports"):
        Liar(3, dtype=F32)
    lying["on"] = False
    assert len(released) == 3 and len(set(released)) == 3, "each refused carrier is released once"
    assert t.version == version and t.to_list() == [1.5, 0.0] and not template.is_released()


def view_returning_class(name: str) -> type:
    """A class whose `neg` returns a new tensor over the operand's own carrier."""

    def prepare(invocation: Any, interface: Any) -> Any:
        (x,) = invocation.operands
        spec = invocation.results[0]
        return ext.PreparedKernel(interface, lambda: ext.ProviderResult([sw.Tensor(x.carrier, 0, spec.layout)]))

    cls = new_class(name)
    pattern = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "view.neg", prepare)
    provider = sw.KernelProvider(RingInterface(), [pattern])
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), kernels=provider))
    return cls


def test_a_result_over_an_operands_storage_is_refused_unless_declared() -> None:
    cls = view_returning_class("ViewReturningCarrier")
    x = filled(cls, [1.0, -2.0])
    version = x.version
    with pytest.raises(sw.ProviderContractError, match="result 0 shares storage with operand 0, which its spec does not declare with alias_of"):
        sw.neg(x)
    assert x.version == version and values_of(x) == [1.0, -2.0]


def aliasing_operation() -> sw.OperationDefinition:
    """`pytests.same(x)`: returns `x` itself, declared with `alias_of=0`; gradients pass
    through."""

    def resolve(call: sw.BoundOperationCall) -> sw.ResolvedInvocation:
        x = call.operands[0]
        assert isinstance(x, sw.Tensor)
        plan = tensor_plan(call.definition.name, 1)
        return sw.ResolvedInvocation(call, plan, [sw.ResultSpec(F32, x.shape, x.layout, alias_of=0)])

    def vjp(context: Any, cotangents: Any) -> Any:
        return list(cotangents)

    return sw.define_operation(fresh("same"), schema("x"), resolve, vjp=vjp)


def identity_class(operation: sw.OperationDefinition) -> type:
    def prepare(invocation: Any, interface: Any) -> Any:
        (x,) = invocation.operands
        return ext.PreparedKernel(interface, lambda: ext.ProviderResult([x]))

    cls = new_class("AliasCarrier")
    pattern = sw.KernelPattern(operation, [sw.OperationCapability.from_plan(tensor_plan(operation.name, 1))], "same", prepare)
    negate = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "neg", elementwise(lambda v: -v))
    provider = sw.KernelProvider(RingInterface(), [pattern, negate])
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), kernels=provider))
    return cls


def test_an_exact_alias_is_the_operand_itself_and_leaves_its_autograd_state_alone() -> None:
    same = aliasing_operation()
    cls = identity_class(same)
    leaf = filled(cls, [1.0, 2.0])
    leaf.requires_grad = True
    w = sw.neg(leaf)
    context = w.autograd_ctx
    assert context is not None and context.name == "neg" and w.autograd_ctx is context
    with sw.no_grad():
        y = same(w)
    assert y is w, "an exact alias comes back as the operand's own object"
    assert w.autograd_ctx is context, "its autograd context is the same object"
    with sw.no_grad():
        (z,) = sw.call(same, w)
    assert z is w and w.autograd_ctx is context
    # Under recording, the operand object itself cannot take a node: refused, nothing changed.
    with pytest.raises(ValueError, match="returns its operand 0 itself as a result, which cannot be recorded"):
        same(w)
    assert w.autograd_ctx is context and w.grad_fn == "neg" and leaf.autograd_ctx is None


def test_operations_a_kernel_runs_inside_submit_record_nothing() -> None:
    inner: List[sw.Tensor] = []

    def prepare(invocation: Any, interface: Any) -> Any:
        (x,) = invocation.operands

        def submit() -> Any:
            a = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
            a.requires_grad = True
            with sw.set_grad_enabled(True):
                inner.append(sw.add(a, a))
            out = invocation.allocate_result(0)
            for i, v in enumerate(x.carrier.slots):
                out.carrier.slots[i] = -v
            return ext.ProviderResult([out])

        return ext.PreparedKernel(interface, submit)

    cls = new_class("ScratchAddingCarrier")
    pattern = sw.KernelPattern(sw.operation_definition("neg"), [neg_plan()], "scratch.neg", prepare)
    provider = sw.KernelProvider(RingInterface(), [pattern])
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), kernels=provider))
    x = filled(cls, [3.0, 4.0])
    x.requires_grad = True
    y = sw.neg(x)
    assert values_of(y) == [-3.0, -4.0] and y.grad_fn == "neg"
    (scratch,) = inner
    assert scratch.to_list() == [2.0, 4.0]
    assert scratch.grad_fn is None, "an operation inside a provider callback records no node"
    assert sw.is_grad_enabled()


def test_operations_a_transfer_runs_inside_submit_record_nothing() -> None:
    inner: List[sw.Tensor] = []

    def prepare(request: Any) -> Any:
        source = request.tensor.carrier.slots

        def submit() -> None:
            a = sw.Tensor.compact(sw.CPU.from_values([1.0]), (1,))
            a.requires_grad = True
            inner.append(sw.add(a, a))
            request.write_slots(0, source[: request.physical_span])

        return ext.PreparedTransfer(submit)

    cls = new_class("ScratchMovingCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "scratch", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    moved = sw.move(filled(cls, [7.0, 8.0]), sw.CPU(2))
    assert moved.to_list() == [7.0, 8.0]
    (scratch,) = inner
    assert scratch.to_list() == [2.0] and scratch.grad_fn is None


class Resource:
    """A provider resource that counts its own collection."""

    collected: List[str] = []

    def __init__(self, name: str) -> None:
        self.name = name

    def __del__(self) -> None:
        Resource.collected.append(self.name)


def test_a_pending_move_keeps_its_prepared_work_alive_with_every_handle_dropped() -> None:
    release = threading.Event()
    finished = threading.Event()

    class Gate:
        def __init__(self) -> None:
            self.done = False

        def wait(self) -> None:
            release.wait(30)
            self.done = True
            finished.set()

    def prepare(request: Any) -> Any:
        resource = Resource("staging buffer")
        source = request.tensor.carrier.slots

        def submit() -> Any:
            # The work in flight needs `resource` until its completion is terminal.
            assert resource.name == "staging buffer"
            request.write_slots(0, source[: request.physical_span])
            return Gate()

        return ext.PreparedTransfer(submit)

    cls = new_class("PendingCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "pending", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    Resource.collected.clear()
    destination = sw.CPU(1)
    source = filled(cls, [2.5])
    handle = sw.move_async(source, destination)
    # Both carriers are held by the pending move, as the original's is_owned() reports.
    assert source.carrier.is_owned() and destination.is_owned() and not handle.done
    del handle
    gc.collect()
    assert Resource.collected == [], "the prepared work's resources outlive the dropped handle"
    release.set()
    assert finished.wait(30)
    for _ in range(100):
        # Calling into the extension lets it drop the references its threads gave back.
        assert destination.get_value(0) in (0.0, 2.5)
        gc.collect()
        if Resource.collected:
            break
        threading.Event().wait(0.01)
    assert Resource.collected == ["staging buffer"], "and are let go once the move is terminal"
    assert destination.get_value(0) == 2.5 and not destination.is_owned()
    assert source.carrier.is_released()


def test_a_completion_exposing_await_is_refused() -> None:
    class Awaitable:
        done = True

        def wait(self) -> Any:
            return None

        def __await__(self) -> Any:
            yield None

    def prepare(request: Any) -> Any:
        return ext.PreparedTransfer(lambda: Awaitable())

    cls = new_class("AwaitingCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "await", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    source = filled(cls, [1.0])
    destination = sw.CPU(1)
    with pytest.raises(TypeError, match="exposes __await__: a ProviderCompletion is a blocking done/wait\\(\\) protocol"):
        sw.move(source, destination)
    assert not source.carrier.is_released() and destination.version == 0


def test_an_assigned_gradient_keeps_its_leafs_dtype() -> None:
    w = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    w.requires_grad = True
    ints = sw.Tensor.compact(sw.CPU.from_values([1, 2], dtype=sw.DType.Int32), (2,))
    with pytest.raises(TypeError, match="^a gradient of dtype Int32 cannot belong to a Float32 tensor$"):
        w.grad = ints
    with pytest.raises(ValueError, match="Shape"):
        w.grad = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0]), (3,))
    assert w.grad is None
