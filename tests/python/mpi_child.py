"""One rank of the MPI tests (`test_mpi.py` runs it under mpirun): the scenario named by the
first argument checks its values and prints `RANK <r> OK <scenario> ...` when every check
passed, or `RANK <r> ERROR ...` (and exits non-zero) when one failed."""

import sys
from typing import Callable, Dict, List, Union

import strideweave as sw
from strideweave import mpi

Nested = Union[float, List["Nested"]]


def flat(values: object) -> List[float]:
    if isinstance(values, list):
        return [v for item in values for v in flat(item)]
    assert isinstance(values, (int, float)), values
    return [float(values)]


def close(what: str, got: List[float], expected: List[float], tolerance: float = 1e-5) -> None:
    if len(got) != len(expected) or any(
        abs(a - b) > tolerance * max(1.0, abs(b)) for a, b in zip(got, expected)
    ):
        raise AssertionError(f"{what}: got {got}, expected {expected}")


def cpu(values: List[float], shape: object) -> sw.Tensor:
    return sw.Tensor.compact(sw.CPU.from_values(values), shape)


def collectives() -> str:
    """Sum and mean of a CPU tensor, the gradient through a mean, average_gradients."""
    world = mpi.init()
    r, n = world.rank, world.size
    x = cpu([float(r + 1) * v for v in (1.0, 2.0, 3.0, 4.0)], (2, 2))
    factor = n * (n + 1) / 2
    mine = flat(x.to_list())
    close("sum", flat(mpi.all_reduce(x, "sum").to_list()), [factor * v / (r + 1) for v in mine])
    close(
        "mean",
        flat(mpi.all_reduce(x, "mean", world).to_list()),
        [factor / n * v / (r + 1) for v in mine],
    )
    leaf = cpu([1.0, 2.0], (1, 2))
    leaf.requires_grad = True
    sw.reduce_sum(mpi.all_reduce(leaf * float(r + 1), "mean")).backward()
    grad = leaf.grad
    assert grad is not None
    # d/dx_r of the ranks' summed losses: (r + 1) * (1/n) * n.
    close("gradient through a mean", flat(grad.to_list()), [float(r + 1)] * 2)
    w = cpu([1.0, 1.0], (1, 2))
    w.requires_grad = True
    sw.reduce_sum(w * float(r)).backward()
    mpi.average_gradients([w])
    averaged = w.grad
    assert averaged is not None
    close("average_gradients", flat(averaged.to_list()), [(n - 1) / 2] * 2)
    try:
        mpi.all_reduce(x, "max")
    except ValueError as error:
        assert "'sum' or 'mean'" in str(error), error
    else:
        raise AssertionError("reduction 'max' was accepted")
    return f"sum, mean, gradient and average_gradients over {n} ranks"


def with_mpi4py() -> str:
    """MPI initialized by mpi4py is adopted; a split mpi4py communicator reduces over its own
    ranks only."""
    from mpi4py import MPI

    world = mpi.init(MPI.COMM_WORLD)
    owns = sw._native.mpi_owns_mpi()
    if owns is not False:
        raise AssertionError(f"MPI initialized by mpi4py was not adopted: owns {owns}")
    r = world.rank
    half = MPI.COMM_WORLD.Split(r % 2, r)
    x = cpu([float(r)], (1,))
    got = flat(mpi.all_reduce(x, "sum", half).to_list())
    expected = float(sum(k for k in range(world.size) if k % 2 == r % 2))
    close("sum over the split communicator", got, [expected])
    again = mpi.communicator(half)
    if again is not mpi.communicator(half):
        raise AssertionError("an mpi4py communicator was converted twice")
    half.Free()
    return f"adopted mpi4py's MPI; split sum {got[0]} on {again.size} ranks"


class TwoTiles(sw.ResidencyPolicy):
    """Bounds the primary tier to two tiles and records the most it held for any work."""

    def __init__(self) -> None:
        self.peak = 0

    def primary_capacity(self) -> int:
        return 2

    def on_progress(self, progress: sw.TileProgress) -> None:
        self.peak = max(self.peak, progress.staged_peak)


def cluster() -> str:
    """A tensor held by the other ranks, reduced and multiplied through a ClusterLocal
    primary of two tiles, equals the same on the CPU."""
    world = mpi.init()
    c = mpi.Cluster(world, 0)
    if not c.is_client:
        summary = c.serve()
        if summary["peak_slots"] <= 0:
            raise AssertionError(f"rank {c.rank} held nothing: {summary}")
        return f"served {summary}"
    try:
        rows, cols, tile = 8, 64, 16
        values = [((i * 7) % 11 - 5) / 4.0 for i in range(rows * cols)]
        far = c.memory_from_values(values)
        owners = [p[0] for p in mpi.Cluster.placement(far)]
        if owners != c.owners:
            raise AssertionError(f"placed on {owners}, expected {c.owners}")
        tiled = sw.TiledEvictable(
            mpi.cluster_local(size=0),
            far,
            [1, cols // tile],
            [rows, tile],
            residency_policy=TwoTiles(),
        )
        x = sw.Tensor.compact(tiled, (rows, cols))
        dense = cpu(values, (rows, cols))
        close(
            "tiled reduce_sum",
            flat(sw.reduce_sum(x).to_list()),
            flat(sw.reduce_sum(dense).to_list()),
        )
        w_values = [((i * 3) % 5 - 2) / 2.0 for i in range(3 * cols)]
        w = sw.Tensor.compact(
            sw.TiledEvictable(
                mpi.cluster_local(w_values),
                mpi.cluster_local(size=0),
                [1, cols // tile],
                [3, tile],
            ),
            (3, cols),
        )
        close(
            "tiled matmul",
            flat(sw.matmul(x, w).to_list()),
            flat(sw.matmul(dense, cpu(w_values, (3, cols))).to_list()),
            1e-4,
        )
        local = mpi.upload(dense)
        if flat(local.to_list()) != flat(dense.to_list()):
            raise AssertionError("upload did not copy the tensor to ClusterLocal")
        policy = tiled.residency_policy
        assert isinstance(policy, TwoTiles)
        if not 0 < policy.peak <= 2:
            raise AssertionError(f"the primary tier held {policy.peak} tiles, bound 2")
        return f"tiled reduce_sum and matmul over ranks {owners} equal the CPU's"
    finally:
        c.stop()


SCENARIOS: Dict[str, Callable[[], str]] = {
    "collectives": collectives,
    "mpi4py": with_mpi4py,
    "cluster": cluster,
}


def say(line: str) -> None:
    """Prints `line` in one write, so mpirun cannot interleave another rank's output inside."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    scenario = sys.argv[1]
    rank = "?"
    try:
        rank = str(mpi.init().rank) if scenario != "mpi4py" else "?"
        detail = SCENARIOS[scenario]()
        if rank == "?":
            from mpi4py import MPI

            rank = str(MPI.COMM_WORLD.Get_rank())
        say(f"RANK {rank} OK {scenario}: {detail}")
    except Exception as error:  # reported to the launcher, which shows it
        say(f"RANK {rank} ERROR {scenario}: {type(error).__name__}: {error}")
        sys.exit(1)


if __name__ == "__main__":
    main()
