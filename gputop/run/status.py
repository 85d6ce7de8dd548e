"""The headless status line: one line on the job every few seconds, while no dashboard shows it."""

from __future__ import annotations

from collections.abc import Sequence

from gputop.formatting import counted, fmt_bytes, fmt_duration
from gputop.model import PROBE_NONE, PROBE_OK, TrainingView


def status_line(views: Sequence[TrainingView], elapsed_s: float) -> str:
    """One line on the job: its busiest view's loader, data wait, throughput, workers, pinning, main thread."""
    view = max(views, key=lambda v: (v.loader is not None, len(v.workers), -v.pid))
    parts = [f"PID {view.pid} up {fmt_duration(elapsed_s)}"]
    ranks = len(views[0].ranks) if views else 0
    if ranks > 1:
        parts[0] += f", {ranks} ranks"
    loader = view.loader
    if loader is not None:
        cfg = loader.effective if loader.effective.num_workers is not None else loader.requested
        parts.append(f"batch {cfg.batch_size if cfg.batch_size is not None else '?'}")
        if loader.data_wait_share is not None:
            parts.append(f"data wait {loader.data_wait_share * 100:.0f}%")
        if loader.steps_per_s is not None:
            rate = f"{loader.steps_per_s:.1f} steps/s"
            if loader.samples_per_s is not None:
                rate += f" {loader.samples_per_s:.0f} samples/s"
            parts.append(rate)
    workers = counted(len(view.workers), "worker")
    if view.worker_start_method:
        workers += f" ({view.worker_start_method})"
    if view.workers_cpu_percent is not None and view.usable_cpu_count:
        workers += f" {view.workers_cpu_percent / 100:.1f}/{counted(view.usable_cpu_count, 'core')}"
    parts.append(workers)
    parts.append(f"pin_memory {view.pin_memory.state}")
    if view.main_thread.activity:
        parts.append(f"main {view.main_thread.activity}")
    for device in view.probe.cuda:
        parts.append(
            f"cuda:{device.device} alloc {fmt_bytes(device.allocated_bytes)} res {fmt_bytes(device.reserved_bytes)}"
        )
    if view.probe.status not in (PROBE_OK, PROBE_NONE):
        parts.append(f"probe {view.probe.status}")
    return " | ".join(parts)
