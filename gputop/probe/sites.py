"""Where in the job's own code something happened: ``train.py:41``, the first frame outside torch and the probe.

Used for the line that built a DataLoader and for the line that made the host wait for the GPU. A frame is the
job's when its file lies outside torch's package and outside the probe (``gputop/probe`` in a checkout,
``gputop_probe`` as ``gputop run`` loads it); the file is named relative to the working directory where it lies
below it, else by its base name, as a job's author would write it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from types import FrameType

MAX_SITE_CHARS = 200
_PROBE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def library_dirs() -> tuple[str, ...]:
    """Directories whose frames are never the job's: the probe's own, and torch's where torch is imported."""
    dirs = [_PROBE_DIR]
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    if torch_file:
        dirs.append(os.path.dirname(os.path.abspath(torch_file)) + os.sep)
    return tuple(dirs)


def is_library(filename: str, library_dirs: tuple[str, ...]) -> bool:
    """Whether a frame of this file belongs to torch, the probe or the interpreter's machinery (``<frozen ...>``)."""
    if filename.startswith("<") and filename != "<stdin>" and not filename.startswith("<string"):
        return True
    return filename.startswith(library_dirs)


def name_site(filename: str, lineno: int, cwd: str | None = None) -> str:
    """``train.py:41``: the file relative to ``cwd`` when below it, else its base name; at most 200 characters."""
    cwd = os.getcwd() if cwd is None else cwd
    name = filename
    if os.path.isabs(filename):
        inside = filename.startswith(cwd.rstrip(os.sep) + os.sep)
        name = os.path.relpath(filename, cwd) if inside else os.path.basename(filename)
    site = f"{name}:{lineno}"
    return site if len(site) <= MAX_SITE_CHARS else "…" + site[-(MAX_SITE_CHARS - 1) :]


Frame = tuple[str, int, str]
"""``(filename, lineno, function)`` of one frame."""


def first_job_frame(frames: Iterable[Frame], dirs: tuple[str, ...] | None = None) -> int | None:
    """The index in ``frames`` (innermost first) of the first that is the job's own; None when none is."""
    dirs = library_dirs() if dirs is None else dirs
    for index, (filename, _, _) in enumerate(frames):
        if not is_library(filename, dirs):
            return index
    return None


def stack(frame: FrameType | None) -> list[Frame]:
    """``frame`` and its callers, innermost first."""
    frames = []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return frames


def job_site(frame: FrameType | None) -> str | None:
    """``train.py:41`` for the first of ``frame`` and its callers that is the job's, or None."""
    frames = stack(frame)
    found = first_job_frame(frames)
    return None if found is None else name_site(frames[found][0], frames[found][1])
