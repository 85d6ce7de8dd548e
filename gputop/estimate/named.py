"""Models by name or configuration, with no factory to write and nothing downloaded.

``hf:TYPE`` is the configuration ``transformers`` ships for a model type (``hf:gpt2``, ``hf:llama``), ``hf:PATH`` a
local ``config.json`` or a model directory holding one (its weights are not read); the model is built from the
configuration with the head that gives a loss (causal language model, sequence to sequence, masked language
model, else the bare model), and a batch is ``sequence_length`` tokens of input and, where the head takes them,
labels, so the step's loss is the model's own. ``timm:NAME`` is ``timm.create_model(NAME)`` without pretrained
weights, its batch given by ``--input``. A name that only a download could resolve is refused in one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from gputop.estimate.errors import EstimateError, users_code

DEFAULT_SEQUENCE = 512
"""Tokens per sample when ``--seq`` is not given (fewer where the model's positions are fewer)."""

PREFIXES = ("hf:", "timm:")


def is_named(spec: str) -> bool:
    return spec.startswith(PREFIXES)


def named_factory(spec: str, sequence_length: int | None) -> Callable[[], Any]:
    """The factory ``hf:...`` or ``timm:...`` stands for; ``EstimateError`` when its library is missing or the
    name needs a download."""
    if spec.startswith("timm:"):
        return _timm(spec.removeprefix("timm:"))
    return _hugging_face(spec.removeprefix("hf:"), sequence_length)


def _timm(name: str) -> Callable[[], Any]:
    with users_code(lambda _: f"timm:{name} needs timm, which cannot be imported: "):
        import timm  # type: ignore[import-not-found, unused-ignore]
    if name not in timm.list_models():
        raise EstimateError(f"timm has no model {name!r} (timm.list_models() names them)")
    return lambda: timm.create_model(name, pretrained=False)


def _hugging_face(name: str, sequence_length: int | None) -> Callable[[], Any]:
    with users_code(lambda _: f"hf:{name} needs transformers, which cannot be imported: "):
        import transformers
        from transformers.models.auto import configuration_auto, modeling_auto
    config = _config(name, transformers, configuration_auto.CONFIG_MAPPING)
    heads = (
        (modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, transformers.AutoModelForCausalLM, "causal"),
        (modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, transformers.AutoModelForSeq2SeqLM, "seq2seq"),
        (modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES, transformers.AutoModelForMaskedLM, "masked"),
    )
    auto, head = next(((a, h) for names, a, h in heads if config.model_type in names), (transformers.AutoModel, ""))
    positions = _positions(config)
    length = sequence_length or min(DEFAULT_SEQUENCE, positions or DEFAULT_SEQUENCE)
    if positions is not None and length > positions:
        raise EstimateError(f"hf:{name} takes at most {positions} positions, not --seq {length}")

    def batch(batch_size: int) -> dict[str, Any]:
        import torch

        tokens = torch.zeros(batch_size, length, dtype=torch.long)
        if head == "seq2seq":
            return {"input_ids": tokens, "decoder_input_ids": tokens, "labels": tokens}
        return {"input_ids": tokens, "labels": tokens} if head else {"input_ids": tokens}

    return lambda: (auto.from_config(config), batch)


def _config(name: str, transformers: Any, known: Any) -> Any:
    """The configuration ``name`` stands for: a local file or directory, a type ``transformers`` ships, or one
    already in the local Hugging Face cache; never a download."""
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise EstimateError(f"hf:{name}: the directory has no config.json")
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as file:
                values = json.load(file)
        except (OSError, ValueError) as exc:
            raise EstimateError(f"hf:{name}: cannot read the configuration: {exc}") from None
        if not isinstance(values, dict) or values.get("model_type") not in known:
            raise EstimateError(f"hf:{name}: not a configuration of a model type transformers knows (model_type)")
        kind = values.pop("model_type")
        with users_code(lambda _: f"hf:{name}: "):
            return transformers.AutoConfig.for_model(kind, **values)
    if name in known:
        return transformers.AutoConfig.for_model(name)
    try:
        return transformers.AutoConfig.from_pretrained(name, local_files_only=True)
    except Exception:  # not in the cache: whatever transformers raises, the answer is the same
        raise EstimateError(
            f"hf:{name} is neither a model type transformers ships (as hf:gpt2, hf:llama, hf:t5) nor in the local "
            "Hugging Face cache, and nothing is downloaded: give a config.json or a model directory (hf:PATH)"
        ) from None


def _positions(config: Any) -> int | None:
    """The most positions the model can take, where its configuration says (absolute position embeddings)."""
    for key in ("n_positions", "max_position_embeddings"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
