"""``gputop estimate``: a model's GPU memory before launch, without a GPU: each part at every batch size asked
for, the peak, what the allocator reserves and NVML will show, and the largest batch that fits a GPU.

The estimate runs the model's training step under PyTorch's FakeTensorMode (``gputop.estimate``); this module only
reads the options, the GPU's memory (``--gpu``) and prints (docs/memory.md).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from gputop.cli.args import UsageError, byte_size, number
from gputop.cli.console import error, say, tell
from gputop.estimate.defaults import CUDA_CONTEXT_BYTES, DEFAULT_MARGIN, KERNELS, PRECISIONS, SHARDS
from gputop.formatting import fmt_bytes
from gputop.sanitize import printable

ERASE_TO_END = "\x1b[K"
"""The terminal's erase-to-end-of-line control: what rewrites the progress line leaves nothing of the longer one
before it."""

NEEDS_TORCH = 'gputop estimate needs PyTorch: pip install "gputop-ml[torch]" (in a checkout: pip install ".[torch]")'


def add_parser(commands: Any) -> None:
    estimate = commands.add_parser(
        "estimate",
        help="a model's GPU memory before launch, without a GPU, and the largest batch that fits (needs torch)",
        usage="gputop estimate MODEL [--input SHAPE[,SHAPE...]] [--batch N[,N...]] [--optimizer NAME] "
        "[--precision P] [--checkpointing] [--checkpoint-class CLASS] [--inference] "
        "[--gpu INDEX | --memory SIZE] [--layers] [--json]",
        description="Run two training steps of MODEL (a factory, package.module:function, returning an nn.Module "
        "or a module and a function that makes a batch for a batch size) under PyTorch's FakeTensorMode, which "
        "allocates no memory, and report each part of its memory (weights, gradients, optimizer state, "
        "activations, temporaries), the peak, what the CUDA caching allocator reserves and what NVML will show "
        "(docs/memory.md).",
    )
    estimate.add_argument(
        "model",
        metavar="MODEL",
        help="the model factory, package.module:function, from PYTHONPATH, the installed packages or the current "
        "directory (only when no one else can write to it); or hf:TYPE (a configuration transformers ships, as "
        "hf:gpt2), hf:PATH (a config.json or a model directory, no weights read) or timm:NAME; nothing is downloaded",
    )
    estimate.add_argument(
        "--input",
        type=_inputs,
        metavar="SHAPE[,SHAPE...]",
        dest="estimate_inputs",
        help="the batch's tensors after the batch dimension, as 3x224x224 or 128:int64, for a factory that returns "
        "a module alone",
    )
    estimate.add_argument(
        "--seq",
        type=_sequence_length,
        metavar="N",
        dest="estimate_seq",
        help="tokens per sample of an hf: model (default 512, or fewer where the model takes fewer)",
    )
    estimate.add_argument(
        "--batch",
        type=_batch_sizes,
        default=(1,),
        metavar="N[,N...]",
        dest="estimate_batches",
        help="the batch sizes to estimate (default 1)",
    )
    estimate.add_argument(
        "--optimizer", default="adam", metavar="NAME", help="sgd, adam, adamw or any torch.optim class (default adam)"
    )
    estimate.add_argument(
        "--optimizer-args",
        type=_optimizer_args,
        default={},
        metavar="K=V[,K=V...]",
        help="the optimizer's keyword arguments, as lr=0.01,momentum=0.9",
    )
    estimate.add_argument("--precision", choices=PRECISIONS, default="fp32", help="(default fp32)")
    estimate.add_argument(
        "--checkpointing",
        action="store_true",
        help="activation checkpointing of the model's repeated blocks (the output names them)",
    )
    estimate.add_argument(
        "--checkpoint-class",
        metavar="CLASS",
        help="checkpoint the modules of this class instead, as Bottleneck or GPT2Block (implies --checkpointing)",
    )
    estimate.add_argument(
        "--inference", action="store_true", help="one forward pass without gradients or optimizer instead"
    )
    target = estimate.add_mutually_exclusive_group()
    target.add_argument("--gpu", type=_gpu_index, metavar="INDEX", help="judge against this GPU's memory (NVML)")
    target.add_argument(
        "--memory",
        type=gpu_size,
        metavar="SIZE",
        help="judge against a GPU of this size, as 80GiB or 24GB (a bare number is GiB: 80 is 80GiB)",
    )
    estimate.add_argument(
        "--margin",
        type=margin_percent,
        default=DEFAULT_MARGIN * 100,
        metavar="PERCENT",
        help=f"the share of the GPU's memory to keep free (default {DEFAULT_MARGIN * 100:.0f}%%): 5 or 5%% is 5%%, "
        "a bare number under 1 a fraction (0.05 is 5%%)",
    )
    estimate.add_argument(
        "--context-bytes",
        type=byte_size,
        metavar="SIZE",
        default=CUDA_CONTEXT_BYTES,
        help="the GPU memory the process holds outside PyTorch's allocator: CUDA context, libraries "
        f"(default {fmt_bytes(CUDA_CONTEXT_BYTES)})",
    )
    estimate.add_argument(
        "--gpus",
        type=_gpu_count,
        default=1,
        metavar="N",
        help="training spread over N GPUs: every figure is one GPU's, the batch each GPU's (default 1)",
    )
    estimate.add_argument(
        "--shard",
        choices=SHARDS,
        help="how, with --gpus: ddp (the default), zero1 (optimizer state), zero2 (and gradients), fsdp or zero3 "
        "(and weights: FSDP2's fully_shard)",
    )
    estimate.add_argument(
        "--kernels",
        choices=KERNELS,
        default="cuda",
        help="whose attention kernels to assume: cuda, the fused ones a GPU runs (no score matrix kept with "
        "dropout), or cpu, the CPU's (default cuda)",
    )
    estimate.add_argument(
        "--gpu-model",
        metavar="NAME",
        help="a GPU model (H100, A100, L4, an NVML name): the time of a step on it from the step's FLOPs, its "
        "peak and the MFU large training runs publish (default: GPU INDEX's model with --gpu)",
    )
    estimate.add_argument("--layers", action="store_true", help="also the table of each layer's parameters and saves")
    estimate.add_argument("--json", action="store_true", dest="estimate_json", help="print a JSON document")


def _inputs(text: str) -> Any:
    from gputop.estimate.inputs import parse_inputs

    try:
        return parse_inputs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _optimizer_args(text: str) -> dict[str, Any]:
    from gputop.estimate.inputs import parse_optimizer_args

    try:
        return parse_optimizer_args(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _batch_sizes(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if not all(p.isascii() and p.isdigit() and 0 < int(p) <= 1 << 30 for p in parts):
        raise argparse.ArgumentTypeError(f"not batch sizes: {text!r} (as 8 or 8,32,128)")
    return tuple(int(p) for p in parts)


def _sequence_length(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 1 << 24):
        raise argparse.ArgumentTypeError(f"not a sequence length: {text!r} (as 1024)")
    return int(text)


def _gpu_count(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 1 << 16):
        raise argparse.ArgumentTypeError(f"not a number of GPUs: {text!r} (as 8)")
    return int(text)


def _gpu_index(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 4):
        raise argparse.ArgumentTypeError(f"not a GPU index: {text!r}")
    return int(text)


def gpu_size(text: str) -> int:
    """A GPU's memory: a size with its unit, or a bare number of GiB, as GPUs are sold (``80`` is 80 GiB: no GPU
    has 80 bytes)."""
    if text.strip() and not text.strip()[-1].isalpha():
        return byte_size(f"{text.strip()}GiB")
    return byte_size(text)


def margin_percent(text: str) -> float:
    """A percentage, ``5%`` or ``5``; a bare number under 1 is the fraction people write it as (``0.05`` is 5 %,
    where 0.05 % of a GPU is never meant)."""
    value = number(text.removesuffix("%"), "a percentage")
    if not text.endswith("%") and 0 < value < 1:
        value *= 100
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"must be from 0 to under 100 percent, got {text}")
    return value


def gpu_memory(index: int) -> tuple[int, str | None]:
    """GPU ``index``'s total memory and, where gputop knows its peak (``gputop.gpu_peaks``), its name, through
    NVML; ``UsageError`` when there is no driver or no such GPU."""
    from gputop.collect.nvml import NvmlCollector
    from gputop.gpu_peaks import peak_of

    collector = NvmlCollector()
    driver = collector.start()
    try:
        if not driver.ok:
            raise UsageError(f"--gpu {index}: no NVIDIA driver: {driver.reason}")
        gpus, _ = collector.read(slow=False)
        found = next((g for g in gpus if g.index == index), None)
        if found is None:
            raise UsageError(f"--gpu {index}: no such GPU (this machine has {len(gpus)}; use --memory SIZE instead)")
        if found.memory_total_bytes is None:
            raise UsageError(f"--gpu {index}: its memory cannot be read: {found.reason or 'unknown'}")
        return found.memory_total_bytes, found.name if peak_of(found.name) else None
    finally:
        collector.close()


def main(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("torch") is None:
        return error(NEEDS_TORCH)
    try:
        memory, gpu_name = (args.memory, None) if args.gpu is None else gpu_memory(args.gpu)
    except UsageError as exc:
        return error(str(exc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own (no NumPy, deprecations) are not the user's business here
        try:
            from gputop.estimate import EstimateError, estimate
        except ImportError as exc:
            return error(f"gputop estimate cannot import torch: {exc}")
        from gputop.estimate.progress import progress_line

        try:
            with progress_on_terminal(not args.estimate_json) as show, users_output_to_stderr():
                show(f"importing torch and building {args.model}…")
                report = estimate(
                    args.model,
                    args.estimate_batches,
                    inputs=args.estimate_inputs,
                    optimizer=args.optimizer,
                    optimizer_args=args.optimizer_args,
                    precision=args.precision,
                    checkpointing=args.checkpointing,
                    checkpoint_class=args.checkpoint_class,
                    inference=args.inference,
                    memory_bytes=memory,
                    margin=args.margin / 100,
                    context_bytes=args.context_bytes,
                    layers=args.layers,
                    kernels=args.kernels,
                    gpu_model=args.gpu_model or gpu_name,
                    gpus=args.gpus,
                    shard=args.shard,
                    progress=lambda progress: show(progress_line(progress)),
                    sequence_length=args.estimate_seq,
                )
        except EstimateError as exc:
            return error(str(exc))
        except KeyboardInterrupt:  # Ctrl-C, or raised by the model's code: either way, no estimate
            say("interrupted (KeyboardInterrupt): no estimate")
            return 130
    from gputop.estimate.render import render_text, report_to_dict

    if args.estimate_json:
        sys.stdout.write(json.dumps(report_to_dict(report), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(report))
    sys.stdout.flush()
    return 0


@contextlib.contextmanager
def progress_on_terminal(wanted: bool) -> Iterator[Callable[[str], None]]:
    """A function that shows a line of progress on stderr, rewritten in place and erased when the block ends,
    before the result or an error is printed. It shows nothing unless ``wanted`` and stderr is a terminal: a
    log, a pipe or ``--json``'s reader gets no progress."""
    if not (wanted and sys.stderr.isatty()):
        yield lambda text: None
        return

    def show(text: str) -> None:
        # cut to the width: a line that wrapped could not be rewritten from its start
        tell("\r" + printable(text)[: _columns() - 1] + ERASE_TO_END)

    try:
        yield show
    finally:
        tell("\r" + ERASE_TO_END)  # the terminal's own echo of ^C included


def _columns() -> int:
    """The terminal's width; 80 where it says none (0, as a new pseudo-terminal does)."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        columns = 0
    return columns or 80


@contextlib.contextmanager
def users_output_to_stderr() -> Iterator[None]:
    """What the model's code prints goes to stderr, so that stdout holds the estimate alone (``--json`` one JSON
    document): ``print`` (``sys.stdout`` is stderr in the block) and writes to file descriptor 1 by C code
    (pointed at stderr in the block) while it runs, and, through an exit handler that runs before the ones the
    model's code registered, whatever it prints as the process ends."""
    stdout, stderr = sys.stdout, sys.stderr
    _flush(stdout)
    saved = _point_stdout_at_stderr()
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        _flush(sys.stdout)
        sys.stdout, sys.stderr = stdout, stderr  # as the command found them, whatever the model's code set
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
        atexit.unregister(_stdout_to_stderr_at_exit)
        atexit.register(_stdout_to_stderr_at_exit)


def _point_stdout_at_stderr() -> int | None:
    """File descriptor 1 pointed at stderr; a copy of what it was (None: there was no stdout or no stderr)."""
    try:
        saved = os.dup(1)
    except OSError:
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(saved)
        return None
    return saved


def _stdout_to_stderr_at_exit() -> None:
    _flush(sys.stdout)  # the estimate, or what a caller in this process printed after it
    _flush(sys.stderr)
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    sys.stdout = sys.stderr


def _flush(stream: Any) -> None:
    with contextlib.suppress(Exception):
        stream.flush()
