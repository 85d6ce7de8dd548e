"""Bad invocations of gputop, as a clumsy user or a hostile script types them, and how each must end.

Shared by ``tests/security/test_cli_abuse.py`` (each must end cleanly) and ``benchmarks/abuse.py`` (the count
that end in a traceback, target 0). Every one is run as a real ``python -m gputop`` process without a display,
and must finish quickly: one line on stderr naming the problem and a non-zero status, never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 20.0
HUGE = "9" * 20
LONG = "x" * 100_000
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m"


@dataclass(frozen=True)
class Invocation:
    args: tuple[str, ...]
    status: int = 2
    """The exit status it must end with: 2 for bad arguments, 126/127 for a command that cannot run."""

    def name(self, files: Path) -> str:
        args = [a.replace(str(files), "FILES") for a in self.args]
        return " ".join(a if len(a) < 40 else a[:20] + "…" for a in args).encode("unicode_escape").decode()


def invocations(files: Path) -> list[Invocation]:
    """The bad invocations; ``files`` is a scratch directory for the files some of them name."""
    empty = files / "empty.gputop"
    text = files / "text.gputop"
    exists = files / "exists.gputop"
    script = files / "no-shebang.sh"
    not_executable = files / "not-executable"
    fifo = files / "hosts.fifo"
    big_hosts = files / "big-hosts"
    if not fifo.exists():
        empty.write_bytes(b"")
        text.write_text("hello\n")
        exists.write_text("keep me\n")
        script.write_text("echo hello\n")
        script.chmod(0o755)
        not_executable.write_text("#!/bin/sh\necho hi\n")
        not_executable.chmod(0o644)
        os.mkfifo(fifo)
        big_hosts.write_text("host-a\n" * 400_000)
    number_options = [
        ("-d",),
        ("stream", "-d"),
        ("stream", "-n"),
        ("record", "-o", str(files / "new.gputop"), "-d"),
        ("record", "-o", str(files / "new.gputop"), "--duration"),
        ("export", "-d"),
        ("report", "--pid", "1", "--seconds"),
        ("report", "--pid", "1", "--window"),
        ("run", "--window"),
        ("demo", "--seconds"),
        ("replay", str(text), "--speed"),
    ]
    every_bad_number = ["1e10", "1e308", "-1", "0", "nan", "inf", "١", "1_0", "", "0x10", HUGE]
    cases: list[Invocation] = []
    for option in number_options:
        tail = ("--", "true") if option[0] == "run" else ()
        # Every form against the two shared types (interval, seconds); the three that broke for the rest.
        shared = option in (("-d",), ("report", "--pid", "1", "--seconds"))
        for bad in every_bad_number if shared else ["1e308", "nan", "١"]:
            cases.append(Invocation((*option, bad, *tail)))
    # A window shorter than a second had report --pid and run --headless snapshot as fast as they could.
    for window in ("1e-300", "0.01", "0.5"):
        cases.append(Invocation(("report", "--pid", "1", "--window", window, "--seconds", "1")))
        cases.append(Invocation(("run", "--headless", "--window", window, "--", "true")))
    pid_forms = [HUGE, "١", "0", "-5", "+5", " 7", "abc", "4194305", ""]
    for pid in pid_forms:
        cases.append(Invocation(("--pid", pid, "--once")))
        cases.append(Invocation(("report", "--pid", pid)))
    cases += [
        Invocation(("--pid", "4194304", "--once")),  # the highest PID there can be, and none runs with it
        Invocation(("--bogus",)),
        Invocation(("stream", "--full", "--bogus")),
        Invocation(("report",)),
        Invocation(("report", str(files / "missing.gputop"))),
        Invocation(("report", str(files))),
        Invocation(("report", str(empty))),
        Invocation(("report", str(text))),
        Invocation(("report", "/dev/zero")),
        Invocation(("report", str(fifo))),
        Invocation(("report", str(text), "--seconds", "5")),
        Invocation(("replay", str(files / "missing.gputop"))),
        Invocation(("replay", "/dev/zero")),
        Invocation(("replay", str(text))),
        Invocation(("replay", str(text), "--at", "99:99")),
        Invocation(("record", "-o", str(exists), "--duration", "1")),
        Invocation(("record", "-o", str(files / "no-such-dir" / "r.gputop"), "--duration", "1")),
        Invocation(("record", "-o", str(files), "--duration", "1")),
        Invocation(("record", "-o", "/dev/null", "--duration", "1")),
        Invocation(("run",)),
        Invocation(("run", "--")),
        Invocation(("run", "--headless", "--", str(files / "no-such-program")), status=127),
        Invocation(("run", "--headless", "--", str(script)), status=126),
        Invocation(("run", "--headless", "--", str(not_executable)), status=126),
        Invocation(("run", "--headless", "--", str(files)), status=126),
        Invocation(("run", "--headless", "--record", str(exists), "--", "true")),
        Invocation(("--hosts-file", "/dev/zero")),
        Invocation(("--hosts-file", str(fifo))),
        Invocation(("--hosts-file", str(files))),
        Invocation(("--hosts-file", str(big_hosts))),
        Invocation(("--hosts-file", str(files / "missing"))),
        Invocation(("--host", "")),
        Invocation(("--host", LONG)),
        Invocation(("--host", f"evil{ESCAPES}")),
        Invocation(("--host", "-oProxyCommand=touch /tmp/gputop-pwned")),
        Invocation(("export", "--listen", "127.0.0.1:99999")),
        Invocation(("export", "--listen", "127.0.0.1:١٢٣")),
        Invocation(("export", "--listen", "nonsense")),
        Invocation(("export", "--listen", f"{LONG}:9400")),
        Invocation(("export", "--textfile", str(files / "no-such-dir"))),
        Invocation(("export", "--textfile", str(text))),
        Invocation(("--once", f"{ESCAPES}")),
        Invocation(("doctor", "--bogus")),
        Invocation(("doctor", "extra")),
        Invocation(("doctor", "--json=yes")),
        Invocation(("doctor", f"{ESCAPES}")),
        Invocation(("estimate", ESCAPES)),
        Invocation(("estimate", LONG)),
        Invocation(("estimate", "models:net", "--memory", f"{HUGE}GiB")),
        Invocation(("estimate", "models:net", "--batch", HUGE)),
        Invocation(("estimate", "models:net", "--margin", "100")),
        Invocation(("estimate", "models:net", "--input", f"{HUGE}x{HUGE}:{ESCAPES}")),
    ]
    return cases


def run_invocation(invocation: Invocation, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run it as a user would, with no terminal: stdin closed, output captured, bounded in time (one that runs
    past ``TIMEOUT_S`` is killed and ends with status None and what it had written)."""
    args = [sys.executable, "-m", "gputop", *invocation.args]
    try:
        return subprocess.run(
            args, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return subprocess.CompletedProcess(args, None, "", f"{stderr}[still running after {TIMEOUT_S:g} s]")


def has_traceback(stderr: str) -> bool:
    return "Traceback (most recent call last)" in stderr
