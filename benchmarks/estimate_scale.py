"""``gputop estimate`` on a 1-billion-parameter transformer that is never materialised: the wall time and the peak
resident memory of the whole command (a child process: ``gputop estimate`` with bf16 mixed precision, AdamW and a
batch of 8 sequences of 1,024 tokens, and again with the search for the largest batch on an 80 GiB GPU).

usage: python benchmarks/estimate_scale.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
VOCABULARY, WIDTH, HEADS, LAYERS, SEQUENCE = 32_000, 2048, 16, 20, 1024


class Gpt(nn.Module):
    """A decoder-only transformer of ``nn.TransformerEncoderLayer`` blocks, causal, without dropout (as large
    language models are pretrained): 1.14 billion parameters at the sizes above. Causal attention without
    dropout takes the fused attention kernel, which keeps no score matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, WIDTH)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(LAYERS)
        )
        self.head = nn.Linear(WIDTH, VOCABULARY, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x, is_causal=True, src_mask=_causal(tokens.shape[1]))
        return self.head(x)


def _causal(length: int) -> torch.Tensor:
    return nn.Transformer.generate_square_subsequent_mask(length)


def gpt_1b() -> tuple[nn.Module, object]:
    return Gpt(), lambda batch: torch.randint(0, VOCABULARY, (batch, SEQUENCE))


def run(*extra: str) -> tuple[float, int, dict]:
    """Wall seconds, peak RSS bytes and the JSON document of one ``gputop estimate`` of the 1B model."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "gputop", "estimate", "estimate_scale:gpt_1b", "--json", *extra],
        cwd=HERE,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert rss >= before
    return wall, rss * 1024, json.loads(result.stdout)


def main() -> None:
    common = ["--precision", "bf16-mixed", "--optimizer", "adamw"]
    for label, extra in (
        ("batch 8", ["--batch", "8"]),
        ("batch 8, largest on 80GiB", ["--batch", "8", "--memory", "80GiB"]),
    ):
        wall, rss, doc = run(*common, *extra)
        batch = doc["batches"][0]
        print(
            f"{label}: {doc['parameters']:,} parameters, peak allocated {batch['peak_allocated_bytes'] / 2**30:.1f} "
            f"GiB, NVML {batch['nvml_bytes'] / 2**30:.1f} GiB, largest batch {doc['largest_batch']} "
            f"({doc['search_estimates']} estimates); wall {wall:.1f} s, peak RSS {rss / 2**20:.0f} MiB"
        )


if __name__ == "__main__":
    main()
