"""The shipped Grafana dashboard and systemd unit stay in step with the exporter."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from gputop.export import DEFAULT_LISTEN
from tests.export.dashboard import dashboard, metric_names, queries
from tests.export.scrape import names, parse
from tests.export.test_metrics import exposition, snapshot

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

UNIT = Path(__file__).resolve().parents[2] / "contrib" / "systemd" / "gputop-exporter.service"


def test_every_metric_the_dashboard_queries_is_exported():
    exported = names(parse(exposition(snapshot())))
    queried = set().union(*(metric_names(expr) for expr in queries()))

    assert queried - exported == set()
    assert {"gputop_gpu_memory_used_bytes", "gputop_gpu_sm_activity_ratio", "gputop_gpu_throttle_reason"} <= queried


def test_dashboard_panels_have_unique_ids_and_a_prometheus_datasource_variable():
    board = dashboard()

    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    [source] = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"


def service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNIT)
    return parser["Service"]


def test_systemd_unit_binds_to_loopback_and_runs_unprivileged():
    unit = service()

    assert f" export --listen {DEFAULT_LISTEN} " in unit["ExecStart"]
    assert unit["DynamicUser"] == "yes"
    assert unit["NoNewPrivileges"] == "yes"
    assert unit["ProtectSystem"] == "strict"
    assert unit["CapabilityBoundingSet"] == ""
