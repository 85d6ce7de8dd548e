"""The installation check: whether another project's ``gputop`` shares this environment with gputop-ml.

This project is published as ``gputop-ml``. An unrelated project publishes ``gputop`` on the package index, and its
wheel installs the same top-level ``gputop`` package and the same ``gputop`` command: in one environment, whichever
was installed last has overwritten the other's files, and what runs is a mix. A distribution named ``gputop`` is
never this project's (it has always been ``gputop-ml``), so its metadata in the environment says so for certain.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from gputop.doctor.result import LIMITED, OK, Check, Fact

OURS = "gputop-ml"
OTHER = "gputop"
ADVICE = (
    f"keep the two apart: pip uninstall {OTHER} && pip install --force-reinstall {OURS}, or install gputop on its "
    f"own with pipx install {OURS} (or uv tool install {OURS})",
)


@dataclass(frozen=True)
class Installed:
    """What the environment's package metadata says: this project's version (None when gputop runs from a
    checkout), and the other project's version and where it is installed (None when it is not)."""

    ours: str | None
    other: str | None = None
    other_location: str | None = None


def read_installed() -> Installed:
    from importlib import metadata

    try:
        ours: str | None = metadata.version(OURS)
    except metadata.PackageNotFoundError:
        ours = None
    try:
        other = metadata.distribution(OTHER)
    except metadata.PackageNotFoundError:
        return Installed(ours)
    return Installed(ours, other.version, str(other.locate_file("")))


def installation_check(found: Installed) -> Check:
    title = "Installation"
    facts: dict[str, Fact] = {
        "distribution": OURS,
        "version": found.ours,
        "other_gputop": found.other,
        "other_location": found.other_location,
        "python": sys.executable,
    }
    ours = f"{OURS} {found.ours}" if found.ours else f"gputop from a checkout (no {OURS} metadata)"
    if found.other is None:
        return Check("installation", title, OK, f"{ours} in {sys.prefix}, with no other gputop beside it", facts=facts)
    return Check(
        "installation",
        title,
        LIMITED,
        f"another project's {OTHER} {found.other} is installed beside {ours} in {found.other_location}: both install "
        "the gputop package and command, so one has overwritten the other's files",
        advice=ADVICE,
        facts=facts,
    )
