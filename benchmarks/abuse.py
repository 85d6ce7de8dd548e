"""What the worst inputs found cost gputop after the fixes, and how many bad invocations end in a traceback.

- **Recordings:** `gputop report FILE` over a 412 KiB zlib bomb (412 MiB of snapshot inflated) and over a 16 KiB
  file whose `data` column is generated as a 999,999,999-byte `zeroblob` (the builders of
  `tests/security/test_recordings.py`); each in a fresh process, its peak RSS and CPU.
- **Remote streams:** the real `gputop --host` dashboard in tmux, fed through a fake ssh (the `GPUTOP_SSH` command)
  with one 80 MiB line without a newline, then a good snapshot; and with 18,000 valid snapshots in 5 s; the
  dashboard process's CPU and peak RSS (`VmHWM`) after 12 s.
- **Replay:** the real `gputop replay` in tmux over a recording of 320 rows, each within the limits of one
  snapshot, that decode to tens of MiB each (`wide_rows` of `tests/security/test_recordings.py`), `$` pressed
  (the end, and the five minutes of graphs before it); the replay's peak RSS (`VmHWM`) and CPU after 12 s.
- **Exporter:** scrape latency with 50 concurrent scrapers on loopback (`abuse_exporter.py`).
- **Command line:** every invocation in `tests/security/cli_abuse.py`, run as a real process; the count that
  print a traceback.

Targets (docs/security.md): under 100 MiB and 2 s of CPU for the worst recording and the worst stream, a replay
within its cache's 128 MiB of what it holds without one, exporter p99 under 100 ms, 0 tracebacks.

usage: python benchmarks/abuse.py [--only recordings|remote|replay|exporter|cli] [--code CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from abuse_exporter import exporter_p99_ms  # noqa: E402

from gputop.codec import snapshot_json  # noqa: E402
from gputop.formatting import fmt_length  # noqa: E402
from tests.security.cli_abuse import has_traceback, invocations, run_invocation  # noqa: E402
from tests.security.test_recordings import bombed, generated_zeroblob, wide_rows  # noqa: E402
from tests.ui import scenes  # noqa: E402

MIB = 1024 * 1024
zeroblob = generated_zeroblob(999_999_999)
WATCH_S = 12.0
CODE = ""
"""A checkout whose gputop the dashboards run (``--code``), else this one."""


# -- recordings ---------------------------------------------------------------------------------------------------


_MEASURED_CHILD = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
use = resource.getrusage(resource.RUSAGE_CHILDREN)
said = [line for line in done.stdout.splitlines() if line.startswith("Note:")] + done.stderr.splitlines()
print(json.dumps({"status": done.returncode, "peak_rss_mib": round(use.ru_maxrss / 1024, 1),
                  "cpu_s": round(use.ru_utime + use.ru_stime, 2), "said": said[:1]}))
"""


def measured(args: list[str]) -> dict:
    """Run ``args`` in a fresh process and return its exit status, peak RSS and CPU time."""
    done = subprocess.run([sys.executable, "-c", _MEASURED_CHILD, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def recordings() -> dict[str, dict]:
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("412 KiB zlib bomb", bombed), ("16 KiB file, 999999999-byte zeroblob", zeroblob)):
            path = make(Path(tmp) / "hostile.gputop")
            result = measured([sys.executable, "-m", "gputop", "report", str(path)])
            result["file_kib"] = round(path.stat().st_size / 1024, 1)
            results[name] = result
            path.unlink()
    return results


# -- remote streams ----------------------------------------------------------------------------------------------

_FAKE_SSH = """\
import sys, time
if "-G" in sys.argv:
    sys.exit(1)
out = sys.stdout.buffer
"""

ENDLESS_LINE = """
block = b"x" * {mib}
for _ in range(80):
    out.write(block)
out.write(b"\\n" + open({good!r}, "rb").read())
out.flush()
time.sleep(60)
"""

FLOOD = """
head, tail = open({template!r}, "rb").read().split(b"@TIME@")
start = time.monotonic()
for batch in range(50):  # 360 snapshots every 0.1 s: 18,000 in 5 s
    numbers = range(batch * 360, batch * 360 + 360)
    out.write(b"".join(head + str({t0} + n).encode() + tail for n in numbers))
    out.flush()
    time.sleep(max(0.0, start + (batch + 1) * 0.1 - time.monotonic()))
time.sleep(60)
"""


def _proc_cost(pid: int) -> tuple[float, float]:
    """CPU seconds (all threads) and peak RSS in MiB of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = Path(f"/proc/{pid}/status").read_text()
    hwm = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return cpu_s, int(hwm.split()[1]) / 1024


def in_tmux(
    tmp: Path, name: str, command: str, keys: tuple[str, ...] = (), until: str | None = None
) -> tuple[float, float, str]:
    """Run ``command`` in tmux at 160x48, press ``keys`` once the screen shows ``OPENED``, and return its CPU
    seconds, peak RSS in MiB and screen ``WATCH_S`` later, or once the screen shows ``until`` (at most
    ``UNTIL_S``). It runs in ``tmp``: ``python -m`` puts the working directory first on the path, before ``--code``."""
    tmux = ["tmux", "-S", str(tmp / f"tmux-{name}.sock")]
    env = f"TERM=xterm-256color PYTHONPATH={shlex.quote(CODE)} " if CODE else "TERM=xterm-256color "
    size = ["-x", "160", "-y", "48", "-c", str(tmp)]
    subprocess.run([*tmux, "new-session", "-d", "-s", "abuse", *size, f"exec env {env}{command}"], check=True)

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", "abuse"], capture_output=True, text=True).stdout

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + UNTIL_S
        while text not in screen() and time.monotonic() < deadline:
            time.sleep(0.5)

    try:
        pid = int(
            subprocess.run(
                [*tmux, "display", "-p", "-t", "abuse", "#{pane_pid}"], capture_output=True, text=True, check=True
            ).stdout
        )
        if keys:
            wait_for(OPENED)
            subprocess.run([*tmux, "send-keys", "-t", "abuse", *keys], check=True)
        if until is None:
            time.sleep(WATCH_S)
        else:
            wait_for(until)
        cpu_s, peak = _proc_cost(pid)
        shown = screen()
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
    return cpu_s, peak, shown


def watch_hosts_dashboard(tmp: Path, name: str, body: str) -> dict[str, float | str]:
    """The real ``gputop --host NAME`` in tmux over a fake ssh running ``body``; its cost after ``WATCH_S``."""
    script = tmp / f"ssh-{name}.py"
    script.write_text(_FAKE_SSH + textwrap.dedent(body))
    command = (
        f"GPUTOP_SSH={shlex.quote(f'{sys.executable} {script}')} "
        f"{shlex.quote(sys.executable)} -m gputop --host {name} -d 0.5"
    )
    cpu_s, peak, screen = in_tmux(tmp, name, command)
    state = next((line.split()[2] for line in screen.splitlines() if f" {name} " in line[:20]), "?")
    return {"cpu_s": round(cpu_s, 2), "peak_rss_mib": round(peak, 1), "state": state}


def remote() -> dict[str, dict]:
    if shutil.which("tmux") is None:
        raise SystemExit("benchmarks/abuse.py: the remote part needs tmux (apt-get install tmux)")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        good = tmp / "good"
        good.write_bytes(snapshot_json(scenes.no_driver()) + b"\n")
        marker = 1234567.25
        line = snapshot_json(replace(scenes.training_node(), time=marker))
        (tmp / "template").write_bytes(line.replace(str(marker).encode(), b"@TIME@") + b"\n")
        return {
            "80 MiB line": watch_hosts_dashboard(tmp, "endless", ENDLESS_LINE.format(mib=MIB, good=str(good))),
            "18,000 snapshots in 5 s": watch_hosts_dashboard(
                tmp, "flood", FLOOD.format(template=str(tmp / "template"), t0=scenes.T0)
            ),
        }


# -- replay -------------------------------------------------------------------------------------------------------

REPLAY_ROWS = 320
OPENED = "+0s / "
"""The replay's timeline at its first snapshot: it is open, and ``$`` can be pressed."""
UNTIL_S = 300.0


def replays() -> dict[str, dict]:
    if shutil.which("tmux") is None:
        raise SystemExit("benchmarks/abuse.py: the replay part needs tmux (apt-get install tmux)")
    results = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for mib in (2.0, 7.5):
            path = wide_rows(REPLAY_ROWS, mib)(tmp / f"wide-{mib:g}.gputop")
            command = f"{shlex.quote(sys.executable)} -m gputop replay {shlex.quote(str(path))} --paused"
            end = f"+{fmt_length((REPLAY_ROWS - 1) * scenes.TICK_S)} / "
            started = time.monotonic()
            cpu_s, peak, shown = in_tmux(tmp, f"replay-{mib:g}", command, keys=("$",), until=end)
            results[f"{REPLAY_ROWS} rows decoding to {4 * mib:g} MiB each, `$`"] = {
                "file_mib": round(path.stat().st_size / MIB, 1),
                "at_the_end": end in shown,
                "after_s": round(time.monotonic() - started, 1),
                "cpu_s": round(cpu_s, 2),
                "peak_rss_mib": round(peak, 1),
            }
            path.unlink()
    return results


# -- command line -------------------------------------------------------------------------------------------------


def cli() -> dict[str, int]:
    with tempfile.TemporaryDirectory() as name:
        cases = invocations(Path(name))
        ended = [run_invocation(case) for case in cases]
    return {
        "invocations": len(cases),
        "tracebacks": sum(has_traceback(done.stderr) for done in ended),
        "wrong status": sum(done.returncode != case.status for case, done in zip(cases, ended)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("recordings", "remote", "replay", "exporter", "cli"))
    parser.add_argument(
        "--code", type=Path, help="run the dashboards of this checkout instead (the code before a change, side by side)"
    )
    args = parser.parse_args()
    global CODE
    CODE = "" if args.code is None else str(args.code.resolve())
    parts = {
        "recordings": recordings,
        "remote": remote,
        "replay": replays,
        "exporter": lambda: exporter_p99_ms(concurrency=50, requests=2000),
        "cli": cli,
    }
    for name, run in parts.items():
        if args.only in (None, name):
            print(f"{name}: {json.dumps(run(), indent=2)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
