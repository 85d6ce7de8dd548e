"""A JSON value as the numbers that differ from a layout of the same shape, packed in bytes (docs/recording.md,
"Rows of numbers").

Most rows of a recording change the same fields as the first row of changes after their whole snapshot, only to
other numbers: such a row is written as those numbers alone, each as its difference from the layout's number in
the same place. Decimal text costs deflate about 3.5 bits a digit and a field name's repetition about 3 bytes.

Packed, ``n`` numbers are ``n`` tag bytes, then each number's difference in order, little-endian: tag
``4 * kind + width``, kind 0 an int (its difference from the layout's, an int there, else 0), kind 1 + ``k``
(``k`` ≤ ``MAX_DECIMALS``) a float of ``k`` decimals (``round(value * 10**k)``'s difference from the layout's
number scaled the same way), width 0 to 3 the difference in 1, 2, 4 or 8 bytes; tag ``RAW`` a float as 8 bytes.
Read back, the numbers go into the layout's JSON value where its own were (``number_slots``). Everything read is
bounded: exactly the layout's count of numbers, no bytes left over.
"""

from __future__ import annotations

import math
import operator
import struct

MAX_DECIMALS = 6
RAW = 4 * (MAX_DECIMALS + 2)
"""The tag of a float packed as its 8 bytes."""
_CODES = bytes(range(256)).translate(bytes.maketrans(bytes(range(RAW + 1)), b"bhiq" * (MAX_DECIMALS + 2) + b"d"))
"""Each tag's ``struct`` format character (a tag above ``RAW`` is refused before it is looked up)."""
_TAGS = bytes(range(RAW + 1))
_WIDTHS = ((-(1 << 7), 1 << 7), (-(1 << 15), 1 << 15), (-(1 << 31), 1 << 31), (-(1 << 63), 1 << 63))
_SCALED = 1e15
"""The largest layout number scaled for a float's difference; beyond it the difference is from 0."""


def number_slots(value: object) -> list[tuple[dict[str, object] | list[object], str | int]]:
    """Where each number of a JSON value is, in order: the object or list that holds it, and its key or index."""
    slots: list[tuple[dict[str, object] | list[object], str | int]] = []

    def visit(holder: dict[str, object] | list[object]) -> None:
        for key, item in holder.items() if type(holder) is dict else enumerate(holder):
            if type(item) is int or type(item) is float:
                slots.append((holder, key))
            elif type(item) is dict or type(item) is list:
                visit(item)

    if type(value) is dict or type(value) is list:
        visit(value)
    return slots


def numbers_like(value: object, layout: object, out: list[int | float]) -> bool:
    """Whether ``value`` is ``layout`` but for its numbers (the same keys in the same order, the same lengths, the
    same strings, booleans and nulls); its numbers appended to ``out`` in order as it goes."""
    if type(value) is int or type(value) is float:
        if type(layout) is int or type(layout) is float:
            out.append(value)
            return True
        return False
    if type(value) is dict:
        if type(layout) is not dict or len(value) != len(layout):
            return False
        for (key, item), (other, inner) in zip(value.items(), layout.items(), strict=True):
            if key != other or not numbers_like(item, inner, out):
                return False
        return True
    if type(value) is list or type(value) is tuple:
        if type(layout) is not list or len(value) != len(layout):
            return False
        return all(numbers_like(item, inner, out) for item, inner in zip(value, layout, strict=True))
    return type(value) is type(layout) and value == layout


def _scaled(number: int | float, k: int) -> int:
    if type(number) is int:
        return number * 10**k
    return round(number * 10**k) if -_SCALED < number < _SCALED else 0


def pack(numbers: list[int | float], layout: list[int | float]) -> bytes | None:
    """``numbers`` (as many as ``layout``), each as its difference from ``layout``'s in its place; None where one
    is not finite or its difference is beyond 8 bytes."""
    tags = bytearray()
    diffs: list[int | float] = []
    for number, base in zip(numbers, layout, strict=True):
        if type(number) is int:
            kind = 0
            diff = number - (base if type(base) is int else 0)
        elif not math.isfinite(number):
            return None
        else:
            # Within range and not -0.0 (which a scaled int would read back as 0.0).
            decimal = -_SCALED < number < _SCALED and (number != 0 or math.copysign(1.0, number) > 0)
            for k in range(MAX_DECIMALS + 1 if decimal else 0):
                scaled = round(number * 10**k)
                if scaled / 10**k == number:
                    break
            else:
                tags.append(RAW)
                diffs.append(number)
                continue
            kind = 1 + k
            diff = scaled - _scaled(base, k)
        for width, (low, high) in enumerate(_WIDTHS):  # noqa: B007 (the width found is the one used)
            if low <= diff < high:
                break
        else:
            return None
        tags.append(4 * kind + width)
        diffs.append(diff)
    return bytes(tags) + struct.pack("<" + tags.translate(_CODES).decode(), *diffs)


def unpack(data: bytes, layout: list[int | float], cache: Bases | None = None) -> list[int | float]:
    """The numbers ``pack`` packed against ``layout``. Raises ``ValueError``, and nothing else, on anything else.
    ``cache`` keeps what the numbers read against this layout are added to and divided by (``Bases``)."""
    count = len(layout)
    tags = data[:count]
    if len(tags) < count or tags.translate(None, _TAGS):
        raise ValueError(f"not the tags of {count} numbers")
    form = "<" + tags.translate(_CODES).decode()
    if struct.calcsize(form) != len(data) - count:
        raise ValueError("not as many bytes as the numbers take")
    bases = Bases() if cache is None else cache
    offsets, divisors = bases.of(tags.translate(_KINDS), layout)
    return [
        (diff + offset) / divisor if divisor else diff + offset
        for diff, offset, divisor in zip(struct.unpack_from(form, data, count), offsets, divisors, strict=True)
    ]


_KINDS = bytes(range(256)).translate(bytes.maketrans(bytes(range(RAW + 1)), bytes(t >> 2 for t in range(RAW + 1))))
_DIVISORS = (0, *(10**k for k in range(MAX_DECIMALS + 1)), 1)
"""What a packed number of each kind (``tag >> 2``) is divided by, once added to its offset: 0 for an int (not
divided), ``10**k`` for a float of ``k`` decimals, 1 for a float packed whole."""


class Bases:
    """What each packed number read against one layout is added to, and divided by (0: an int, not divided), by
    the kinds (``tag >> 2``) of a row's numbers: those of the last row read, and for each kind met what a number of
    it is added to in every place (``offsets``), so that a row whose numbers are of other kinds in a few places
    finds them all made."""

    __slots__ = ("by_kind", "divisors", "kinds", "offsets")

    def __init__(self) -> None:
        self.kinds = b""
        self.offsets: list[int | float] = []
        self.divisors: list[int] = []
        self.by_kind: dict[int, list[int | float]] = {}

    def of(self, kinds: bytes, layout: list[int | float]) -> tuple[list[int | float], list[int]]:
        """The offsets and divisors of numbers of ``kinds`` (as many as ``layout``'s numbers) in order."""
        if kinds != self.kinds:
            by_kind = self.by_kind
            for kind in set(kinds).difference(by_kind):
                by_kind[kind] = offsets(kind, layout)
            self.offsets = list(map(operator.getitem, map(by_kind.__getitem__, kinds), range(len(kinds))))
            self.divisors = list(map(_DIVISORS.__getitem__, kinds))
            self.kinds = kinds
        return self.offsets, self.divisors


def offsets(kind: int, layout: list[int | float]) -> list[int | float]:
    """What a packed number of ``kind`` is added to in each place of ``layout``: the layout's number there (an int,
    else 0) for an int, that number scaled as the float was (``_scaled``) for a float of some decimals, and -0.0
    for a float packed whole (``x + -0.0`` is ``x`` for every float, -0.0 included; ``+ 0`` would make it 0.0)."""
    if kind == RAW >> 2:
        return [-0.0] * len(layout)
    if not kind:
        return [base if type(base) is int else 0 for base in layout]
    return [_scaled(base, kind - 1) for base in layout]
