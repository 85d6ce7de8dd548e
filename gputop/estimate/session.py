"""One model under ``FakeTensorMode``, built once and estimated at any batch size: the tracker around two real
training steps (two, so the optimizer's state exists in the second), or around one forward pass in inference."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from gputop.estimate import building, kernels, sharding, training
from gputop.estimate.allocator import replay
from gputop.estimate.checkpointing import checkpoint_model
from gputop.estimate.errors import EstimateError, users_code
from gputop.estimate.inputs import InputSpec
from gputop.estimate.parts import BatchEstimate, Parts
from gputop.estimate.report import Settings, fits
from gputop.estimate.tracker import MemoryTracker

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

TRAINING_STEPS = 2


class Session:
    """The model a factory returns, built under ``FakeTensorMode`` (no memory, no GPU), with what makes a batch.

    Args:
        factory: returns an ``nn.Module``, or a module and a function of the batch size that makes a batch.
        name: what the factory is called in errors.
        inputs: the batch's tensor shapes when the factory makes no batches.
        settings: the optimizer, precision, checkpointing and inference choices.
        step: a custom training step (None: forward, loss, backward, optimizer step).
    """

    def __init__(
        self,
        factory: Callable[[], Any],
        name: str,
        inputs: tuple[InputSpec, ...] | None,
        settings: Settings,
        step: training.Step | None,
    ) -> None:
        self.settings = settings
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        shard = settings.shard
        mesh, self._made_group = (
            sharding.fake_group(settings.gpus) if shard in sharding.FULLY_SHARDED else (None, False)
        )
        try:
            first = self._build(factory, name, inputs, mesh)
        except BaseException:
            self.close()
            raise
        self._inputs = inputs
        self.device_type = "cpu" if first is None else first.device.type
        self._step = step or training.default_step(settings.precision, self.device_type)
        self._custom_step = step is not None

    def close(self) -> None:
        """End what the session started in the process: the fake process group of a sharded estimate."""
        if self._made_group:
            self._made_group = False
            sharding.release_group()

    def _build(
        self, factory: Callable[[], Any], name: str, inputs: tuple[InputSpec, ...] | None, mesh: DeviceMesh | None
    ) -> torch.nn.Parameter | None:
        """Build the model under the fake mode, as the settings ask; its first parameter (None without any)."""
        settings, shard = self.settings, self.settings.shard
        # the model's own methods run here too (train(), parameters() may be overridden)
        with users_code(lambda _: f"{name} raised "):
            made = building.build(factory, self.fake_mode)
            with self.fake_mode:
                self.model, self._make_batch = _model_and_batches(made, name, inputs)
                building.adopt(self.model, self.fake_mode)
                if settings.precision == "bf16":
                    training.to_bfloat16(self.model)
                self.checkpointed = None
                if settings.checkpointing and not settings.inference:
                    self.checkpointed = checkpoint_model(self.model, settings.checkpoint_class)
                if mesh is not None and shard is not None:
                    sharding.shard_model(self.model, sharding.units(self.model), shard, mesh)
            self.model.train(not settings.inference)
            first = next(self.model.parameters(), None)
            self.parameters = sum(p.numel() for p in self.model.parameters())
        return first

    def batch(self, batch_size: int) -> training.Batch:
        """One batch of ``batch_size`` (call under the fake mode)."""
        if self._make_batch is not None:
            return training.as_batch(self._make_batch(batch_size), self.settings.precision)
        assert self._inputs is not None
        return training.batch_from_specs(self._inputs, batch_size, self.settings.precision)

    def estimate(self, batch_size: int) -> BatchEstimate:
        """The step's memory at ``batch_size``: each part, the peak, and the CUDA allocator's view of it."""
        tracker = MemoryTracker("activations" if self.settings.inference else "temporaries")
        # an operator without a fake kernel, a data-dependent shape, or the user's code failed
        failed = f"the model failed under FakeTensorMode at {{}} (batch size {batch_size}): "
        try:
            with (
                users_code(lambda exc: failed.format(tracker.failed_at(exc))),
                self.fake_mode,
                tracker,
                training.native_kernels(),
                kernels.assumed(self.settings.kernels),
                sharding.storage_resizes(tracker) if self.settings.shard in sharding.FULLY_SHARDED else nullcontext(),
            ):
                tracker.add([*self.model.parameters(), *self.model.buffers()], "weights")
                # DDP's gradient buckets, allocated as it wraps the model and held as long as it lives
                buckets = sharding.ddp_buckets(self.model) if self.settings.shard in ("ddp", "zero1") else None
                tracker.add(buckets, "gradients")
                if self.settings.inference:
                    self._serve(batch_size)
                else:
                    self._train(batch_size, tracker)
        finally:
            for p in self.model.parameters():
                p.grad = None
        at_peak = tracker.live_at_peak()
        most = tracker.most_by_part()
        held = Parts(most["weights"], most["gradients"], most["optimizer"], most["activations"], at_peak.temporaries)
        cuda = replay(tracker.events)
        nvml = cuda.reserved_bytes + self.settings.context_bytes
        return BatchEstimate(
            batch_size=batch_size,
            at_peak=at_peak,
            held=held,
            peak_allocated_bytes=tracker.peak_bytes,
            cuda_allocated_bytes=cuda.allocated_bytes,
            reserved_bytes=cuda.reserved_bytes,
            nvml_bytes=nvml,
            fits=fits(nvml, self.settings.memory_bytes, self.settings.margin),
            gathered_bytes=_gathered(tracker) if self.settings.shard in sharding.FULLY_SHARDED else None,
        )

    def flops(self, batch_size: int) -> int:
        """The FLOPs of one step at ``batch_size`` (a forward pass in inference), as the live MFU counts them
        (``gputop.probe.flops``): matrix products and convolutions of the forward and backward passes."""
        from gputop.probe.flops import counted_flops, step_counter

        counter = step_counter()
        failed = f"the model failed under FakeTensorMode counting FLOPs (batch size {batch_size}): "
        try:
            with (
                users_code(lambda _: failed),
                self.fake_mode,
                training.native_kernels(),
                kernels.assumed(self.settings.kernels),
                counter,
            ):
                if self.settings.inference:
                    self._serve(batch_size)
                else:  # the optimizer too: a custom step may use it (its updates count no FLOPs)
                    optimizer = None if self.settings.optimizer is None else self._optimizer()
                    self._step(self.model, self.batch(batch_size), optimizer)
        finally:
            for p in self.model.parameters():
                p.grad = None
        return counted_flops(counter)

    def _serve(self, batch_size: int) -> None:
        args, kwargs = self.batch(batch_size)
        with training.inference(self.settings.precision, self.device_type):
            self.model(*args, **kwargs)

    def _train(self, batch_size: int, tracker: MemoryTracker) -> None:
        batch = self.batch(batch_size)
        optimizer = None
        if self.settings.optimizer is not None:
            optimizer = self._optimizer()
            optimizer.register_step_post_hook(lambda opt, args, kwargs: self._claim_state(opt, tracker))
        handles = [
            p.register_post_accumulate_grad_hook(lambda p: tracker.claim([_local(p.grad)], "gradients"))
            for p in self.model.parameters()
            if p.requires_grad
        ]

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            tracker.claim([tensor], "activations")
            return tensor

        autocast = (
            training.forward_under_autocast(self.model, self.settings.precision, self.device_type)
            if self._custom_step
            else contextlib.nullcontext()
        )
        try:
            with autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
                for _ in range(TRAINING_STEPS):
                    self._step(self.model, batch, optimizer)
        finally:
            for handle in handles:
                handle.remove()

    def _optimizer(self) -> torch.optim.Optimizer:
        name, args = self.settings.optimizer, self.settings.optimizer_args
        assert name is not None
        if self.settings.shard == "zero1":
            return sharding.zero1_optimizer(name, args, self.model, self.settings.gpus)
        return training.make_optimizer(name, args, self.model)

    def _claim_state(self, optimizer: torch.optim.Optimizer, tracker: MemoryTracker) -> None:
        """The optimizer's state, and the gradients it stepped with: FSDP sets its sharded gradients in ``.grad``
        after autograd, where no accumulation hook sees them."""
        tracker.claim(_state_tensors(optimizer), "optimizer")
        tracker.claim([_local(p.grad) for p in self.model.parameters()], "gradients")


def _gathered(tracker: MemoryTracker) -> int:
    return sum(tracker.allocations[s].nbytes for s in tracker.serials_at_peak() & tracker.resized)


def _local(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else sharding.local(tensor)


def _state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [
        sharding.local(v) for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)
    ]


def _model_and_batches(
    made: Any, name: str, inputs: tuple[InputSpec, ...] | None
) -> tuple[torch.nn.Module, Callable[[int], Any] | None]:
    """The module and batch function in what a factory returned; ``EstimateError`` when it is neither a module
    nor a (module, function) pair, or when nothing says what a batch is."""
    if isinstance(made, torch.nn.Module):
        model, make_batch = made, None
    elif isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module) and callable(made[1]):
        model, make_batch = made
    else:
        raise EstimateError(
            f"{name} returned {type(made).__name__}: expected an nn.Module, or a module and a function that makes "
            "a batch for a batch size"
        )
    if make_batch is None and inputs is None:
        raise EstimateError(f"{name} returns a model without a batch function: give the batch's shapes with --input")
    return model, make_batch if inputs is None else None
