"""The original package's tile values: ``TileSet`` and ``TileSelection``.

Immutable, hashable, compared by value. A tile coordinate is a tuple of non-negative ints,
one per grid axis; orders are first mode fastest (axis 0 varies fastest), the order
StrideWeave enumerates every index space in. The native residency calls take plain
coordinate tuples, so pass ``tiles.coordinates`` to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Iterable, List, Set, Tuple

__all__ = ["TileSelection", "TileSet"]

Coordinate = Tuple[int, ...]


def _materialize(value: object, name: str) -> Tuple[object, ...]:
    """``value`` consumed once into a tuple; a non-iterable is a TypeError naming ``name``."""
    try:
        iterator = iter(value)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(
            f"{name} must be a finite iterable, got {type(value).__name__}"
        ) from None
    return tuple(iterator)


def _grid_shape(grid_shape: object) -> Coordinate:
    extents = _materialize(grid_shape, "tile grid shape")
    for extent in extents:
        if type(extent) is not int:
            raise TypeError(f"tile grid extents must be integers, got {type(extent).__name__}")
        if extent <= 0:
            raise ValueError(f"tile grid extents must be positive, got {extent}")
    return tuple(extents)  # type: ignore[arg-type]


def _check_against_grid(coordinates: Iterable[Coordinate], rank: int, grid_shape: object) -> None:
    grid = _grid_shape(grid_shape)
    if rank != len(grid):
        raise ValueError(f"tile coordinate rank {rank} does not match grid rank {len(grid)}")
    for coordinate in coordinates:
        if any(component >= extent for component, extent in zip(coordinate, grid)):
            raise ValueError(f"tile coordinate {coordinate!r} is outside grid shape {grid!r}")


@dataclass(frozen=True, init=False)
class TileSet:
    """Any set of tile coordinates of one rank, kept sorted first mode fastest.

    ``TileSet([(0, 1), (1, 0), (0, 0)]).coordinates == ((0, 0), (1, 0), (0, 1))``; the empty
    set (the default) has no rank.
    """

    coordinates: Tuple[Coordinate, ...]

    def __init__(self, coordinates: Iterable[Iterable[int]] = ()) -> None:
        entries = _materialize(coordinates, "coordinates")
        rank = None
        seen: Set[Coordinate] = set()
        for position, entry in enumerate(entries):
            name = f"coordinates[{position}]"
            components = _materialize(entry, name)
            for component in components:
                if type(component) is not int:
                    raise TypeError(
                        f"{name} components must be integers, got {type(component).__name__}"
                    )
                if component < 0:
                    raise ValueError(f"{name} components must be non-negative, got {component}")
            coordinate: Coordinate = components  # type: ignore[assignment]
            if rank is None:
                rank = len(coordinate)
            elif len(coordinate) != rank:
                raise ValueError(
                    f"tile coordinates must all have the same rank: {name} has rank "
                    f"{len(coordinate)}, the first has rank {rank}"
                )
            if coordinate in seen:
                raise ValueError(f"duplicate tile coordinate {coordinate!r}")
            seen.add(coordinate)
        ordered = tuple(sorted(seen, key=lambda c: c[::-1]))
        object.__setattr__(self, "coordinates", ordered)

    def _validate_grid_shape(self, grid_shape: Iterable[int]) -> None:
        """Checks the set against a tile grid: its rank and every coordinate inside it."""
        if not self.coordinates:
            _grid_shape(grid_shape)
            return
        _check_against_grid(self.coordinates, len(self.coordinates[0]), grid_shape)


@dataclass(frozen=True, init=False)
class TileSelection:
    """A Cartesian product of tiles: per grid axis, the chosen tile indices in the
    caller's order.

    ``TileSelection(([7, 2], [4, 9])).coordinates == ((7, 4), (2, 4), (7, 9), (2, 9))``:
    axis 0 varies fastest.
    """

    per_axis: Tuple[Coordinate, ...]

    def __init__(self, per_axis: Iterable[Iterable[int]]) -> None:
        entries = _materialize(per_axis, "per_axis")
        if not entries:
            raise ValueError("TileSelection requires at least one axis")
        axes: List[Coordinate] = []
        for position, entry in enumerate(entries):
            name = f"per_axis[{position}]"
            indices = _materialize(entry, name)
            if not indices:
                raise ValueError(f"{name} must not be empty: every axis selects a tile")
            seen: Set[int] = set()
            for index in indices:
                if type(index) is not int:
                    raise TypeError(
                        f"tile coordinates must be integers, got {type(index).__name__} in {name}"
                    )
                if index < 0:
                    raise ValueError(
                        f"tile coordinates must be non-negative, got {index} in {name}"
                    )
                if index in seen:
                    raise ValueError(f"{name} contains duplicate coordinate {index}")
                seen.add(index)
            axes.append(indices)  # type: ignore[arg-type]
        object.__setattr__(self, "per_axis", tuple(axes))

    @property
    def rank(self) -> int:
        """The number of grid axes."""
        return len(self.per_axis)

    @property
    def compact_grid_shape(self) -> Coordinate:
        """How many tiles the selection takes on each axis."""
        return tuple(len(axis) for axis in self.per_axis)

    @property
    def coordinates(self) -> Tuple[Coordinate, ...]:
        """Every selected tile, axis 0 fastest, each axis in the caller's order."""
        return tuple(c[::-1] for c in product(*reversed(self.per_axis)))

    @property
    def tile_set(self) -> TileSet:
        """The selected tiles as a (sorted) ``TileSet``."""
        return TileSet(self.coordinates)

    def _validate_grid_shape(self, grid_shape: Iterable[int]) -> None:
        """Checks the selection against a tile grid: its rank and every tile inside it."""
        _check_against_grid(self.coordinates, self.rank, grid_shape)
