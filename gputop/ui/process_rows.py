"""The rows of the process table, worked out from a snapshot: flat or as a tree, filtered and sorted.

Pure functions over the data model, so every view option is tested without a terminal. The table widget only
turns these rows into cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from gputop.frozen import immutable
from gputop.model import (
    COMPUTE,
    COMPUTE_GRAPHICS,
    GRAPHICS,
    MIG_ENABLED,
    Gpu,
    GpuProcess,
    HostProcess,
    Snapshot,
    frozen_reasons,
)

DATALOADER_WORKER_NAME = "pt_data_worker"
KIND_LABELS = {COMPUTE: "C", GRAPHICS: "G", COMPUTE_GRAPHICS: "C+G"}


@immutable
class Column:
    """One process-table column: how it is titled, how wide it is and how it sorts."""

    key: str
    title: str
    width: int
    right: bool = False
    descending: bool = False
    """Sorting by this column puts the largest first, which is what one looks for in usage columns."""
    wide_only: bool = False
    """Left out below ``WIDE_TABLE_MIN`` columns, so the command keeps some room at 80 columns."""


COLUMNS: tuple[Column, ...] = (
    Column("gpu", "GPU", 3, right=True),
    Column("pid", "PID", 7, right=True),
    Column("user", "USER", 7),
    Column("kind", "C/G", 3, wide_only=True),
    Column("gpu_mem", "GPU MEM", 7, right=True, descending=True),
    Column("sm", "%SM", 4, right=True, descending=True),
    Column("cpu", "%CPU", 5, right=True, descending=True),
    Column("host_mem", "HOST MEM", 8, right=True, descending=True, wide_only=True),
    Column("elapsed", "ELAPSED", 10, right=True, descending=True),
    Column("command", "COMMAND", 0),
)
WIDE_TABLE_MIN = 100
MIG_COLUMN = Column("mig", "MIG", 10)
"""The MIG instance a process runs on (``3g.40gb#1``: profile and GPU instance id), shown after the GPU column
only while some GPU is in MIG mode."""


CONTAINER_COLUMN = Column("container", "CONTAINER", 20, wide_only=True)
"""The container, pod, Slurm job or systemd unit a process runs in (``docker a1b2c3d4e5f6``), shown before the
command only while some process is in a container or a job, and only in a wide table."""


POD_COLUMN = Column("container", "NAMESPACE/POD/CONTAINER", 34, wide_only=True)
"""The CONTAINER column where some process's pod is known by name: wide enough for the three names of a pod
made by a Deployment (``ml/train-llama-5f6d8c9b7-x2k4q/trainer``, cut with an ellipsis beyond)."""
NARROW_POD_COLUMN = Column("pod", "POD/USER", 16)
"""The pod's name alone, in place of the user below ``WIDE_TABLE_MIN`` columns where some process's pod is known
(in a pod the user is most often root, and the pod says whose it is); a process in no pod keeps its user there,
so that whose it is stays on screen."""


def column_for(key: str) -> Column:
    """The column of a sort key (the first column for one that is not known)."""
    columns = (*COLUMNS, MIG_COLUMN, CONTAINER_COLUMN, NARROW_POD_COLUMN)
    return next((c for c in columns if c.key == key), COLUMNS[0])


def any_mig(snap: Snapshot) -> bool:
    """Whether some GPU of the snapshot is in MIG mode: the table then has a MIG column."""
    return any(g.mig_mode == MIG_ENABLED for g in snap.gpus)


def any_container(snap: Snapshot) -> bool:
    """Whether some watched process runs in a container or a batch job: the wide table then has a CONTAINER
    column (a systemd unit alone does not make one: every process on a systemd host is in some unit)."""
    return any(h.container is not None and h.container.contained for h in snap.host_processes)


def any_pod(snap: Snapshot) -> bool:
    """Whether some watched process's pod is known by name: the table then shows it (``POD_COLUMN``)."""
    return any(h.pod is not None for h in snap.host_processes)


def container_label(host: HostProcess) -> str | None:
    """``namespace/pod/container`` where the pod is known by name, for a Slurm job its id and name once Slurm has
    told it (``slurm 123 train``), else the container's own label."""
    if host.pod is not None:
        return host.pod.label
    if host.slurm is not None:
        return host.slurm.label
    return None if host.container is None else host.container.label


@immutable
class ViewOptions:
    """What the user asked the table to show."""

    sort_key: str = "gpu"
    reverse: bool = False
    tree: bool = False
    filter_text: str = ""
    compute_only: bool = False
    mine_only: bool = False
    user: str | None = None
    """Who "mine" is: the user running gputop."""
    focus_pid: int | None = None


class ProcessRow(NamedTuple):
    """One line of the table: a process on one GPU (flat view) or one process with all its GPUs (tree view).

    A named tuple rather than a frozen dataclass: the table makes one per GPU process on every tick (2,000 on a
    large machine), and a frozen dataclass sets each of its 18 fields through ``object.__setattr__``, three times
    slower. Immutable all the same."""

    key: str
    pid: int
    gpus: tuple[int, ...] = ()
    kind: str | None = None
    user: str | None = None
    name: str | None = None
    command: str | None = None
    gpu_memory_bytes: int | None = None
    sm_percent: float | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    elapsed_s: float | None = None
    start_time: float | None = None
    """When the process started (epoch seconds): what a signal checks the PID still belongs to."""
    tree_prefix: str = ""
    unavailable: Mapping[str, str] = frozen_reasons(None)
    """Why values are missing; the shared empty mapping (read-only) when none is."""
    mig: str | None = None
    """The MIG instance it runs on (``3g.40gb#1``), several joined by commas in the tree view; None off MIG."""
    container: str | None = None
    """The container, pod, job or unit it runs in, as ``Container.label`` words it (``Pod.label`` for a pod known
    by name); None in none."""
    pod: str | None = None
    """The name of the Kubernetes pod it runs in, where a source on the node named it."""
    visible: bool = True
    """Whether this PID namespace sees the process: false for NVML's host PIDs in a container without
    ``--pid=host``, which name no process here (or another one), so they are never signalled."""

    @property
    def is_worker(self) -> bool:
        return self.name == DATALOADER_WORKER_NAME

    @property
    def on_gpu(self) -> bool:
        return bool(self.gpus)


def row_key(gpus: Iterable[int], pid: int) -> str:
    """A stable key: the same process on the same GPUs keeps its row (and the cursor) from tick to tick."""
    return f"{','.join(map(str, gpus))}:{pid}"


def build_rows(snap: Snapshot, options: ViewOptions, flat: list[ProcessRow] | None = None) -> list[ProcessRow]:
    """The rows to show for ``snap``, in display order. ``flat``: ``flat_rows(snap)`` already worked out (the
    table keeps them while only the view options change)."""
    family = focus_family(snap, options.focus_pid) if options.focus_pid is not None else None
    if options.tree:
        return _tree_rows(snap, options, family)
    rows = flat_rows(snap) if flat is None else flat
    if family is not None:
        rows = [r for r in rows if r.pid in family]
    if _filtering(options):
        rows = [r for r in rows if _matches(r, options)]
    return sort_rows(rows, options)


def flat_rows(snap: Snapshot) -> list[ProcessRow]:
    """One row per process and GPU, in the snapshot's order (the flat view before filtering and sorting)."""
    return [_gpu_row(snap, p) for p in snap.processes]


def focus_family(snap: Snapshot, focus_pid: int) -> set[int]:
    """The focus process and all its descendants that the snapshot knows about."""
    children = _children_by_parent(snap.host_processes)
    family: set[int] = set()
    stack = [focus_pid]
    while stack:
        pid = stack.pop()
        if pid not in family:
            family.add(pid)
            stack.extend(children.get(pid, ()))
    return family


def focus_gpus(snap: Snapshot, focus_pid: int) -> tuple[Gpu, ...]:
    """The GPUs the focus process and its descendants run on; of a GPU in MIG mode, only the instances they run
    on (the others are other jobs' business)."""
    family = focus_family(snap, focus_pid)
    ours = [p for p in snap.processes if p.pid in family]
    used = {p.gpu_index for p in ours}
    instances: dict[int, set[int]] = {}
    for p in ours:
        if p.mig_index is not None:
            instances.setdefault(p.gpu_index, set()).add(p.mig_index)
    return tuple(
        replace(g, mig=tuple(m for m in g.mig if m.index in instances[g.index])) if g.index in instances else g
        for g in snap.gpus
        if g.index in used
    )


def sort_rows(rows: list[ProcessRow], options: ViewOptions) -> list[ProcessRow]:
    """Rows in the chosen order; values that could not be read go last in either direction."""
    column = column_for(options.sort_key)
    value = _SORT_VALUES[column.key]
    known = [r for r in rows if value(r) is not None]
    unknown = [r for r in rows if value(r) is None]
    descending = column.descending != options.reverse
    known.sort(key=lambda r: (value(r), *_tiebreak(r)), reverse=descending)
    unknown.sort(key=_tiebreak)
    return known + unknown


def _tiebreak(row: ProcessRow) -> tuple[int, int, int]:
    return (min(row.gpus, default=1 << 30), -(row.gpu_memory_bytes or 0), row.pid)


_SORT_VALUES: dict[str, Callable[[ProcessRow], Any]] = {
    "gpu": lambda r: min(r.gpus) if r.gpus else None,
    "pid": lambda r: r.pid,
    "user": lambda r: r.user,
    "kind": lambda r: r.kind,
    "gpu_mem": lambda r: r.gpu_memory_bytes,
    "sm": lambda r: r.sm_percent,
    "cpu": lambda r: r.cpu_percent,
    "host_mem": lambda r: r.rss_bytes,
    "elapsed": lambda r: r.elapsed_s,
    "command": lambda r: r.command,
    "mig": lambda r: r.mig,
    "container": lambda r: r.container,
    "pod": lambda r: r.pod,
}


def _elapsed(snap: Snapshot, start_time: float | None) -> float | None:
    return None if start_time is None else max(0.0, snap.time - start_time)


def mig_label(snap: Snapshot, p: GpuProcess) -> str | None:
    """How the table names the MIG instance a process runs on: its profile and GPU instance id."""
    if p.mig_index is None and p.gpu_instance_id is None:
        return None
    gpu = next((g for g in snap.gpus if g.index == p.gpu_index), None)
    for instance in gpu.mig if gpu is not None else ():
        if instance.index == p.mig_index or (
            p.mig_index is None
            and (instance.gpu_instance_id, instance.compute_instance_id) == (p.gpu_instance_id, p.compute_instance_id)
        ):
            return instance.label
    return f"GI {p.gpu_instance_id}" if p.gpu_instance_id is not None else None


def _gpu_row(snap: Snapshot, p: GpuProcess) -> ProcessRow:
    host = p.host or HostProcess(p.pid)
    # Both mappings are read-only already: merged (and copied) only when both hold reasons.
    reasons = frozen_reasons({**p.unavailable, **host.unavailable}) if host.unavailable else p.unavailable
    return ProcessRow(
        key=f"{p.gpu_index}:{p.pid}",  # row_key((p.gpu_index,), p.pid), without its join
        pid=p.pid,
        gpus=(p.gpu_index,),
        kind=p.kind,
        user=host.user,
        name=host.name,
        command=host.command,
        gpu_memory_bytes=p.gpu_memory_bytes,
        sm_percent=p.sm_percent,
        cpu_percent=host.cpu_percent,
        rss_bytes=host.rss_bytes,
        elapsed_s=_elapsed(snap, host.start_time),
        start_time=host.start_time,
        unavailable=reasons,
        mig=mig_label(snap, p),
        container=container_label(host),
        pod=None if host.pod is None else host.pod.name,
        visible=host.visible,
    )


def _host_row(snap: Snapshot, host: HostProcess, on_gpus: list[GpuProcess]) -> ProcessRow:
    """A process with its GPU side summed over its GPUs (memory) or the busiest GPU (SM)."""
    reasons = dict(host.unavailable)
    memory: int | None = None
    sm: float | None = None
    kinds = set()
    for p in on_gpus:
        reasons.update(p.unavailable)
        kinds.add(p.kind)
        if p.gpu_memory_bytes is not None:
            memory = (memory or 0) + p.gpu_memory_bytes
        if p.sm_percent is not None:
            sm = p.sm_percent if sm is None else max(sm, p.sm_percent)
    gpus = tuple(sorted({p.gpu_index for p in on_gpus}))
    labels = sorted({label for label in (mig_label(snap, p) for p in on_gpus) if label is not None})
    kind = None if not kinds else kinds.pop() if len(kinds) == 1 else COMPUTE_GRAPHICS
    return ProcessRow(
        key=row_key(gpus, host.pid),
        pid=host.pid,
        gpus=gpus,
        kind=kind,
        user=host.user,
        name=host.name,
        command=host.command,
        gpu_memory_bytes=memory,
        sm_percent=sm,
        cpu_percent=host.cpu_percent,
        rss_bytes=host.rss_bytes,
        elapsed_s=_elapsed(snap, host.start_time),
        start_time=host.start_time,
        unavailable=frozen_reasons(reasons),
        mig=",".join(labels) or None,
        container=container_label(host),
        pod=None if host.pod is None else host.pod.name,
        visible=host.visible,
    )


def _children_by_parent(hosts: Iterable[HostProcess]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for h in hosts:
        if h.ppid is not None:
            children.setdefault(h.ppid, []).append(h.pid)
    return children


def _tree_rows(snap: Snapshot, options: ViewOptions, family: set[int] | None) -> list[ProcessRow]:
    gpu_side: dict[int, list[GpuProcess]] = {}
    for p in snap.processes:
        gpu_side.setdefault(p.pid, []).append(p)
    hosts = {h.pid: h for h in snap.host_processes}
    for pid in gpu_side:
        hosts.setdefault(pid, HostProcess(pid))  # NVML saw it, the host could not: still a row
    if family is not None:
        hosts = {pid: h for pid, h in hosts.items() if pid in family}
    rows = {pid: _host_row(snap, h, gpu_side.get(pid, [])) for pid, h in hosts.items()}
    parent = {pid: h.ppid for pid, h in hosts.items() if h.ppid in hosts}
    children = _children_by_parent(h for h in hosts.values() if h.pid in parent)
    shown = _shown_in_tree(rows, parent, children, options)
    roots = [rows[pid] for pid in rows if pid not in parent and pid in shown]
    out: list[ProcessRow] = []

    def walk(row: ProcessRow, lead: str, branch: str) -> None:
        out.append(_with_prefix(row, lead + branch))
        kids = sort_rows([rows[c] for c in children.get(row.pid, ()) if c in shown], options)
        below = lead + ("   " if branch == "└─ " else "│  " if branch else "")
        for i, kid in enumerate(kids):
            walk(kid, below, "└─ " if i == len(kids) - 1 else "├─ ")

    for root in sort_rows(roots, options):
        walk(root, "", "")
    return out


def _with_prefix(row: ProcessRow, prefix: str) -> ProcessRow:
    return row._replace(tree_prefix=prefix) if prefix else row


def _shown_in_tree(
    rows: dict[int, ProcessRow], parent: dict[int, int], children: dict[int, list[int]], options: ViewOptions
) -> set[int]:
    """A process stays in the tree when it, an ancestor or a descendant matches: a match keeps its family."""
    if not _filtering(options):
        return set(rows)
    shown: set[int] = set()
    for pid, row in rows.items():
        if not _matches(row, options):
            continue
        up: int | None = pid
        while up is not None and up not in shown:
            shown.add(up)
            up = parent.get(up)
        stack = list(children.get(pid, ()))
        while stack:
            kid = stack.pop()
            shown.add(kid)
            stack.extend(children.get(kid, ()))
    return shown


def _filtering(options: ViewOptions) -> bool:
    return bool(options.filter_text or options.compute_only or options.mine_only)


def _matches(row: ProcessRow, options: ViewOptions) -> bool:
    if options.compute_only and row.kind not in (COMPUTE, COMPUTE_GRAPHICS):
        return False
    if options.mine_only and (row.user is None or row.user != options.user):
        return False
    if options.filter_text:
        words = (row.pid, row.user, row.name, row.command, row.container)
        haystack = " ".join(str(v) for v in words if v is not None).lower()
        if options.filter_text.lower() not in haystack:
            return False
    return True
