"""gputop's Xid table against NVIDIA's Xid catalogue for Ampere and newer GPUs, row by row.

``BUCKETS`` is each catalogued Xid's "Resolution Bucket (Immediate Action)" as NVIDIA's catalogue gives it
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html); 61 is unused there, and is judged by the
catalogue for older GPUs (https://docs.nvidia.com/deploy/xid-errors/archive/index.html), where it asks for a reset.
"""

from __future__ import annotations

import pytest

from gputop.model import HEALTH_CRITICAL, HEALTH_WARN
from gputop.xids import CATALOGUE, REBOOT, RESET_GPU, RESTART_APP

pytestmark = pytest.mark.fast

BUCKETS = {
    8: "RESTART_APP",
    13: "RESTART_APP",
    31: "RESTART_APP",
    43: "IGNORE",
    45: "WORKFLOW_XID_45",
    48: "WORKFLOW_XID_48",
    61: "RESET_GPU",
    62: "RESET_GPU",
    63: "IGNORE",
    64: "RESET_GPU",
    68: "RESTART_APP",
    69: "RESTART_APP",
    74: "WORKFLOW_NVLINK_ERR",
    79: "RESTART_BM",
    92: "IGNORE",
    94: "RESTART_APP",
    95: "RESET_GPU",
    109: "RESET_GPU",
    119: "RESET_GPU",
    120: "RESET_GPU",
    140: "RESET_GPU",
    154: "XID_154",
}
CRITICAL_BUCKETS = {"RESET_GPU", "RESTART_BM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR"}
"""The buckets that need a GPU reset or a node reboot: 48's and 74's workflows are cleared by a reset."""
ACTIONS = {"RESTART_APP": RESTART_APP, "RESET_GPU": RESET_GPU, "RESTART_BM": REBOOT}


def test_every_xid_gputop_knows_is_in_the_catalogue() -> None:
    assert CATALOGUE.keys() == BUCKETS.keys()


@pytest.mark.parametrize("xid", sorted(BUCKETS))
def test_an_xids_severity_follows_its_immediate_action(xid: int) -> None:
    want = HEALTH_CRITICAL if BUCKETS[xid] in CRITICAL_BUCKETS else HEALTH_WARN
    assert CATALOGUE[xid].severity == want


@pytest.mark.parametrize("xid", sorted(x for x, bucket in BUCKETS.items() if bucket in ACTIONS))
def test_an_xids_action_is_the_catalogues_immediate_action(xid: int) -> None:
    assert CATALOGUE[xid].action == ACTIONS[BUCKETS[xid]]
