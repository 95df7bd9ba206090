"""Seed scenarios of the carrier extension not covered elsewhere in the Python suite."""

import pytest

import strideweave as sw

from authoring_helpers import F32, ListStorage, new_class

ALL = [sw.DType.Float32, sw.DType.Int32, sw.DType.Bool]


def test_derive_composite_dtype_support_from_configured_tiers() -> None:
    # Scenario: a TiledEvictable reports the identity-based intersection of the dtypes its
    # configured tiers support.
    f32_only = new_class("Float32OnlyTier")
    sw.register_carrier_definition(f32_only, sw.CarrierDefinition(ListStorage().provider()))
    narrow = sw.TiledEvictable(sw.CPU(0), f32_only(0, dtype=F32), [1], [2])
    assert [narrow.supports_storage_dtype(d) for d in ALL] == [True, False, False]
    wide = sw.TiledEvictable(sw.CPU(0), sw.CPU(0), [1], [2])
    assert [wide.supports_storage_dtype(d) for d in ALL] == [True, True, True]
    with pytest.raises(TypeError, match="Int32"):
        sw.TiledEvictable(sw.CPU(0, dtype=sw.DType.Int32), f32_only(0, dtype=F32), [1], [2])


@pytest.mark.parametrize("cls", [sw.CPU, sw.Generic, sw.FileBacked, sw.Evictable, sw.TiledEvictable, sw.BlockDeviceCarrier, sw.Metal])
def test_preserve_a_shipped_legacy_carrier(cls: type) -> None:
    # Scenario: the shipped classes keep their definition-free authority: they take no
    # definition, and their answers do not change when definitions are registered.
    before = sw.CPU(1).operation_capabilities()
    definition = sw.CarrierDefinition(ListStorage().provider())
    with pytest.raises(TypeError, match=f"^{cls.__name__} is a shipped carrier class; it cannot take a carrier definition$"):
        sw.register_carrier_definition(cls, definition)
    assert sw.CPU(1).operation_capabilities() == before and len(before) > 0
    assert sw.CPU(1).facet(sw.TiledResidencyFacet) is None
