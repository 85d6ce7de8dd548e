"""The DataLoader workers in the training panel: their summed CPU against the usable cores, and one row each."""

from __future__ import annotations

from rich.text import Text

from gputop.formatting import NA, counted, fmt_bytes, fmt_duration, fmt_percent
from gputop.model import MEASURING, HostProcess, TrainingView, Worker
from gputop.ui.text.bars import meter
from gputop.ui.text.gpu import Palette
from gputop.ui.text.parts import LABEL_CELLS, flow, label
from gputop.ui.text.process_cells import MEASURING_MARK
from gputop.ui.text.step import fmt_ms

WORKER_ROWS_INLINE = 4
"""Worker rows in the dashboard's panel; the training screen shows them all."""
CPU_BAR_CELLS = 10
"""A worker's CPU bar: full at one core."""
TABLE_INDENT = 2
COLUMN_NAMES = {"cpu_percent": "CPU", "rss_bytes": "RSS", "uss_bytes": "USS", "status": "STATE", "age_s": "AGE"}
HOST_COLUMNS = frozenset({"status", "cpu_percent", "rss_bytes"})
"""Columns read from the worker's host process; the others are the worker's own."""


def _cores(view: TrainingView, of: str = " of ") -> str:
    """``3.1 of 16 cores``; ``…`` while new workers' CPU is still being measured (every epoch, without
    persistent workers), N/A when it cannot be read."""
    cores = counted(view.usable_cpu_count, "core")
    used = view.workers_cpu_percent
    if used is not None:
        return f"{used / 100:.1f}{of}{cores}"
    measuring = any(w.host.unavailable.get("cpu_percent") == MEASURING for w in view.workers)
    return f"{MEASURING_MARK if measuring else NA}{of}{cores}"


def compact_workers(view: TrainingView, p: Palette) -> Text:
    """``4 (fork) 3.1/16 cores`` for the summary line."""
    if not view.workers:
        return Text("none", style=p.dim)
    method = f" ({view.worker_start_method})" if view.worker_start_method else ""
    return Text(f"{len(view.workers)}{method} {_cores(view, '/')}")


def worker_lines(view: TrainingView, bar: int, width: int, p: Palette, rows: int) -> list[Text]:
    """``WORKERS`` with the summed CPU as a bar over the usable cores, a note when the workers were replaced by new
    processes (every epoch without ``persistent_workers``), and a table of at most ``rows`` workers."""
    head = label("WORKERS", p)
    if not view.workers:
        loader = view.loader if view.probe.ok else None
        none_running = loader is not None and loader.effective.num_workers == 0
        head.append("none", style=p.dim)
        head.append(": num_workers=0, the main process loads every batch" if none_running else " seen", style=p.dim)
        return [head]
    method = f" ({view.worker_start_method})" if view.worker_start_method else ""
    head.append(f"{len(view.workers)}{method}  ")
    used, usable = view.workers_cpu_percent, view.usable_cpu_count
    fraction = None if used is None or not usable else used / 100 / usable
    head.append_text(meter(fraction, bar, p.fill, p.track))
    head.append(f" {_cores(view)}")
    lines = flow(head, _batch_time(view, p), width)
    if view.workers_replaced:
        note = [
            Text(f"replaced by new processes {view.workers_replaced}×", style=p.warn),
            Text("(persistent_workers=False starts them every epoch)", style=p.dim),
        ]
        lines += flow(Text(" " * LABEL_CELLS), note, width)
    with_bar = width >= TABLE_INDENT + 60 + CPU_BAR_CELLS
    lines.append(_header(with_bar, p))
    for worker in sorted(view.workers, key=lambda w: (w.worker_id is None, w.worker_id, w.pid))[:rows]:
        lines.append(_row(worker, with_bar, p))
    if len(view.workers) > rows:
        lines.append(Text(f"{'':{TABLE_INDENT}}… {len(view.workers) - rows} more (l shows them all)", style=p.dim))
    missing = _reasons(view.workers)
    if missing:
        lines.append(Text(f"{'':{TABLE_INDENT}}N/A: {missing}", style=p.dim))
    return lines


def _batch_time(view: TrainingView, p: Palette) -> list[Text]:
    """``a worker makes a batch in 67.2 ms (95% within 300 ms)``: what each worker delivers, and its slow batches,
    timed inside the workers by the probe (the advisor's num_workers and prefetch_factor rest on them); nothing
    where they are not timed (``spawn`` workers, an older probe, no batch yet)."""
    loader = view.loader if view.probe.ok else None
    batch_s = None if loader is None else loader.worker_batch_s
    if batch_s is None or loader is None:
        return []
    slow_s = loader.worker_batch_p95_s
    slow = "" if slow_s is None else f" (95% within {fmt_ms(slow_s)} ms)"
    return [Text(f"a worker makes a batch in {fmt_ms(batch_s)} ms{slow}", style=p.dim)]


def _header(with_bar: bool, p: Palette) -> Text:
    cpu = f"{'CPU':<{CPU_BAR_CELLS + 7}}" if with_bar else f"{'CPU':>5} "
    head = f"{'':{TABLE_INDENT}}{'PID':>7}  {'ID':>3}  {'STATE':<10}  {cpu}{'RSS':>8}  {'USS':>8}  {'AGE':>8}"
    return Text(head, style=p.label)


def _cell(worker: Worker, name: str, text: str) -> str:
    source: Worker | HostProcess = worker.host if name in HOST_COLUMNS else worker
    if getattr(source, name) is not None:
        return text
    return MEASURING_MARK if source.unavailable.get(name) == MEASURING else NA


def _row(worker: Worker, with_bar: bool, p: Palette) -> Text:
    line = Text(f"{'':{TABLE_INDENT}}{worker.pid:>7}  ")
    known = worker.worker_id is not None
    line.append(f"{worker.worker_id if known else NA:>3}", style="" if known else p.dim)
    host = worker.host
    line.append(f"  {_cell(worker, 'status', host.status or ''):<10}  ")
    cpu = host.cpu_percent
    if with_bar:
        line.append_text(meter(None if cpu is None else cpu / 100, CPU_BAR_CELLS, p.fill, p.track))
        line.append(" ")
    line.append(f"{_cell(worker, 'cpu_percent', fmt_percent(cpu)):>5} ")
    line.append(f"{_cell(worker, 'rss_bytes', fmt_bytes(host.rss_bytes)):>8}  ")
    line.append(f"{_cell(worker, 'uss_bytes', fmt_bytes(worker.uss_bytes)):>8}  ")
    line.append(f"{_cell(worker, 'age_s', fmt_duration(worker.age_s)):>8}")
    return line


def _reasons(workers: tuple[Worker, ...]) -> str:
    """Why values in the table are N/A (``USS access denied``); measuring is left out, ``…`` says it already."""
    found: dict[str, str] = {}
    for worker in workers:
        host = ((name, reason) for name, reason in worker.host.unavailable.items() if name in HOST_COLUMNS)
        for name, reason in (*host, *worker.unavailable.items()):
            if reason != MEASURING and name in COLUMN_NAMES:
                found.setdefault(f"{COLUMN_NAMES[name]} {reason}", "")
    return ", ".join(found)
