"""The estimate tests' work that needs torch, run in a process of its own (``python -m tests.estimate.in_torch
WHAT``), so that the test process never imports torch (it would swell by 400 MiB, and every child forked from it
with it). Each part prints one JSON document on stdout for the tests to judge."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
import warnings
from typing import Any

warnings.simplefilter("ignore")  # torch's own (no NumPy) would mix with the document

import torch  # noqa: E402
from torch import nn  # noqa: E402

from gputop.cli import main as gputop_main  # noqa: E402
from gputop.estimate import estimate  # noqa: E402
from gputop.estimate.checkpointing import checkpoint_model  # noqa: E402
from gputop.estimate.render import report_to_dict  # noqa: E402
from gputop.estimate.training import loss_of  # noqa: E402
from tests.estimate import built_models  # noqa: E402
from tests.estimate.built_models import accumulating_step  # noqa: E402
from tests.estimate.families import FAMILIES  # noqa: E402
from tests.estimate.measure import measured_peak  # noqa: E402

OPTIMIZERS: list[tuple[str, dict[str, Any]]] = [
    ("sgd", {}),
    ("sgd", {"momentum": 0.9}),
    ("adam", {}),
    ("adam", {"amsgrad": True}),
    ("adamw", {}),
    ("Adagrad", {}),
]
PRECISIONS = ["fp32", "tf32", "bf16-mixed", "fp16-mixed", "bf16"]


def small_net() -> tuple[nn.Module, Any]:
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(512, 10))
    return net, lambda b: torch.randn(b, 3, 8, 8)


def vgg_style() -> tuple[nn.Module, Any]:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]

    net = nn.Sequential(
        *block(3, 16),
        *block(16, 16),
        nn.MaxPool2d(2),
        *block(16, 32),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )
    return net, lambda b: torch.randn(b, 3, 32, 32)


def embedded() -> tuple[nn.Module, Any]:
    net = nn.Sequential(nn.Embedding(1000, 32), nn.Flatten(), nn.Linear(4 * 32, 2))
    return net, lambda b: torch.zeros(b, 4, dtype=torch.long)


def exact() -> dict[str, Any]:
    """The held parts of ``small_net`` for every optimizer and precision, and the layer tables."""
    held = {
        f"{name} {args} {precision}": report_to_dict(
            estimate(small_net, [4], optimizer=name, optimizer_args=args, precision=precision)
        )["batches"][0]["held"]
        for name, args in OPTIMIZERS
        for precision in PRECISIONS
    }
    return {
        "held": held,
        "vgg": report_to_dict(estimate(vgg_style, [2], layers=True)),
        "embedding": report_to_dict(estimate(embedded, [2], layers=True)),
        "custom_step": report_to_dict(estimate(small_net, [4], step=accumulating_step)),
        "default_step": report_to_dict(estimate(small_net, [4])),
    }


def peak(report: Any) -> int:
    return int(report.batches[0].peak_allocated_bytes)


def built() -> dict[str, Any]:
    """Models built as libraries build them, optimizer arguments and custom steps as users write them."""
    custom = {p: peak(estimate(small_net, [4], step=accumulating_step, precision=p)) for p in ("fp32", "bf16-mixed")}
    return {
        "scheduled": peak(estimate(built_models.scheduled, [2])),
        "copied_encoder": peak(estimate(built_models.copied_encoder, [2])),
        "fresh_encoder": peak(estimate(built_models.fresh_encoder, [2])),
        "fused": report_to_dict(estimate(small_net, [4], optimizer_args={"fused": True}))["batches"][0]["held"],
        "foreach": report_to_dict(estimate(small_net, [4]))["batches"][0]["held"],
        "custom_step": custom,
        "own_loss": own_loss(),
        "complaint": failure(built_models.complaining),
        "tied": report_to_dict(estimate(built_models.tied_lm, [1], layers=True)),
        "checkpointed": {
            "resnet": checkpoint_model(built_models.resnet_like()[0]),
            "vgg": checkpoint_model(built_models.vgg_like()),
            "encoder_decoder": checkpoint_model(built_models.encoder_decoder()),
            "named": checkpoint_model(built_models.encoder_decoder(), "_Mlp"),
        },
        "checkpointing": {
            str(block): report_to_dict(estimate(built_models.resnet_like, [2], checkpoint_class=block))
            for block in ("Bottleneck", None)
        },
    }


def failure(factory: Any) -> str:
    """The one line the estimate of ``factory`` fails with."""
    from gputop.estimate.errors import EstimateError

    try:
        estimate(factory, [1])
    except EstimateError as exc:
        return str(exc)
    return "no failure"


def own_loss() -> bool:
    """Whether the default step's loss is the model's own ``loss`` when the output has one, beside logits."""
    from transformers.modeling_outputs import CausalLMOutput

    logits = torch.randn(2, 8, requires_grad=True)
    loss = logits.logsumexp(-1).mean()
    return loss_of(CausalLMOutput(loss=loss, logits=logits)) is loss and loss_of({"loss": loss}) is loss


HF_CONFIGS: dict[str, dict[str, Any]] = {
    "GPT-2": {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 512, "n_positions": 64},
    "Llama": {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
    },
    "BERT": {
        "model_type": "bert",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "vocab_size": 512,
    },
}
"""Tiny configurations of three Hugging Face families: a causal model with learnt positions, one with rotary
positions and grouped-query attention, and a masked one."""


def named() -> dict[str, Any]:
    """Hugging Face models by configuration file and by directory, estimated and measured on a real step; what a
    name that needs a download, and timm where it cannot be imported, say."""
    import tempfile

    from gputop.estimate.errors import EstimateError
    from gputop.estimate.named import named_factory

    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as directory:
        for family, config in HF_CONFIGS.items():
            path = os.path.join(directory, family)
            os.makedirs(path)
            with open(os.path.join(path, "config.json"), "w") as file:
                json.dump(config, file)
            # measured on the CPU, whose attention keeps the dropout's score matrix: the CPU's kernels compared
            report = estimate(f"hf:{path}/config.json", [2], sequence_length=32, kernels="cpu")
            real = measured_peak(named_factory(f"hf:{path}", 32), 2)
            found[family] = {"estimated": peak(report), "measured": real, "parameters": report.parameters}
        found["directory"] = estimate(f"hf:{directory}/GPT-2", [1], sequence_length=8, inference=True).parameters
    for spec in ("hf:gpt2-xl", "timm:convnext_tiny"):
        try:
            estimate(spec, [1])
        except EstimateError as exc:
            found[spec] = str(exc)
    return found


def accuracy() -> dict[str, Any]:
    """For each family and batch size: the estimated peak and the one measured on a real CPU run."""
    rows = {}
    for family, (factory, batch_sizes) in FAMILIES.items():
        report = estimate(factory, batch_sizes)
        rows[family] = [
            {
                "batch_size": b.batch_size,
                "estimated": b.peak_allocated_bytes,
                "measured": measured_peak(factory, b.batch_size),
                "activations_at_peak": b.at_peak.activations,
            }
            for b in report.batches
        ]
    return rows


def commands(argvs: list[list[str]]) -> list[dict[str, Any]]:
    """``gputop`` run in this process once per argument list: exit status, stdout, stderr, and any exception
    that escaped it as the traceback a user would have seen."""
    results = []
    for argv in argvs:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = gputop_main(argv)
            except BaseException:  # the point: nothing may escape the command
                status = -1
                err.write(traceback.format_exc())
        results.append({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()})
    return results


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "commands":
        sys.stdout.write(json.dumps(commands(json.loads(sys.argv[2]))))
    else:
        sys.stdout.write(json.dumps({"exact": exact, "accuracy": accuracy, "built": built, "named": named}[what]()))
