"""Data-parallel training from Python: the tour's two-layer perceptron on every rank, each on
its share of the points, with the gradients averaged across the ranks after each backward
pass (`strideweave.mpi.average_gradients`); then rank 0 trains alone on all the points and
compares. Needs an extension built with MPI support (`make develop`). Run it on four ranks:

    mpirun -n 4 --oversubscribe python examples/python/data_parallel_mpi.py

(as root, add --allow-run-as-root). With mpi4py imported first, StrideWeave adopts the MPI
that mpi4py initialized, and `mpi.init(comm)` takes an mpi4py communicator.
"""

import sys
from typing import List, Optional, Tuple

import strideweave as sw
from strideweave import mpi

POINTS = 128
HIDDEN = 16
EPOCHS = 200
RATE = 2.0


def noise(state: List[int]) -> float:
    """A deterministic value in [-1, 1) (the same generator on every rank)."""
    state[0] = (state[0] * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    return (state[0] >> 40) / float(1 << 24) * 2.0 - 1.0


def problem() -> Tuple[List[float], List[float], List[float], List[float], List[float]]:
    """Points of two features labelled by the sign of their product, and the initial weights."""
    state = [7]
    x0: List[float] = []
    x1: List[float] = []
    labels: List[float] = []
    for _ in range(POINTS):
        a, b = noise(state), noise(state)
        x0.append(a)
        x1.append(b)
        labels.append(1.0 if a * b > 0.0 else 0.0)
    w1 = [noise(state) * 1.5 for _ in range(HIDDEN * 2)]
    w2 = [noise(state) for _ in range(HIDDEN)]
    return x0, x1, labels, w1, w2


def leaf(values: List[float], shape: Tuple[int, int]) -> sw.Tensor:
    t = sw.Tensor.compact(sw.CPU.from_values(values), shape)
    t.requires_grad = True
    return t


def step(p: sw.Tensor) -> sw.Tensor:
    """One SGD step: a new leaf `p - RATE * grad`."""
    grad = p.grad
    assert grad is not None
    with sw.no_grad():
        updated = p - grad * RATE
    updated.requires_grad = True
    return updated


def flat(values: object) -> List[float]:
    if isinstance(values, list):
        return [v for item in values for v in flat(item)]
    assert isinstance(values, float)
    return [values]


def train(first: int, last: int, comm: Optional[mpi.Communicator]) -> Tuple[List[float], float]:
    """Trains on points `first..last`, averaging gradients over `comm` when given; returns
    the parameters (flattened) and the final loss (averaged over the ranks)."""
    x0, x1, labels, w1_values, w2_values = problem()
    n = last - first
    x = sw.Tensor.compact(sw.CPU.from_values(x0[first:last] + x1[first:last]), (n, 2))
    y = sw.Tensor.compact(sw.CPU.from_values(labels[first:last]), (n, 1))
    w1 = leaf(w1_values, (HIDDEN, 2))
    b1 = leaf([0.0] * HIDDEN, (1, HIDDEN))
    w2 = leaf(w2_values, (1, HIDDEN))
    b2 = leaf([0.0], (1, 1))
    loss_value = 0.0
    for epoch in range(EPOCHS + 1):
        hidden = sw.relu(sw.add(sw.matmul(x, w1), b1))
        p = sw.sigmoid(sw.add(sw.matmul(hidden, w2), b2))
        diff = p - y
        loss = sw.reduce_sum((diff * diff).permute(1, 0)) * (1.0 / n)
        if epoch == EPOCHS:
            with sw.no_grad():
                final = loss.detach() if comm is None else mpi.all_reduce(loss, "mean", comm)
            loss_value = flat(final.to_list())[0]
            break
        loss.backward()
        if comm is not None:
            mpi.average_gradients([w1, b1, w2, b2], comm)
        w1, b1, w2, b2 = step(w1), step(b1), step(w2), step(b2)
    parameters = [v for t in (w1, b1, w2, b2) for v in flat(t.to_list())]
    return parameters, loss_value


def say(line: str) -> None:
    """Prints `line` in one write, so mpirun cannot interleave another rank's output inside."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    if not mpi.available():
        say("this build of strideweave has no MPI support (make develop builds it)")
        return
    world = mpi.init()
    rank, ranks = world.rank, world.size
    if POINTS % ranks:
        raise SystemExit(f"{POINTS} points do not split evenly over {ranks} ranks")
    share = POINTS // ranks
    parameters, loss = train(rank * share, (rank + 1) * share, world)
    # Every rank's weights against rank 0's: the same bits everywhere.
    mine = sw.Tensor.compact(sw.CPU.from_values(parameters), (len(parameters),))
    rank0 = sw.Tensor.compact(
        sw.CPU.from_values(parameters if rank == 0 else [0.0] * len(parameters)),
        (len(parameters),),
    )
    spread = max(
        abs(a - b)
        for a, b in zip(flat(mine.to_list()), flat(mpi.all_reduce(rank0, "sum").to_list()))
    )
    say(f"rank {rank}: final loss {loss:.4f}, largest difference from rank 0's weights {spread}")
    world.barrier()
    if rank == 0:
        alone, alone_loss = train(0, POINTS, None)
        deviation = max(abs(a - b) for a, b in zip(parameters, alone))
        say(
            f"one rank on all {POINTS} points: final loss {alone_loss:.4f}; the {ranks}-rank "
            f"weights differ by at most {deviation:.1e}"
        )


if __name__ == "__main__":
    main()
