"""Pictures of the dashboard from fixed snapshots, compared with the accepted SVGs in ``__snapshots__``.

Update after a deliberate change with ``pytest tests/ui/test_snapshots.py --snapshot-update`` and look at the
new pictures (``scripts/screenshots`` renders the same scenes as PNG).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gputop.ui.app import GputopApp
from tests.ui import cluster_scenes, container_scenes, job_scenes, scenes, training_scenes

MakeApp = Callable[..., GputopApp]
SMALL = (80, 24)
LARGE = (160, 48)


async def two_frames(pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_eight_gpus_in_training(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(scenes.training_node))
    assert snap_compare(app, terminal_size=size, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_gpus_that_report_real_work(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(scenes.real_work_node))
    assert snap_compare(app, terminal_size=size, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_a_lost_gpu(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    snapshots = [*scenes.history(scenes.training_node)[:-1], scenes.training_node(lost=[scenes.LOST_GPU_INDEX])]
    assert snap_compare(make_app(snapshots), terminal_size=size, run_before=two_frames)


def test_no_driver(snap_compare, make_app: MakeApp) -> None:
    assert snap_compare(make_app([scenes.no_driver()]), terminal_size=SMALL, run_before=two_frames)


def test_tree_view_with_dataloader_workers(snap_compare, make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    assert snap_compare(app, terminal_size=LARGE, press=["t"], run_before=two_frames)


def test_process_detail(snap_compare, make_app: MakeApp) -> None:
    app = make_app(scenes.history(scenes.training_node))
    assert snap_compare(app, terminal_size=SMALL, press=["enter"], run_before=two_frames)


def test_focus_on_a_process_without_a_gpu(snap_compare, make_app: MakeApp) -> None:
    pid = scenes.CPU_JOB_PID
    app = make_app([scenes.training_node(focus_pid=pid)], focus_pid=pid)
    assert snap_compare(app, terminal_size=SMALL, run_before=two_frames)


def starved_run(make_app: MakeApp) -> GputopApp:
    """``gputop run`` over a data-starved job, with the findings the advisor gave it (fixed: see STARVED_ADVICE)."""
    snapshots = scenes.history(training_scenes.starved_job)
    return make_app(snapshots, focus_pid=training_scenes.JOB_PID, advisor=training_scenes.FixedAdvisor())


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_training_panel_and_findings_of_a_starved_job(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    assert snap_compare(starved_run(make_app), terminal_size=size, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_training_screen(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    assert snap_compare(starved_run(make_app), terminal_size=size, press=["l"], run_before=two_frames)


def test_findings_in_full_at_80x24(snap_compare, make_app: MakeApp) -> None:
    assert snap_compare(starved_run(make_app), terminal_size=SMALL, press=["l", "a"], run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_processes_in_containers_pods_and_jobs(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(container_scenes.container_node))
    assert snap_compare(app, terminal_size=size, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_job_view_with_a_straggler(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    snapshots = scenes.history(job_scenes.torchrun_job)
    app = make_app(snapshots, advisor=training_scenes.FixedAdvisor(job_scenes.ADVICE))
    assert snap_compare(app, terminal_size=size, press=["j"], run_before=two_frames)


def stepped_run(make_app: MakeApp, make: Callable[[float], object] = training_scenes.stepped_job) -> GputopApp:
    """``gputop run`` over the starved job whose probe times its steps: phases, syncs, FLOPs, MFU and energy."""
    return make_app(scenes.history(make), focus_pid=training_scenes.JOB_PID, advisor=training_scenes.FixedAdvisor())


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_training_panel_with_the_steps_phases(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    assert snap_compare(stepped_run(make_app), terminal_size=size, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_training_screen_with_the_steps_phases(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    assert snap_compare(stepped_run(make_app), terminal_size=size, press=["l"], run_before=two_frames)


@pytest.mark.parametrize("keys", [[], ["l"]], ids=["panel", "screen"])
def test_the_steps_of_a_cpu_job_without_mfu_or_energy(snap_compare, make_app: MakeApp, keys: list[str]) -> None:
    app = stepped_run(make_app, training_scenes.cpu_stepped_job)
    assert snap_compare(app, terminal_size=SMALL, press=keys, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_job_view_with_each_ranks_phases(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    snapshots = scenes.history(job_scenes.stepped_torchrun_job)
    app = make_app(snapshots, advisor=training_scenes.FixedAdvisor(job_scenes.STEP_ADVICE))
    assert snap_compare(app, terminal_size=size, press=["j"], run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_processes_in_pods_and_a_slurm_job_by_name(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(cluster_scenes.pod_node))
    assert snap_compare(app, terminal_size=size, run_before=two_frames)


SLURM_DETAIL_KEYS = ["slash", *str(scenes.EVAL_PID), "enter", "enter"]
"""Filter the table to the eval process in its Slurm job, then open its detail screen."""


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_the_detail_of_a_process_in_a_slurm_job(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(cluster_scenes.pod_node))
    assert snap_compare(app, terminal_size=size, press=SLURM_DETAIL_KEYS, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_inside_a_slurm_allocation_its_gpus_come_first(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(cluster_scenes.pod_node), allocation=cluster_scenes.ALLOCATION)
    assert snap_compare(app, terminal_size=size, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_a_critical_and_a_warn_gpu(snap_compare, make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(cluster_scenes.unhealthy_node))
    assert snap_compare(app, terminal_size=size, run_before=two_frames)
