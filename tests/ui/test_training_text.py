"""The words of the training and advice panels, from plain model values: what is shown, and how honestly."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from gputop.model import (
    PROBE_FOREIGN,
    PROBE_NONE,
    PROBE_OK,
    PROBE_STALE,
    ROLE_TORCHRUN_AGENT,
    HostProcess,
    LoaderConfig,
    ProbeReport,
    Snapshot,
    TensorMemory,
    TrainingView,
    Worker,
    frozen_reasons,
)
from gputop.ui.targets.training import training_target
from gputop.ui.text.advice import brief_lines, evidence_value, full_lines
from gputop.ui.text.gpu import Palette
from gputop.ui.text.loader import loader_config_parts
from gputop.ui.text.memory import breakdown_lines, cuda_lines
from gputop.ui.text.parts import flow
from gputop.ui.text.training import TrainingSparks, panel_lines, summary_lines
from tests.ui import scenes
from tests.ui.training_scenes import JOB_PID, OTHER_PID, STARVED_ADVICE, fed_job, starved_job, two_jobs

P = Palette()
NO_SPARKS = TrainingSparks()


def plain(lines: list[Text]) -> str:
    return "\n".join(line.plain for line in lines)


def starved() -> TrainingView:
    return starved_job().training[0]


def test_without_a_probe_report_the_pipeline_numbers_are_na_with_the_reason_never_zero() -> None:
    view = replace(starved(), probe=ProbeReport(PROBE_NONE))

    summary = plain(summary_lines(view, NO_SPARKS, 120, P))
    panel = plain(panel_lines(view, NO_SPARKS, {}, 120, P))

    assert "DATA WAIT N/A (probe none)" in summary
    assert "STEPS/S     N/A (probe none)" in panel
    assert "gputop run, or call gputop.probe.install()" in panel
    assert " 0%" not in panel and "0.00" not in panel


def test_a_stale_report_says_so_and_shows_no_numbers() -> None:
    view = replace(starved(), probe=ProbeReport(PROBE_STALE, reason="last written 12 s ago", age_s=12.0))

    panel = plain(panel_lines(view, NO_SPARKS, {}, 120, P))

    assert "PROBE       stale  last written 12 s ago: the job may be frozen" in panel
    assert "DATA WAIT   N/A (probe stale)" in panel


def test_a_report_of_another_user_is_shown_as_foreign() -> None:
    view = replace(starved(), probe=ProbeReport(PROBE_FOREIGN, reason="report owned by uid 1001, not by this user"))

    assert "foreign owner  report owned by uid 1001" in plain(panel_lines(view, NO_SPARKS, {}, 120, P))


def test_a_setting_not_in_effect_shows_the_request_beside_it() -> None:
    loader = starved().probe.loaders[0]
    loader = replace(loader, requested=replace(loader.requested, pin_memory=True))

    parts = [part.plain for part in loader_config_parts(loader, P)]

    assert "pin_memory=False (asked True)" in parts
    assert "num_workers=4" in parts


def test_before_the_first_iterator_the_settings_are_the_request() -> None:
    loader = replace(starved().probe.loaders[0], effective=LoaderConfig())

    assert "(as requested: no iterator yet)" in [part.plain for part in loader_config_parts(loader, P)]


def test_workers_replaced_every_epoch_get_a_note_and_each_worker_a_row() -> None:
    panel = plain(panel_lines(starved(), NO_SPARKS, {}, 120, P))

    assert "replaced by new processes 45×  (persistent_workers=False starts them every epoch)" in panel
    assert "4 (fork)" in panel and "3.8 of 16 cores" in panel
    assert sum("running" in line for line in panel.splitlines()) == 4


def with_batch_time(view: TrainingView, batch_s: float | None) -> TrainingView:
    loaders = tuple(replace(loader, worker_batch_s=batch_s) for loader in view.probe.loaders)
    return replace(view, probe=replace(view.probe, loaders=loaders))


def test_the_workers_head_says_how_long_a_worker_takes_to_make_a_batch() -> None:
    panel = plain(panel_lines(with_batch_time(starved(), 0.0672), NO_SPARKS, {}, 120, P))

    head = next(line for line in panel.splitlines() if line.startswith("WORKERS"))
    assert "3.8 of 16 cores  a worker makes a batch in 67.2 ms" in head


def test_the_workers_head_says_within_what_time_95_percent_of_the_batches_are_made() -> None:
    view = with_batch_time(starved(), 0.0672)
    loaders = tuple(replace(loader, worker_batch_p95_s=0.3) for loader in view.probe.loaders)
    panel = plain(panel_lines(replace(view, probe=replace(view.probe, loaders=loaders)), NO_SPARKS, {}, 160, P))

    assert "a worker makes a batch in 67.2 ms (95% within 300 ms)" in panel


def test_workers_not_timed_show_no_batch_time() -> None:
    panel = plain(panel_lines(with_batch_time(starved(), None), NO_SPARKS, {}, 120, P))

    assert "makes a batch" not in panel


def test_the_batch_time_moves_below_the_workers_head_where_it_does_not_fit() -> None:
    panel = plain(panel_lines(with_batch_time(starved(), 0.541), NO_SPARKS, {}, 60, P)).splitlines()

    at = next(n for n, line in enumerate(panel) if line.startswith("WORKERS"))
    assert "makes a batch" not in panel[at]
    assert panel[at + 1].strip() == "a worker makes a batch in 541 ms"


def test_a_worker_value_that_cannot_be_read_is_na_with_its_reason_below_the_table() -> None:
    denied = frozen_reasons({"uss_bytes": "access denied"})
    worker = Worker(HostProcess(7, status="sleeping", cpu_percent=0.0), unavailable=denied)
    panel = plain(panel_lines(replace(starved(), workers=(worker,)), NO_SPARKS, {}, 120, P))

    row = next(line for line in panel.splitlines() if line.strip().startswith("7 "))
    assert "0B" not in row and "N/A" in row
    assert "N/A: USS access denied" in panel


def test_new_workers_whose_cpu_is_still_measured_show_the_measuring_mark() -> None:
    measuring = frozen_reasons({"cpu_percent": "measuring"})
    workers = tuple(
        replace(w, host=replace(w.host, cpu_percent=None, unavailable=measuring)) for w in starved().workers
    )
    view = replace(starved(), workers=workers, workers_cpu_percent=None)

    assert "4 (fork) …/16 cores" in plain(summary_lines(view, NO_SPARKS, 120, P))
    assert "N/A" not in plain(panel_lines(view, NO_SPARKS, {}, 120, P)).split("WORKERS")[1].split("CUDA")[0]


def test_cuda_memory_shows_allocated_reserved_and_nvml_against_the_gpu() -> None:
    lines = plain(cuda_lines(starved().probe, {0: 80 * scenes.GIB}, 20, 120, P))

    assert "allocated 21.4GiB" in lines and "reserved 24.0GiB" in lines and "NVML 25.1GiB" in lines
    assert "of 80.0GiB on GPU 0" in lines
    assert "alloc retries 0" in lines and "OOMs 0" in lines


def test_a_job_without_cuda_says_why() -> None:
    probe = replace(starved().probe, cuda=(), cuda_reason="CUDA not initialised in this process")

    assert plain(cuda_lines(probe, {}, 20, 120, P)) == "CUDA        none: CUDA not initialised in this process"


def test_the_summary_fits_80_columns() -> None:
    for view in (starved(), fed_job().training[0]):
        assert all(line.cell_len <= 76 for line in summary_lines(view, TrainingSparks(wait="▅" * 12), 76, P))


def test_parts_flow_onto_indented_lines() -> None:
    lines = flow(Text("LOADER  "), [Text("a" * 10), Text("b" * 10), Text("c" * 10)], 30, indent=8)

    assert [line.plain for line in lines] == ["LOADER  aaaaaaaaaa  bbbbbbbbbb", "        cccccccccc"]


def test_findings_read_without_colour_and_name_the_change() -> None:
    lines = plain(brief_lines(STARVED_ADVICE, 100, P, show_pid=False))

    assert lines.splitlines()[0].startswith("WARN  Input-bound")
    assert "→ num_workers=8" in lines
    assert lines.splitlines()[2].startswith("INFO  ")


def test_on_a_narrow_line_the_title_gives_way_to_the_change() -> None:
    line = brief_lines(STARVED_ADVICE[2:], 76, P, show_pid=False)[0].plain

    assert len(line) <= 76
    assert line.endswith("→ persistent_workers=True")
    assert "…" in line


def test_findings_beyond_the_limit_are_counted_on_the_last_line() -> None:
    lines = brief_lines(STARVED_ADVICE, 100, P, show_pid=True, limit=2)

    assert len(lines) == 2
    assert lines[0].plain.startswith(f"WARN  PID {JOB_PID}  ")
    assert "2 more: l shows every finding in full" in lines[1].plain


def test_a_finding_in_full_has_its_detail_action_settings_and_evidence() -> None:
    lines = plain(full_lines(STARVED_ADVICE[:1], 80, P))

    assert "→ Set num_workers=8 (4 now)" in lines
    assert "suggest num_workers=8" in lines
    assert "data_wait_share 35%" in lines and "steps_per_s 6.77/s" in lines
    assert "data-starved · PID 48213 · from both · since 12:08:48" in lines


def test_evidence_is_shown_in_the_units_its_name_says() -> None:
    assert evidence_value("pcie_rx_bytes_per_s", 2 * 1024**3) == "2.00GiB/s"
    assert evidence_value("workers_uss_bytes", 1536 * 1024**2) == "1.50GiB"
    assert evidence_value("startup_share", 0.1) == "10%"
    assert evidence_value("pass_start_s", 4.6) == "4.6 s"
    assert evidence_value("gpu_busy_percent", None) == "N/A"
    assert evidence_value("bottleneck", "cpu") == "cpu"


def test_the_target_is_the_selected_training_process_or_the_one_shown_so_far() -> None:
    snap = two_jobs()
    worker = snap.training_view(OTHER_PID).workers[0].pid  # type: ignore[union-attr]

    assert training_target(snap, None, None, None).pid == JOB_PID  # type: ignore[union-attr]
    assert training_target(snap, None, OTHER_PID, JOB_PID).pid == OTHER_PID  # type: ignore[union-attr]
    assert training_target(snap, None, worker, JOB_PID).pid == OTHER_PID  # type: ignore[union-attr]
    assert training_target(snap, None, 1, OTHER_PID).pid == OTHER_PID  # type: ignore[union-attr]


def test_a_gpu_process_without_training_evidence_is_shown_only_as_the_focus() -> None:
    job = starved_job()
    holder = TrainingView(pid=7000, name="sleep")  # a view of a GPU process with no evidence
    snap = replace(job, training=(*job.training, holder))

    assert training_target(snap, None, 7000, None).pid == JOB_PID  # type: ignore[union-attr]
    assert training_target(snap, None, None, 7000).pid == JOB_PID  # type: ignore[union-attr]
    assert training_target(snap, 7000, None, None) is holder
    assert training_target(snap, 7000, 7000, 7000) is holder


def test_a_torchrun_agent_stands_for_its_first_rank() -> None:
    rank = starved()
    agent = TrainingView(pid=100, role=ROLE_TORCHRUN_AGENT, ranks=(rank.pid,))
    snap = Snapshot(scenes.T0, starved_job().host, scenes.DRIVER, training=(agent, rank))

    assert training_target(snap, 100, None, None) is rank
    assert training_target(snap, None, 100, None) is rank


def test_the_host_side_step_counters_of_a_gpu_model_get_no_memory_bars_of_their_own():
    # As on a real H100: AdamW over 14 CUDA parameter tensors keeps its 14 float32 step counters on the CPU.
    cuda = TensorMemory("cuda:0", 628712, 2514848, 2514848, 5029696, (("float32", 2514848),), 103393280)
    host = TensorMemory("cpu", 0, 0, 0, 56)
    probe = ProbeReport(PROBE_OK, tensors=(cuda, host), optimizers=("AdamW",))

    text = "\n".join(line.plain for line in breakdown_lines(probe, 90, 20, Palette()))

    assert "MEM cuda:0" in text
    assert "MEM cpu" not in text


def test_a_model_on_the_cpu_gets_its_memory_bars():
    host = TensorMemory("cpu", 450, 1800, 1800, 3616, (("float32", 1800),))
    probe = ProbeReport(PROBE_OK, tensors=(host,), optimizers=("Adam",))

    text = "\n".join(line.plain for line in breakdown_lines(probe, 90, 20, Palette()))

    assert "MEM cpu" in text and "in host memory" in text
