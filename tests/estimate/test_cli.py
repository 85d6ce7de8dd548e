"""The ``gputop estimate`` command: its table, its JSON, a GPU's memory read through NVML (the fake driver), and one
line with exit status 2 for every bad input.

A few tests start the real command; the rest run the command line's ``main`` in one process of their own
(``in_torch.py``), one torch import for all of them, with anything that escaped ``main`` turned into the traceback a
user would have seen."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import FakeDriver
from tests.estimate.helpers import ROOT, in_torch
from tests.fakenvml.state import FakeState
from tests.machines import GIB, h100

MODELS = "tests.estimate.cli_models"


def gputop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", "estimate", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,  # a guard against a hang, not a limit on speed: a busy machine takes minutes
    )


def one_line_error(returncode: int, stderr: str) -> str:
    """The error line of a failed command, after checking it is one line, exit status 2, no traceback."""
    assert returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("gputop: error: ")
    return lines[0]


DEEP = (f"{MODELS}:deep", "--batch", "64", "--json")
RUNS: dict[str, tuple[str, ...]] = {
    "json": (f"{MODELS}:mlp", "--input", "64", "--batch", "8", "--memory", "1GiB", "--json"),
    "training": DEEP,
    "inference": (*DEEP, "--inference"),
    "checkpointing": (*DEEP, "--checkpointing"),
    "layers": (f"{MODELS}:mlp", "--input", "64", "--layers"),
    "sharded": (f"{MODELS}:mlp", "--input", "64", "--gpus", "4", "--shard", "zero3", "--gpu-model", "H100", "--json"),
}
BAD = [
    (("tests.estimate.no_such_module:f", "--input", "4"), "cannot import tests.estimate.no_such_module"),
    ((f"{MODELS}:nothing", "--input", "4"), f"{MODELS} has no function nothing"),
    ((f"{MODELS}:raises", "--input", "4"), "raises raised ValueError: no weights file at /models/net.pt"),
    ((f"{MODELS}:not_a_model", "--input", "4"), "returned str: expected an nn.Module"),
    ((f"{MODELS}:mlp",), "give the batch's shapes with --input"),
    ((f"{MODELS}:data_dependent", "--input", "8"), "failed under FakeTensorMode at aten."),
    ((f"{MODELS}:extension", "--input", "8"), "failed under FakeTensorMode at gputop_tests.scale"),
    ((f"{MODELS}:mlp", "--input", "64", "--optimizer", "Adamz"), "unknown optimizer 'Adamz' (torch.optim has"),
    ((f"{MODELS}:mlp", "--input", "64", "--optimizer-args", "momentum=0.9"), "bad arguments for Adam"),
    ((f"{MODELS}:mlp", "--input", "64", "--optimizer-args", "lr=a"), "argument --optimizer-args"),
    ((f"{MODELS}:mlp", "--input", "3x"), "argument --input: not a shape: '3x'"),
    ((f"{MODELS}:mlp", "--input", "64", "--memory", "80parsecs"), "argument --memory: not a size"),
    ((f"{MODELS}:mlp", "--input", "64", "--batch", "0"), "argument --batch: not batch sizes"),
    ((f"{MODELS}:mlp", "--input", "64", "--gpu-model", "Z9000"), "unknown GPU model 'Z9000' (known: H100 SXM,"),
    ((f"{MODELS}:mlp", "--input", "64", "--shard", "fsdp"), "sharding (fsdp) needs 2 GPUs or more"),
    ((f"{MODELS}:mlp", "--input", "64", "--gpus", "two"), "argument --gpus: not a number of GPUs: 'two'"),
    ((f"{MODELS}:calls_exit", "--input", "4"), "calls_exit raised SystemExit: the model's code asked to exit"),
    ((f"{MODELS}:exits_7", "--input", "4"), "exits_7 raised SystemExit(7): the model's code asked to exit"),
    ((f"{MODELS}:cancelled", "--input", "4"), "cancelled raised Cancelled: the run was cancelled"),
    ((f"{MODELS}:unprintable", "--input", "4"), "unprintable raised Unprintable"),
    (("tests.estimate.exits_on_import:f", "--input", "4"), "exits_on_import: SystemExit(0): the model's code asked"),
    ((f"{MODELS}:exits_in_batch",), "(batch size 1): SystemExit(4): the model's code asked to exit"),
    (
        (f"{MODELS}:silences_stderr", "--input", "4"),
        "silences_stderr raised ValueError: after setting sys.stderr aside",
    ),
    ((f"{MODELS}:exits_in_layer_table", "--input", "8", "--layers"), "(batch size 1): SystemExit(3): the model's"),
]
INTERRUPTED = (f"{MODELS}:interrupts", "--input", "4")


@pytest.fixture(scope="module")
def ran() -> dict[str, dict[str, Any]]:
    """Each of ``RUNS`` and ``BAD`` run through ``gputop``'s ``main``, by name (a bad one by its message)."""
    names = [*RUNS, *(message for _, message in BAD), "interrupted"]
    argvs = [["estimate", *args] for args in [*RUNS.values(), *(args for args, _ in BAD), INTERRUPTED]]
    return dict(zip(names, in_torch("commands", json.dumps(argvs)), strict=True))


def document(ran: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    assert ran[name]["status"] == 0, ran[name]["stderr"]
    return json.loads(ran[name]["stdout"])  # type: ignore[no-any-return]


def test_a_sharded_run_gives_one_gpus_figures_its_flops_and_its_time_on_the_gpu_named(ran):
    doc = document(ran, "sharded")
    assert (doc["settings"]["shard"], doc["settings"]["gpus"], doc["settings"]["kernels"]) == ("zero3", 4, "cuda")
    assert doc["batches"][0]["gathered_bytes"] > 0
    assert doc["flops_per_step"] > 0
    assert doc["step_time"]["gpu"] == "H100 SXM"


def test_help_describes_the_command_without_importing_torch():
    result = gputop("--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "FakeTensorMode" in text
    assert "keep free (default 10%)" in text


def test_the_table_has_each_part_per_batch_size_and_the_rule_of_thumb():
    result = gputop(f"{MODELS}:mlp", "--input", "64", "--batch", "2,8", "--memory", "24GiB")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{MODELS}:mlp: 19,210 parameters, training, adam, fp32")
    for label in ("weights", "gradients", "optimizer state", "activations", "temporaries", "peak allocated"):
        assert any(line.startswith(label) for line in lines), label
    assert any(line.startswith("fits") and line.split()[1:] == ["yes", "yes"] for line in lines)
    assert any(line.startswith("largest batch that fits: ") for line in lines)
    assert any(line.startswith("rule of thumb 16 B/param: 300KiB") for line in lines)


def test_json_gives_bytes_as_integers_and_the_largest_batch_found_by_search(ran):
    doc = document(ran, "json")
    batch = doc["batches"][0]
    assert batch["held"]["weights"] == 19_210 * 4
    assert batch["nvml_bytes"] == batch["reserved_bytes"] + doc["settings"]["context_bytes"]
    assert doc["settings"]["memory_bytes"] == GIB
    assert doc["largest_batch"] > 8
    assert doc["search_estimates"] > 2


def test_the_parts_live_at_the_peak_add_up_to_the_peak(ran):
    for batch in document(ran, "training")["batches"]:
        assert sum(batch["at_peak"].values()) == batch["peak_allocated_bytes"]


def test_inference_counts_no_gradients_or_optimizer_and_needs_less_than_training(ran):
    training, inference = document(ran, "training")["batches"][0], document(ran, "inference")["batches"][0]
    assert inference["held"]["gradients"] == inference["held"]["optimizer"] == 0
    assert inference["peak_allocated_bytes"] < training["peak_allocated_bytes"]


def test_checkpointing_keeps_fewer_activations(ran):
    plain, checkpointed = document(ran, "training"), document(ran, "checkpointing")
    assert checkpointed["settings"]["checkpointing"] is True
    assert checkpointed["batches"][0]["held"]["activations"] < plain["batches"][0]["held"]["activations"] / 2


def test_the_gpu_memory_is_read_through_nvml(tmp_path):
    driver = FakeDriver(tmp_path / "state.txt", "r550")
    driver.write(FakeState(gpus=[h100(0), h100(1, memory_total=40 * GIB)]))
    result = gputop(f"{MODELS}:mlp", "--input", "64", "--gpu", "1", "--json", env=driver.env())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["settings"]["memory_bytes"] == 40 * GIB
    missing = gputop(f"{MODELS}:mlp", "--input", "64", "--gpu", "2", env=driver.env())
    assert "no such GPU" in one_line_error(missing.returncode, missing.stderr)


def test_gpu_without_a_driver_is_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(tmp_path)}
    result = gputop(f"{MODELS}:mlp", "--input", "64", "--gpu", "0", env=env)
    assert "no NVIDIA driver" in one_line_error(result.returncode, result.stderr)


@pytest.mark.parametrize("message", [message for _, message in BAD])
def test_bad_input_is_one_line_and_exit_status_2(ran, message):
    assert message in one_line_error(ran[message]["status"], ran[message]["stderr"])


def test_an_exit_in_the_layer_tables_forward_pass_is_named_as_there(ran):
    line = one_line_error(
        ran["(batch size 1): SystemExit(3): the model's"]["status"],
        ran["(batch size 1): SystemExit(3): the model's"]["stderr"],
    )
    assert line.startswith("gputop: error: the layer table's forward pass failed at ")


def test_a_keyboard_interrupt_from_the_model_says_so_and_exits_130(ran):
    assert (ran["interrupted"]["status"], ran["interrupted"]["stderr"]) == (
        130,
        "gputop: interrupted (KeyboardInterrupt): no estimate\n",
    )


def test_what_the_models_code_prints_goes_to_stderr_and_json_stays_json():
    result = gputop("tests.estimate.chatty_model:model", "--input", "8", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"] == "tests.estimate.chatty_model:model"
    for said in ("imported", "building", "written to fd 1", "forward", "at exit"):
        assert f"chatty: {said}\n" in result.stderr


def test_without_torch_the_command_says_how_to_install_it():
    code = "import sys; sys.modules['torch'] = None; from gputop.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "estimate", f"{MODELS}:mlp", "--input", "64"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    message = one_line_error(result.returncode, result.stderr)
    assert 'gputop estimate needs PyTorch: pip install "gputop-ml[torch]"' in message


def test_the_layer_table_follows_the_estimate(ran):
    assert ran["layers"]["status"] == 0, ran["layers"]["stderr"]
    lines = ran["layers"]["stdout"].splitlines()
    header = lines.index(next(line for line in lines if line.startswith("layer ")))
    assert [line.split()[:2] for line in lines[header + 1 :]] == [
        ["(model)", "Sequential"],
        ["0", "Linear"],
        ["1", "ReLU"],
        ["2", "Linear"],
    ]
