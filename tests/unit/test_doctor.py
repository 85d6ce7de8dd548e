"""gputop doctor's verdicts, grouping and rendering, from plain values (no driver, no subprocess)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import gputop.collect.nvml
from gputop.doctor import runner
from gputop.doctor.checks import driver, gpus, probe_dir, pytorch, system, words
from gputop.doctor.checks.installation import Installed, installation_check
from gputop.doctor.checks.pytorch import TorchView, torch_build
from gputop.doctor.checks.system import ProcView
from gputop.doctor.checks.unreadable import Unreadable, fields_check, unreadable
from gputop.doctor.nvml import MigState, Session
from gputop.doctor.render import render_check, render_text, report_to_dict
from gputop.doctor.result import Check, Report
from gputop.model import DRIVER_OK, DriverInfo, Gpu, GpuProcess, HostProcess, Snapshot
from tests.factories import host_info

pytestmark = pytest.mark.fast


def snapshot(gpus: tuple[Gpu, ...] = (), processes: tuple[GpuProcess, ...] = (), hosts=()) -> Snapshot:
    return Snapshot(
        time=0.0,
        host=host_info(),
        driver=DriverInfo(DRIVER_OK, driver_version="550.90.07"),
        gpus=gpus,
        processes=processes,
        host_processes=hosts,
    )


def test_spans_collapse_runs() -> None:
    assert words.spans([0, 1, 2, 3, 4, 5, 6, 7]) == "0–7"
    assert words.spans([5, 0, 2, 3, 7, 8]) == "0, 2–3, 5, 7–8"
    assert words.spans([4]) == "4"
    assert words.spans([]) == ""


def test_branch_of_reads_the_major_version() -> None:
    assert driver.branch_of("550.90.07") == 550
    assert driver.branch_of("470.239.06") == 470
    assert driver.branch_of(None) is None
    assert driver.branch_of("x") is None


def test_repeated_unreadable_fields_collapse_to_one_line_each() -> None:
    gpus = tuple(Gpu(i, None, "H100", unavailable={"fan_percent": "unsupported"}) for i in range(8))
    gpus = (*gpus[:2], Gpu(2, None, "H100", unavailable={"fan_percent": "unsupported", "power_w": "no permission"}))
    hosts = tuple(HostProcess(pid, unavailable={"command": "access denied"}) for pid in (30, 10, 20))
    found = unreadable(snapshot(gpus, hosts=hosts))

    assert [u.line() for u in found] == [
        "fan_percent: unsupported on GPU 0–2",
        "power_w: no permission on GPU 2",
        "command: access denied for 3 processes (PID 10, 20, 30)",
    ]


def test_fields_check_is_information_for_what_the_hardware_lacks_and_limited_for_what_can_be_fixed() -> None:
    harmless = [Unreadable("gpu", "fan_percent", "unsupported", (0, 1))]
    lacking = fields_check(harmless)
    assert (lacking.verdict, lacking.info, lacking.advice) == ("info", ("fan_percent: unsupported on GPU 0–1",), ())
    assert fields_check([]).summary == "every value was read"
    measuring = fields_check([Unreadable("gpu", "sm_activity_percent", "measuring", (0,))])
    assert measuring.verdict == "ok"

    fixable = [*harmless, Unreadable("gpu", "sm_activity_percent", "not in this driver", (0, 1))]
    check = fields_check(fixable)
    assert check.verdict == "limited"
    assert "sm_activity_percent: not in this driver on GPU 0–1" in check.details
    assert any("upgrade the NVIDIA driver" in a for a in check.advice)
    assert check.facts["unreadable"][1] == {  # type: ignore[index]
        "owner": "gpu",
        "field": "sm_activity_percent",
        "reason": "not in this driver",
        "where": [0, 1],
    }


def test_a_lost_gpu_limits_and_all_lost_block() -> None:
    one = gpus.gpus_check(snapshot((Gpu(0, "u0", "H100"), Gpu(1, "u1", "H100", state="lost", reason="fell off"))))
    assert one.verdict == "limited"
    assert one.summary == "1 GPU of 2 cannot be read: GPU 1"
    assert "nvidia-smi -r -i 1" in one.advice[0]
    every = gpus.gpus_check(snapshot((Gpu(0, "u0", "H100", state="lost", reason="fell off"),)))
    assert every.verdict == "blocked"


def test_proc_check_names_the_hidepid_group() -> None:
    view = ProcView(euid=1000, hidepid="2", hidepid_gid=27, ptrace_scope=1, others_visible=0, container=None)
    check = system.proc_check(view)
    assert check.verdict == "limited"
    assert "GID 27" in check.advice[0]
    assert system.proc_check(ProcView(0, "2", None, None, 5, "docker")).verdict == "ok"
    assert system.proc_check(ProcView(1000, None, None, None, 5, None)).verdict == "ok"


def test_proc_mount_options_come_from_mountinfo() -> None:
    text = (
        "22 27 0:21 / /proc rw,relatime shared:13 - proc proc rw,hidepid=invisible,gid=27\n"
        "23 27 0:22 / /sys rw - sysfs sysfs rw\n"
    )
    assert system.proc_mount_options(text) == {"rw": "", "hidepid": "invisible", "gid": "27"}
    assert system.proc_mount_options("") == {}


def test_container_kind() -> None:
    assert system.container_kind("0::/kubepods/pod1/abc", lambda p: False) == "kubepods"
    assert system.container_kind("0::/", lambda p: p == "/.dockerenv") == "docker"
    assert system.container_kind("0::/", lambda p: False) is None


def test_nested_pid_namespace_is_a_limit_with_its_remedy() -> None:
    assert system.pid_namespace_check(False, 0).verdict == "ok"
    nested = system.pid_namespace_check(True, 3)
    assert nested.verdict == "limited"
    assert "never signalled (3 GPU processes now)" in nested.summary
    assert nested.advice == ("run gputop on the host, or start the container with --pid=host",)


def test_another_projects_gputop_beside_this_one_is_a_limit_with_the_way_out() -> None:
    alone = installation_check(Installed("0.1.0"))
    beside = installation_check(Installed("0.1.0", "0.2.1", "/venv/lib/python3.12/site-packages"))
    checkout = installation_check(Installed(None))

    assert alone.verdict == "ok" and "gputop-ml 0.1.0" in alone.summary
    assert "from a checkout" in checkout.summary
    assert beside.verdict == "limited"
    assert beside.summary.startswith("another project's gputop 0.2.1 is installed beside gputop-ml 0.1.0")
    assert beside.advice == (
        "keep the two apart: pip uninstall gputop && pip install --force-reinstall gputop-ml, or install gputop on "
        "its own with pipx install gputop-ml (or uv tool install gputop-ml)",
    )


def test_gpm_says_why_not() -> None:
    names = {0: "Tesla V100-SXM2-32GB", 1: "NVIDIA H100 80GB HBM3"}
    old_driver = gpus.gpm_check({0: (None, "not in this driver"), 1: (None, "not in this driver")}, names, 470)
    assert old_driver.verdict == "limited"
    assert old_driver.summary == "R470 has no GPM (needs R520 or newer) on GPU 0–1"
    volta = gpus.gpm_check({0: (False, None), 1: (True, None)}, names, 550)
    assert volta.summary == "GPU 0 has no GPM (Tesla V100-SXM2-32GB: GPM needs Hopper or newer)"
    assert gpus.gpm_check({1: (True, None)}, names, 550).verdict == "ok"
    refused = gpus.gpm_check({1: (None, "no permission")}, names, 550)
    assert refused.advice == ("run gputop as root to read GPM",)


def test_a_gpu_older_than_hopper_has_no_gpm_as_information_not_a_limit() -> None:
    check = gpus.gpm_check({0: (False, None)}, {0: "Tesla T4"}, 550)

    assert (check.verdict, check.advice) == ("info", ())
    assert check.summary == "GPU 0 has no GPM (Tesla T4: GPM needs Hopper or newer)"
    assert check.info == ("without GPM the SM column reads N/A; Busy (utilization.gpu) is still shown",)


def test_gpm_refused_beside_a_gpu_without_it_is_a_limit_with_its_fix_and_the_lack_as_information() -> None:
    check = gpus.gpm_check({0: (False, None), 1: (None, "no permission")}, {0: "Tesla T4", 1: "H100"}, 550)

    assert (check.verdict, check.summary) == ("limited", "no permission to use GPM on GPU 1")
    assert check.advice == ("run gputop as root to read GPM",)
    assert check.info[0] == "GPU 0 has no GPM (Tesla T4: GPM needs Hopper or newer)"


def test_values_a_gpu_in_mig_mode_does_not_give_are_information_on_one_line() -> None:
    found = [
        Unreadable("gpu", "utilization_gpu_percent", "not available in MIG mode", (0,)),
        Unreadable("gpu", "utilization_memory_percent", "not available in MIG mode", (0,)),
        Unreadable("gpu_process", "sm_percent", "not available in MIG mode", (7,)),
    ]

    check = fields_check(found)

    assert (check.verdict, check.advice, check.details) == ("info", (), ())
    assert check.info == (
        "utilization_gpu_percent, utilization_memory_percent: not available in MIG mode on GPU 0",
        "sm_percent: not available in MIG mode for 1 GPU process (PID 7)",
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: fields_check([Unreadable("gpu", "power_w", "a reason doctor has no words for", (0,))]),
        lambda: fields_check([Unreadable("gpu", "power_w", "error: Unknown Error", (0,))]),
        lambda: gpus.gpm_check({0: (None, "error: Unknown Error")}, {0: "H100"}, 550),
    ],
    ids=["fields, unknown reason", "fields, an error", "gpm, an error"],
)
def test_every_limit_has_a_fix(make) -> None:
    check = make()

    assert check.verdict == "limited" and check.advice == (words.GENERIC_FIX,)


def test_mig_modes() -> None:
    assert gpus.mig_check({0: MigState(False, False, None, None)}).summary == "MIG off on every GPU"
    on = gpus.mig_check(
        {0: MigState(True, True, 3, None, ("3g.40gb", "2g.20gb", "1g.10gb")), 1: MigState(False, False, None, None)}
    )
    assert (on.verdict, on.details) == ("ok", ("GPU 0: MIG on, 3 instances: 3g.40gb, 2g.20gb, 1g.10gb",))
    pending = gpus.mig_check({0: MigState(False, True, None, None)})
    assert pending.verdict == "limited"
    assert "nvidia-smi -r -i 0" in pending.advice[0]
    missing = gpus.mig_check({0: MigState(None, None, None, "not in this driver")})
    assert (missing.verdict, missing.summary) == ("ok", "MIG mode not readable: not in this driver on GPU 0")


def test_persistence_off_is_a_limit_and_the_start_up_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    modes = {"h0": (True, None), "h1": (False, None), "h2": (None, "unsupported")}
    monkeypatch.setattr(driver.nvml, "persistence", lambda handle: modes[handle])
    session = Session(started=True, init_ms=8.8, count=3, first_device_ms=1503.2, handles=["h0", "h1", "h2"])
    check = driver.persistence_check(session)
    assert check.verdict == "limited"
    assert check.summary == "persistence mode is off on GPU 1: start-up is slow"
    assert check.details == ("nvmlInit took 8.8 ms, the first GPU call 1503.2 ms", "GPU 2: unsupported")
    assert "sudo nvidia-smi -pm 1" in check.advice[0]
    assert check.facts["persistence"] == {"0": True, "1": False, "2": "unsupported"}
    modes["h1"] = (True, None)
    assert driver.persistence_check(session).verdict == "ok"


def test_torch_verdicts() -> None:
    assert pytorch.torch_check(TorchView(installed=False), 2, "12.4").verdict == "ok"
    cpu = pytorch.torch_check(TorchView(True, "2.13.0+cpu", None, False, 0), 2, "12.4")
    assert cpu.verdict == "limited" and "CPU-only build" in cpu.summary
    assert pytorch.torch_check(TorchView(True, "2.13.0+cpu", None, False, 0), 0, None).verdict == "ok"
    too_new = pytorch.torch_check(TorchView(True, "2.5.0", "12.6", False, 0), 2, "12.2")
    assert "supports CUDA 12.2 at most" in too_new.advice[0]
    seen = pytorch.torch_check(TorchView(True, "2.5.0", "12.4", True, 2), 2, "12.4")
    assert (seen.verdict, seen.summary.endswith("sees 2 GPUs")) == ("ok", True)


def test_probe_dir_states(tmp_path: Path) -> None:
    missing = probe_dir.probe_dir_check(str(tmp_path / "probe"), "$GPUTOP_PROBE_DIR")
    assert (missing.verdict, missing.facts["exists"]) == ("ok", False)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "123.json").write_text("{}")
    ok = probe_dir.probe_dir_check(str(private), "$GPUTOP_PROBE_DIR")
    assert (ok.verdict, ok.facts["reports"], ok.facts["mode"]) == ("ok", 1, "700")
    private.chmod(0o755)
    open_dir = probe_dir.probe_dir_check(str(private), "$GPUTOP_PROBE_DIR")
    assert open_dir.verdict == "limited"
    assert open_dir.advice == (f"chmod 700 {private}",)
    not_dir = tmp_path / "file"
    not_dir.write_text("")
    assert probe_dir.probe_dir_check(str(not_dir), "x").verdict == "limited"


def test_a_check_that_raises_is_reported_and_the_rest_run() -> None:
    def boom() -> Check:
        raise ValueError("bad")

    check = runner.isolated("mig", "MIG", boom)
    assert (check.verdict, check.summary) == ("limited", "could not check: ValueError: bad")


REPORT = Report(
    (
        Check("driver", "NVIDIA driver and NVML", "ok", "driver 550.90.07, 2 GPUs", ("branch R550",)),
        Check("persistence", "Persistence", "limited", "off on GPU 1", advice=("sudo nvidia-smi -pm 1",)),
        Check("mig", "MIG", "skipped", "not checked: NVML is not usable"),
    )
)


def test_the_overall_verdict_is_the_worst_and_only_blocked_exits_1() -> None:
    assert (REPORT.verdict, REPORT.exit_status) == ("limited", 0)
    blocked = Report((*REPORT.checks, Check("driver", "NVIDIA driver", "blocked", "not loaded")))
    assert (blocked.verdict, blocked.exit_status) == ("blocked", 1)
    assert Report((Check("mig", "MIG", "skipped", "x"),)).verdict == "ok"


def test_text_has_a_verdict_per_check_details_and_fix_lines() -> None:
    assert render_text(REPORT) == (
        "[ok]      NVIDIA driver and NVML: driver 550.90.07, 2 GPUs\n"
        "            branch R550\n"
        "[limited] Persistence: off on GPU 1\n"
        "            fix: sudo nvidia-smi -pm 1\n"
        "[skipped] MIG: not checked: NVML is not usable\n"
        "\n"
        "limited: gputop monitors this machine, with 1 limit (Persistence); the fix lines say how to lift each\n"
    )


def test_information_is_its_own_verdict_in_text_and_json_and_leaves_the_exit_status_alone() -> None:
    fact = Check("gpm", "GPM", "info", "GPU 0 has no GPM", info=("the SM column reads N/A",))
    report = Report((REPORT.checks[0], fact))

    assert render_text(report) == (
        "[ok]      NVIDIA driver and NVML: driver 550.90.07, 2 GPUs\n"
        "            branch R550\n"
        "[info]    GPM: GPU 0 has no GPM\n"
        "            info: the SM column reads N/A\n"
        "\n"
        "ok: nothing limits gputop here; information only, nothing to fix: GPM\n"
    )
    doc = report_to_dict(report, "1.2.3")
    assert (doc["verdict"], doc["exit_status"]) == ("ok", 0)
    assert (doc["checks"][1]["verdict"], doc["checks"][1]["info"], doc["checks"][1]["advice"]) == (
        "info",
        ["the SM column reads N/A"],
        [],
    )


def test_text_shows_escapes_from_outside_as_visible_text() -> None:
    [line] = render_check(Check("probe_dir", "Probe", "ok", "dir \x1b]0;pwned\x07 ok"))
    assert "\x1b" not in line and "\x07" not in line


def test_json_document_shape() -> None:
    doc = report_to_dict(REPORT, "1.2.3")
    assert json.loads(json.dumps(doc)) == doc
    assert list(doc) == ["doctor", "gputop_version", "verdict", "exit_status", "checks"]
    assert (doc["doctor"], doc["verdict"], doc["exit_status"]) == (1, "limited", 0)
    assert doc["checks"][1] == {
        "id": "persistence",
        "title": "Persistence",
        "verdict": "limited",
        "summary": "off on GPU 1",
        "details": [],
        "advice": ["sudo nvidia-smi -pm 1"],
        "info": [],
        "facts": {},
    }


def test_unreadable_reads_gpu_process_rows_too() -> None:
    p = GpuProcess(7, 0, "compute", unavailable={"sm_percent": "no recent sample"})
    [u] = unreadable(snapshot((Gpu(0, None, "H100"),), (p,)))
    assert (u.owner, u.line(), u.harmless) == (
        "gpu_process",
        "sm_percent: no recent sample for 1 GPU process (PID 7)",
        True,
    )


def test_the_check_ids_are_those_docs_doctor_md_documents() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "doctor.md").read_text()
    for id in ("driver", "gpus", "persistence", "processes", "proc", "pid_namespace", "mig", "gpm", "fields"):
        assert f"`{id}`" in doc
    assert "`probe_dir`" in doc and "`torch`" in doc


@pytest.mark.parametrize(
    ("text", "build"),
    [
        ("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n", ("2.13.0+cpu", None)),
        ("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n", ("2.11.0+cu130", "13.0")),
        ("__version__ = '2.5.1'\ncuda = '12.4'\ngit_version = 'abc'\n", ("2.5.1", "12.4")),
        ("__version__ = get_version()\ncuda = None\n", None),  # not a plain value: import torch instead
        ("__version__ = '2.5.1'\n", None),  # no cuda line at all
        ("cuda = None\n", None),
        ("this is not python(", None),
    ],
)
def test_torch_build_is_read_from_version_py_without_importing_torch(tmp_path, text, build) -> None:
    (tmp_path / "version.py").write_text(text)
    assert torch_build(str(tmp_path)) == build


def test_a_missing_version_file_is_no_build(tmp_path) -> None:
    assert torch_build(str(tmp_path)) is None


SHARED_WITH_THE_COLLECTOR = ("gputop.collect.nvml.errors", "gputop.collect.host", "gputop.collect.sampler")
"""Modules whose public names the doctor may use: the one NVML error mapping, the PID-namespace test, snapshots."""


def test_the_doctor_reads_the_collector_through_its_public_functions_only() -> None:
    doctor = Path(__file__).resolve().parents[2] / "gputop" / "doctor"
    for path in sorted(doctor.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("gputop.collect") for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gputop.collect"):
                for alias in node.names:
                    public = alias.name in gputop.collect.nvml.__all__
                    allowed = (
                        public if node.module == "gputop.collect.nvml" else node.module in SHARED_WITH_THE_COLLECTOR
                    )
                    assert allowed and not alias.name.startswith("_"), f"{path.name}: {node.module}.{alias.name}"
