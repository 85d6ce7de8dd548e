"""The text of the multi-host view: one summary line per host, a line per job of several ranks (one job across
hosts where its ranks run on several), and one section per host.

Pure functions of a host's status, its latest snapshot, the time, the width and a palette, like ``gpu_text``: the
layout is tested without a terminal. A host that is down says so, why, and when the next attempt is; its old
numbers are not shown as if they were current.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from gputop.formatting import NA, fmt_age, fmt_bytes, fmt_number, fmt_percent, short_command
from gputop.jobs import Job, find_jobs, merge_jobs
from gputop.model import GPU_OK, GpuProcess, HostProcess, Snapshot
from gputop.remote.status import CONNECTING, LIVE, STALE, HostStatus
from gputop.ui.history import History
from gputop.ui.text.bars import fit, meter
from gputop.ui.text.gpu import HOT_C, Palette, compact_line, has_sm_activity
from gputop.ui.text.job import job_user

PROCESS_ROWS = 3
"""The busiest processes a section lists; the drill-down shows them all."""
STATE_CELLS = 11
UPDATED_CELLS = 7
MEMORY_CELLS = 15
"""``60.0GiB/80.0GiB``: two figures of ``fmt_bytes`` (7 cells at most) and the slash, never cut."""
TOP_PROCESS_MIN_WIDTH = 120


@dataclass(frozen=True)
class HostTotals:
    """One host's GPUs summed up for its summary line; None where no GPU could say."""

    gpus: int
    lost: int
    busy_percent: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    hottest_c: float | None
    power_w: float | None
    top: GpuProcess | None


def host_totals(snap: Snapshot) -> HostTotals:
    ok = [g for g in snap.gpus if g.state == GPU_OK]
    busy = [g.utilization_gpu_percent for g in ok if g.utilization_gpu_percent is not None]
    memory = [(g.memory_used_bytes, g.memory_total_bytes) for g in ok if g.memory_used_bytes is not None]
    memory = [(used, total) for used, total in memory if total]
    temperatures = [g.temperature_c for g in ok if g.temperature_c is not None]
    power = [g.power_w for g in ok if g.power_w is not None]
    top = busiest(snap.processes, 1)
    return HostTotals(
        gpus=len(snap.gpus),
        lost=len(snap.gpus) - len(ok),
        busy_percent=sum(busy) / len(busy) if busy else None,
        memory_used_bytes=sum(used for used, _ in memory) if memory else None,
        memory_total_bytes=sum(total for _, total in memory if total) if memory else None,
        hottest_c=max(temperatures) if temperatures else None,
        power_w=sum(power) if power else None,
        top=top[0] if top else None,
    )


def busiest(processes: Sequence[GpuProcess], count: int) -> list[GpuProcess]:
    """The ``count`` busiest process rows: highest %SM first, then most GPU memory; unknown values last."""
    ranked = sorted(processes, key=lambda p: (p.sm_percent is not None, p.sm_percent or 0, p.gpu_memory_bytes or 0))
    return ranked[::-1][:count]


def fmt_power(watts: float | None) -> str:
    if watts is None:
        return NA
    return f"{watts / 1000:.2f}kW" if watts >= 1000 else f"{watts:.0f}W"


def stream_notice(status: HostStatus) -> str:
    """What the host sent that is not on screen: ``3 bad lines skipped · 120 lines dropped (sent too fast)``; empty
    when everything it sent was a snapshot, read in time."""
    parts = []
    if status.bad_lines:
        parts.append(f"{status.bad_lines} bad line{'s' if status.bad_lines != 1 else ''} skipped")
    if status.dropped_lines:
        parts.append(f"{status.dropped_lines} line{'s' if status.dropped_lines != 1 else ''} dropped (sent too fast)")
    return " · ".join(parts)


def _append_notice(line: Text, status: HostStatus, width: int, p: Palette) -> None:
    """The stream notice at the end of a summary line, where it fits whole (the host's section always has it)."""
    notice = stream_notice(status)
    if notice and line.cell_len + 2 + len(notice) <= width:
        line.append("  ")
        line.append(notice, style=p.warn)


def state_style(state: str, p: Palette) -> Style:
    if state == LIVE:
        return p.fill
    if state in (STALE, CONNECTING):
        return p.warn if state == STALE else p.dim
    return p.crit


def _value(text: str, p: Palette, style: Style | None = None) -> Text:
    return Text(text, style=p.dim if text == NA else style or Style())


@dataclass(frozen=True)
class SummaryLayout:
    """The summary's column widths at one terminal width, the same for every host so the columns line up."""

    name: int
    bar: int
    temperature: bool
    power: bool
    top: bool


def summary_layout(names: Sequence[str], width: int) -> SummaryLayout:
    name = min(24, max([4, *map(len, names)]))
    fixed = 2 + name + 1 + STATE_CELLS + 5 + 2 + 5 + 2 + MEMORY_CELLS + 7 + 8 + 1 + UPDATED_CELLS
    temperature = power = True
    if width - fixed < 4:
        power = False
        fixed -= 8
    if width - fixed < 4:
        temperature = False
        fixed -= 7
    top = width >= TOP_PROCESS_MIN_WIDTH
    bar = max(3, min(12, width - fixed - (40 if top else 0)))
    return SummaryLayout(name, bar, temperature, power, top)


def summary_header(layout: SummaryLayout, width: int, p: Palette) -> Text:
    line = Text("  " + "HOST".ljust(layout.name) + " " + "STATE".ljust(STATE_CELLS) + " GPUS", style=p.label)
    line.append("  " + "BUSY".ljust(layout.bar + 5) + "  " + "GPU MEMORY".ljust(MEMORY_CELLS), style=p.label)
    if layout.temperature:
        line.append("  " + "TEMP".rjust(5), style=p.label)
    if layout.power:
        line.append("  " + "POWER".rjust(6), style=p.label)
    line.append(" " + "UPDATED".rjust(UPDATED_CELLS), style=p.label)
    if layout.top:
        line.append("  BUSIEST PROCESS", style=p.label)
    line.truncate(width)
    return line


def summary_line(
    name: str,
    status: HostStatus,
    snap: Snapshot | None,
    now: float,
    layout: SummaryLayout,
    width: int,
    p: Palette,
    selected: bool = False,
) -> Text:
    """One host on one line: its state and, while it has live numbers, its GPUs summed up."""
    line = Text("▶ " if selected else "  ", style=p.label)
    line.append(fit(name, layout.name), style=Style(bold=True))
    state = status.shown_state(now)
    line.append(" ")
    line.append(fit(state, STATE_CELLS), style=state_style(state, p))
    if state not in (LIVE, STALE) or snap is None:
        line.append("  ")
        line.append(down_note(status, now, short=True), style=p.dim if state == CONNECTING else p.crit)
        _append_notice(line, status, width, p)
        line.truncate(width, overflow="ellipsis")
        return line
    totals = host_totals(snap)
    line.append(f"{totals.gpus:>5}" if totals.lost == 0 else f"{totals.gpus:>3}!{totals.lost}", style=Style())
    busy = totals.busy_percent
    line.append("  ")
    line.append_text(meter(None if busy is None else busy / 100, layout.bar, p.fill, p.track))
    line.append_text(_value(fmt_percent(busy).rjust(5), p))
    memory = f"{fmt_bytes(totals.memory_used_bytes)}/{fmt_bytes(totals.memory_total_bytes)}"
    line.append("  ")
    line.append_text(_value(fit(memory if totals.memory_total_bytes else NA, MEMORY_CELLS), p))
    if layout.temperature:
        hot = totals.hottest_c is not None and totals.hottest_c >= HOT_C
        line.append("  ")
        line.append_text(_value(fmt_number(totals.hottest_c, "°C").rjust(5), p, p.crit if hot else None))
    if layout.power:
        line.append("  ")
        line.append_text(_value(fmt_power(totals.power_w).rjust(6), p))
    age = fmt_age(now - status.last_snapshot_at) if status.last_snapshot_at is not None else NA
    line.append(" ")
    line.append(age.rjust(UPDATED_CELLS), style=p.warn if state == STALE else p.dim)
    busiest = totals.top if layout.top else None
    if busiest is not None and busiest.host is None:
        # read from an exporter, which says why it names no user or command (names not exported)
        why = busiest.unavailable.get("command")
        line.append(f"  pid {busiest.pid} ", style=p.label)
        line.append(f"on GPU {busiest.gpu_index}" + (f" · {why}" if why else ""), style=p.dim)
    elif busiest is not None and busiest.host is not None:
        top = busiest.host
        line.append("  ")
        line.append(f"{top.user or NA} ", style=p.label)
        line.append(short_command(top.command) if top.command else top.name or NA)
    _append_notice(line, status, width, p)
    line.truncate(width, overflow="ellipsis")
    return line


def host_line(name: str, snap: Snapshot, width: int, p: Palette) -> Text:
    """The machine behind the host: its own name (where it differs from ``name``), driver, CPU and memory.

    Where they do not all fit, the load and then the driver are left out whole, so no figure is cut into another
    (``MEM 612GiB / 10…`` reads as 10)."""
    host, driver = snap.host, snap.driver
    own = Text(host.hostname + "  " if host.hostname != name else "", style=Style(bold=True))
    versions = Text()
    if driver.ok:
        versions.append("driver ", style=p.label).append(driver.driver_version or NA)
        versions.append("  CUDA ", style=p.label).append(driver.cuda_version or NA)
    cpu = Text().append("CPU ", style=p.label).append_text(_value(fmt_percent(host.cpu_percent), p))
    cpu.append(f" of {host.cpu_count}", style=p.label)
    cpu_load = cpu.copy()
    if host.load_average is not None:
        cpu_load.append("  load ", style=p.label).append(f"{host.load_average[0]:.2f}")
    memory = Text().append("MEM ", style=p.label)
    memory.append(f"{fmt_bytes(host.memory_used_bytes)} / {fmt_bytes(host.memory_total_bytes)}")
    if not host.cpu_count:  # an exporter that reports no machine (dcgm-exporter's series): nothing to say
        cpu = cpu_load = Text()
    if not host.memory_total_bytes:
        memory = Text()
    for parts in ((versions, cpu_load), (versions, cpu), (cpu,)):
        line = own.copy()
        for part in (*parts, memory):
            if part:
                line.append("   " if line.plain.strip() else "", style=p.label).append_text(part)
        if line.cell_len <= width:
            break
    return line


def process_header(width: int, p: Palette) -> Text:
    line = Text(f"{'GPU':>3} {'PID':>7}  {'USER':<8} {'GPU MEM':>8} {'%SM':>4} {'%CPU':>5}  COMMAND", style=p.label)
    line.truncate(width)
    return line


def process_line(proc: GpuProcess, width: int, p: Palette) -> Text:
    host = proc.host or HostProcess(proc.pid)
    line = Text(f"{proc.gpu_index:>3} {proc.pid:>7}  {fit(host.user or ('-' if proc.host is None else NA), 8)} ")
    line.append_text(_value(fmt_bytes(proc.gpu_memory_bytes).rjust(8), p))
    line.append(" ")
    line.append_text(_value(fmt_percent(proc.sm_percent).rjust(4), p))
    line.append(" ")
    line.append_text(_value(fmt_percent(host.cpu_percent).rjust(5), p))
    line.append("  ")
    if proc.host is None:  # read from an exporter
        line.append(proc.unavailable.get("command", NA), style=p.dim)
    else:
        line.append(short_command(host.command) if host.command else host.name or NA)
    line.truncate(width, overflow="ellipsis")
    return line


def section_lines(
    status: HostStatus,
    snap: Snapshot | None,
    history: History | None,
    now: float,
    width: int,
    p: Palette,
    process_rows: int = PROCESS_ROWS,
) -> list[Text]:
    """The inside of a host's section: its GPUs and busiest processes, or why there are none to show."""
    state = status.shown_state(now)
    if state not in (LIVE, STALE) or snap is None:
        return _down_lines(status, snap, now, width, p)
    lines = [host_line(status.name, snap, width, p)]
    if state == STALE and status.last_snapshot_at is not None:
        lines[0].append(f"   no update for {fmt_age(now - status.last_snapshot_at)}", style=p.warn)
    notice = stream_notice(status)
    if notice:
        lines.append(Text(notice, style=p.warn))
    if not snap.driver.ok:
        lines.append(Text(f"No GPU information: {snap.driver.reason or 'the NVIDIA driver did not answer'}", p.warn))
    cells = min(30, max(0, width - 130))
    for gpu in snap.gpus:
        trends = history.gpus.get(gpu.index) if history is not None else None
        spark = ""
        if trends is not None and cells:
            trend = trends.sm_percent if has_sm_activity(gpu) else trends.busy_percent
            spark = trend.sparkline(cells, snap.time)
        lines.append(compact_line(gpu, spark, width, p))
    if snap.driver.ok:
        shown = busiest(snap.processes, process_rows)
        if shown:
            lines.append(process_header(width, p))
            lines.extend(process_line(proc, width, p) for proc in shown)
            more = len(snap.processes) - len(shown)
            if more:
                lines.append(Text(f"… {more} more: ⏎ for all of them", style=p.dim))
        else:
            why = {g.unavailable.get("processes") for g in snap.gpus}  # a source that may not report them says so
            lines.append(Text(why.pop() or "no GPU processes" if len(why) == 1 else "no GPU processes", style=p.dim))
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def _retry_text(status: HostStatus, now: float) -> str:
    if status.state == CONNECTING or status.retry_at is None:
        return "connecting again"
    left = status.retry_at - now
    return f"retry in {fmt_age(left)}" if left >= 0.5 else "retrying"


def down_note(status: HostStatus, now: float, short: bool = False) -> str:
    """Why a host shows no live numbers and what happens next: ``connection refused · retry in 12s``.

    ``short``: the reason without its details in brackets (ssh's own words), for the summary line.
    """
    reason = status.reason.split(" (")[0] if short else status.reason
    if status.state == CONNECTING:
        return f"connecting again · last: {reason}" if reason else "connecting…"
    return " · ".join(part for part in (reason, _retry_text(status, now)) if part)


def _down_lines(status: HostStatus, snap: Snapshot | None, now: float, width: int, p: Palette) -> list[Text]:
    if status.state == CONNECTING and not status.failures:
        lines = [Text("connecting…", style=p.dim)]
    else:
        lines = [Text(status.reason or status.state, style=p.dim if status.state == CONNECTING else p.crit)]
        failed = f"{status.failures} failed attempt{'s' if status.failures != 1 else ''}"
        info = Text(f"{_retry_text(status, now)} · {failed} · down for {fmt_age(now - status.since)}")
        if status.last_snapshot_at is not None:
            info.append(f" · last update {fmt_age(now - status.last_snapshot_at)} ago")
            if snap is not None:
                info.append(f" from {snap.host.hostname}")
        info.stylize(p.dim)
        lines.append(info)
    notice = stream_notice(status)
    if notice:
        lines.append(Text(notice, style=p.warn))
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def jobs_across(hosts: Sequence[tuple[str, Snapshot | None]]) -> tuple[Job, ...]:
    """The jobs of several ranks among the hosts' latest snapshots, a job that runs on several hosts as one."""
    per_host = [(name, find_jobs(snap, host=name)) for name, snap in hosts if snap is not None]
    return tuple(job for job in merge_jobs(per_host) if len(job.ranks) > 1)


def job_lines(
    jobs: Sequence[Job], width: int, p: Palette, findings: Mapping[str, Sequence[str]] | None = None
) -> list[Text]:
    """A line per job of several ranks: its id and kind, how many ranks on which hosts (of how many the launcher
    started), the range of the ranks' step rates and data waits, and the advisor's findings on its hosts where the
    hosts say them (``findings``, by host: a fleet read from Prometheus); nothing without such a job."""
    lines = []
    for job in jobs:
        line = Text("JOB ", style=p.label)
        line.append(f"{job.id}  ", style=Style(bold=True))
        line.append(f"{job.kind}  user {job_user(job)}  ")
        seen = len(job.ranks)
        world = f" of {job.world_size}" if job.world_size and job.world_size != seen else ""
        counts = {host: sum(1 for r in job.ranks if r.host == host) for host in job.hosts}
        where = ", ".join(f"{host or 'here'} ({count})" for host, count in counts.items())
        line.append(f"{seen}{world} ranks on {where}")
        loaders = [r.view.loader for r in job.ranks if r.view.probe.ok and r.view.loader is not None]
        steps = [v.steps_per_s for v in loaders if v.steps_per_s is not None]
        waits = [v.data_wait_share for v in loaders if v.data_wait_share is not None]
        if steps:
            line.append("   steps/s ", style=p.label)
            line.append(_span(min(steps), max(steps), "{:.1f}"))
        if waits:
            line.append("   data wait ", style=p.label)
            line.append(_span(min(waits) * 100, max(waits) * 100, "{:.0f}") + "%")
        found = [f"{host} {text}" for host in job.hosts if host for text in (findings or {}).get(host, ())]
        if found:
            line.append("   findings ", style=p.label)
            line.append("; ".join(found), style=p.warn)
        line.truncate(width, overflow="ellipsis")
        lines.append(line)
    return lines


def _span(low: float, high: float, form: str) -> str:
    """``12.5`` or ``2–45``: one number where the ranks agree (as written), else the range."""
    a, b = form.format(low), form.format(high)
    return a if a == b else f"{a}–{b}"
