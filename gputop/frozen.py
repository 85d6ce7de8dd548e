"""``immutable``: ``@dataclass(frozen=True, slots=True)`` as gputop's data model needs it, with half the compiling.

``dataclasses`` writes the source of each method of each class and compiles it when the class is made: six
compilations for a frozen class, 174 for ``gputop.model``'s 29, most of the 26 ms its import took on every
command's path (20 ms with ``immutable``). ``immutable`` lets ``dataclasses`` make ``__init__`` and the frozen
``__setattr__`` and ``__delattr__`` as before, and gives each class ``__eq__``, ``__hash__`` and ``__repr__`` made
from closures, with no compilation, unless the class defines one itself. They behave as the generated ones do, in the
same order of fields:

- ``__eq__``: True when ``other`` is of the very same class and the fields compared (``field(compare=...)``) are
  equal in order, as tuples; ``NotImplemented`` for any other class.
- ``__hash__``: the hash of that tuple, as ``frozen=True, eq=True`` makes it.
- ``__repr__``: ``QualName(a=1, b='x')`` over the fields shown (``field(repr=...)``), ``...`` for a value that
  holds itself (``reprlib.recursive_repr``, as dataclasses does).
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: object) -> Callable[[T], T]:
        return lambda decorated: decorated


T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def immutable(cls: type[T]) -> type[T]:
    """``cls`` as ``@dataclass(frozen=True, slots=True)`` makes it (``dataclasses.fields``, ``replace``,
    ``asdict``, pickling and the slots included), its comparison, hash and repr made without compiling them."""
    made: Any = dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)
    fields = dataclasses.fields(made)
    compared = _key([f.name for f in fields if f.compare])
    hashed = _key([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = tuple((f"{f.name}=", operator.attrgetter(f.name)) for f in fields if f.repr)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(compared(self) == compared(other))
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        return f"{self.__class__.__qualname__}({', '.join(name + repr(get(self)) for name, get in shown)})"

    own = cls.__dict__
    # As dataclasses does: a method the class defines itself is kept, and so is a hash it defines (Python sets
    # ``__hash__`` to None in a class that defines ``__eq__`` alone: that is not one).
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    for method in (__eq__, __hash__, __repr__):
        name = method.__name__
        if name in own and (name != "__hash__" or explicit_hash):
            continue
        method.__qualname__ = f"{made.__qualname__}.{name}"
        setattr(made, name, method)
    return made


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields ``names`` of a value, as a tuple (``operator.attrgetter`` gives a lone field bare)."""
    if len(names) == 1:
        get = operator.attrgetter(names[0])
        return lambda obj: (get(obj),)
    if not names:
        return lambda obj: ()
    return operator.attrgetter(*names)
