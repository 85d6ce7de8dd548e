"""The step anatomy on a real GPU: CUDA events, copies to the GPU, one hidden sync a step, and the probe's cost.

Trains a small bf16 model from a DataLoader with pinned memory and workers, copying each batch with
``non_blocking=True`` and calling ``loss.item()`` once a step (the line marked ``ITEM_LINE``), for ``--seconds``,
three times in turn: without the probe, with it, without it again (steps/s of each, the probe's cost is the
difference). The run with the probe prints its report's ``"step"`` object, which should show ``clock: "cuda"``,
the phases, ``h2d_pageable_share`` 0 and ``h2d_blocking_share`` 0, and one sync a step at the ``ITEM_LINE`` line
(``call: "item"``).

usage: python benchmarks/step_anatomy_cuda.py [--seconds 12]   (needs a CUDA GPU; one run takes about a minute)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def job(seconds: float, directory: str | None) -> None:
    if directory is not None:
        sys.path.insert(0, str(ROOT))
        import gputop.probe

        assert gputop.probe.install(directory)
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Rows(Dataset):
        def __len__(self) -> int:
            return 10**7

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.randn(512), torch.randint(0, 10, ())

    blocks = [m for _ in range(6) for m in (torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512))]
    model = torch.nn.Sequential(*blocks, torch.nn.Linear(512, 10)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    loader = DataLoader(Rows(), batch_size=256, num_workers=4, pin_memory=True, persistent_workers=True)
    deadline = time.monotonic() + seconds
    steps, total, started = 0, 0.0, 0.0
    for x, y in loader:
        x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        total += loss.item()  # ITEM_LINE
        steps += 1
        if steps == 20:
            started = time.perf_counter()
        if time.monotonic() > deadline:
            break
    print(f"{'probe' if directory else 'plain'}: {(steps - 20) / (time.perf_counter() - started):.1f} steps/s")
    if directory is not None:
        probe = gputop.probe.installed()
        assert probe is not None
        time.sleep(1.0)  # the last sampled steps' events complete
        probe.write()
        report = json.loads((Path(directory) / f"{os.getpid()}.json").read_text())
        print(json.dumps(report["step"], indent=1))
        print("failures", report["failures"], report["last_failure"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--job", choices=("plain", "probe"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        job(args.seconds, tempfile.mkdtemp() if args.job == "probe" else None)
        return 0
    lines = Path(__file__).read_text().splitlines()
    print("ITEM_LINE is line", next(n for n, text in enumerate(lines, 1) if text.endswith("# ITEM_LINE")))
    for kind in ("plain", "probe", "plain"):
        argv = [sys.executable, "-W", "ignore", __file__, "--job", kind, "--seconds", str(args.seconds)]
        subprocess.run(argv, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
