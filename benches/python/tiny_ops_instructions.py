"""What a tiny operation costs from Python in instructions, which the machine's load does not
change, against numpy's same operation.

Needs valgrind (callgrind) and a release build (`maturin develop --release`) with numpy:
`python benches/python/tiny_ops_instructions.py`. Each case runs a loop of N and of 2N calls
in a fresh interpreter under callgrind; the difference of the two totals divided by N is the
cost of one call, start-up and the first calls' one-time work cancelled out. The loop's own
cost (the range iteration, the discarded result) is in both sides of the ratio; the loop is
a function's, so its names are local and the string hash seed (fixed anyway) changes no dict
probe. numpy runs with `OPENBLAS_NUM_THREADS=1`: otherwise its BLAS worker threads spin in
the background and callgrind counts their instructions too, though they are not the call's.

For the strideweave cases the `core` column is the inclusive cost of the core's entry point
(`strideweave::ops::add`, `ops::mul`, `Tensor::get`) and `binding` what is left once the
core and the loop itself (measured with `a` as the body) are taken away: the interpreter's
dispatch to the slot, pyo3's trampolines and the binding's own code, and the result object's
allocation and deallocation — which drops the result tensor, a core cost counted here.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

SETUP = {
    "strideweave": (
        "import strideweave as sw\n"
        "a = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), (4,))\n"
        "b = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), (4,))\n"
    ),
    "numpy": (
        "import numpy as np\n"
        "a = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)\n"
        "b = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)\n"
    ),
}

# (case, loop body, the core entry point whose inclusive cost is the core's share)
CASES: List[Tuple[str, str, str]] = [
    ("4-element a + b", "a + b", "strideweave::ops::add"),
    ("4-element a * 2.0", "a * 2.0", "strideweave::ops::mul"),
    ("element read t[2]", "a[2]", "Tensor>::get"),
]

N = 10000


def script(library: str, body: str) -> str:
    """The program: the operands, then a function-local loop of `body` (local names, so the
    string hash seed does not change the cost of reading them)."""
    return (
        SETUP[library]
        + "import sys\n\n\ndef loop(a, b, calls):\n    for _ in range(calls):\n        "
        + body
        + "\n\n\nloop(a, b, int(sys.argv[1]))\n"
    )


def run(path: str, calls: int, out: str) -> int:
    """The instructions callgrind counted for `calls` calls of the script at `path`."""
    environment = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, path, str(calls)],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no total:\n{result.stderr}")
    return int(found.group(1))


def inclusive(out: str, symbol: str) -> Optional[int]:
    """The inclusive instructions of the first function whose name contains `symbol`."""
    if shutil.which("callgrind_annotate") is None:
        return None
    listing = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in listing.splitlines():
        found = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*?:(.*)$", line)
        if found and symbol in found.group(2):
            return int(found.group(1).replace(",", ""))
    return None


def per_call(library: str, body: str, symbol: Optional[str], work: str) -> Tuple[float, Optional[float]]:
    path = os.path.join(work, f"loop_{library}.py")  # not `numpy.py`: it would import itself
    with open(path, "w") as file:
        file.write(script(library, body))
    totals: Dict[int, int] = {}
    cores: Dict[int, Optional[int]] = {}
    for calls in (N, 2 * N):
        out = os.path.join(work, f"{library}.{calls}.out")
        totals[calls] = run(path, calls, out)
        cores[calls] = inclusive(out, symbol) if symbol else None
    total = (totals[2 * N] - totals[N]) / N
    low, high = cores[N], cores[2 * N]
    core = (high - low) / N if low is not None and high is not None else None
    return total, core


def main() -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    with tempfile.TemporaryDirectory() as work:
        loop, _ = per_call("strideweave", "a", None, work)
        print(f"the loop alone (`a` as the body): {loop:.0f} instructions per iteration")
        print(
            f"{'case':<20} {'strideweave':>12} {'core':>6} {'binding':>8} {'numpy':>7} {'ratio':>6}"
        )
        for name, body, symbol in CASES:
            ours, core = per_call("strideweave", body, symbol, work)
            theirs, _ = per_call("numpy", body, None, work)
            core_text = f"{core:6.0f}" if core is not None else f"{'-':>6}"
            binding = f"{ours - core - loop:8.0f}" if core is not None else f"{'-':>8}"
            print(f"{name:<20} {ours:12.0f} {core_text} {binding} {theirs:7.0f} {ours / theirs:6.2f}")


if __name__ == "__main__":
    main()
