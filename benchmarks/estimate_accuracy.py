"""``gputop estimate``'s peak against a real CPU run of the same two training steps, for the six model families of
the tests at three batch sizes each, and ``nn.LSTM`` beside them (oneDNN's kernel and PyTorch's native one): prints
the markdown table of docs/memory.md.

The measured peak is the CPU allocator's, from ``torch.profiler``'s memory events (``tests/estimate/measure.py``).

usage: python benchmarks/estimate_accuracy.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.simplefilter("ignore")  # torch's own (no NumPy) would mix with the table

import torch  # noqa: E402

from gputop.estimate import estimate  # noqa: E402
from gputop.formatting import fmt_bytes  # noqa: E402
from tests.estimate.families import FAMILIES, Factory, lstm  # noqa: E402
from tests.estimate.measure import measured_peak  # noqa: E402


def rows(name: str, factory: Factory, batch_sizes: tuple[int, ...], onednn: bool = True) -> list[str]:
    """One markdown row per batch size: estimated and measured peak and the error."""
    start = time.perf_counter()
    report = estimate(factory, batch_sizes)
    estimate_s = (time.perf_counter() - start) / len(batch_sizes)
    lines = []
    for batch in report.batches:
        with torch.backends.mkldnn.flags(enabled=onednn):
            measured = measured_peak(factory, batch.batch_size)
        error = 100 * (batch.peak_allocated_bytes / measured - 1)
        lines.append(
            f"| {name} | {batch.batch_size} | {fmt_bytes(batch.peak_allocated_bytes)} | {fmt_bytes(measured)} "
            f"| {error:+.1f} % | {estimate_s:.2f} s |"
        )
    return lines


def main() -> None:
    print("| model | batch | estimated peak | measured peak | error | estimate time per batch size |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (factory, batch_sizes) in FAMILIES.items():
        print("\n".join(rows(name, factory, batch_sizes)))
    print("\n".join(rows("nn.LSTM, oneDNN (not among the six)", lstm, (4, 16, 64))))
    print("\n".join(rows("nn.LSTM, native kernels (not among the six)", lstm, (4, 16, 64), onednn=False)))


if __name__ == "__main__":
    main()
