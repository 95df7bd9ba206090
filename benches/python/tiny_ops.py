"""What a tiny operation costs from Python, as ratios against numpy measured in the same run.

Run it against a release build (`maturin develop --release`) with numpy installed:
`python benches/python/tiny_ops.py`. Each case is timed by `timeit` over many calls, the
best of several repeats (of the thread's CPU time), and printed with its ratio to numpy's same-size operation. The
spread column repeats the pair of measurements in rounds, ours and numpy's back to back,
and gives the smallest, median and largest ratio of the rounds, so a busy machine shows as
a wide spread rather than a misleading single ratio.
"""

import statistics
import time
import timeit
from typing import Callable, Dict, List

import numpy as np

import strideweave as sw


def best_ns(run: Callable[[], object], number: int = 20000, repeat: int = 7) -> float:
    """The best per-call time of `run`, in nanoseconds of this thread's CPU time (so time
    the thread spends preempted on a busy machine does not count)."""
    times = timeit.repeat(run, number=number, repeat=repeat, timer=time.thread_time)
    return min(times) / number * 1e9


def main() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    a = sw.Tensor.compact(sw.CPU.from_values(values), (4,))
    b = sw.Tensor.compact(sw.CPU.from_values(values), (4,))
    x = np.array(values, dtype=np.float32)
    y = np.array(values, dtype=np.float32)
    m = sw.Tensor.compact(sw.CPU.from_values([1.0] * 4), (2, 2))
    p = np.ones((2, 2), dtype=np.float32)

    cases: Dict[str, tuple] = {
        "4-element a + b": (lambda: a + b, lambda: x + y),
        "4-element a * 2.0": (lambda: a * 2.0, lambda: x * 2.0),
        "2x2 matmul": (lambda: m @ m, lambda: p @ p.T),
        "element read t[2]": (lambda: a[2], lambda: x[2]),
    }
    print(
        f"{'case':<20} {'strideweave ns':>15} {'numpy ns':>10} {'ratio':>7}"
        f"  {'spread (min / median / max of 9 rounds)':>40}"
    )
    for name, (ours, theirs) in cases.items():
        mine = best_ns(ours)
        base = best_ns(theirs)
        rounds: List[float] = []
        for _ in range(9):
            rounds.append(best_ns(ours, 5000, 3) / best_ns(theirs, 5000, 3))
        spread = f"{min(rounds):.2f} / {statistics.median(rounds):.2f} / {max(rounds):.2f}"
        print(f"{name:<20} {mine:>15.0f} {base:>10.0f} {mine / base:>7.2f}  {spread:>40}")


if __name__ == "__main__":
    main()
