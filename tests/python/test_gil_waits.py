"""Waiting releases the GIL: `AwaitMove.wait()` blocks without it while the framework's move
worker finishes the transfer — here by waiting on a route completion that a Python thread
completes — so other Python threads run meanwhile (issue: Threads and the GIL)."""

import threading
import time
from typing import Any, List

import strideweave as sw
from strideweave.carriers import extension

from authoring_helpers import ListStorage, filled, new_class
from test_threads import no_preemption, spin_while  # noqa: F401


def test_waiting_for_a_move_lets_other_threads_run(no_preemption: None) -> None:  # noqa: F811
    finished = threading.Event()

    def prepare(request: Any) -> Any:
        source = request.tensor.carrier.slots

        def finish() -> None:
            time.sleep(0.05)
            request.write_slots(0, source[: request.physical_span])
            finished.set()

        class Pending:
            @property
            def done(self) -> bool:
                return finished.is_set()

            def wait(self) -> None:
                if not finished.wait(timeout=30):
                    raise TimeoutError("the transfer did not finish in 30 s")

        def submit() -> Pending:
            threading.Thread(target=finish, daemon=True).start()
            return Pending()

        return extension.PreparedTransfer(submit)

    cls = new_class("SlowRouteCarrier")
    route = sw.TransferRoute(cls, sw.CPU, "slow", extension.TransferProvider(prepare))
    sw.register_carrier_definition(cls, sw.CarrierDefinition(ListStorage().provider(), transfers=[route]))
    handle = sw.move_async(filled(cls, [1.0, 2.0]), sw.CPU(2))
    assert isinstance(handle, extension.ProviderCompletion)
    moved: List[sw.Tensor] = []
    during = spin_while(lambda: moved.append(handle.wait()))
    assert moved[0].to_list() == [1.0, 2.0] and finished.is_set()
    assert during > 0, "another thread ran while the caller waited"


def test_a_residency_handle_is_a_provider_completion() -> None:
    carrier = sw.TiledEvictable(sw.CPU(0), sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), [2], [2])
    handle = carrier.require_facet(sw.TiledResidencyFacet).promote_async([(1,)])
    assert isinstance(handle, extension.ProviderCompletion) and not hasattr(handle, "__await__")
    handle.wait()
    assert handle.done and carrier.tile_state([1]).location == "primary"
