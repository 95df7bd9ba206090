"""Tiny operations on CPU tensors keep the GIL (releasing it costs more than they do);
larger ones, and those on other carriers, release it. Results are the same either way."""

import pathlib
import subprocess
import sys
from typing import Callable

import pytest

import strideweave as sw
from test_threads import another_thread_ran, no_preemption, spin_while  # noqa: F401  (the fixture is used by name)


def repeat(run: Callable[[], object], times: int) -> Callable[[], None]:
    def loop() -> None:
        for _ in range(times):
            run()

    return loop


def test_tiny_cpu_operations_keep_the_gil(no_preemption: None) -> None:  # noqa: F811
    a = sw.Tensor.compact(sw.CPU.from_values([1.0] * 64), (64,))
    during = spin_while(repeat(lambda: (a + a, a * 2.0, -a, a[3]), 3000))
    assert during == 0
    assert (a + a).to_list() == [2.0] * 64


def test_larger_and_non_cpu_operations_release_it(no_preemption: None) -> None:  # noqa: F811
    # Another thread gets the GIL only while a call has released it for a while: these
    # calls take long enough for the counting thread to wake up inside one.
    b = sw.Tensor.compact(sw.CPU(300 * 300), (300, 300))
    assert another_thread_ran(repeat(lambda: b @ b, 2))
    g = sw.Tensor.compact(sw.Generic([1.0] * 20000, dtype=sw.DType.Float32), (20000,))
    assert another_thread_ran(repeat(lambda: g + g, 20))
    assert (g + g)[7] == 2.0


def test_tiny_errors_are_unchanged() -> None:
    a = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    b = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0]), (3,))
    with pytest.raises(ValueError, match="'add' cannot broadcast Shape 2 with Shape 3: extents 2 and 3"):
        a + b
    with pytest.raises(ValueError, match=r"coordinate 5 is out of range \[0, 2\) for the whole of Shape 2"):
        a[5]


def test_tiny_calls_never_wait_for_work_blocked_in_a_python_callback() -> None:
    child = pathlib.Path(__file__).with_name("tiny_calls_child.py")
    try:
        finished = subprocess.run(
            [sys.executable, str(child)], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a tiny call held the GIL while waiting for work blocked in a Python callback")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "no deadlock"


class Index(int):
    """An int subclass: a coordinate too, read through the general key path."""


def test_one_int_key_reads_one_element_like_every_other_key_form() -> None:
    t = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), (4,))
    assert [t[i] for i in range(4)] == [1.0, 2.0, 3.0, 4.0]
    assert t[2] == t[(2,)] == t[Index(2)] == 3.0
    for key in (-1, 4, 2**70):
        with pytest.raises(ValueError, match=rf"coordinate {key} is out of range \[0, 4\) for the whole of Shape 4"):
            t[key]
    with pytest.raises(ValueError, match="coordinate holds an integer beyond 128 bits"):
        t[2**130]
    for key, name in ((True, "bool"), (2.0, "float"), (None, "NoneType")):
        with pytest.raises(TypeError, match=f"a tensor key holds ints, int tuples and slices, got {name}"):
            t[key]  # type: ignore[index]
    assert t[1:3].to_list() == [2.0, 3.0]
    m = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), (2, 2))
    # One int on a tensor of several modes is an ordinal, first mode fastest (the original's
    # layout expansion): m[1] is m[1, 0].
    assert [m[i] for i in range(4)] == [1.0, 2.0, 3.0, 4.0] and m[1] == m[1, 0]
    with pytest.raises(ValueError, match=r"slice of Layout \(2,2\):\(1,2\) needs one key per mode \(2\), got 1"):
        m[1:2]
    assert m[1, 1] == 4.0
