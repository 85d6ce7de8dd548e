"""What the command line says of the batch and the optimizer: ``--input`` shapes for a model that takes plain
tensors, and the optimizer's keyword arguments. Importing this module imports no torch."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")
"""The dtypes an ``--input`` may name; floating ones follow the model's dtype under ``bf16``."""

_SHAPE = re.compile(r"[0-9]+(?:x[0-9]+)*")


@dataclass(frozen=True)
class InputSpec:
    """One tensor of a batch: its shape after the batch dimension and its dtype."""

    shape: tuple[int, ...]
    dtype: str = "float32"


def parse_inputs(text: str) -> tuple[InputSpec, ...]:
    """``3x224x224`` or ``128:int64``, several separated by commas, as ``InputSpec``\\ s; ``ValueError`` naming
    the part that is wrong."""
    specs = []
    for part in text.split(","):
        shape_text, _, dtype = part.strip().partition(":")
        if not _SHAPE.fullmatch(shape_text) or any(int(n) == 0 for n in shape_text.split("x")):
            raise ValueError(f"not a shape: {part.strip()!r} (sizes after the batch, as 3x224x224 or 128:int64)")
        if dtype and dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r} in {part.strip()!r} (one of {', '.join(DTYPES)})")
        specs.append(InputSpec(tuple(int(n) for n in shape_text.split("x")), dtype or "float32"))
    return tuple(specs)


def parse_optimizer_args(text: str) -> dict[str, Any]:
    """``lr=0.01, betas=(0.9, 0.95)``: keyword arguments with Python literal values, as a dict; ``ValueError``
    for anything else (names, calls and expressions are not evaluated)."""
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise ValueError(f"not keyword arguments: {text!r} (as lr=0.01,momentum=0.9)") from None
    assert isinstance(call, ast.Call)
    if call.args or any(k.arg is None for k in call.keywords):
        raise ValueError(f"not keyword arguments: {text!r} (as lr=0.01,momentum=0.9)")
    args = {}
    for keyword in call.keywords:
        try:
            args[str(keyword.arg)] = ast.literal_eval(keyword.value)
        except ValueError:
            raise ValueError(f"the value of {keyword.arg} is not a number, string or tuple: {text!r}") from None
    return args
