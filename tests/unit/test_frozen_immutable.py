"""``gputop.frozen.immutable`` behaves as ``@dataclass(frozen=True, slots=True)`` does: compared side by side with
classes the standard decorator makes from the same body."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import field
from typing import Any

import pytest

from gputop.frozen import immutable

pytestmark = pytest.mark.fast  # pure


def body() -> dict[str, Any]:
    """A class body with every kind of field the model uses: plain, defaulted, made by a factory, left out of the
    comparison, of the repr, of the hash."""
    return {
        "__annotations__": {"a": "int", "b": "str", "c": "tuple[int, ...]", "d": "float", "e": "object", "f": "int"},
        "__doc__": "A value.",
        "b": "x",
        "c": field(default_factory=tuple),
        "d": field(default=0.5, compare=False),
        "e": field(default=None, repr=False),
        "f": field(default=0, hash=False),
    }


Ours: Any = immutable(type("Point", (), body()))
Theirs: Any = dataclasses.dataclass(frozen=True, slots=True)(type("Point", (), body()))
CASES = [(1,), (1, "y"), (2, "x", (1, 2)), (1, "x", (), 9.0), (1, "x", (), 0.5, [3]), (1, "x", (), 0.5, None, 7)]


@pytest.mark.parametrize("left", CASES)
@pytest.mark.parametrize("right", CASES)
def test_equality_and_hash_as_the_standard_decorator_makes_them(left, right):
    assert (Ours(*left) == Ours(*right)) is (Theirs(*left) == Theirs(*right))
    assert (Ours(*left) != Ours(*right)) is (Theirs(*left) != Theirs(*right))
    if Theirs(*left) == Theirs(*right) and all(not isinstance(v, list) for v in (*left, *right)):
        assert hash(Ours(*left)) == hash(Ours(*right))


def test_the_hash_is_the_standard_one_over_the_hashed_fields():
    assert hash(Ours(1, "x", (2,), 0.1, None, 5)) == hash(Theirs(1, "x", (2,), 0.1, None, 5))
    assert hash(Ours(1, "x", (2,), 0.1, None, 5)) == hash(Ours(1, "x", (2,), 0.9, None, 6))


def test_another_class_is_never_equal():
    assert Ours(1) != Theirs(1)
    assert Ours(1).__eq__(Theirs(1)) is NotImplemented
    assert Ours(1) != (1, "x", (), 0.5, None, 0)


@pytest.mark.parametrize("args", CASES)
def test_the_repr_is_the_standard_one(args):
    assert repr(Ours(*args)) == repr(Theirs(*args))


def test_values_inside_values_and_a_value_that_holds_itself():
    assert repr(Ours(1, "x", (Ours(2),))) == repr(Theirs(1, "x", (Theirs(2),)))
    ours: list[object] = []
    theirs: list[object] = []
    ours.append(Ours(1, "x", (ours,)))
    theirs.append(Theirs(1, "x", (theirs,)))
    assert repr(ours[0]) == repr(theirs[0]) == "Point(a=1, b='x', c=([...],), d=0.5, f=0)"


def test_frozen_slotted_and_a_dataclass():
    point = Ours(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.a = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.a
    assert not hasattr(point, "__dict__")
    assert Ours.__slots__ == Theirs.__slots__
    assert dataclasses.is_dataclass(point)
    assert [f.name for f in dataclasses.fields(point)] == ["a", "b", "c", "d", "e", "f"]
    assert dataclasses.replace(point, b="z") == Ours(1, "z")
    assert dataclasses.asdict(point) == dataclasses.asdict(Theirs(1))
    assert Ours.__match_args__ == Theirs.__match_args__
    assert Ours.__eq__.__qualname__ == "Point.__eq__"


@immutable
class Pair:
    """Importable by name, as pickle needs."""

    left: int
    right: tuple[int, ...] = ()


def test_it_pickles():
    made = Pair(1, (2, 3))
    assert pickle.loads(pickle.dumps(made)) == made


def test_methods_the_class_defines_itself_are_kept():
    def shown(self: object) -> str:
        return "mine"

    def same(self: object, other: object) -> bool:
        return True

    made: Any = immutable(type("Own", (), {**body(), "__repr__": shown, "__eq__": same}))
    assert repr(made(1)) == "mine"
    assert made(1) == made(2)
    assert hash(made(1)) == hash(Theirs(1))  # __eq__ alone: the hash over the fields is still made
    hashed: Any = immutable(type("Hashed", (), {**body(), "__hash__": lambda self: 7}))
    assert hash(hashed(1)) == 7
