"""torch in gputop's own Python: its build, and whether it sees the GPUs NVML sees."""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass

from gputop.doctor.checks.words import plural
from gputop.doctor.result import LIMITED, OK, Check, Fact

VERSION_FILE_MAX_BYTES = 64 * 1024
"""torch's version.py is a few hundred bytes; a larger one is not read."""


@dataclass(frozen=True)
class TorchView:
    installed: bool
    version: str | None = None
    cuda_build: str | None = None  # torch.version.cuda: None for a CPU-only build
    cuda_available: bool | None = None
    device_count: int | None = None
    error: str | None = None


def torch_build(package_dir: str) -> tuple[str, str | None] | None:
    """``(version, CUDA version or None)`` from torch's own ``version.py``, read without importing torch (an import
    costs a second or more); None when that file cannot be read as plain assignments."""
    try:
        with open(os.path.join(package_dir, "version.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read(VERSION_FILE_MAX_BYTES))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    version, cuda = values.get("__version__"), values.get("cuda", "")
    if not isinstance(version, str) or not (cuda is None or isinstance(cuda, str)) or cuda == "":
        return None
    return version, cuda


def read_torch() -> TorchView:
    """torch in this interpreter. A CPU-only build is known from its ``version.py`` alone; a CUDA build is imported
    to ask whether it sees the GPUs. Looking costs nothing when torch is not installed."""
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return TorchView(installed=False)
    build = next((b for d in spec.submodule_search_locations or () if (b := torch_build(d)) is not None), None)
    if build is not None and build[1] is None:
        return TorchView(True, build[0], None, cuda_available=False, device_count=0)
    try:
        with warnings.catch_warnings():  # torch warns on stderr about optional parts (NumPy) it cannot load
            warnings.simplefilter("ignore")
            import torch
    except Exception as exc:  # a broken install: missing libraries, an ABI mismatch
        return TorchView(installed=True, error=f"import failed: {type(exc).__name__}: {exc}")
    version = str(torch.__version__)
    cuda_build = torch.version.cuda
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except Exception as exc:
        return TorchView(True, version, cuda_build, None, None, f"{type(exc).__name__}: {exc}")
    return TorchView(True, version, cuda_build, available, count)


def _cuda_tuple(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in (text or "").split(".")[:2]) or None
    except ValueError:
        return None


def torch_check(view: TorchView, gpu_count: int, driver_cuda: str | None) -> Check:
    title = "PyTorch"
    facts: dict[str, Fact] = {
        "installed": view.installed,
        "version": view.version,
        "cuda_build": view.cuda_build,
        "cuda_available": view.cuda_available,
        "device_count": view.device_count,
        "error": view.error,
        "python": sys.executable,
    }
    where = f"in {sys.executable}"
    if not view.installed:
        return Check(
            "torch",
            title,
            OK,
            f"not installed {where}: gputop needs it only for gputop demo; a job uses its own environment's torch",
            facts=facts,
        )
    if view.error:
        return Check(
            "torch",
            title,
            LIMITED,
            f"torch {view.version or ''} {where}: {view.error}".replace("  ", " "),
            advice=("reinstall torch in this environment (pip install --force-reinstall torch)",),
            facts=facts,
        )
    build = f"CUDA {view.cuda_build} build" if view.cuda_build else "CPU-only build"
    summary = f"torch {view.version} ({build}) {where}"
    if view.cuda_available:
        return Check("torch", title, OK, f"{summary} sees {plural(view.device_count or 0, 'GPU')}", facts=facts)
    if not gpu_count:
        return Check("torch", title, OK, f"{summary}; no GPU to see", facts=facts)
    if not view.cuda_build:
        return Check(
            "torch",
            title,
            LIMITED,
            f"{summary} cannot use the {plural(gpu_count, 'GPU')} here",
            advice=(
                "install a CUDA build of torch for jobs run with this Python "
                "(pip install torch --index-url https://download.pytorch.org/whl/cu124)",
            ),
            facts=facts,
        )
    built, driver = _cuda_tuple(view.cuda_build), _cuda_tuple(driver_cuda)
    if built and driver and built > driver:
        advice = (
            f"the driver supports CUDA {driver_cuda} at most and torch was built for CUDA {view.cuda_build}: upgrade "
            f"the driver, or install a torch built for CUDA {driver_cuda} or older",
        )
    else:
        advice = ("check CUDA_VISIBLE_DEVICES and access to /dev/nvidia* for this user",)
    return Check("torch", title, LIMITED, f"{summary} does not see the GPUs", advice=advice, facts=facts)
