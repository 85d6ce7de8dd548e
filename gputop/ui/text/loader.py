"""A DataLoader's settings as the job would write them (``num_workers=4``), with those not in effect marked."""

from __future__ import annotations

from rich.text import Text

from gputop.model import LOADER_CONFIG_FIELDS, LoaderConfig, LoaderView
from gputop.ui.text.gpu import Palette

TORCH_DEFAULTS: dict[str, object] = {"drop_last": False, "timeout_s": 0.0, "pin_memory_device": ""}
"""Settings left out while they hold torch's default: they would only take room."""
NAMES = {"timeout_s": "timeout"}
"""The DataLoader's own argument names where the model's differ (units in the model's names)."""


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def loader_config_parts(loader: LoaderView, p: Palette) -> list[Text]:
    """One ``name=value`` part per setting: the value in effect, and where it differs from the request, the
    request beside it in the warning style (``pin_memory=False (asked True)``). Unset settings are left out; until
    the first iterator exists only the request is known, and the parts say so."""
    running = any(getattr(loader.effective, name) is not None for name in LOADER_CONFIG_FIELDS)
    overridden = set(loader.overridden)
    parts = []
    for name in LOADER_CONFIG_FIELDS:
        value = _value(loader.effective if running else loader.requested, loader.requested, name)
        if value is None or TORCH_DEFAULTS.get(name, object()) == value:
            continue
        part = Text(f"{NAMES.get(name, name)}={_shown(value)}", style=p.warn if name in overridden else "")
        if name in overridden:
            part.append(f" (asked {_shown(getattr(loader.requested, name))})", style=p.warn)
        parts.append(part)
    if not running:
        parts.append(Text("(as requested: no iterator yet)", style=p.dim))
    return parts


def _value(config: LoaderConfig, requested: LoaderConfig, name: str) -> object:
    value = getattr(config, name)
    return getattr(requested, name) if value is None else value
