"""One process in detail: its history of GPU memory, %SM and %CPU, command line, start, threads and children."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget

from gputop.formatting import NA, counted, fmt_bytes, fmt_clock, fmt_duration, fmt_percent
from gputop.model import POD_ORIGIN_WORDS, HostProcess, SlurmJob, Snapshot
from gputop.ui.history import HISTORY_S, ProcessHistory, Trend
from gputop.ui.in_app import InGputopApp
from gputop.ui.process_rows import KIND_LABELS, ViewOptions, build_rows
from gputop.ui.signals import confirm_and_signal
from gputop.ui.text.gpu import Palette
from gputop.ui.widgets.drawing import CachedComponentStyles
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.status_bar import StatusBar

LABEL_CELLS = 12
VALUE_CELLS = 26


def _trend_line(
    label: str, trend: Trend, now: float, top: float, value: str, note: str, width: int, p: Palette
) -> Text:
    """``label  sparkline  value  note``: the sparkline takes the room the text leaves."""
    cells = max(10, width - LABEL_CELLS - VALUE_CELLS)
    line = Text(f"{label:<{LABEL_CELLS}}", style=p.label)
    line.append(trend.sparkline(cells, now, top), style=p.spark)
    line.append(f"  {value}")
    if note:
        line.append(f"  {note}", style=p.dim)
    return line


def detail_lines(
    snap: Snapshot, pid: int, history: ProcessHistory | None, width: int, p: Palette
) -> list[RenderableType]:
    """The detail page of ``pid`` in ``snap``, ``width`` cells wide."""
    host = snap.host_process(pid)
    if host is None:
        return [Text(f"PID {pid} is no longer watched: it has exited, or no longer uses a GPU.", style=p.label)]
    gpu_side = [p for p in snap.processes if p.pid == pid]
    title = Text(f"PID {pid}  ", style=p.label)
    title.append(host.name or NA, style=p.label)
    facts = [f"user {host.user or NA}", f"status {host.status or NA}", counted(host.num_threads, "thread")]
    if host.ppid is not None:
        parent = snap.host_process(host.ppid)
        facts.append(f"parent {host.ppid}" + (f" ({parent.name})" if parent and parent.name else ""))
    title.append("   " + "   ".join(facts))
    started = Text("Started  ", style=p.label)
    if host.start_time is None:
        started.append(NA, style=p.dim)
    else:
        stamp = fmt_clock(host.start_time, with_date=True)
        started.append(f"{stamp}  ({fmt_duration(snap.time - host.start_time)} ago)")
    command = Text("Command  ", style=p.label)
    command.append(host.command or f"({host.unavailable.get('command', NA)})")
    lines: list[RenderableType] = [title, started, command]
    if host.container is not None or "container" in host.unavailable:
        lines.append(_container_line(host, p))
    if host.container is not None and host.container.runtime == "kubernetes":
        lines.append(_pod_line(host, p))
    if host.slurm is not None:
        lines.append(_slurm_line(host.slurm, p))
    lines.append(Text())

    gpus = Text("GPUs     ", style=p.label)
    if gpu_side:
        bus_ids = {g.index: g.pci_bus_id for g in snap.gpus if g.pci_bus_id}
        gpus.append(
            "   ".join(
                f"{p.gpu_index}: {fmt_bytes(p.gpu_memory_bytes)} {KIND_LABELS.get(p.kind, '')}"
                + (f" (PCI {bus_ids[p.gpu_index]})" if p.gpu_index in bus_ids else "")
                for p in gpu_side
            )
        )
    else:
        gpus.append("none: this process holds no GPU context", style=p.dim)
    lines += [gpus, Text(f"History, last {HISTORY_S / 60:g} minutes", style=p.dim)]
    if history is not None:
        totals = {g.index: g.memory_total_bytes for g in snap.gpus}
        top = sum(totals.get(g.gpu_index) or 0 for g in gpu_side) or (history.gpu_memory_bytes.peak() or 1)
        memory = sum(g.gpu_memory_bytes or 0 for g in gpu_side) if gpu_side else None
        cpu_top = max(100.0, history.cpu_percent.peak() or 0)
        now = snap.time
        lines += [
            _trend_line(
                "GPU memory", history.gpu_memory_bytes, now, top, fmt_bytes(memory), f"of {fmt_bytes(top)}", width, p
            ),
            Text(),
            _trend_line("%SM", history.sm_percent, now, 100, fmt_percent(history.sm_percent.latest), "", width, p),
            Text(),
            _trend_line(
                "%CPU", history.cpu_percent, now, cpu_top, fmt_percent(host.cpu_percent), f"of {cpu_top:.0f}%", width, p
            ),
            Text(),
            Text(f"{'Host memory':<{LABEL_CELLS}}{fmt_bytes(host.rss_bytes)} resident", style=p.label),
        ]
    family = build_rows(snap, ViewOptions(tree=True, focus_pid=pid))[1:]
    lines += [Text(), Text(f"Children and workers ({len(family)})", style=p.label)]
    for row in family:
        line = Text(f"  {row.pid:>7}  {row.tree_prefix}{row.name or NA}")
        if row.is_worker:
            line.append("  DataLoader worker", style=p.spark)
        line.append(f"   CPU {fmt_percent(row.cpu_percent)}   RSS {fmt_bytes(row.rss_bytes)}", style=p.dim)
        lines.append(line)
    if not family:
        lines.append(Text("  none", style=p.dim))
    return lines


def _container_line(host: HostProcess, p: Palette) -> Text:
    """Where the process runs: the container (its full id), pod, job or unit, and the cgroup path it was read from."""
    line = Text("Runs in  ", style=p.label)
    container = host.container
    if container is None:
        line.append(f"({host.unavailable.get('container', NA)})", style=p.dim)
        return line
    line.append(container.label if container.id is None else f"{container.runtime} {container.id}")
    if container.pod_uid is not None:
        line.append(f"  pod {container.pod_uid}")
    if container.runtime != "cgroup":  # a bare cgroup's label is its path already
        line.append(f"  {container.path}", style=p.dim)
    return line


def _pod_line(host: HostProcess, p: Palette) -> Text:
    """The pod by name, as the node's pod source names it (the pod's owner chose the names), or why not."""
    line = Text("Pod      ", style=p.label)
    pod = host.pod
    if pod is None:
        line.append(f"({host.unavailable.get('pod', NA)})", style=p.dim)
        return line
    line.append(f"{pod.namespace}/{pod.name}")
    line.append(f"  container {pod.container or NA}")
    line.append(f"  (from the {POD_ORIGIN_WORDS[pod.source]})", style=p.dim)
    return line


def _slurm_line(job: SlurmJob, p: Palette) -> Text:
    """The Slurm job: its id and step, then its name, user, state and GPUs on this node, or why Slurm did not say."""
    line = Text("Slurm    ", style=p.label)
    line.append(f"job {job.id}" + ("" if job.step is None else f" step {job.step}"))
    for key, shown in (
        ("name", job.name),
        ("user", job.user),
        ("state", job.state),
        ("gpus", None if job.gpus is None else ",".join(map(str, job.gpus))),
    ):
        if shown is not None:
            line.append(f"  {key} {shown}")
    reasons = dict.fromkeys(job.unavailable.values())
    if reasons:
        line.append(f"  ({'; '.join(reasons)})", style=p.dim)
    return line


class ProcessDetail(CachedComponentStyles, InGputopApp, Widget):
    """Draws ``detail_lines`` for the app's current snapshot."""

    DEFAULT_CSS = """
    ProcessDetail { height: auto; padding: 0 1; }
    ProcessDetail > .process-detail--label { text-style: bold; }
    ProcessDetail > .process-detail--dim { color: $text-muted; }
    ProcessDetail > .process-detail--spark { color: $accent; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"process-detail--label", "process-detail--dim", "process-detail--spark"}

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid

    def render(self) -> RenderableType:
        app = self.gputop
        if app.snapshot is None:
            return ""
        history = app.history.processes.get(self.pid)
        style = self.component_style
        palette = Palette(
            label=style("process-detail--label"),
            dim=style("process-detail--dim"),
            spark=style("process-detail--spark"),
        )
        return Group(*detail_lines(app.snapshot, self.pid, history, self.content_size.width, palette))


class ProcessDetailScreen(InGputopApp, Screen[None]):
    """Follows one PID; Esc goes back to the overview with its cursor where it was."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape,backspace",
            "app.pop_screen",
            "Back",
            key_display="Esc",
            tooltip="Back to the overview (from a process's details or the training screen)",
        ),
        Binding("k", "signal", "Signal", tooltip="Send SIGINT, SIGTERM or SIGKILL to this process (asks first)"),
    ]

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid

    def compose(self) -> ComposeResult:
        yield StatusBar()
        with VerticalScroll():
            yield ProcessDetail(self.pid)
        yield Footer()

    def on_mount(self) -> None:
        app = self.gputop
        self.watch(app, "snapshot", self._refresh_detail)
        self.watch(app, "paused", self._refresh_detail)
        self.watch(app, "interval_s", self._refresh_detail)
        self.watch(app, "final", self._refresh_detail, init=False)

    def _refresh_detail(self) -> None:
        app = self.gputop
        self.query_one(StatusBar).show(app.snapshot, app.interval_s, app.paused, app.focus_pid)
        self.query_one(ProcessDetail).refresh(layout=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "signal" and self.gputop.readonly)

    def action_signal(self) -> None:
        app = self.gputop
        snap = app.snapshot
        host = snap.host_process(self.pid) if snap is not None else None
        if host is not None and not app.readonly:
            confirm_and_signal(
                app, self.pid, host.start_time, host.user, host.command or host.name, visible=host.visible
            )
