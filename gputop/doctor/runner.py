"""``gputop doctor``'s run: every check in the order it is shown, each isolated, into one ``Report``.

A check that fails with an exception becomes a ``limited`` check saying so, and the others still run. Checks that
need NVML are ``skipped`` when NVML could not start, and those that ask each GPU when no GPU answers: a check of no
GPU would say all is well.
"""

from __future__ import annotations

from collections.abc import Callable

from gputop.collect.host import in_nested_pid_namespace
from gputop.collect.nvml import gpm_support, process_list_access
from gputop.doctor import nvml
from gputop.doctor.checks.driver import branch_of, driver_check, persistence_check
from gputop.doctor.checks.gpus import gpm_check, gpus_check, mig_check, processes_check
from gputop.doctor.checks.health import health_check
from gputop.doctor.checks.installation import Installed, installation_check, read_installed
from gputop.doctor.checks.probe_dir import probe_dir_check
from gputop.doctor.checks.pytorch import TorchView, read_torch, torch_check
from gputop.doctor.checks.system import pid_namespace_check, proc_check, read_proc_view
from gputop.doctor.checks.unreadable import fields_check, unreadable
from gputop.doctor.result import LIMITED, SKIPPED, Check, Fact, Report
from gputop.model import Snapshot
from gputop.probe import channel


def failed(id: str, title: str, exc: BaseException) -> Check:
    return Check(
        id,
        title,
        LIMITED,
        f"could not check: {type(exc).__name__}: {exc}",
        advice=("this is a bug in gputop doctor: please report it with the line above",),
        facts={"error": f"{type(exc).__name__}: {exc}"},
    )


def isolated(id: str, title: str, make: Callable[[], Check]) -> Check:
    """The check, or a ``limited`` one saying why it could not be made."""
    try:
        return make()
    except Exception as exc:  # one check's failure must not cost the others
        return failed(id, title, exc)


def skipped(id: str, title: str, because: str) -> Check:
    return Check(id, title, SKIPPED, f"not checked: {because}")


def take_snapshot() -> Snapshot:
    from gputop.collect.sampler import SnapshotMaker

    maker = SnapshotMaker()
    try:
        return maker.one_shot()
    finally:
        maker.close()


def run(
    snapshot: Callable[[], Snapshot] = take_snapshot,
    torch: Callable[[], TorchView] = read_torch,
    installed: Callable[[], Installed] = read_installed,
) -> Report:
    """Every check, in the order they are shown. Never raises."""
    checks: list[Check] = []
    try:
        session = nvml.Session.open()
    except Exception as exc:  # Session.open catches NVML's errors; this is anything else
        session = nvml.Session(reason=f"{type(exc).__name__}: {exc}")
    try:
        driver = isolated("driver", "NVIDIA driver and NVML", lambda: driver_check(session))
        checks.append(driver)
        snap: Snapshot | None = None
        snap_error: Exception | None = None
        try:
            snap = snapshot()
        except Exception as exc:
            snap_error = exc
        ready = session.started and bool(session.count)
        no_nvml = "NVML is not usable (see the driver check)"
        answering = bool(session.usable())
        no_gpu = "no GPU answers (see the GPUs check)"

        def with_snapshot(id: str, title: str, make: Callable[[Snapshot], Check]) -> Check:
            if snap is None:
                return failed(id, title, snap_error or RuntimeError("no snapshot"))
            taken = snap
            return isolated(id, title, lambda: make(taken))

        def with_nvml(id: str, title: str, make: Callable[[], Check]) -> Check:
            return isolated(id, title, make) if ready else skipped(id, title, no_nvml)

        def per_gpu(id: str, title: str, make: Callable[[], Check]) -> Check:
            if ready and not answering:
                return skipped(id, title, no_gpu)
            return with_nvml(id, title, make)

        checks.append(with_nvml("gpus", "GPUs", lambda: gpus_check(snap) if snap else _no_snapshot(snap_error)))
        checks.append(
            with_nvml("persistence", "Persistence mode and start-up time", lambda: persistence_check(session))
        )
        checks.append(
            per_gpu("processes", "GPU process lists", lambda: processes_check(process_list_access(session.usable())))
        )
        checks.append(isolated("proc", "Other users' processes (/proc)", lambda: proc_check(read_proc_view())))
        checks.append(
            isolated(
                "pid_namespace",
                "PID namespace",
                lambda: pid_namespace_check(
                    in_nested_pid_namespace(), len({p.pid for p in (snap.processes if snap else ()) if not p.visible})
                ),
            )
        )
        checks.append(
            per_gpu("mig", "MIG (Multi-Instance GPU)", lambda: mig_check({i: nvml.mig(h) for i, h in session.usable()}))
        )
        branch = branch_of(_fact_text(driver.facts.get("driver_version")))
        names = {g.index: g.name for g in snap.gpus} if snap else {}
        checks.append(
            per_gpu(
                "gpm",
                "GPM (SM activity)",
                lambda: gpm_check({i: gpm_support(i, h) for i, h in session.usable()}, names, branch),
            )
        )
        checks.append(
            with_snapshot("fields", "Unreadable values (N/A) in a snapshot", lambda s: fields_check(unreadable(s)))
        )
        if ready and answering:
            checks.append(with_snapshot("health", "GPU health", health_check))
        else:
            checks.append(skipped("health", "GPU health", no_nvml if not ready else no_gpu))
        checks.append(
            isolated("probe_dir", "Probe report directory", lambda: probe_dir_check(*channel.report_dir_and_source()))
        )
        cuda = _fact_text(driver.facts.get("cuda_driver_version"))
        checks.append(isolated("torch", "PyTorch", lambda: torch_check(torch(), session.count or 0, cuda)))
        checks.append(isolated("installation", "Installation", lambda: installation_check(installed())))
    finally:
        session.close()
    return Report(tuple(checks))


def _fact_text(value: Fact) -> str | None:
    return value if isinstance(value, str) else None


def _no_snapshot(exc: Exception | None) -> Check:
    raise exc or RuntimeError("no snapshot")
