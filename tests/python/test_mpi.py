"""strideweave.mpi under mpirun: each test launches `mpirun -n 2` or `-n 4` on a Python script
(mpi_child.py or the data-parallel example), bounded by a timeout, and checks every rank's
line. Skipped when the extension has no MPI support or mpirun is missing."""

import os
import pathlib
import shutil
import subprocess
import sys
from typing import List

import pytest

from strideweave import mpi

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "python" / "data_parallel_mpi.py"

pytestmark = [
    pytest.mark.skipif(not mpi.available(), reason="the extension was built without MPI"),
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is missing"),
]


def mpirun(ranks: int, *arguments: str) -> List[str]:
    """The output lines of `mpirun -n ranks python arguments...`, which must succeed."""
    command = ["mpirun", "--oversubscribe", "-n", str(ranks)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    done = subprocess.run(
        [*command, sys.executable, *arguments], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


def rank_lines(lines: List[str], ranks: int, scenario: str) -> List[str]:
    found = []
    for rank in range(ranks):
        prefix = f"RANK {rank} OK {scenario}"
        matching = [line for line in lines if line.startswith(prefix)]
        assert matching, f"rank {rank} printed no `{prefix}` line:\n" + "\n".join(lines)
        found.append(matching[0])
    return found


@pytest.mark.parametrize("ranks", [2, 4])
def test_all_reduce_and_average_gradients_agree_on_every_rank(ranks: int) -> None:
    output = mpirun(ranks, str(HERE / "mpi_child.py"), "collectives")
    lines = rank_lines(output, ranks, "collectives")
    assert all(line.endswith(f"over {ranks} ranks") for line in lines)


def test_mpi_initialized_by_mpi4py_is_adopted_and_its_communicators_taken() -> None:
    pytest.importorskip("mpi4py")
    lines = rank_lines(mpirun(4, str(HERE / "mpi_child.py"), "mpi4py"), 4, "mpi4py")
    # Ranks 0, 2 sum 0 + 2; ranks 1, 3 sum 1 + 3 over their halves of COMM_WORLD.
    assert [line.split("split sum ")[1] for line in lines] == [
        "2.0 on 2 ranks",
        "4.0 on 2 ranks",
        "2.0 on 2 ranks",
        "4.0 on 2 ranks",
    ]


@pytest.mark.parametrize("ranks", [2, 4])
def test_a_tensor_held_by_other_ranks_computes_like_the_cpu(ranks: int) -> None:
    lines = rank_lines(mpirun(ranks, str(HERE / "mpi_child.py"), "cluster"), ranks, "cluster")
    assert "equal the CPU's" in lines[0]
    assert all("served" in line for line in lines[1:])


def test_the_data_parallel_example_matches_one_rank() -> None:
    lines = mpirun(4, str(EXAMPLE))
    for rank in range(4):
        assert any(
            line.startswith(f"rank {rank}: final loss")
            and line.endswith("from rank 0's weights 0.0")
            for line in lines
        ), lines
    summary = [line for line in lines if line.startswith("one rank on all")]
    assert len(summary) == 1, lines
    deviation = float(summary[0].rsplit(" ", 1)[1])
    assert deviation < 1e-3, summary
