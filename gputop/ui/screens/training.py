"""One training process in full: its input pipeline, every worker, GPU memory, and the advisor's findings."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gputop.model import Advice, Snapshot, TrainingView, job_views
from gputop.ui.in_app import InGputopApp
from gputop.ui.text.training import gpu_totals
from gputop.ui.widgets.advice_panel import AdvicePanel, AdviceShown
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.status_bar import StatusBar
from gputop.ui.widgets.training_panel import TrainingPanel, TrainingShown

SIDE_BY_SIDE_MIN = 150
"""From this width the findings stand beside the panel instead of below it."""


def job_advice(advice: tuple[Advice, ...], snap: Snapshot, view: TrainingView) -> tuple[Advice, ...]:
    """The findings about ``view``'s process and the training processes below it (a torchrun agent's ranks),
    including those about a whole job it is a rank of (a finding merged over every rank)."""
    pids = {v.pid for v in job_views(snap.training, view.pid)}
    return tuple(a for a in advice if pids.intersection(a.concerns))


class TrainingScreen(InGputopApp, Screen[None]):
    """Follows one training process; Esc (or ``l`` again) goes back to the overview."""

    DEFAULT_CSS = """
    TrainingScreen #training-body { height: 1fr; }
    TrainingScreen #training-body.-side-by-side { layout: horizontal; }
    TrainingScreen #training-body.-side-by-side > * { width: 1fr; }
    TrainingScreen #training-gone { padding: 1 2; display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace,l", "app.pop_screen", "Back", key_display="Esc", tooltip="Back to the overview"),
        Binding("a", "findings", "Findings", tooltip="On the training screen: scroll to the advisor's findings"),
    ]

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid
        self._arranged = (False, False)
        """Whether there are findings, and whether they stand beside the panel: what the ``a`` key depends on."""

    def compose(self) -> ComposeResult:
        yield StatusBar()
        with VerticalScroll(id="training-body"):
            yield TrainingPanel()
            yield AdvicePanel()
            yield Static(id="training-gone", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        app = self.gputop
        self.watch(app, "snapshot", self._refresh_training)
        self.watch(app, "paused", self._refresh_status)
        self.watch(app, "interval_s", self._refresh_status)
        self.watch(app, "advice_note", self._refresh_training, init=False)
        self.watch(app, "final", self._refresh_training, init=False)

    def on_resize(self) -> None:
        self._arrange()

    def _refresh_status(self) -> None:
        app = self.gputop
        self.query_one(StatusBar).show(app.snapshot, app.interval_s, app.paused, app.focus_pid)

    def _refresh_training(self) -> None:
        self._refresh_status()
        app = self.gputop
        snap = app.snapshot
        if snap is None:
            return
        view = snap.training_view(self.pid)
        gone = self.query_one("#training-gone", Static)
        if gone.display != (view is None):
            gone.display = view is None
        if view is None:
            gone.update(
                f"PID {self.pid} is no longer a training process gputop sees: it has exited, "
                "or has neither DataLoader workers nor a probe report any more."
            )
            self.query_one(TrainingPanel).show(None, None)
            self.query_one(AdvicePanel).shown = AdviceShown(())
            self._arrange()
            return
        final = app.final is not None
        rows = len(view.workers)
        totals = gpu_totals(snap)
        shown = TrainingShown(view, snap.time, totals, True, worker_rows=rows, final=final, step_in_full=True)
        self.query_one(TrainingPanel).show(shown, app.history.processes.get(self.pid))
        advice = job_advice(app.advice, snap, view)
        self.query_one(AdvicePanel).shown = AdviceShown(advice, full=True, note=app.advice_note, final=final)
        self._arrange()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "findings":  # only where the findings are below the panel, out of sight
            body = self.query_one("#training-body")
            return bool(self.query_one(AdvicePanel).shown.advice) and not body.has_class("-side-by-side")
        return True

    def action_findings(self) -> None:
        self.query_one(AdvicePanel).scroll_visible(top=True, animate=False)

    def _arrange(self) -> None:
        findings = bool(self.query_one(AdvicePanel).shown.advice)
        body = self.query_one("#training-body")
        wide = self.size.width >= SIDE_BY_SIDE_MIN and findings
        if (findings, wide) != self._arranged:
            self._arranged = (findings, wide)
            body.set_class(wide, "-side-by-side")
            self.refresh_bindings()
