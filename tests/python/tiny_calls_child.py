"""Tiny CPU calls keep the GIL, so they must never wait for a thread that needs it. Here a
second thread's work is stopped inside a Python callback — in the middle of a move through a
Python route into CPU carriers, and inside a TiledEvictable's residency policy (its `plan`, and
a progress report in the middle of the streamed operation) — while this thread holds the GIL
and runs tiny calls on tensors over exactly the CPU carriers that work is using. If any of
them waited on that work, this interpreter would hang; `test_tiny_calls` runs it as a child
process with a timeout, so a deadlock is a failure rather than a hung suite. Prints
`no deadlock` when every scenario finished with the right values."""

import sys
import threading
from typing import Any, Callable, List

import strideweave as sw
from strideweave.carriers import extension as ext

F32 = sw.DType.Float32
inside = threading.Event()
release = threading.Event()


def tiny_reads(tensors: List[sw.Tensor]) -> List[Any]:
    """The tiny CPU calls that keep the GIL, on each tensor."""
    return [((t + t)[0], (t * 2.0)[1], (-t)[0], t[0]) for t in tensors]


def while_blocked(work: Callable[[], Any], tensors: List[sw.Tensor]) -> List[Any]:
    """Runs `work` on another thread until its callback blocks, then the tiny calls here."""
    done: List[Any] = []
    worker = threading.Thread(target=lambda: done.append(work()), daemon=True)
    worker.start()
    if not inside.wait(timeout=30):
        sys.exit("the callback was never reached")
    seen = tiny_reads(tensors)
    release.set()
    worker.join(timeout=30)
    if worker.is_alive() or not done:
        sys.exit("the blocked work did not finish")
    inside.clear()
    release.clear()
    return seen


def blocking() -> None:
    inside.set()
    if not release.wait(timeout=30):
        raise TimeoutError("not released")


def route_scenario() -> None:
    cls = type("Routed", (sw.Carrier,), {})

    def prepare(request: Any) -> Any:
        source = request.tensor.carrier.slots

        def submit() -> None:
            request.write_slots(0, source[:2])
            blocking()
            request.write_slots(2, source[2 : request.physical_span])

        return ext.PreparedTransfer(submit)

    def allocate(carrier: Any, slots: int) -> None:
        carrier.slots = [float(i) for i in range(slots)]

    provider = sw.StorageProvider(
        lambda carrier, dtype: dtype is F32,
        lambda carrier: len(carrier.slots),
        allocate,
        lambda carrier: None,
        lambda carrier, index: carrier.slots[index],
        lambda carrier, index, value: None,
    )
    route = sw.TransferRoute(cls, sw.CPU, "blocking", ext.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(provider, transfers=[route]))
    for slots in (4, 32):
        source = sw.Tensor.compact(cls(slots, dtype=F32), (slots,))
        destination = sw.CPU.from_values([1.0] * slots)
        watched = sw.Tensor.compact(destination, (slots,))
        seen = while_blocked(lambda: sw.move(source, destination), [watched])
        assert seen[0][3] in (0.0, 1.0), seen
        assert watched.to_list() == [float(i) for i in range(slots)]


class Blocking(sw.ResidencyPolicy):
    """Blocks in its first `plan` of an operation (`at="plan"`) or in its first progress
    report, in the middle of the streamed operation (`at="progress"`)."""

    def __init__(self, at: str) -> None:
        self.at = at
        self.blocked = False

    def block(self, where: str) -> None:
        if where == self.at and not self.blocked:
            self.blocked = True
            blocking()

    def plan(self, required: Any, purpose: str) -> sw.ResidencyPlan:
        if purpose == "operation":
            self.block("plan")
        return sw.ResidencyPlan()

    def on_progress(self, progress: sw.TileProgress) -> None:
        self.block("progress")


def tiled_scenario(at: str) -> None:
    for columns, empty_primary in ((2, True), (2, False), (8, True), (8, False)):
        slots = 4 * columns
        values = [float(i) for i in range(slots)]
        primary = sw.CPU(0 if empty_primary else slots)
        secondary = sw.CPU.from_values(values)
        policy = Blocking(at)
        carrier = sw.TiledEvictable(primary, secondary, [1, columns], [4, 1], residency_policy=policy)
        x = sw.Tensor.compact(carrier, (4, columns))
        tiers = [sw.Tensor.compact(secondary, (slots,))]
        if not empty_primary:
            tiers.append(sw.Tensor.compact(primary, (slots,)))
        result: List[Any] = []
        seen = while_blocked(lambda: result.append(sw.reduce_sum(x)), tiers)
        assert policy.blocked
        assert seen[0] == (0.0, 2.0, -0.0, 0.0), seen
        twin_primary = sw.CPU(0 if empty_primary else slots)
        twin = sw.TiledEvictable(twin_primary, sw.CPU.from_values(values), [1, columns], [4, 1])
        assert result[0].to_list() == sw.reduce_sum(sw.Tensor.compact(twin, (4, columns))).to_list()


route_scenario()
tiled_scenario("plan")
tiled_scenario("progress")
print("no deadlock")
