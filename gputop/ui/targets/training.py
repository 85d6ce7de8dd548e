"""Which training process the training panel shows: worked out from the snapshot, the focus and the cursor.

The panel follows the process table's cursor, but only onto training processes (those with training evidence:
``TrainingView.trains``): on any other row it keeps what it showed, so moving the cursor past a desktop or a
notebook does not make the panel jump around. A process that only holds GPU memory gets a panel only as the focus
the user asked for (``--pid``, ``gputop run``).
"""

from __future__ import annotations

from gputop.model import ROLE_TORCHRUN_AGENT, Snapshot, TrainingView, job_views


def training_target(
    snap: Snapshot, focus_pid: int | None, selected_pid: int | None, shown_pid: int | None
) -> TrainingView | None:
    """The view to show, in this order of preference:

    1. the training process under the cursor (a DataLoader worker's row stands for its training process, a
       torchrun agent's for its first rank);
    2. the one shown so far, while it is still a training process;
    3. the focus's job (``--pid``, ``gputop run``): the focus itself, or its first rank;
    4. without a focus, the first training process in the snapshot that has workers or a probe report.

    The snapshot has a view of every GPU process; one without training evidence counts only as the focus.
    """
    if selected_pid is not None:
        view = _view_for(snap, selected_pid)
        if view is not None and (view.trains or view.pid == focus_pid):
            return view
    if shown_pid is not None:
        view = snap.training_view(shown_pid)
        if view is not None and (view.trains or view.pid == focus_pid):
            return view
    if focus_pid is not None:
        return _first_rank(snap, focus_pid)
    return next((v for v in snap.training if v.workers or v.probe.ok), None)


def _view_for(snap: Snapshot, pid: int) -> TrainingView | None:
    view = _first_rank(snap, pid)
    if view is not None:
        return view
    return next((v for v in snap.training if any(w.pid == pid for w in v.workers)), None)


def _first_rank(snap: Snapshot, pid: int) -> TrainingView | None:
    """The view of ``pid``; for a torchrun agent, the first of its ranks that the snapshot has."""
    views = job_views(snap.training, pid)
    if not views:
        return None
    if views[0].role == ROLE_TORCHRUN_AGENT:
        return next((v for v in views[1:] if v.role != ROLE_TORCHRUN_AGENT), views[0])
    return views[0]
