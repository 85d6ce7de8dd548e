"""Each process's container through the snapshot codec: it round-trips; snapshots written before it (without the
key) decode with no container and the reason "not recorded"; a container from elsewhere is checked like any
other value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputop.codec import V1_NOT_RECORDED, snapshot_from_json, snapshot_json
from tests.security.test_snapshot_decoder import check_well_typed, decoded_or_value_error
from tests.ui import container_scenes


def plain_snapshot() -> dict[str, Any]:
    return json.loads(snapshot_json(container_scenes.container_node()))


def test_a_snapshot_with_containers_round_trips_losslessly() -> None:
    snap = container_scenes.container_node()
    back = snapshot_from_json(snapshot_json(snap))
    assert back == snap
    assert sum(container_scenes.in_container(p) for p in back.processes) >= 3
    check_well_typed(back)


def test_a_host_process_recorded_before_containers_has_none_and_says_why() -> None:
    plain = plain_snapshot()
    for host in plain["host_processes"]:
        del host["container"]
    for row in plain["processes"]:
        if isinstance(row["host"], dict):  # not one written as its PID: that is the host_processes entry
            del row["host"]["container"]
    snap = snapshot_from_json(json.dumps(plain))
    for host in snap.host_processes:
        assert host.container is None and host.unavailable["container"] == V1_NOT_RECORDED


def test_a_host_process_with_no_container_keeps_no_reason() -> None:
    snap = snapshot_from_json(snapshot_json(container_scenes.container_node()))
    plain = next(h for h in snap.host_processes if h.container is None)
    assert "container" not in plain.unavailable


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("runtime", "vmware"),
        ("runtime", None),
        ("id", "a" * 65),
        ("id", 12),
        ("path", "/" + "a" * 2000),
        ("name", "n" * 257),
        ("pod_uid", ["x"]),
    ],
)
def test_a_bad_container_value_is_a_value_error(field: str, value: object) -> None:
    plain = plain_snapshot()
    plain["host_processes"][0]["container"] = {"runtime": "docker", "path": "/docker/x", field: value}
    assert decoded_or_value_error(json.dumps(plain)) is None


def test_escapes_in_a_container_from_elsewhere_are_made_visible() -> None:
    plain = plain_snapshot()
    plain["host_processes"][0]["container"] = {"runtime": "systemd", "path": "/x", "name": "\x1b]0;pwned\x07.scope"}
    snap = decoded_or_value_error(json.dumps(plain))
    assert snap is not None
    container = snap.host_processes[0].container
    assert container is not None and container.name == "\\x1b]0;pwned\\x07.scope"
