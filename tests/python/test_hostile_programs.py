"""Programs that try to take the interpreter down through StrideWeave: exiting while daemon
threads are inside Python storage, kernel and transfer callbacks, and asking for lists sized
beyond memory. Each runs in a child interpreter with a memory limit and a timeout, so an
abort, a crash or a hang fails the test instead of the suite."""

import resource
import subprocess
import sys
import textwrap

import pytest

#: The address-space limit of the child interpreters.
MEMORY_LIMIT = 4 << 30

#: How often each exit race is run.
RUNS = 20


def run_child(code: str, limit: int = MEMORY_LIMIT, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter under an address-space limit of `limit` bytes."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit_memory,
    )


PROLOGUE = """
import threading, time
import strideweave as sw
from strideweave.carriers.operation_policy import resolve_operation_plan
from strideweave.carriers import extension as ext
F32 = sw.DType.Float32

class Slots(sw.Carrier):
    def __init__(self, slots, **kwargs):
        self.slots = []
        super().__init__(slots, **kwargs)

def allocate(c, n):
    c.slots = [0.0] * n

def write(c, i, v):
    c.slots[i] = v

def read(c, i):
    time.sleep(0.005)
    return c.slots[i]

def storage():
    return sw.StorageProvider(lambda c, d: d is F32, lambda c: len(c.slots), allocate, lambda c: None, read, write)

def start(loop, threads=2):
    for _ in range(threads):
        threading.Thread(target=loop, daemon=True).start()
    time.sleep(0.05)
    print("exiting with threads in callbacks")
"""

STORAGE = """
sw.register_carrier_definition(Slots, sw.CarrierDefinition(storage()))
t = sw.Tensor.compact(Slots(4, dtype=F32), (4,))

def loop():
    while True:
        t.to_list()

start(loop)
"""

KERNEL = """
def prepare(invocation, interface):
    def submit():
        time.sleep(0.005)
        return ext.ProviderResult([invocation.allocate_result(0)])
    return ext.PreparedKernel(interface, submit)

pattern = sw.KernelPattern(sw.operation_definition("neg"), [sw.OperationCapability.from_plan(resolve_operation_plan("neg", F32))], "slow.neg", prepare)
kernels = sw.KernelProvider(sw.KernelExecutionInterface("1"), [pattern])
sw.register_carrier_definition(Slots, sw.CarrierDefinition(storage(), kernels=kernels))
t = sw.Tensor.compact(Slots(4, dtype=F32), (4,))

def loop():
    while True:
        sw.neg(t)

start(loop)
"""

TRANSFER = """
class Pending:
    def __init__(self):
        self.done = False
    def wait(self):
        time.sleep(0.01)
        self.done = True

def prepare(request):
    def submit():
        request.write_slots(0, [1.0] * request.physical_span)
        return Pending()
    return ext.PreparedTransfer(submit)

route = sw.TransferRoute(Slots, sw.CPU, "slow", ext.TransferProvider(prepare))
sw.register_carrier_definition(Slots, sw.CarrierDefinition(storage(), transfers=[route]))

def loop():
    while True:
        sw.move_async(sw.Tensor.compact(Slots(4, dtype=F32), (4,)), sw.CPU(4))

start(loop)
"""


@pytest.mark.parametrize("program", [STORAGE, KERNEL, TRANSFER], ids=["storage", "kernel", "transfer"])
def test_the_interpreter_exits_cleanly_with_daemon_threads_inside_callbacks(program: str) -> None:
    for run in range(RUNS):
        child = run_child(PROLOGUE + program)
        assert (child.returncode, child.stdout) == (0, "exiting with threads in callbacks\n"), (
            f"run {run}: exit status {child.returncode}\n{child.stderr[-2000:]}"
        )
        assert "Fatal Python error" not in child.stderr


def test_a_list_beyond_the_address_space_limit_is_a_memory_error_naming_that_limit() -> None:
    limit = 1 << 30
    child = run_child(
        """
        import strideweave as sw
        huge = sw.Layout((2**31, 2**31))
        broadcast = sw.Tensor(sw.CPU(1), 0, sw.Layout((2**31, 2**31), (0, 0)))
        for make in (huge.indices, broadcast.to_list, lambda: sw.CPU(2**40)):
            try:
                make()
            except MemoryError as error:
                print(type(error).__name__, error)
        """,
        limit=limit,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    lines = child.stdout.splitlines()
    assert len(lines) == 3, child.stdout
    expected = [
        "the indices of Layout('(2147483648,2147483648):(1,2147483648)') needs 4611686018427387904 elements",
        "the list of a Tensor of shape (2147483648,2147483648) needs 4611686018427387904 elements",
        "a CPU carrier of Float32 slots needs 1099511627776 elements (4398046511104 bytes)",
    ]
    for line, start in zip(lines, expected):
        assert line.startswith(f"MemoryError {start}"), line
        assert line.endswith(f"more than this process's address-space limit (RLIMIT_AS) of {limit} bytes can hold"), line


def test_messages_name_no_internal_type_and_a_bare_shape_says_how_to_write_a_layout() -> None:
    import strideweave as sw

    with pytest.raises(ValueError) as raised:
        sw.Layout("(2,3)")
    assert str(raised.value) == (
        'malformed Layout "(2,3)": a layout is written shape:stride and this one has no stride; '
        'the column-major layout of that shape is "(2,3):(1,2)"'
    )

    class Panicky(sw.Carrier):
        def __init__(self, slots: int, **kwargs: object) -> None:
            self.slots: list = []
            super().__init__(slots, **kwargs)

    def allocate(carrier: Panicky, slots: int) -> None:
        carrier.slots = [0.0] * slots

    storage = sw.StorageProvider(
        lambda c, d: True, lambda c: -1, allocate, lambda c: None, lambda c, i: 0.0, lambda c, i, v: None
    )
    sw.register_carrier_definition(Panicky, sw.CarrierDefinition(storage))
    with pytest.raises(ValueError) as negative:
        Panicky(2, dtype=sw.DType.Float32)
    assert "Panicky returned a negative physical_size -1" in str(negative.value)
    assert "_native" not in str(negative.value) and "::" not in str(negative.value)
