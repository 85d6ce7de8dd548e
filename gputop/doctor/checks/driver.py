"""The driver and NVML: whether NVML starts, the driver's branch, persistence mode and how long start-up took."""

from __future__ import annotations

from gputop.doctor import nvml
from gputop.doctor.checks.words import plural, spans
from gputop.doctor.result import BLOCKED, LIMITED, OK, Check, Fact

SLOW_START_MS = 1000.0
"""An ``nvmlInit`` or first GPU call slower than this is the driver loading the GPU's state: persistence is off."""

GPM_BRANCH = 520
"""The first driver branch with GPM (``nvmlGpm*``)."""


def branch_of(driver_version: str | None) -> int | None:
    """The driver branch (550 for 550.90.07), or None."""
    major = (driver_version or "").split(".")[0]
    return int(major) if major.isascii() and major.isdigit() else None


def driver_check(session: nvml.Session) -> Check:
    title = "NVIDIA driver and NVML"
    facts: dict[str, Fact] = {
        "pynvml_version": nvml.pynvml_version(),
        "init_ms": session.init_ms,
        "driver_version": None,
        "branch": None,
        "nvml_version": None,
        "cuda_driver_version": None,
        "gpu_count": session.count,
        "error": session.reason,
    }
    if not session.started:
        return Check(
            "driver",
            title,
            BLOCKED,
            session.reason or "NVML did not start",
            advice=(_init_advice(session.reason),),
            facts=facts,
        )
    version, _ = session.system("nvmlSystemGetDriverVersion")
    nvml_version, _ = session.system("nvmlSystemGetNVMLVersion")
    cuda, _ = session.system("nvmlSystemGetCudaDriverVersion_v2")
    if cuda is None:
        cuda, _ = session.system("nvmlSystemGetCudaDriverVersion")
    driver = nvml.text(version) if version is not None else None
    branch = branch_of(driver)
    cuda_text = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if cuda is not None else None
    facts.update(
        driver_version=driver,
        branch=f"R{branch}" if branch is not None else None,
        nvml_version=nvml.text(nvml_version) if nvml_version is not None else None,
        cuda_driver_version=cuda_text,
        gpu_count=session.count,
    )
    details = (
        f"driver {driver or 'unknown'} (branch {facts['branch'] or 'unknown'}), "
        f"NVML {facts['nvml_version'] or 'unknown'}",
        f"CUDA driver API {cuda_text or 'unknown'}, pynvml (nvidia-ml-py) {facts['pynvml_version'] or 'unknown'}",
    )
    if session.count is None:
        return Check("driver", title, BLOCKED, session.reason or "NVML could not count the GPUs", details, facts=facts)
    if session.count == 0:
        return Check(
            "driver",
            title,
            BLOCKED,
            "NVML started but sees no GPU",
            details,
            ("check nvidia-smi -L; in a container, start it with GPU access (docker run --gpus all)",),
            facts,
        )
    summary = f"driver {driver or 'unknown'}, {plural(session.count, 'GPU')}"
    if branch is not None and branch < 535:
        return Check(
            "driver",
            title,
            LIMITED,
            summary + f": R{branch} lacks calls gputop uses",
            details,
            (
                f"upgrade the driver to R535 or newer (R{branch} has no v3 process lists, no reserved-memory split"
                + (", no GPM" if branch < GPM_BRANCH else "")
                + ")",
            ),
            facts,
        )
    return Check("driver", title, OK, summary, details, facts=facts)


def _init_advice(reason: str | None) -> str:
    text = reason or ""
    if "pynvml" in text:
        return "pip install nvidia-ml-py in gputop's environment"
    if "not found" in text:
        return "install the NVIDIA driver, or start the container with GPU access (docker run --gpus all)"
    if "not loaded" in text:
        return "load the driver: sudo modprobe nvidia (see dmesg if it fails), then nvidia-smi"
    if "mismatch" in text:
        return (
            "reload the nvidia kernel module (sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; "
            "sudo modprobe nvidia) or reboot"
        )
    if "permission" in text:
        return "give this user access to /dev/nvidia* (usually the video group), or run as root"
    return "run nvidia-smi: it reports the same failure with NVIDIA's own words"


def persistence_check(session: nvml.Session) -> Check:
    title = "Persistence mode and start-up time"
    per_gpu: dict[str, Fact] = {}
    off: list[int] = []
    unknown: list[str] = []
    for index, handle in session.usable():
        enabled, reason = nvml.persistence(handle)
        per_gpu[str(index)] = enabled if enabled is not None else reason
        if enabled is False:
            off.append(index)
        elif enabled is None:
            unknown.append(f"GPU {index}: {reason}")
    timing = f"nvmlInit took {session.init_ms:.1f} ms" if session.init_ms is not None else "nvmlInit not timed"
    if session.first_device_ms is not None:
        timing += f", the first GPU call {session.first_device_ms:.1f} ms"
    facts: dict[str, Fact] = {
        "persistence": per_gpu,
        "init_ms": session.init_ms,
        "first_device_call_ms": session.first_device_ms,
    }
    slow = max(session.init_ms or 0.0, session.first_device_ms or 0.0) > SLOW_START_MS
    details = (timing, *unknown)
    if off:
        return Check(
            "persistence",
            title,
            LIMITED,
            f"persistence mode is off on GPU {spans(off)}" + (": start-up is slow" if slow else ""),
            details,
            (
                "enable persistence mode so the driver keeps the GPUs initialised between programs: "
                "sudo nvidia-smi -pm 1 (or run nvidia-persistenced); without it every NVML program's first call "
                "waits for the GPUs to initialise",
            ),
            facts,
        )
    on = [i for i, v in per_gpu.items() if v is True]
    summary = f"on for GPU {spans(int(i) for i in on)}" if on else "not readable"
    return Check("persistence", title, OK, f"{summary}; {timing}", details[1:], facts=facts)
