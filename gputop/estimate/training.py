"""The training step as the estimate runs it: the optimizer by name, the precision's dtypes and autocast,
the batch and the default step (forward, loss, backward, step)."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, Protocol, cast

import torch
from torch.utils._pytree import tree_leaves, tree_map

from gputop.estimate.building import replace_tensors
from gputop.estimate.defaults import Precision
from gputop.estimate.errors import EstimateError
from gputop.estimate.inputs import InputSpec

Batch = tuple[tuple[Any, ...], dict[str, Any]]
"""The model's positional and keyword arguments for one batch."""
Step = Callable[[torch.nn.Module, Batch, "torch.optim.Optimizer | None"], None]
"""A training step: given the model, a batch and the optimizer, run one step of training."""


def optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    """The ``torch.optim`` class called ``name`` (any case); ``EstimateError`` listing the known ones if none is."""
    classes = {
        n.lower(): c
        for n, c in vars(torch.optim).items()
        if isinstance(c, type) and issubclass(c, torch.optim.Optimizer) and c is not torch.optim.Optimizer
    }
    found = classes.get(name.lower())
    if found is None:
        known = ", ".join(sorted(c.__name__ for c in classes.values()))
        raise EstimateError(f"unknown optimizer {name!r} (torch.optim has {known})")
    return found


def make_optimizer(name: str, args: dict[str, Any], model: torch.nn.Module) -> torch.optim.Optimizer:
    """The optimizer over the model's trainable parameters, built as on a GPU: with the multi-tensor (``foreach``)
    implementation PyTorch picks for CUDA tensors unless ``args`` says otherwise (``foreach``, or ``fused``, which
    cannot be combined with it), since its temporaries differ from the one-tensor-at-a-time loop PyTorch uses on
    the CPU."""
    cls = optimizer_class(name)
    chosen = "foreach" in args or args.get("fused")
    if "foreach" in inspect.signature(cls.__init__).parameters and not chosen:
        args = {**args, "foreach": True}
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        return cls(params, **args)
    except (TypeError, ValueError) as exc:
        raise EstimateError(f"bad arguments for {cls.__name__}: {exc}") from exc


def model_dtype(precision: Precision) -> torch.dtype:
    return torch.bfloat16 if precision == "bf16" else torch.float32


def to_bfloat16(model: torch.nn.Module) -> None:
    """The model's floating parameters and buffers replaced by bfloat16 ones, tied ones staying tied."""
    replace_tensors(model, lambda t: t.to(torch.bfloat16) if t.is_floating_point() else t)


class _Switch(Protocol):
    enabled: bool


@contextlib.contextmanager
def native_kernels() -> Iterator[None]:
    """oneDNN off: recurrent layers then run as the tensor operations whose sizes FakeTensorMode knows, where
    oneDNN's RNN kernel keeps its activations in a workspace that FakeTensorMode sizes as empty."""
    # ``enabled`` is a bool property of the module's class at run time; torch annotates the descriptor behind it.
    mkldnn = cast(_Switch, torch.backends.mkldnn)
    previous = mkldnn.enabled
    mkldnn.enabled = False
    try:
        yield
    finally:
        mkldnn.enabled = previous


def autocast(precision: Precision, device_type: str) -> contextlib.AbstractContextManager[Any]:
    """The autocast region of a mixed precision for tensors on ``device_type`` (``cpu`` where torch has no CUDA:
    the fake tensors are CPU ones); else nothing."""
    if precision == "bf16-mixed":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if precision == "fp16-mixed":
        return torch.autocast(device_type, dtype=torch.float16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def forward_under_autocast(model: torch.nn.Module, precision: Precision, device_type: str) -> Iterator[None]:
    """The model's forward pass under the precision's autocast while the block runs, whoever calls it: a custom
    step calls the model itself, and a mixed precision must still apply to it."""
    if precision not in ("bf16-mixed", "fp16-mixed"):
        yield
        return
    own = model.__dict__.get("forward")  # an instance's own forward (checkpointing sets one), else the class's
    inner = model.forward

    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        with autocast(precision, device_type):
            return inner(*args, **kwargs)

    model.forward = forward
    try:
        yield
    finally:
        if own is None:
            del model.forward
        else:
            model.forward = own


def batch_from_specs(specs: tuple[InputSpec, ...], batch_size: int, precision: Precision) -> Batch:
    """Tensors of the shapes ``specs`` give with ``batch_size`` in front: floating ones in the model's dtype,
    integer ones zeros (a valid index for any embedding)."""
    tensors = []
    for spec in specs:
        dtype = getattr(torch, spec.dtype)
        shape = (batch_size, *spec.shape)
        if dtype.is_floating_point:
            tensors.append(torch.randn(shape, dtype=model_dtype(precision) if dtype == torch.float32 else dtype))
        else:
            tensors.append(torch.zeros(shape, dtype=dtype))
    return tuple(tensors), {}


def as_batch(made: Any, precision: Precision) -> Batch:
    """What a factory's batch function returned (a tensor, a tuple or list of arguments, or a dict of keyword
    arguments) as a ``Batch``; under ``bf16``, float32 tensors in it become bfloat16 as the model did."""
    if precision == "bf16":
        made = tree_map(
            lambda t: t.to(torch.bfloat16) if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t, made
        )
    if isinstance(made, dict):
        return (), made
    if isinstance(made, (tuple, list)):
        return tuple(made), {}
    return (made,), {}


def loss_of(output: Any) -> torch.Tensor:
    """A scalar to call ``backward()`` on: the model's own loss when its output has one (a Hugging Face model
    given labels returns it as ``loss``, beside the logits it was computed from), else the sum of the means of the
    output's tensors that need a gradient."""
    own = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if isinstance(own, torch.Tensor) and own.requires_grad and own.numel() == 1:
        return own
    parts = [t.mean() for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not parts:
        raise EstimateError("the model's output holds no tensor that needs a gradient: nothing to train")
    return functools.reduce(torch.add, parts)


def default_step(precision: Precision, device_type: str) -> Step:
    """Forward (under the precision's autocast), loss, backward, optimizer step, gradients set to None."""

    def step(model: torch.nn.Module, batch: Batch, optimizer: torch.optim.Optimizer | None) -> None:
        args, kwargs = batch
        with autocast(precision, device_type):
            loss = loss_of(model(*args, **kwargs))
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad()

    return step


@contextlib.contextmanager
def inference(precision: Precision, device_type: str) -> Iterator[None]:
    """The forward pass of serving: no gradients, under the precision's autocast."""
    with torch.no_grad(), autocast(precision, device_type):
        yield
