"""A real sharded training step over two CPU processes (gloo) and each rank's peak memory, as the CPU allocator
reported it to ``torch.profiler``: what the sharded estimate is checked against. It shares no code with the
estimate: real processes, a real process group, torch's own DDP, ZeroRedundancyOptimizer and FSDP2."""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from pathlib import Path

warnings.simplefilter("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from tests.estimate.launch_models import mlp  # noqa: E402
from tests.estimate.measure import _peak  # noqa: E402

GPUS, BATCH, STEPS = 2, 8, 2
ROUNDS = 6
"""Each way is measured this many times over in each rank. gloo runs a collective on a thread of its own, and that
thread holds the collective's tensors until it has done its own bookkeeping after the rank's ``wait()`` returns. When
the rank allocates its next tensors before then, its real peak holds one more layer's gathered weights (FSDP2's
all-gather output, 263,168 bytes here); from one run to the next, 0 to 3 of them. Such a late free only ever adds to a
peak, so the lowest of the rounds is what the step itself must hold: the number an estimate is checked against."""


def wrapped(model: torch.nn.Module, shard: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The model and its optimizer, spread the ``shard`` way."""
    if shard in ("ddp", "zero1"):
        from torch.distributed.optim import ZeroRedundancyOptimizer
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model)
        if shard == "zero1":
            return model, ZeroRedundancyOptimizer(model.parameters(), torch.optim.Adam, foreach=True)
        return model, torch.optim.Adam(model.parameters(), foreach=True)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (GPUS,))
    for block in model:  # type: ignore[attr-defined]
        fully_shard(block, mesh=mesh, reshard_after_forward=shard != "zero2")
    fully_shard(model, mesh=mesh, reshard_after_forward=shard != "zero2")
    return model, torch.optim.Adam(model.parameters(), foreach=True)


def one_round(shard: str, rank: int) -> int:
    """The peak bytes of one rank, from building the model to the end of its steps, sharded the ``shard`` way."""
    torch.manual_seed(rank)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model, make_batch = mlp()
        batch = make_batch(BATCH)
        model, optimizer = wrapped(model, shard)
        for _ in range(STEPS):
            model(batch).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        del model, batch, optimizer
    return _peak(prof)


def rank_peaks(rank: int, shards: list[str], folder: str) -> None:
    """One rank: each way of sharding in turn, ``ROUNDS`` times each."""
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=GPUS)
    found = {}
    for shard in shards:
        found[shard] = [one_round(shard, rank) for _ in range(ROUNDS)]
    Path(folder, f"rank{rank}").write_text(json.dumps(found))
    dist.destroy_process_group()


def peaks(shards: list[str]) -> dict[str, list[list[int]]]:
    """Each rank's peak bytes in each round, over two steps of ``launch_models.mlp`` at batch 8, spread each of the
    ``shards`` ways: two processes for all of them."""
    with tempfile.TemporaryDirectory(prefix="gputop-sharded-") as folder:
        mp.spawn(rank_peaks, args=(shards, folder), nprocs=GPUS)
        ranks = [json.loads(Path(folder, f"rank{r}").read_text()) for r in range(GPUS)]
    return {shard: [found[shard] for found in ranks] for shard in shards}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(peaks(sys.argv[1:])))
