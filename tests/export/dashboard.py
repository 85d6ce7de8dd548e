"""The queries of the shipped Grafana dashboard (contrib/grafana/gputop.json), as tests read them."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "gputop.json"


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries() -> list[str]:
    """Every PromQL expression of every panel, with the dashboard's variables set to match everything."""
    exprs = [target["expr"] for panel in dashboard()["panels"] for target in panel.get("targets", ())]
    return [re.sub(r"\$(instance|gpu)\b", ".*", expr) for expr in exprs]


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bgputop_[a-z0-9_]+", expr))
