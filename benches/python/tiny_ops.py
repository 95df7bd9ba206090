"""What a tiny operation costs from Python, as ratios against numpy measured in the same run.

Run it against a release build (`maturin develop --release`) with numpy installed:
`python benches/python/tiny_ops.py`. Each case is timed by `timeit` over many calls, the
best of several repeats, and printed with its ratio to numpy's same-size operation.
"""

import timeit
from typing import Callable, Dict

import numpy as np

import strideweave as sw


def best_ns(run: Callable[[], object], number: int = 20000, repeat: int = 7) -> float:
    """The best per-call time of `run`, in nanoseconds."""
    return min(timeit.repeat(run, number=number, repeat=repeat)) / number * 1e9


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
    print(f"{'case':<20} {'strideweave ns':>15} {'numpy ns':>10} {'ratio':>7}")
    for name, (ours, theirs) in cases.items():
        mine = best_ns(ours)
        base = best_ns(theirs)
        print(f"{name:<20} {mine:>15.0f} {base:>10.0f} {mine / base:>7.2f}")


if __name__ == "__main__":
    main()
