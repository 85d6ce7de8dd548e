"""The directory ``gputop run`` gives the probe for its reports: whether it is private and usable."""

from __future__ import annotations

import os
import stat

from gputop.doctor.checks.words import plural
from gputop.doctor.result import LIMITED, OK, Check, Fact
from gputop.probe import channel


def probe_dir_check(directory: str, source: str) -> Check:
    title = "Probe report directory"
    facts: dict[str, Fact] = {"path": directory, "source": source, "exists": False}
    details: list[str] = [f"{directory} (from {source})"]
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        parent = os.path.dirname(directory.rstrip("/")) or "/"
        if os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK):
            return Check(
                "probe_dir",
                title,
                OK,
                f"{directory} does not exist yet: gputop run creates it (mode 700)",
                tuple(details),
                facts=facts,
            )
        return Check(
            "probe_dir",
            title,
            LIMITED,
            f"{directory} cannot be created: {parent} is not writable here",
            tuple(details),
            (
                f"set {channel.DIR_ENV} to a directory of your own (mode 700); "
                "gputop run falls back to a new one each run",
            ),
            facts,
        )
    except OSError as exc:
        info = None
        problem: str | None = f"unreadable: {exc.strerror}"
    facts["exists"] = True
    if info is not None:
        facts["mode"] = f"{stat.S_IMODE(info.st_mode):o}"
        facts["owner_uid"] = info.st_uid
        details.append(f"mode {stat.S_IMODE(info.st_mode):o}, owner uid {info.st_uid}")
        problem = channel.unsafe_reason(directory)
    if problem is None:
        reports = sum(channel.report_pid(n) is not None for n in _listdir(directory))
        facts["reports"] = reports
        return Check(
            "probe_dir",
            title,
            OK,
            f"{directory} is private and usable ({plural(reports, 'report')} in it now)",
            tuple(details),
            facts=facts,
        )
    facts["problem"] = problem
    fix = (
        f"chmod 700 {directory}"
        if "open to other users" in problem
        else f"remove {directory} (or set {channel.DIR_ENV})"
    )
    return Check(
        "probe_dir",
        title,
        LIMITED,
        f"{problem}: gputop run uses a new private directory each run instead, and the dashboard finds no reports "
        "of jobs started with the probe by hand",
        tuple(details),
        (fix,),
        facts,
    )


def _listdir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
