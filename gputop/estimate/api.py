"""``estimate()``: a model's GPU memory at each batch size, the largest batch that fits, and the layer table."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gputop.estimate.defaults import (
    CUDA_CONTEXT_BYTES,
    DEFAULT_MARGIN,
    KERNELS,
    PRECISIONS,
    SHARDS,
    Kernels,
    Precision,
    Shard,
)
from gputop.estimate.errors import EstimateError
from gputop.estimate.factory import load_factory
from gputop.estimate.flops import find_gpu, gpu_names, step_time
from gputop.estimate.inputs import InputSpec, parse_inputs
from gputop.estimate.named import is_named, named_factory
from gputop.estimate.parts import BatchEstimate
from gputop.estimate.progress import Phase, Progress
from gputop.estimate.report import Report, Settings
from gputop.estimate.search import largest_fitting

if TYPE_CHECKING:
    from gputop.estimate.session import Session
    from gputop.gpu_peaks import GpuPeak


def estimate(
    model: Callable[[], Any] | str,
    batch_sizes: Sequence[int],
    *,
    inputs: Sequence[InputSpec] | str | None = None,
    optimizer: str = "adam",
    optimizer_args: Mapping[str, Any] | None = None,
    precision: Precision = "fp32",
    checkpointing: bool = False,
    checkpoint_class: str | None = None,
    inference: bool = False,
    memory_bytes: int | None = None,
    margin: float = DEFAULT_MARGIN,
    context_bytes: int = CUDA_CONTEXT_BYTES,
    step: Callable[..., None] | None = None,
    layers: bool = False,
    progress: Callable[[Progress], None] | None = None,
    sequence_length: int | None = None,
    kernels: Kernels = "cuda",
    gpu_model: str | None = None,
    gpus: int = 1,
    shard: Shard | None = None,
) -> Report:
    """Estimate a model's GPU memory without a GPU, by running its training step under ``FakeTensorMode``.

    Args:
        model: a model by name (``hf:gpt2``, ``hf:PATH`` to a config.json, ``timm:convnext_tiny``: ``named.py``),
            or a factory (or its name, ``package.module:function``) that returns an ``nn.Module``, or a module and
            a function that makes one batch for a given batch size. It is called under ``FakeTensorMode``, so the
            model is never materialised. A name is imported from ``sys.path``, and from the current directory only
            when no one else can change it (``factory.search_path_for``, which may take it off ``sys.path``).
        batch_sizes: the batch sizes to estimate.
        inputs: the batch's tensors (shapes after the batch dimension, ``"3x224x224"`` or ``InputSpec``\\ s) when
            the factory returns a module alone.
        optimizer: any ``torch.optim`` class by name (``sgd``, ``adam``, ``adamw``, ``Adagrad``...).
        optimizer_args: its keyword arguments (``lr``, ``momentum``...).
        precision: ``fp32``, ``tf32``, ``bf16-mixed``, ``fp16-mixed`` or ``bf16``.
        checkpointing: run the model's repeated blocks under activation checkpointing (``checkpointing.py`` says
            which are found; ``Report.checkpointed`` which were wrapped).
        checkpoint_class: the class name of the blocks to checkpoint instead (implies ``checkpointing``).
        inference: estimate one forward pass without gradients instead (no optimizer).
        memory_bytes: the GPU's memory: each batch is judged against it and the largest batch that fits is
            searched for.
        margin: the share of ``memory_bytes`` to keep free.
        context_bytes: what the process holds outside PyTorch's allocator (CUDA context, libraries).
        step: a custom training step ``step(model, batch, optimizer)``, for loops that are not forward, loss,
            backward, step; ``batch`` is ``(args, kwargs)`` for the model. It runs twice.
        layers: also build the layer table (at the first batch size).
        progress: called as each estimate starts, with what it runs and what the one before found.
        sequence_length: the tokens per sample of an ``hf:`` model (default 512, or its positions if fewer).
        kernels: whose attention kernels to assume: ``cuda``, the fused ones a GPU runs (no score matrix kept with
            dropout), or ``cpu``, the CPU's (``gputop.estimate.kernels``).
        gpu_model: a GPU model (``H100``, ``A100 SXM4``, an NVML name): the time of a step on it from the step's
            FLOPs, its peak and the MFU large training runs publish (``gputop.estimate.flops``).
        gpus: how many GPUs the training is spread over; every figure is one GPU's, ``batch_sizes`` each GPU's.
        shard: how (``ddp``, ``zero1``, ``zero2``, ``fsdp`` or ``zero3``; ``gputop.estimate.sharding``); ``ddp``
            where ``gpus`` is over 1 and this is None.

    Returns:
        The ``Report``. Raises ``EstimateError`` (one line: what failed and where) for anything that stops it.
    """
    if precision not in PRECISIONS:
        raise EstimateError(f"unknown precision {precision!r} (one of {', '.join(PRECISIONS)})")
    if not batch_sizes or any(b < 1 for b in batch_sizes):
        raise EstimateError("batch sizes must be 1 or more")
    shard = _sharding(gpus, shard, inference)
    if kernels not in KERNELS:
        raise EstimateError(f"unknown kernels {kernels!r} (one of {', '.join(KERNELS)})")
    gpu = None
    if gpu_model is not None:
        gpu = find_gpu(gpu_model)
        if gpu is None:
            raise EstimateError(f"unknown GPU model {gpu_model!r} (known: {gpu_names()})")
    name = model if isinstance(model, str) else getattr(model, "__qualname__", repr(model))
    if isinstance(model, str) and is_named(model):
        factory = named_factory(model, sequence_length)
    else:  # first: a factory's name settles where torch comes from
        factory = load_factory(model) if isinstance(model, str) else model
    from gputop.estimate.session import Session

    specs = parse_inputs(inputs) if isinstance(inputs, str) else None if inputs is None else tuple(inputs)
    settings = Settings(
        optimizer=None if inference else optimizer,
        optimizer_args=dict(optimizer_args or {}),
        precision=precision,
        checkpointing=checkpointing or checkpoint_class is not None,
        inference=inference,
        context_bytes=context_bytes,
        memory_bytes=memory_bytes,
        margin=margin,
        checkpoint_class=checkpoint_class,
        kernels=kernels,
        shard=shard,
        gpus=gpus,
    )
    session = Session(factory, name, specs, settings, step)
    try:
        return _report(session, name, settings, batch_sizes, memory_bytes, layers, gpu, progress)
    finally:
        session.close()


def _report(
    session: Session,
    name: str,
    settings: Settings,
    batch_sizes: Sequence[int],
    memory_bytes: int | None,
    layers: bool,
    gpu: GpuPeak | None,
    progress: Callable[[Progress], None] | None,
) -> Report:
    """The estimate's report from ``session``: the batch sizes asked for, the largest that fits, the layer table and
    the step's FLOPs."""
    done: dict[int, BatchEstimate] = {}
    latest: BatchEstimate | None = None

    def starting(phase: Phase, batch_size: int) -> None:
        if progress is not None:
            progress(Progress(phase, batch_size, latest))

    def run(batch_size: int, phase: Phase) -> BatchEstimate:
        nonlocal latest
        if batch_size not in done:
            starting(phase, batch_size)
            done[batch_size] = latest = session.estimate(batch_size)
        return done[batch_size]

    batches = tuple(run(b, "asked") for b in batch_sizes)
    largest, tried = None, 0
    if memory_bytes is not None:
        search = largest_fitting(lambda b: bool(run(b, "search").fits))
        largest, tried = search.largest, search.tried
    table = None
    if layers:
        from gputop.estimate.layers import layer_table

        starting("layers", batch_sizes[0])
        table = layer_table(session, batch_sizes[0])
    starting("flops", batch_sizes[0])
    flops = session.flops(batch_sizes[0])
    time = None if gpu is None else step_time(flops, gpu, settings.precision)
    return Report(
        name,
        session.parameters,
        settings,
        batches,
        largest,
        tried,
        table,
        checkpointed=session.checkpointed,
        flops_per_step=flops,
        step_time=time,
    )


def _sharding(gpus: int, shard: Shard | None, inference: bool) -> Shard | None:
    """The way a step is sharded (DDP over more than one GPU unless one is named); ``EstimateError`` for one that
    cannot be."""
    if gpus < 1:
        raise EstimateError("the number of GPUs must be 1 or more")
    if shard is not None and shard not in SHARDS:
        raise EstimateError(f"unknown sharding {shard!r} (one of {', '.join(SHARDS)})")
    if gpus == 1:
        if shard is not None:
            raise EstimateError(f"sharding ({shard}) needs 2 GPUs or more")
        return None
    if inference:
        raise EstimateError("a sharded estimate is of training: leave out inference or the GPUs")
    return shard or "ddp"
