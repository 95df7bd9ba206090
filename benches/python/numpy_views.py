"""What `np.asarray(t)` costs for a CPU tensor, as a ratio of a 16 Mi-element tensor to a
4-element one measured in the same run: a view copies nothing, so the ratio stays near 1.

Run it against a release build (`maturin develop --release`) with numpy installed:
`python benches/python/numpy_views.py`. Each size is timed by `timeit` over many calls, the
best of several repeats; `np.array(t)` (a copy) is printed beside it for scale.
"""

import time
import timeit
from typing import Callable

import numpy as np

import strideweave as sw


def best_ns(run: Callable[[], object], number: int, repeat: int = 7) -> float:
    """The best per-call time of `run`, in nanoseconds of this thread's CPU time."""
    times = timeit.repeat(run, number=number, repeat=repeat, timer=time.thread_time)
    return min(times) / number * 1e9


def tensor(count: int) -> sw.Tensor:
    return sw.Tensor.compact(sw.CPU(count), (count,))


def main() -> None:
    small = tensor(4)
    large = tensor(16 * 1024 * 1024)
    view_small = best_ns(lambda: np.asarray(small), 20000)
    view_large = best_ns(lambda: np.asarray(large), 20000)
    copy_large = best_ns(lambda: np.array(large), 5, repeat=3)
    print(f"np.asarray 4 elements      {view_small:>12.0f} ns")
    print(f"np.asarray 16 Mi elements  {view_large:>12.0f} ns")
    print(f"ratio 16 Mi / 4            {view_large / view_small:>12.2f}")
    print(f"np.array (copy) 16 Mi      {copy_large:>12.0f} ns")


if __name__ == "__main__":
    main()
