"""TiledEvictable from Python as in the original: geometry and tiers, tiles by location as
`TileSet` values, residency moves by `TileSet` or `TileSelection` (blocking and asynchronous),
and `project` and `scatter` with their completion handles."""

import pytest

import strideweave as sw
from strideweave.carriers import AwaitProjection, TileSelection, TileSet
from strideweave.carriers.move import AwaitResult


def tiled_over(values: "list[float]", grid: "list[int]", tile: "list[int]") -> sw.TiledEvictable:
    return sw.TiledEvictable(sw.CPU(0), sw.CPU.from_values(values), grid, tile)


def test_geometry_tiers_and_tiles_by_location() -> None:
    secondary = sw.CPU.from_values([float(i) for i in range(12)])
    primary = sw.CPU(0)
    tiled = sw.TiledEvictable(primary, secondary, [2, 3], [2, 1])
    assert (tiled.grid_shape, tiled.tile_shape, tiled.logical_shape) == ((2, 3), (2, 1), (4, 3))
    assert tiled.primary is primary and tiled.secondary is secondary
    assert tiled.residency_policy is None
    everything = TileSet([(i, j) for i in range(2) for j in range(3)])
    assert tiled.secondary_tiles == tiled.valid_tiles == everything
    assert tiled.primary_tiles == tiled.dirty_tiles == TileSet()
    assert isinstance(tiled.primary_tiles, TileSet)


def test_residency_moves_take_tile_sets_and_selections_and_keep_the_version() -> None:
    tiled = tiled_over([float(i) for i in range(8)], [4], [2])
    t = sw.Tensor.compact(tiled, (8,))
    version = tiled.version
    tiled.promote(TileSet([(1,), (3,)]))
    assert tiled.primary_tiles == TileSet([(1,), (3,)])
    assert tiled.secondary_tiles == TileSet([(0,), (2,)])
    handle = tiled.evict_async(TileSelection([[3]]))
    assert isinstance(handle, AwaitResult) and handle.wait() is None and handle.done
    assert tiled.primary_tiles == TileSet([(1,)])
    tiled.promote_async(TileSelection([[0, 2]])).wait()
    t[2] = 9.0
    assert tiled.dirty_tiles == TileSet([(1,)]) and tiled.version == version + 1
    tiled.evict(TileSet([(1,)]))
    assert tiled.dirty_tiles == TileSet() and t.to_list()[2] == 9.0
    with pytest.raises(TypeError, match="^tiles must be a TileSet or TileSelection, got int$"):
        tiled.promote(5)
    with pytest.raises(ValueError):
        tiled.promote(TileSet([(7,)]))


def test_project_gathers_selected_tiles_and_its_handle_returns_one_tensor() -> None:
    tiled = tiled_over([float(i) for i in range(8)], [4], [2])
    t = sw.Tensor.compact(tiled, (8,))
    handle = tiled.project(t, TileSelection([[2, 0]]))
    assert isinstance(handle, AwaitProjection) and isinstance(handle, AwaitResult)
    compact = handle.wait()
    assert compact.to_list() == [4.0, 5.0, 0.0, 1.0] and type(compact.carrier) is sw.CPU
    assert handle.wait() is compact and handle.done
    destination = sw.CPU(4)
    assert tiled.project(t, TileSelection([[1, 3]]), destination).wait().to_list() == [2.0, 3.0, 6.0, 7.0]
    assert destination.version == 1
    other = sw.Tensor.compact(sw.CPU(8), (8,))
    with pytest.raises(ValueError, match="project needs a tensor backed by this TiledEvictable"):
        tiled.project(other, TileSelection([[0]]))


def test_project_records_for_gradients() -> None:
    tiled = tiled_over([float(i) for i in range(4)], [2], [2])
    t = sw.Tensor.compact(tiled, (4,))
    t.requires_grad = True
    compact = tiled.project(t, TileSelection([[1]])).wait()
    assert compact.grad_fn == "tiled.project"


def test_scatter_writes_a_fresh_tiled_tensor_replacing_or_adding() -> None:
    tiled = tiled_over([float(i) for i in range(8)], [4], [2])
    template = sw.Tensor.compact(tiled, (8,))
    compact = sw.Tensor.compact(sw.CPU.from_values([-1.0, -2.0]), (2,))
    added = tiled.scatter(compact, template, TileSelection([[1]]), reduction="add").wait()
    assert [added.carrier[i] for i in (2, 3)] == [1.0, 1.0]
    assert added.carrier.tile_state([0]).location == "invalid" and added.carrier is not tiled
    replaced = tiled.scatter(compact, template, TileSelection([[1]])).wait()
    assert [replaced.carrier[i] for i in (2, 3)] == [-1.0, -2.0]
    assert template.to_list() == [float(i) for i in range(8)], "the template is unchanged"
    with pytest.raises(ValueError, match="^reduction must be 'replace' or 'add', got \"max\"$"):
        tiled.scatter(compact, template, TileSelection([[1]]), reduction="max")
