"""The step's anatomy in a probe report, and where each DataLoader was built: read into the model when well formed;
a malformed step is dropped with its reason and costs nothing else of the report, a malformed ``created_at`` costs
that field alone."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from gputop.collect.probe_reader import MAX_SYNC_SITES, parse_report
from gputop.model import PROBE_OK, ProbeReport, StepAnatomy, SyncSite
from tests.security.test_probe_reports import LOADER

pytestmark = pytest.mark.fast

PID = 4242
STEP: dict[str, Any] = {
    "boundary": "DataLoader",
    "clock": "cuda",
    "steps": 1200,
    "window_s": 10.0,
    "window_steps": 600,
    "step_s": 0.0164,
    "step_p95_s": 0.0171,
    "warmup_step_s": 0.9,
    "drift": 1.02,
    "steps_per_s": 60.5,
    "samples_per_s": 1936.0,
    "phases_s": {"other": 0.0005, "forward": 0.0063, "data": 0.0002, "backward": 0.0092, "optimizer": 0.001},
    "h2d_bytes_per_step": 1 << 20,
    "h2d_pageable_share": 1.0,
    "h2d_blocking_share": 0.0,
    "syncs_per_step": 1.0,
    "sync_sites": [{"site": "train.py:57", "call": "item", "per_step": 1.0}],
    "sync_sampled_steps": 20,
    "flops_per_step": 1.224e12,
    "flops_source": "counted",
    "unavailable": {"h2d_pageable_share": "no copies seen"},
}

STEP_ANATOMY = StepAnatomy(
    boundary="DataLoader",
    clock="cuda",
    steps=1200,
    window_s=10.0,
    window_steps=600,
    step_s=0.0164,
    step_p95_s=0.0171,
    warmup_step_s=0.9,
    drift=1.02,
    steps_per_s=60.5,
    samples_per_s=1936.0,
    phases_s=(("data", 0.0002), ("forward", 0.0063), ("backward", 0.0092), ("optimizer", 0.001), ("other", 0.0005)),
    h2d_bytes_per_step=1 << 20,
    h2d_pageable_share=1.0,
    h2d_blocking_share=0.0,
    syncs_per_step=1.0,
    sync_sites=(SyncSite("train.py:57", "item", 1.0),),
    sync_sampled_steps=20,
    flops_per_step=1.224e12,
    flops_source="counted",
    unavailable={"h2d_pageable_share": "no copies seen"},
)
"""What ``STEP`` reads into."""


def report(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "gputop-probe",
        "version": 1,
        "pid": PID,
        "written_at": time.time(),
        "loaders": [{**LOADER, "created_at": "train.py:41"}],
        "step": STEP,
    }
    return copy.deepcopy({**doc, **fields})


def parsed(doc: dict[str, Any]) -> ProbeReport:
    return parse_report(doc, PID, None, time.time(), 5.0)


def with_step(**fields: Any) -> dict[str, Any]:
    return report(step={**STEP, **fields})


def test_a_well_formed_step_reads_whole_with_its_phases_in_their_order() -> None:
    probe = parsed(report())

    assert probe.status == PROBE_OK and probe.step_reason is None
    assert probe.step == STEP_ANATOMY


@pytest.mark.parametrize("value", [None, "absent"])
def test_a_report_before_the_first_timed_step_has_no_step_and_no_reason(value: object) -> None:
    doc = report(step=value)
    if value == "absent":
        del doc["step"]

    probe = parsed(doc)

    assert (probe.status, probe.step, probe.step_reason) == (PROBE_OK, None, None)


def test_the_fewest_fields_a_step_needs_are_its_boundary_and_clock() -> None:
    probe = parsed(report(step={"boundary": "optimizer step", "clock": "host"}))

    assert probe.step == StepAnatomy(boundary="optimizer step", clock="host")


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ([STEP], "expected an object, got list"),
        ({**STEP, "boundary": "epoch"}, "boundary: not one of DataLoader, optimizer step"),
        ({k: v for k, v in STEP.items() if k != "clock"}, "clock: not one of host, cuda"),
        ({**STEP, "clock": ["cuda"]}, "clock: not one of host, cuda"),
        ({**STEP, "flops_source": "guess"}, "flops_source: not one of counted, estimate"),
        ({**STEP, "steps": -1}, "steps: out of range"),
        ({**STEP, "steps": 1.5}, "steps: not an integer"),
        ({**STEP, "window_steps": True}, "window_steps: not an integer"),
        ({**STEP, "step_s": -0.01}, "step_s: out of range"),
        ({**STEP, "step_s": 1e300}, "step_s: out of range"),
        ({**STEP, "steps_per_s": "60"}, "steps_per_s: not a number"),
        ({**STEP, "h2d_pageable_share": 1.5}, "h2d_pageable_share: out of range"),
        ({**STEP, "h2d_bytes_per_step": 1 << 64}, "h2d_bytes_per_step: out of range"),
        ({**STEP, "flops_per_step": -1.0}, "flops_per_step: out of range"),
        ({**STEP, "phases_s": [["forward", 0.1]]}, "expected an object, got list"),
        ({**STEP, "phases_s": {"forward": 0.1, "compile": 0.2}}, "phases_s: unknown phase 'compile'"),
        ({**STEP, "phases_s": {"forward": -0.1}}, "forward: out of range"),
        ({**STEP, "phases_s": {"forward": None, "\x1b[2J": 1}}, "unknown phase '\\x1b[2J'"),
        ({**STEP, "sync_sites": {"site": "train.py:57"}}, "sync sites is not a list"),
        ({**STEP, "sync_sites": [STEP["sync_sites"][0]] * (MAX_SYNC_SITES + 1)}, "too many sync sites"),
        ({**STEP, "sync_sites": [{"site": "train.py", "call": "item", "per_step": 1}]}, "site: not a file and line"),
        ({**STEP, "sync_sites": [{"site": "train.py:0", "call": "item", "per_step": 1}]}, "site: not a file and line"),
        ({**STEP, "sync_sites": [{"site": "a:b.py:9", "call": "item", "per_step": 1}]}, "site: not a file and line"),
        ({**STEP, "sync_sites": [{"site": "x" * 400 + ":9", "call": "item", "per_step": 1}]}, "site: not a file"),
        ({**STEP, "sync_sites": [{"site": 57, "call": "item", "per_step": 1}]}, "site: not a file and line"),
        ({**STEP, "sync_sites": [{"site": "t.py:5", "call": "\x1b]0;x\x07", "per_step": 1}]}, "call: not a function"),
        ({**STEP, "sync_sites": [{"site": "t.py:5", "call": "item"}]}, "sync site without per_step"),
        ({**STEP, "sync_sites": ["train.py:57"]}, "expected an object, got str"),
        ({**STEP, "unavailable": {"no such field": "why"}}, "unavailable: names no field"),
        ({**STEP, "unavailable": {"syncs_per_step": 3}}, "syncs_per_step: not a string"),
        ({**STEP, "unavailable": ["syncs_per_step"]}, "expected an object, got list"),
    ],
)
def test_a_malformed_step_is_dropped_with_its_reason_and_the_rest_of_the_report_is_used(
    step: object, reason: str
) -> None:
    probe = parsed(report(step=step))

    assert (probe.status, probe.step) == (PROBE_OK, None)
    assert probe.step_reason is not None and probe.step_reason.startswith("malformed step: ")
    assert reason in probe.step_reason
    (loader,) = probe.loaders
    assert (loader.data_wait_share, loader.created_at) == (0.4, "train.py:41")


def test_text_in_a_step_is_made_printable_before_it_is_shown() -> None:
    site = {"site": "/home/u/tr\u202eain.py:57", "call": "item", "per_step": 2.0}

    probe = parsed(with_step(sync_sites=[site], unavailable={"syncs_per_step": "no CUDA\x1b[2J" + "x" * 1000}))

    assert probe.step is not None
    assert probe.step.sync_sites[0].site == "/home/u/tr\\u202eain.py:57"
    reason = probe.step.unavailable["syncs_per_step"]
    assert reason.startswith("no CUDA\\x1b[2J") and len(reason) <= 300


def test_a_reason_why_the_step_was_dropped_is_short() -> None:
    probe = parsed(with_step(phases_s={"x" * 250_000: 1.0}))

    assert probe.step_reason is not None and len(probe.step_reason) <= 300


def test_where_a_loader_was_built_reads_into_the_loader() -> None:
    probe = parsed(report())

    assert probe.loaders[0].created_at == "train.py:41"
    assert probe.loaders[0].unavailable == {}


@pytest.mark.parametrize("created_at", ["train.py", 41, "train.py:41\nfake.py:1", "x" * 301 + ":1", ["a.py:1"]])
def test_a_malformed_created_at_costs_that_field_alone_with_its_reason(created_at: object) -> None:
    loader = {**LOADER, "created_at": created_at}

    probe = parsed(report(loaders=[loader]))

    (view,) = probe.loaders
    assert (probe.status, view.created_at, view.data_wait_share) == (PROBE_OK, None, 0.4)
    assert view.unavailable["created_at"] == "malformed: created_at: not a file and line"
    assert probe.step is not None


def test_a_loader_without_created_at_from_an_older_probe_has_none_and_no_reason() -> None:
    probe = parsed(report(loaders=[LOADER]))

    assert (probe.loaders[0].created_at, probe.loaders[0].unavailable) == (None, {})
