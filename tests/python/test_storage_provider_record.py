"""StorageProvider as the original's frozen dataclass: fields, replace, asdict."""

import dataclasses
from typing import Any

import pytest

import strideweave as sw


def _provider() -> sw.StorageProvider:
    return sw.StorageProvider(
        supports_dtype=lambda carrier, dtype: True,
        physical_size=lambda carrier: 3,
        allocate=lambda carrier, slots: None,
        release=lambda carrier: None,
        read=lambda carrier, index: 0,
        write=lambda carrier, index, value: None,
    )


def test_fields_are_the_constructor_parameters_in_order() -> None:
    names = [field.name for field in dataclasses.fields(_provider())]
    assert names == [
        "supports_dtype",
        "physical_size",
        "allocate",
        "release",
        "read",
        "write",
        "elementwise_fallback",
    ]


def test_replace_changes_one_hook_and_keeps_the_others() -> None:
    provider = _provider()
    changed = dataclasses.replace(provider, physical_size=lambda carrier: 7)
    assert type(changed) is sw.StorageProvider
    assert changed.physical_size(None) == 7
    assert provider.physical_size(None) == 3
    assert changed.allocate is provider.allocate
    assert changed.read is provider.read
    assert changed.elementwise_fallback is False


def test_replace_goes_through_the_checking_constructor() -> None:
    bad: Any = 5
    with pytest.raises(TypeError, match="StorageProvider read must be callable, got int"):
        dataclasses.replace(_provider(), read=bad)


def test_asdict_lists_every_field_with_its_value() -> None:
    def allocate(carrier: Any, slots: int) -> None:
        return None

    provider = dataclasses.replace(_provider(), allocate=allocate)
    record = dataclasses.asdict(provider)
    assert list(record) == [field.name for field in dataclasses.fields(provider)]
    assert record["allocate"] is allocate
    assert record["elementwise_fallback"] is False
