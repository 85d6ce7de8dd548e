"""Models by name or configuration (``hf:``, ``timm:``): built from their libraries, nothing downloaded, and
estimated within reach of a real training step's peak."""

from __future__ import annotations

from typing import Any

import pytest

from tests.estimate.helpers import in_torch

FAMILIES = ("GPT-2", "Llama", "BERT")


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    return in_torch("named")  # type: ignore[no-any-return]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_hugging_face_model_from_its_config_is_within_2_percent_of_a_real_step(found, family):
    row = found[family]
    assert abs(row["estimated"] - row["measured"]) <= 0.02 * row["measured"], row


def test_a_model_directory_without_weights_is_built_from_its_config(found):
    assert found["directory"] == found["GPT-2"]["parameters"]


def test_a_name_that_needs_a_download_is_refused_in_one_line(found):
    message = found["hf:gpt2-xl"]
    assert message.startswith("hf:gpt2-xl is neither a model type transformers ships")
    assert "nothing is downloaded" in message and "\n" not in message


def test_a_timm_model_is_built_by_timm_or_its_absence_said_in_one_line(found):
    # timm imports torchvision, and no torchvision built for this CPU torch can be installed here
    message = found["timm:convnext_tiny"]
    missing = message.startswith("timm:convnext_tiny needs timm, which cannot be imported: ")
    assert missing or message.endswith("give the batch's shapes with --input")
    assert "\n" not in message
