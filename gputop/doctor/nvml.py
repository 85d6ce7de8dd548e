"""The NVML side of ``gputop doctor``: one session of its own, timed, and the per-GPU questions it asks NVML
itself (persistence mode, MIG mode and instances). The questions the collector also asks (process lists, GPM) go
to the collector's public functions with this session's handles, so that doctor says what the dashboard shows.

Nothing here raises for an NVML error: each answer is a value or the reason there is none (``reason_of``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gputop.collect.nvml.errors import (
    NO_PYNVML,
    NVML_ERROR_NOT_FOUND,
    init_reason,
    lost_reason,
    nvml_code,
    reason_of,
    text,
)
from gputop.model import NOT_IN_DRIVER
from gputop.sanitize import printable

try:
    import pynvml
except ImportError:
    pynvml = None

T = TypeVar("T")


def ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def ask(fn: Callable[[], T]) -> tuple[T | None, str | None]:
    """``(value, None)`` or ``(None, reason)``."""
    try:
        return fn(), None
    except Exception as exc:  # NVMLError subclasses, AttributeError for a wrapper this pynvml lacks
        return None, reason_of(exc)


def pynvml_version() -> str | None:
    for name in ("nvidia-ml-py", "pynvml"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@dataclass
class Session:
    """doctor's own NVML session: whether it started, how long the first calls took, one handle per GPU."""

    started: bool = False
    reason: str | None = None
    init_ms: float | None = None
    count: int | None = None
    first_device_ms: float | None = None
    handles: list[Any] = field(default_factory=list)
    handle_reasons: list[str | None] = field(default_factory=list)

    @classmethod
    def open(cls) -> Session:
        session = cls()
        if pynvml is None:
            session.reason = NO_PYNVML
            return session
        started = time.perf_counter()
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError, or OSError from a broken library
            session.reason = init_reason(exc)
            return session
        session.init_ms = ms_since(started)
        session.started = True
        try:
            session.count = int(pynvml.nvmlDeviceGetCount())
        except Exception as exc:
            session.reason = f"NVML could not count the GPUs: {text(exc)}"
            return session
        for index in range(session.count):
            started = time.perf_counter()
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                pynvml.nvmlDeviceGetName(handle)  # the first call that needs the GPU itself, not only its handle
            except Exception as exc:
                session.handles.append(None)
                session.handle_reasons.append(lost_reason(exc)[1])
            else:
                session.handles.append(handle)
                session.handle_reasons.append(None)
            if index == 0:
                session.first_device_ms = ms_since(started)
        return session

    def close(self) -> None:
        if self.started:
            with contextlib.suppress(Exception):  # a session that misbehaved: nothing left to do
                pynvml.nvmlShutdown()
            self.started = False

    def system(self, name: str) -> tuple[Any, str | None]:
        fn = getattr(pynvml, name, None)
        if fn is None:
            return None, NOT_IN_DRIVER
        return ask(fn)

    def usable(self) -> list[tuple[int, Any]]:
        """``(index, handle)`` of every GPU whose handle could be fetched."""
        return [(i, h) for i, h in enumerate(self.handles) if h is not None]


def persistence(handle: Any) -> tuple[bool | None, str | None]:
    mode, reason = ask(lambda: pynvml.nvmlDeviceGetPersistenceMode(handle))
    return (None, reason) if mode is None else (mode == pynvml.NVML_FEATURE_ENABLED, None)


@dataclass(frozen=True)
class MigState:
    current: bool | None
    pending: bool | None
    instances: int | None
    reason: str | None
    profiles: tuple[str, ...] = ()
    """The instances' profiles (``3g.40gb``) by slot, where their names could be read."""


def mig(handle: Any) -> MigState:
    """MIG mode now and after the next reset, and the instances that exist when it is on."""
    modes, reason = ask(lambda: pynvml.nvmlDeviceGetMigMode(handle))
    if modes is None:
        return MigState(None, None, None, reason)
    current, pending = (bool(m == pynvml.NVML_DEVICE_MIG_ENABLE) for m in modes)
    if not current:
        return MigState(current, pending, None, None)
    most, reason = ask(lambda: int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)))
    if most is None:
        return MigState(current, pending, None, reason)
    found = 0
    profiles = []
    for slot in range(most):
        try:
            instance = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except Exception as exc:
            if nvml_code(exc) == NVML_ERROR_NOT_FOUND:
                continue  # an empty slot
            return MigState(current, pending, None, reason_of(exc))
        found += 1
        profile = _profile(instance)
        if profile is not None:
            profiles.append(profile)
    return MigState(current, pending, found, None, tuple(profiles))


def _profile(instance: Any) -> str | None:
    """A MIG device's profile from its name, as drivers give it: ``NVIDIA A100-SXM4-40GB MIG 3g.20gb``."""
    name, _ = ask(lambda: str(pynvml.nvmlDeviceGetName(instance)))
    return printable(name.rsplit(" MIG ", 1)[1].strip()) if name is not None and " MIG " in name else None
