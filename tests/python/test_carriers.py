"""The shipped carriers from Python: CPU, Generic, FileBacked, Evictable, TiledEvictable."""

import os

import pytest

import strideweave as sw
from conftest import cpu_tensor


def test_cpu_carrier() -> None:
    carrier = sw.CPU(3)
    assert [carrier.get_value(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert carrier.size() == 3 and carrier.dtype() is sw.DType.Float32 and carrier.version == 0
    carrier.set_value(2, 0.1)
    assert carrier.get_value(2) == 0.10000000149011612  # stored as binary32
    assert carrier.version == 1
    assert carrier.pointer() is not None
    assert carrier.supports_storage_dtype(sw.DType.Int32)
    assert not carrier.supports_storage_dtype(sw.DType.Float64)
    with pytest.raises(TypeError, match="supports_storage_dtype dtype must be a DType, got str"):
        carrier.supports_storage_dtype("Int32")
    with pytest.raises(ValueError, match="CPU does not support storage dtype Float64"):
        sw.CPU(3, dtype=sw.DType.Float64)
    with pytest.raises(ValueError, match="CPU size must be a non-negative int, got -1"):
        sw.CPU(-1)


def test_release_keeps_dtype_support_and_refuses_access() -> None:
    carrier = sw.CPU(2)
    carrier.release()
    carrier.release()  # idempotent
    assert carrier.is_released() and carrier.size() == 0 and carrier.pointer() is None
    assert carrier.supports_storage_dtype(sw.DType.Int32)
    with pytest.raises(RuntimeError, match="cannot write a slot: CPU is released"):
        carrier.set_value(0, 1.0)
    assert carrier.version == 0


def test_immutable_carriers_refuse_writes() -> None:
    carrier = sw.CPU(2, mutable=False)
    assert not carrier.is_mutable()
    with pytest.raises(RuntimeError):
        carrier.set_value(0, 1.0)
    assert carrier.version == 0 and carrier.get_value(0) == 0.0


def test_generic_carrier_normalizes_values() -> None:
    carrier = sw.Generic([1, 2], dtype=sw.DType.Int32)
    assert carrier.get_value(1) == 2 and type(carrier.get_value(1)) is int
    with pytest.raises(TypeError, match="^Generic values must be an iterable of bool, int or float, got int$"):
        sw.Generic(5, dtype=sw.DType.Float32)
    with pytest.raises(TypeError, match=r"^Generic values\[1\] must be a bool, int or float, got str$"):
        sw.Generic([1.0, "2"], dtype=sw.DType.Float32)
    with pytest.raises(TypeError, match=r"^CPU\.from_values values\[0\] must be a bool, int or float, got NoneType$"):
        sw.CPU.from_values([None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="dtype"):
        sw.Generic([1.0])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="value must be a bool, int or float, got str"):
        carrier.set_value(0, "x")
    assert carrier.version == 0


def test_file_backed_carrier_deletes_its_file_on_release() -> None:
    carrier = sw.FileBacked(dtype=sw.DType.Float32)
    path = carrier.path
    assert path is not None and os.path.exists(path)
    assert carrier.size() == 0
    carrier.release()
    assert not os.path.exists(path) and carrier.path is None
    with pytest.raises(ValueError, match="is not a plain file name"):
        sw.FileBacked("a/b", dtype=sw.DType.Float32)


def test_evictable_moves_its_contents_between_tiers() -> None:
    primary = sw.Generic([1.0, 2.0], dtype=sw.DType.Float32)
    secondary = sw.Generic([0.0, 0.0], dtype=sw.DType.Float32)
    hierarchy = sw.Evictable(primary, secondary)
    assert hierarchy.primary is primary and hierarchy.secondary is secondary
    assert primary.is_owned() and not hierarchy.is_evicted()
    with pytest.raises(RuntimeError, match="owned by another carrier"):
        primary.set_value(0, 5.0)
    hierarchy.set_value(0, 9.0)
    assert hierarchy.version == 1
    hierarchy.evict()
    assert hierarchy.is_evicted()
    with pytest.raises(RuntimeError, match="evicted; call promote\\(\\) first"):
        hierarchy.get_value(0)
    hierarchy.promote()
    assert (hierarchy.get_value(0), hierarchy.get_value(1), hierarchy.version) == (9.0, 2.0, 1)
    with pytest.raises(ValueError, match="two distinct tiers"):
        sw.Evictable(primary, primary)
    with pytest.raises(TypeError, match="Evictable secondary must be a Carrier instance, got int"):
        sw.Evictable(sw.CPU(2), 3)


def tiled() -> sw.TiledEvictable:
    """A 4x2 tensor's carrier (values 0..8) in two 4x1 tiles, all on the secondary tier."""
    secondary = sw.CPU.from_values([float(i) for i in range(8)])
    return sw.TiledEvictable(sw.CPU(0), secondary, [1, 2], [4, 1])


def test_tiled_evictable_runs_operations_tile_by_tile() -> None:
    carrier = tiled()
    x = sw.Tensor.compact(carrier, (4, 2))
    assert sw.reduce_sum(x).to_list() == [4.0, 6.0, 8.0, 10.0]
    state = carrier.tile_state([0, 1])
    assert (state.location, state.valid, state.dirty) == ("secondary", True, False)
    assert repr(state) == "TileState(location='secondary', valid=True, dirty=False)"
    with pytest.raises(TypeError, match=r"residency_policy must be a ResidencyPolicy or have a callable plan\(required, purpose\), got object"):
        sw.TiledEvictable(sw.CPU(0), sw.CPU(8), [1, 2], [4, 1], residency_policy=object())
    with pytest.raises(TypeError, match="tile_shape must be a tuple or list of ints, got str"):
        sw.TiledEvictable(sw.CPU(0), sw.CPU(8), [1, 2], "x")


def test_residency_facet_is_found_by_exact_type() -> None:
    carrier = tiled()
    facet = carrier.facet(sw.TiledResidencyFacet)
    assert isinstance(facet, sw.TiledResidencyFacet) and isinstance(facet, sw.CarrierFacet)
    assert carrier.require_facet(sw.TiledResidencyFacet) is facet
    assert facet.tiles_at("secondary") == ((0, 0), (0, 1))
    handle = facet.promote_async([(0, 1)])
    assert handle.wait() is None and handle.done
    assert facet.tile_state((0, 1)).location == "primary"
    assert facet.tiles_at("primary") == ((0, 1),)
    assert facet.dirty_tiles() == ()
    with pytest.raises(ValueError, match="tile location must be"):
        facet.tiles_at("nowhere")


def test_facet_lookup_rules() -> None:
    class OtherFacet(sw.CarrierFacet):
        pass

    carrier = tiled()
    assert carrier.facet(OtherFacet) is None
    with pytest.raises(NotImplementedError, match="^TiledEvictable carriers register no OtherFacet facet$"):
        carrier.require_facet(OtherFacet)
    with pytest.raises(TypeError, match="facet_type must be a CarrierFacet subclass, got int"):
        carrier.facet(int)
    with pytest.raises(TypeError, match="got CarrierFacet"):
        carrier.facet(sw.CarrierFacet)
    # A storage-only carrier queried for the residency facet: None, and require fails.
    plain = sw.FileBacked(dtype=sw.DType.Float32)
    assert plain.facet(sw.TiledResidencyFacet) is None
    with pytest.raises(NotImplementedError, match="register no TiledResidencyFacet facet"):
        plain.require_facet(sw.TiledResidencyFacet)


def test_carrier_objects_keep_their_identity_through_the_core() -> None:
    carrier = sw.CPU(4)
    t = sw.Tensor.compact(carrier, (4,))
    assert t.carrier is carrier
    assert t[1:3].carrier is carrier
    moved = sw.move(t, sw.CPU(4))
    assert moved.carrier is not carrier and moved.carrier is moved.carrier


def test_capabilities_list_the_executable_plans() -> None:
    capabilities = sw.CPU(1).operation_capabilities()
    assert capabilities == sw.CPU(2).operation_capabilities()
    assert all(isinstance(c, sw.OperationCapability) for c in capabilities)
    operations = {c.operation for c in capabilities}
    assert {"add", "matmul", "reduce_sum", "relu"} <= operations
    add = [c for c in capabilities if c.operation == "add"]
    assert str(add[0]).startswith("add with operands (")
    assert sw.FileBacked(dtype=sw.DType.Float32).operation_capabilities() == ()
