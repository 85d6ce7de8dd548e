"""The GPUs of the Slurm job gputop runs in (``SLURM_JOB_ID`` in its environment) or was named (``--slurm-job``),
as this node's NVML GPUs, so that the dashboard can show them first.

Inside a job step Slurm says which GPUs it gave in three ways; the first that is set wins:

- ``SLURM_STEP_GPUS``: the step's GPUs, as the node's GPU indices (``gres.conf``'s order, NVML's on a node whose
  ``gres.conf`` is made by ``AutoDetect=nvml``)
- ``SLURM_JOB_GPUS``: the job's GPUs on this node, the same indices
- ``CUDA_VISIBLE_DEVICES``: UUIDs (``GPU-...``, ``MIG-...``) or indices; indices here count the GPUs the job may
  see, which are NVML's own where devices are constrained (NVML then sees those alone) or unconstrained (all)

A job named on the command line has its GPUs from ``scontrol -d``'s ``GRES=gpu:N(IDX:...)`` for this node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gputop.collect.slurm import valid_job_id
from gputop.frozen import immutable
from gputop.model import SLURM_MAX_GPUS, Gpu, SlurmJob
from gputop.sanitize import printable

GPU_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
"""The environment's names for a job's GPUs, the most precise first."""
MAX_GPU_TOKEN_CHARS = 96
"""The longest GPU named in a list kept: a MIG UUID is 40 characters."""


@immutable
class Allocation:
    """A Slurm job's GPUs as named where gputop learned them: ``gpus`` indices or UUIDs, ``source`` the variable
    (or ``scontrol``) they came from; ``name`` the job's name where known."""

    job_id: str
    gpus: tuple[str, ...]
    source: str | None
    name: str | None = None


def gpu_list(text: str) -> tuple[str, ...]:
    """The GPUs of a comma-separated list (``0,1``, ``GPU-8f2e...``), each bounded and printable, at most
    ``SLURM_MAX_GPUS``; ``NoDevFiles`` (Slurm's word for none) and empty items are left out."""
    items = [item.strip() for item in text.split(",", SLURM_MAX_GPUS)[:SLURM_MAX_GPUS]]
    return tuple(printable(item[:MAX_GPU_TOKEN_CHARS]) for item in items if item and item not in ("NoDevFiles", "-1"))


def allocation_from_env(env: Mapping[str, str]) -> Allocation | None:
    """The allocation gputop runs in, from its environment; None outside one (or with a malformed job id)."""
    job_id = env.get("SLURM_JOB_ID", "").strip()
    if not valid_job_id(job_id):
        return None
    for variable in GPU_VARIABLES:
        gpus = gpu_list(env.get(variable, ""))
        if gpus:
            return Allocation(job_id, gpus, variable, name=_name(env.get("SLURM_JOB_NAME")))
    return Allocation(job_id, (), None, name=_name(env.get("SLURM_JOB_NAME")))


def _name(text: str | None) -> str | None:
    return None if not text else printable(text[:256])


def allocation_of(job: SlurmJob) -> Allocation:
    """The allocation of a job Slurm told of (``--slurm-job``): its GPUs on this node."""
    gpus = tuple(map(str, job.gpus or ()))
    return Allocation(job.id, gpus, "scontrol" if gpus else None, name=job.name)


def job_gpu_indices(allocation: Allocation, gpus: Sequence[Gpu]) -> tuple[int, ...]:
    """The NVML indices of the allocation's GPUs among ``gpus``, in the allocation's order: a UUID matches a GPU's
    UUID, a number its index; one that names no GPU here is left out."""
    by_uuid = {g.uuid: g.index for g in gpus if g.uuid}
    indices = {g.index for g in gpus}
    found: list[int] = []
    for token in allocation.gpus:
        if token.isascii() and token.isdigit():
            if int(token) in indices:
                found.append(int(token))
        elif token in by_uuid:
            found.append(by_uuid[token])
    return tuple(dict.fromkeys(found))


def job_gpus_first(gpus: Sequence[Gpu], first: Sequence[int]) -> list[Gpu]:
    """``gpus`` with those whose index is in ``first`` before the others, in ``first``'s order."""
    rank = {index: place for place, index in enumerate(first)}
    return sorted(gpus, key=lambda g: rank.get(g.index, len(rank)))


def allocation_notice(allocation: Allocation, found: Sequence[int]) -> str:
    """A line saying whose GPUs come first: ``slurm job 123 (train): its GPUs 0, 1 first (SLURM_JOB_GPUS)``."""
    job = f"slurm job {allocation.job_id}" + (f" ({allocation.name})" if allocation.name else "")
    if allocation.source is None:
        return f"{job}: no GPUs allocated to it on this node"
    if not found:
        named = ",".join(allocation.gpus[:8])
        return f"{job}: its GPUs {named} ({allocation.source}) are none of this node's"
    return f"{job}: its GPUs {', '.join(map(str, found))} first ({allocation.source})"
