"""The text of the job view: one row per rank of a job, with the figures that tell the ranks apart.

Pure functions of a ``Job`` (gputop/jobs.py), the snapshot it comes from and a palette, so the table is tested
without a terminal. An unknown value reads ``N/A``; a GPU figure of a rank on no GPU reads ``-``. Host names come
from other machines and are made printable before they are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import fmean

from rich.style import Style
from rich.text import Text

from gputop.formatting import NA, fmt_bytes, fmt_percent
from gputop.jobs import JOB_TORCHRUN, Job, JobRank
from gputop.model import PHASES, PROBE_AWAITED, PROBE_NONE, Phase, Snapshot
from gputop.sanitize import printable
from gputop.ui.process_rows import Column
from gputop.ui.targets.job import StragglerMark
from gputop.ui.text.gpu import Palette
from gputop.ui.text.process_cells import NOT_ON_GPU
from gputop.ui.text.step import PHASE_NAMES, fmt_ms, step_of
from gputop.ui.text.training import wait_style

CELL_PADDING = 1
"""Blank cells on each side of a column (the table widget's padding)."""
STRAGGLER_MARK = "◀"
STRAGGLER_NOTE = "straggler"
HOST_CELLS = 14
PHASE_PREFIX = "phase_"
LONGER_MARK = "▲"
"""Marks the straggler's phase that is longest against the other ranks' median: the phase that holds them back."""
PHASE_CELLS = 6
"""``▲1,240``: a phase's milliseconds with the straggler's mark."""


COLUMNS: tuple[Column, ...] = (
    Column("rank", "RANK", 6),
    Column("host", "HOST", HOST_CELLS),
    Column("pid", "PID", 7, right=True),
    Column("gpu", "GPU", 3, right=True),
    Column("steps", "STEPS/S", 7, right=True),
    Column("data_wait", "DATA WAIT", 9, right=True),
    Column("sync_wait", "SYNC WAIT", 9, right=True),
    *(Column(PHASE_PREFIX + phase, PHASE_NAMES[phase].short.upper(), PHASE_CELLS, right=True) for phase in PHASES),
    Column("busy", "BUSY", 4, right=True),
    Column("sm", "SM", 4, right=True),
    Column("gpu_mem", "GPU MEM", 7, right=True),
    Column("workers", "WORKERS", 7, right=True),
    Column("workers_cpu", "WORKERS CPU", 11, right=True),
    Column("note", "", len(STRAGGLER_NOTE)),
)
FOLD_ORDER = (
    "note",
    "workers",
    "workers_cpu",
    "sm",
    "gpu_mem",
    "busy",
    "steps",
    "gpu",
    *(PHASE_PREFIX + phase for phase in ("data", "collective", "h2d", "other", "optimizer", "backward", "forward")),
)
"""The columns a narrow table leaves out, least important first; rank, host, PID and the two waits always stay.
Of the phases, data and collective go first (DATA WAIT and SYNC WAIT say much the same as shares), and the
straggler's longer phase never goes."""


@dataclass(frozen=True)
class RankRow:
    """One rank's figures at the latest snapshot; None where unknown. Shares are 0-1, percents 0-100."""

    pid: int
    rank: int | None = None
    host: str | None = None
    gpus: tuple[int, ...] = ()
    steps_per_s: float | None = None
    data_wait_share: float | None = None
    sync_wait_share: float | None = None
    gpu_busy_percent: float | None = None
    sm_activity_percent: float | None = None
    gpu_memory_bytes: int | None = None
    workers: int = 0
    workers_cpu_percent: float | None = None
    straggler: bool = False
    phases_s: tuple[tuple[Phase, float], ...] = ()
    """The mean seconds of each phase of its steps (probe), as ``StepAnatomy.phases_s``."""
    longer_phase: Phase | None = None
    """The phase the straggler finding names: its longest against the other ranks' median."""

    def phase_s(self, phase: Phase) -> float | None:
        return next((seconds for name, seconds in self.phases_s if name == phase), None)


def job_user(job: Job) -> str:
    """Whom the job's ranks run as, printable (a remote host's or a recording's words), N/A where unknown."""
    return NA if job.user is None else printable(job.user)


def distributed(job: Job) -> bool:
    """Whether the ranks synchronise with each other, so that waiting for the others means something."""
    return len(job.ranks) > 1 or (job.world_size or 0) > 1


def sync_wait(busy_share: float | None, data_wait_share: float | None) -> float | None:
    """The share of a step the main thread is off the CPU outside the data wait: in data-parallel training, the
    wait inside the collective (NCCL or gloo) for the other ranks. Unknown unless both shares are known."""
    if busy_share is None or data_wait_share is None:
        return None
    return max(0.0, 1.0 - busy_share - data_wait_share)


def rank_row(rank: JobRank, snap: Snapshot, straggler: bool = False) -> RankRow:
    view = rank.view
    loader = view.loader if view.probe.ok else None
    wait = None if loader is None else loader.data_wait_share
    rows = [p for p in snap.processes if p.pid == rank.pid]
    gpus = tuple(sorted({p.gpu_index for p in rows}))
    by_index = {g.index: g for g in snap.gpus}
    busy = [v for i in gpus if i in by_index and (v := by_index[i].utilization_gpu_percent) is not None]
    sm = [v for i in gpus if i in by_index and (v := by_index[i].sm_activity_percent) is not None]
    memory = [p.gpu_memory_bytes for p in rows if p.gpu_memory_bytes is not None]
    step = step_of(view)
    return RankRow(
        pid=rank.pid,
        rank=rank.rank,
        host=None if rank.host is None else printable(rank.host),
        gpus=gpus,
        steps_per_s=None if loader is None else loader.steps_per_s,
        data_wait_share=wait,
        sync_wait_share=sync_wait(view.main_thread.busy_share, wait),
        gpu_busy_percent=fmean(busy) if busy else None,
        sm_activity_percent=fmean(sm) if sm else None,
        gpu_memory_bytes=sum(memory) if memory else None,
        workers=len(view.workers),
        workers_cpu_percent=view.workers_cpu_percent,
        straggler=straggler,
        phases_s=() if step is None else step.phases_s,
    )


def rank_rows(job: Job, snap: Snapshot, straggler: StragglerMark | None = None) -> list[RankRow]:
    """The job's ranks in its order (by rank), the ``straggler``'s marked with the phase its finding names (none
    where the finding was measured without the step, or the rank reports no such phase)."""
    rows = [rank_row(r, snap, straggler is not None and r.pid == straggler.pid) for r in job.ranks]
    phase = None if straggler is None else straggler.phase
    if phase is None:
        return rows
    return [replace(r, longer_phase=phase) if r.straggler and r.phase_s(phase) is not None else r for r in rows]


def table_width(columns: Sequence[Column]) -> int:
    return sum(c.width + 2 * CELL_PADDING for c in columns)


def job_columns(job: Job, rows: Sequence[RankRow], width: int) -> tuple[Column, ...]:
    """The columns that fit in ``width`` cells: HOST only when some rank runs on a named host, SYNC WAIT only for
    a distributed job, the straggler's note only while there is one; then ``FOLD_ORDER`` until the rest fits."""
    left_out = {PHASE_PREFIX + phase for phase in PHASES if all(r.phase_s(phase) is None for r in rows)}
    if not any(r.host for r in rows):
        left_out.add("host")
    if not distributed(job):
        left_out.add("sync_wait")
    if not any(r.straggler for r in rows):
        left_out.add("note")
    columns = [c for c in COLUMNS if c.key not in left_out]
    kept = {PHASE_PREFIX + r.longer_phase for r in rows if r.longer_phase is not None}
    for key in FOLD_ORDER:
        if key in kept:
            continue
        if table_width(columns) <= width:
            break
        columns = [c for c in columns if c.key != key]
    return tuple(columns)


def _rate(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def _share(value: float | None) -> str:
    return NA if value is None else fmt_percent(value * 100)


def _gpu_value(row: RankRow, value: str | None) -> str:
    return value if value is not None else NA if row.gpus else NOT_ON_GPU


def cell_text(row: RankRow, key: str) -> str:
    """The words in column ``key`` for ``row``."""
    if key == "rank":
        rank = "?" if row.rank is None else str(row.rank)
        return f"{rank} {STRAGGLER_MARK}" if row.straggler else rank
    if key == "host":
        return row.host or "local"
    if key == "pid":
        return str(row.pid)
    if key == "gpu":
        return ",".join(map(str, row.gpus)) or NOT_ON_GPU
    if key == "steps":
        return NA if row.steps_per_s is None else _rate(row.steps_per_s)
    if key == "data_wait":
        return _share(row.data_wait_share)
    if key == "sync_wait":
        return _share(row.sync_wait_share)
    if key == "busy":
        return _gpu_value(row, None if row.gpu_busy_percent is None else fmt_percent(row.gpu_busy_percent))
    if key == "sm":
        return _gpu_value(row, None if row.sm_activity_percent is None else fmt_percent(row.sm_activity_percent))
    if key == "gpu_mem":
        return _gpu_value(row, None if row.gpu_memory_bytes is None else fmt_bytes(row.gpu_memory_bytes))
    if key == "workers":
        return str(row.workers)
    if key == "workers_cpu":
        return NA if row.workers_cpu_percent is None else fmt_percent(row.workers_cpu_percent)
    if key == "note":
        return STRAGGLER_NOTE if row.straggler else ""
    if key.startswith(PHASE_PREFIX):
        phase = next(p for p in PHASES if PHASE_PREFIX + p == key)
        seconds = row.phase_s(phase)
        mark = LONGER_MARK if phase == row.longer_phase else ""
        return NA if seconds is None else mark + fmt_ms(seconds)
    raise KeyError(key)


def rank_cells(row: RankRow, columns: Sequence[Column], p: Palette) -> tuple[Text, ...]:
    """The cells of ``row``: placeholders dimmed, the data wait in the advisor's colours, the straggler's row in
    the warning style, its rank marked so it reads without colour too."""
    row_style = p.warn + Style(bold=True) if row.straggler else Style()
    cells = []
    for column in columns:
        text = cell_text(row, column.key)
        style = row_style
        if text in (NA, NOT_ON_GPU):
            style = p.dim
        elif column.key == "data_wait" and not row.straggler:
            style = wait_style(row.data_wait_share, p) if (row.data_wait_share or 0) > 0 else Style()
        elif row.longer_phase is not None and column.key == PHASE_PREFIX + row.longer_phase:
            style = row_style + Style(reverse=True)
        cells.append(
            Text(text, style=style, justify="right" if column.right else "left", no_wrap=True, overflow="ellipsis")
        )
    return tuple(cells)


def job_title(job: Job, rows: Sequence[RankRow]) -> str:
    """``Job 1a2b3c4d of alice · torchrun · 4 ranks of 4 · straggler: rank 2 (PID 7002)``: whose it is, since only
    one user's ranks make a job."""
    ranks = f"{len(job.ranks)} rank" + ("s" if len(job.ranks) != 1 else "")
    if job.world_size is not None and job.world_size != len(job.ranks):
        ranks += f" of {job.world_size}"
    owner = f"Job {job.id} of {job_user(job)}" if job.user is not None else f"Job {job.id} · user {NA}"
    parts = [owner, job.kind, ranks]
    hosts = [h for h in job.hosts if h]
    if len(hosts) > 1:
        parts.append(f"{len(hosts)} hosts")
    straggler = next((r for r in rows if r.straggler), None)
    if straggler is not None:
        rank = "?" if straggler.rank is None else straggler.rank
        longer = f", longer in {PHASE_NAMES[straggler.longer_phase].full}" if straggler.longer_phase else ""
        parts.append(f"straggler: rank {rank} (PID {straggler.pid}{longer})")
    if any(r.phases_s for r in rows):
        parts.append("phases in ms per step")
    return " " + " · ".join(parts) + " "


def probe_hint(job: Job) -> str:
    """What a job view needs said when ranks have no probe report, so their step rate and waits read N/A: how to
    get one, or that the first is on its way; "" when every rank has a report (or a reason of its own)."""
    missing = [r for r in job.ranks if r.view.probe.status == PROBE_NONE]
    unprobed = [r for r in missing if r.view.probe.reason != PROBE_AWAITED]
    figures = "STEPS/S, DATA WAIT and SYNC WAIT" if distributed(job) else "STEPS/S and DATA WAIT"
    command = "torchrun ..." if job.kind == JOB_TORCHRUN else "python train.py ..."
    how = f"start the job with gputop run (gputop run -- {command}), or call gputop.probe.install() in it"
    if unprobed and len(unprobed) == len(job.ranks):
        return f"No probe report from this job, so {figures} read N/A: {how}."
    if unprobed:
        names = ", ".join(f"PID {r.pid}" if r.rank is None else str(r.rank) for r in unprobed)
        which = f"Rank {names} sends" if len(unprobed) == 1 else f"Ranks {names} send"
        return f"{which} no probe report, so its {figures} read N/A: {how}."
    if missing:
        return "Awaiting the probe's first report: the probe writes once the job iterates a DataLoader."
    return ""
