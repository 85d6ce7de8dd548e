"""The model's factory, ``package.module:function``, imported from where the user expects it.

Python looks for a module along ``sys.path``: the directories in ``PYTHONPATH``, then the installed packages. The
current directory is searched as well (first, as ``python -m`` would) only when the model's module is there and
only its owner and root can change it. A directory others can write to is never searched: another user who plants
``models.py`` (or ``torch.py``) in ``/tmp`` or a group share would have it run as whoever runs the estimate,
root included. The module is then imported from ``sys.path`` alone, or, when it is only there, refused with a
line that names the directory and how to name it on purpose (``PYTHONPATH``). Importing this module imports no
torch.
"""

from __future__ import annotations

import grp
import importlib
import os
import pwd
import re
import shlex
import stat
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from typing import Any

from gputop.estimate.errors import EstimateError, users_code

_FACTORY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)")


def load_factory(spec: str) -> Callable[[], Any]:
    """The function ``package.module:function`` names; ``EstimateError`` when the name is malformed, the module
    is only in a current directory others can write to, cannot be imported or has no such function."""
    match = _FACTORY.fullmatch(spec)
    if match is None:
        raise EstimateError(f"a model factory is package.module:function, got {spec!r}")
    module_name, function_name = match.groups()
    search_path_for(module_name.partition(".")[0])
    with users_code(lambda _: f"cannot import {module_name}: "):
        module = importlib.import_module(module_name)
        factory = getattr(module, function_name, None)  # a module's __getattr__ is its code too
    if not callable(factory):
        raise EstimateError(f"{module_name} has no function {function_name}")
    return factory


def search_path_for(top: str) -> None:
    """Make ``sys.path`` ready to import the package ``top``: the current directory first when ``top`` is there
    and the directory is safe; otherwise never the current directory (``python -m`` put it there). Raises
    ``EstimateError`` when ``top`` is only in an unsafe current directory that ``PYTHONPATH`` does not name."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the current directory was removed: nothing to import from it
        return
    if here in _pythonpath():
        return  # named by the user: imported from as Python would
    implicit = [entry for entry in sys.path if _resolved(entry) == here]
    elsewhere = [entry for entry in sys.path if _resolved(entry) != here]
    is_here = PathFinder.find_spec(top, [here]) is not None
    if not (is_here or implicit):
        return
    unsafe = unsafe_because(here)
    if unsafe is None:
        if is_here and not implicit:
            sys.path.insert(0, here)
        return
    sys.path[:] = elsewhere
    if is_here and PathFinder.find_spec(top, elsewhere) is None:
        raise EstimateError(
            f"not importing {top} from the current directory {here}: {unsafe}; if you trust what is in it, "
            f"name it: PYTHONPATH={shlex.quote(here)}"
        )


def unsafe_because(directory: str) -> str | None:
    """Why a module in ``directory`` (a real path) could be someone else's code, or None when only its owner (this
    user or root) can change what is in it: it belongs to another user or others can write to it, or a directory
    above it belongs to another user or lets others rename it away (writable by others without the sticky bit,
    which keeps each entry to its owner)."""
    try:
        return _unsafe_because(directory)
    except OSError as exc:
        return f"who can change it cannot be read: {exc.strerror}"


def _unsafe_because(directory: str) -> str | None:
    me = os.geteuid()
    info = os.stat(directory)
    if info.st_uid not in (me, 0):
        return f"it belongs to {_user(info.st_uid)}"
    if _writable_by_others(info):
        return f"{_who_writes(info)} can write to it (mode {stat.S_IMODE(info.st_mode):o})"
    parent = os.path.dirname(directory)
    while parent != directory:
        info = os.stat(parent)
        if info.st_uid not in (me, 0):
            return f"{parent} above it belongs to {_user(info.st_uid)}"
        if _writable_by_others(info) and not info.st_mode & stat.S_ISVTX:
            return f"{_who_writes(info)} can write to {parent} above it (mode {stat.S_IMODE(info.st_mode):o})"
        directory, parent = parent, os.path.dirname(parent)
    return None


def _writable_by_others(info: os.stat_result) -> bool:
    """Writable by every user, or by a group that is not the owner's own (a user-private group, whose only member
    is the owner, as ``umask 002`` systems give every user, is the owner)."""
    if info.st_mode & stat.S_IWOTH:
        return True
    return bool(info.st_mode & stat.S_IWGRP) and not _private_group(info.st_gid, info.st_uid)


def _private_group(gid: int, uid: int) -> bool:
    try:
        owner = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return owner.pw_gid == gid and set(group.gr_mem) <= {owner.pw_name}


def _who_writes(info: os.stat_result) -> str:
    if info.st_mode & stat.S_IWOTH:
        return "every user"
    try:
        return f"group {grp.getgrgid(info.st_gid).gr_name}"
    except KeyError:
        return f"group {info.st_gid}"


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _pythonpath() -> set[str]:
    """The directories ``PYTHONPATH`` names (none when Python was told to ignore the environment)."""
    if sys.flags.ignore_environment:
        return set()
    return {_resolved(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry}


def _resolved(entry: str) -> str:
    return os.path.realpath(entry or os.curdir)
