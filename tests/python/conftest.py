"""Shared helpers for the Python suite."""

from typing import List, Sequence

import pytest

import strideweave as sw


def cpu_tensor(values: Sequence[float], shape: object, dtype: "sw.DType" = sw.DType.Float32) -> sw.Tensor:
    """A compact CPU tensor of `values` (first mode fastest) with `shape`."""
    return sw.Tensor.compact(sw.CPU.from_values(list(values), dtype=dtype), shape)


@pytest.fixture
def matrix() -> sw.Tensor:
    """The 2x3 CPU matrix [[1, 3, 5], [2, 4, 6]] (values 1..6 column-major)."""
    return cpu_tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3))


def flat(values: List[List[float]]) -> List[float]:
    """Row-major flattening of a nested list, for comparisons."""
    return [v for row in values for v in row]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--loop-devices",
        action="store_true",
        help="run the tests marked loop_device (they need root and losetup; .ci/run passes it)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "loop_device: needs root and losetup: creates Linux loop devices"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    if config.getoption("--loop-devices"):
        return
    skip = pytest.mark.skip(
        reason="needs root and losetup: creates Linux loop devices (run with --loop-devices)"
    )
    for item in items:
        if "loop_device" in item.keywords:
            item.add_marker(skip)
