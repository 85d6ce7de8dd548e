"""How the delta decoder makes a model object from its values (``gputop.codec.delta``): without ``__init__``, as
an instance of the model class holding exactly those values, for every class a snapshot holds."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from gputop.codec.delta import _shape
from gputop.model import Snapshot

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


def snapshot_classes() -> list[type]:
    """Every dataclass a snapshot holds, through its fields' type hints."""
    found: list[type] = []
    waiting: list[object] = [Snapshot]
    while waiting:
        hint = waiting.pop()
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            if hint not in found:
                found.append(hint)
                waiting.extend(typing.get_type_hints(hint).values())
        else:
            waiting.extend(typing.get_args(hint))
    return found


@pytest.mark.parametrize("cls", snapshot_classes(), ids=lambda cls: cls.__name__)
def test_an_object_made_from_its_values_is_one_of_its_class_holding_them(cls: type) -> None:
    shape = _shape(cls)
    values = [object() for _ in shape.names]
    made = shape.build(list(values))
    assert type(made) is cls
    assert all(getattr(made, name) is value for name, value in zip(shape.names, values, strict=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, shape.names[0], 1)
