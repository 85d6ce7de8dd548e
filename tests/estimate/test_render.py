"""The estimate as text and JSON, from plain values."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gputop.estimate.parts import BatchEstimate, LayerRow, Parts
from gputop.estimate.render import conclusions, render_text, report_to_dict
from gputop.estimate.report import Report, Settings

pytestmark = pytest.mark.fast

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def batch(size: int, fits: bool | None) -> BatchEstimate:
    at_peak = Parts(100 * MIB, 100 * MIB, 200 * MIB, activations=size * MIB, temporaries=MIB)
    return BatchEstimate(size, at_peak, at_peak, at_peak.sum(), at_peak.sum(), 512 * MIB * 2, 1536 * MIB, fits)


def report(memory: int | None = 80 * GIB, largest: int | None = 300, layers=None) -> Report:
    settings = Settings("adam", {"lr": 0.1}, "bf16-mixed", False, False, 512 * MIB, memory, 0.1)
    return Report("models:net", 26_214_400, settings, (batch(8, True), batch(64, False)), largest, 12, layers)


def test_the_table_has_a_column_per_batch_and_a_row_per_part():
    lines = render_text(report()).splitlines()
    assert lines[0] == "models:net: 26,214,400 parameters, training, adam, bf16-mixed"
    header = next(line for line in lines if line.startswith("at the peak"))
    assert header.split()[-4:] == ["batch", "8", "batch", "64"]
    rows = {line.split("  ")[0]: line.split()[-2:] for line in lines if "  " in line}
    assert rows["optimizer state"] == ["200MiB", "200MiB"]
    assert rows["activations"] == ["8.00MiB", "64.0MiB"]
    assert rows["fits"] == ["yes", "no"]


def test_the_conclusions_name_the_largest_batch_that_fits():
    assert "largest batch that fits: 300 (margin 10%, 12 estimates)" in render_text(report())


def test_the_peak_beside_the_rule_of_thumb_is_split_into_the_parts_live_at_it():
    # at the peak (the optimizer step) the gradients are whole but the activations are freed: what the forward
    # pass held at its end (300 MiB) is not part of this peak
    at_peak = Parts(100 * MIB, 100 * MIB, 200 * MIB, activations=8 * KIB, temporaries=100 * MIB)
    held = Parts(100 * MIB, 100 * MIB, 200 * MIB, activations=300 * MIB, temporaries=100 * MIB)
    first = BatchEstimate(1, at_peak, held, at_peak.sum(), at_peak.sum(), 600 * MIB, 1112 * MIB, True)
    assert conclusions(dataclasses.replace(report(), batches=(first,)))[-2:] == [
        "rule of thumb 16 B/param: 400MiB, without activations",
        "estimated peak at batch 1: 500MiB = "
        "weights, gradients and optimizer state 400MiB + activations 8.00KiB + temporaries 100MiB",
    ]


def test_the_peaks_line_names_only_the_state_live_at_the_peak():
    # at the end of the forward pass the gradients are not there yet
    at_peak = Parts(100 * MIB, 0, 200 * MIB, activations=64 * MIB, temporaries=MIB)
    first = BatchEstimate(64, at_peak, at_peak, at_peak.sum(), at_peak.sum(), 512 * MIB, 1024 * MIB, True)
    line = conclusions(dataclasses.replace(report(), batches=(first,)))[-1]
    assert line == (
        "estimated peak at batch 64: 365MiB = weights and optimizer state 300MiB + activations 64.0MiB + "
        "temporaries 1.00MiB"
    )


def test_without_a_gpu_size_there_is_no_fits_row_and_no_search():
    text = render_text(report(memory=None, largest=None))
    assert "fits" not in text
    assert "largest batch" not in text


def test_a_model_too_large_for_one_sample_says_so():
    assert "largest batch that fits: none, not even 1" in render_text(report(largest=0))


def test_a_batch_at_the_search_ceiling_is_a_lower_bound():
    assert "largest batch that fits: 1048576 or more, where the search stops" in render_text(report(largest=1 << 20))


def test_the_layer_table_indents_by_depth():
    layers = (LayerRow("", "Net", 0, 0, 0, 3 * MIB, 2 * MIB), LayerRow("conv", "Conv2d", 1, 1792, 7168, MIB, None))
    lines = render_text(report(layers=layers)).splitlines()
    assert lines[-2].startswith("(model)  Net")
    assert lines[-1].startswith("  conv   Conv2d")
    assert lines[-1].split()[2:5] == ["1,792", "7.00KiB", "1.00MiB"]


def test_the_json_document_has_stable_keys_and_bytes_as_integers():
    doc = json.loads(json.dumps(report_to_dict(report())))
    assert list(doc) == [
        "schema",
        "model",
        "parameters",
        "settings",
        "batches",
        "largest_batch",
        "search_estimates",
        "rule_of_thumb_bytes",
        "layers",
        "checkpointed",
        "flops_per_step",
        "step_time",
    ]
    first = doc["batches"][0]
    assert first["at_peak"] == {
        "weights": 100 * MIB,
        "gradients": 100 * MIB,
        "optimizer": 200 * MIB,
        "activations": 8 * MIB,
        "temporaries": MIB,
    }
    assert (first["nvml_bytes"], first["fits"]) == (1536 * MIB, True)
    assert doc["settings"]["optimizer_args"] == {"lr": 0.1}
    assert doc["rule_of_thumb_bytes"] == 16 * 26_214_400


def test_a_model_of_one_parameter_and_a_search_of_one_estimate_say_so_in_the_singular():
    one = dataclasses.replace(report(), parameters=1, search_estimates=1)

    text = render_text(one)

    assert text.startswith("models:net: 1 parameter, training")
    assert "(margin 10%, 1 estimate)" in text


@pytest.mark.parametrize(("optimizer", "inference"), [("sgd", False), ("Adagrad", False), (None, True)])
def test_the_rule_of_thumb_is_left_out_where_it_would_mislead(optimizer, inference):
    settings = dataclasses.replace(report().settings, optimizer=optimizer, inference=inference)
    lines = conclusions(dataclasses.replace(report(), settings=settings))
    assert not any(line.startswith("rule of thumb") for line in lines)
    assert lines[-1].startswith("estimated peak at batch 8: ")


def test_a_sharded_estimate_says_what_each_gpu_holds_and_the_all_gathered_weights():
    settings = dataclasses.replace(report().settings, shard="fsdp", gpus=8)
    batch = dataclasses.replace(report().batches[0], gathered_bytes=3 * MIB)
    text = render_text(dataclasses.replace(report(), settings=settings, batches=(batch,)))
    assert "sharded over 8 GPUs, the figures one GPU's (rank 0); each holds FSDP2 fully_shard (ZeRO-3): 1/8 of" in text
    assert [line.split() for line in text.splitlines() if "all-gathered weights" in line] == [
        ["all-gathered", "weights", "3.00MiB"]
    ]


def test_the_kernels_assumed_are_said():
    assert "kernels: attention by CUDA's fused kernels" in render_text(report())


def test_the_time_of_a_step_names_the_gpu_its_peak_and_the_source_of_the_mfu_band():
    from gputop.estimate.flops import StepTime

    time = StepTime("H100 SXM", 989.5, "datasheet", 0.0123, 0.0269)
    text = render_text(dataclasses.replace(report(), flops_per_step=2 * 10**12, step_time=time))
    assert "FLOPs of a step at batch " in text and ": 2 TFLOP (" in text
    assert "on H100 SXM (989.5 TFLOP/s dense bf16): 12.3 ms to 26.9 ms per step at MFU 21-46 %: Chowdhery" in text
