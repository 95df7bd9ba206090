"""DType identities."""

import pytest

import strideweave as sw


def test_dtypes_are_recognised_by_identity() -> None:
    assert sw.DType.Float32 is sw.DType.from_name("Float32")
    t = sw.Tensor.compact(sw.CPU(2, dtype=sw.DType.Int32), (2,))
    assert t.dtype() is sw.DType.Int32
    assert t.carrier.dtype() is sw.DType.Int32
    assert sw.DType.Float32 != sw.DType.Float64


def test_dtype_descriptors() -> None:
    f32 = sw.DType.Float32
    assert (f32.name, f32.bits, f32.is_simple, f32.is_category) == ("Float32", 32, True, False)
    assert f32.supertype is sw.DType.Floating
    assert f32.is_subtype_of(sw.DType.Any)
    assert not f32.is_subtype_of(sw.DType.Integer)
    assert f32.is_differentiable and not sw.DType.Int32.is_differentiable
    assert sw.DType.Any.supertype is None
    assert sw.DType.Floating.bits is None and sw.DType.Floating.is_category
    assert repr(sw.DType.Bool) == "DType.Bool" and str(sw.DType.Bool) == "Bool"


def test_registered_lists_the_builtins_once() -> None:
    names = [d.name for d in sw.DType.registered()]
    assert len(names) == len(set(names))
    for name in ["Any", "Floating", "Integer", "Bool", "Int8", "Int32", "Float32", "Float64"]:
        assert name in names
        assert getattr(sw.DType, name) is sw.DType.from_name(name)


def test_dtype_is_immutable() -> None:
    with pytest.raises(AttributeError):
        sw.DType.Float32.name = "x"  # type: ignore[misc]
