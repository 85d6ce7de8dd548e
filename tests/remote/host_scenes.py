"""Fixed hosts for the multi-host view's tests, snapshot images and screenshots: two busy nodes and a dead one.

``ScriptedFleet`` has the ``Fleet``'s interface and plays prepared ``HostEvent``s; its clock stands still, so ages
and countdowns on screen are the same every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace

from gputop.model import (
    COMPUTE,
    EVIDENCE_PROBE,
    PROBE_OK,
    GpuProcess,
    HostProcess,
    Launch,
    ProbeReport,
    Snapshot,
    TrainingView,
)
from gputop.remote.hostspec import HostSpec
from gputop.remote.status import LIVE, UNREACHABLE, HostEvent, HostStatus
from tests.ui import scenes, training_scenes

TRAINING_HOST = "gpu-node-07"
SERVING_HOST = "gpu-node-08"
DEAD_HOST = "gpu-node-09"
NOW = scenes.T0 + 0.4
DEAD_REASON = "connection timed out (ssh: connect to host gpu-node-09 port 22: Connection timed out)"
VLLM_PIDS = (8801, 8802, 8803, 8804)


def serving_node(t: float) -> Snapshot:
    """Four A100s (no GPM) behind one vLLM server per GPU, at a steady clip."""
    base = scenes.training_node(t)
    gpus = []
    for index in range(4):
        busy = round(62 + 20 * math.sin(t / 13 + index), 0)
        gpus.append(
            replace(
                scenes.gpu(index, t),
                uuid=f"GPU-9f8e7d6c-0000-4000-8000-{index:012d}",
                name="NVIDIA A100-SXM4-80GB",
                memory_used_bytes=int(71.5 * scenes.GIB),
                memory_free_bytes=int(8.5 * scenes.GIB),
                utilization_gpu_percent=busy,
                utilization_memory_percent=round(busy * 0.6),
                sm_activity_percent=None,
                temperature_c=52.0 + 3 * index,
                power_w=260.0 + 12 * index,
                power_limit_w=400.0,
                clock_sm_mhz=1410,
                clock_mem_mhz=1593,
                throttle_reasons=(),
            )
        )
    processes = tuple(
        GpuProcess(
            pid,
            index,
            COMPUTE,
            int(70.8 * scenes.GIB),
            round(gpus[index].utilization_gpu_percent or 0) - 4,
            30.0,
            host=HostProcess(
                pid,
                visible=True,
                user="svc-llm",
                name="python3",
                command=f"python3 -m vllm.entrypoints.openai.api_server --model llama3-70b --port {8000 + index}",
                cpu_percent=104.0,
                rss_bytes=9 * scenes.GIB,
                start_time=scenes.T0 - 6 * 86400,
                status="running",
            ),
        )
        for index, pid in enumerate(VLLM_PIDS)
    )
    host = replace(base.host, hostname=SERVING_HOST, cpu_count=96, usable_cpu_count=96, load_average=(12.5, 12.1, 11.8))
    return Snapshot(t, host, scenes.DRIVER, tuple(gpus), processes, scenes.host_processes(processes))


def events(ticks: int = scenes.HISTORY_TICKS) -> list[HostEvent]:
    """The history of the two live hosts, one event per snapshot, and the dead host's latest state."""
    training = scenes.history(scenes.training_node, ticks)
    serving = scenes.history(serving_node, ticks)
    out = []
    for train, serve in zip(training, serving):
        out.append(HostEvent(_live(TRAINING_HOST, train.time), train))
        out.append(HostEvent(_live(SERVING_HOST, serve.time), serve))
    out.append(HostEvent(dead_status()))
    return out


def _live(name: str, at: float) -> HostStatus:
    return HostStatus(name, LIVE, since=scenes.T0 - 3 * 3600, last_snapshot_at=at, stale_after_s=5.0)


def dead_status() -> HostStatus:
    return HostStatus(
        DEAD_HOST,
        UNREACHABLE,
        DEAD_REASON,
        since=NOW - 272,
        last_snapshot_at=None,
        retry_at=NOW + 16.2,
        failures=6,
        stale_after_s=5.0,
    )


SPECS = (HostSpec(TRAINING_HOST), HostSpec(SERVING_HOST), HostSpec(DEAD_HOST, command="~/venv/bin/gputop"))


class ScriptedFleet:
    """The ``Fleet``'s interface over prepared events: played on ``start``, more with ``push``."""

    def __init__(self, specs: Iterable[HostSpec] = SPECS, events: Iterable[HostEvent] = (), now: float = NOW) -> None:
        self.specs = tuple(specs)
        self.events = list(events)
        self.now = now
        self.subscribers: list[Callable[[HostEvent], None]] = []
        self.started = False
        self.stopped = False

    def clock(self) -> float:
        return self.now

    def subscribe(self, callback: Callable[[HostEvent], None]) -> None:
        self.subscribers.append(callback)

    def start(self) -> None:
        self.started = True
        for event in self.events:
            self.push(event)

    def stop(self) -> None:
        self.stopped = True

    def set_interval(self, interval_s: float) -> None:
        raise AssertionError("the multi-host view's interval is fixed")

    def push(self, event: HostEvent) -> None:
        for callback in self.subscribers:
            callback(event)


SECOND_TRAINING_HOST = "gpu-node-10"
RUN_ID = "llama3-8b-0412"


def ranked(snap: Snapshot, first_rank: int, world: int, hostname: str, pid_offset: int = 0) -> Snapshot:
    """``snap`` with a training view for each torchrun rank (the ``train.py`` processes): ranks ``first_rank`` on
    of a ``world``-rank run, their launcher variables, a probe's DataLoader numbers; on ``hostname``, its PIDs
    moved by ``pid_offset`` (another machine's)."""
    ranks = [p for p in snap.processes if p.pid in scenes.RANK_PIDS]
    views = []
    for n, proc in enumerate(ranks):
        wait = 0.02 + 0.01 * n + (0.31 if first_rank + n == 13 else 0.0)  # one slow shard on the second node
        launch = Launch(
            rank=first_rank + n,
            local_rank=n,
            world_size=world,
            local_world_size=len(ranks),
            group_rank=first_rank // len(ranks),
            run_id=RUN_ID,
            master_addr=TRAINING_HOST,
            master_port=29500,
        )
        loader = training_scenes.loader_view(snap.time, wait, 3.1)
        probe = ProbeReport(PROBE_OK, age_s=0.3, rank=first_rank + n, world_size=world, loaders=(loader,))
        views.append(TrainingView(proc.pid + pid_offset, probe=probe, launch=launch, evidence=(EVIDENCE_PROBE,)))
    moved = tuple(replace(p, pid=p.pid + pid_offset) for p in snap.processes)
    hosts = tuple(replace(h, pid=h.pid + pid_offset) for h in snap.host_processes)
    return replace(
        snap, host=replace(snap.host, hostname=hostname), processes=moved, host_processes=hosts, training=tuple(views)
    )


def two_node_events(ticks: int = scenes.HISTORY_TICKS) -> list[HostEvent]:
    """Two training nodes running one 16-rank torchrun job, eight ranks each, and the serving node."""
    out = []
    for train in scenes.history(scenes.training_node, ticks):
        out.append(HostEvent(_live(TRAINING_HOST, train.time), ranked(train, 0, 16, TRAINING_HOST)))
        second = ranked(train, 8, 16, SECOND_TRAINING_HOST, pid_offset=1000)
        out.append(HostEvent(_live(SECOND_TRAINING_HOST, train.time), second))
        out.append(HostEvent(_live(SERVING_HOST, train.time), serving_node(train.time)))
    return out


TWO_NODE_SPECS = (HostSpec(TRAINING_HOST), HostSpec(SECOND_TRAINING_HOST), HostSpec(SERVING_HOST))
