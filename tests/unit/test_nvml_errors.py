"""The NVML error wrapper: which errors cost one value, which are remembered, and which mean the GPU is gone."""

from __future__ import annotations

import pytest

from gputop.collect.nvml.errors import (
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    GpuLost,
    call,
    reason_of,
)
from gputop.model import GPU_LOST_STATE, NO_PERMISSION, NOT_IN_DRIVER, UNSUPPORTED

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


class FakeNvmlError(Exception):
    """What pynvml raises: an exception whose ``value`` is NVML's return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def failing(code: int):
    calls = []

    def fn(*args: object) -> object:
        calls.append(args)
        raise FakeNvmlError(code)

    return fn, calls


def test_a_value_is_returned_with_no_reason() -> None:
    assert call({}, "fan", lambda h: 42, "handle") == (42, None)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (NVML_ERROR_NOT_SUPPORTED, UNSUPPORTED),
        (NVML_ERROR_FUNCTION_NOT_FOUND, NOT_IN_DRIVER),
        (NVML_ERROR_ARGUMENT_VERSION_MISMATCH, NOT_IN_DRIVER),
    ],
)
def test_what_the_gpu_or_driver_lacks_is_remembered_and_not_asked_again(code: int, reason: str) -> None:
    unsupported: dict[str, str] = {}
    fn, calls = failing(code)
    assert call(unsupported, "fan", fn, "h") == (None, reason)
    assert call(unsupported, "fan", fn, "h") == (None, reason)
    assert len(calls) == 1 and unsupported == {"fan": reason}


def test_a_missing_symbol_in_pynvml_reads_as_not_in_the_driver() -> None:
    def fn() -> object:
        raise AttributeError("nvmlDeviceGetSomethingNew")

    assert call({}, "new", fn) == (None, NOT_IN_DRIVER)


def test_no_permission_is_a_reason_but_asked_again_next_time() -> None:
    unsupported: dict[str, str] = {}
    fn, calls = failing(NVML_ERROR_NO_PERMISSION)
    assert call(unsupported, "ecc", fn) == (None, NO_PERMISSION)
    assert call(unsupported, "ecc", fn) == (None, NO_PERMISSION)
    assert len(calls) == 2 and unsupported == {}


def test_another_error_gives_the_drivers_words_made_printable() -> None:
    def fn() -> object:
        raise RuntimeError("Unknown Error \x1b[2J")

    assert call({}, "x", fn) == (None, "error: Unknown Error \\x1b[2J")


@pytest.mark.parametrize("code", [NVML_ERROR_GPU_IS_LOST, NVML_ERROR_RESET_REQUIRED])
def test_a_lost_gpu_raises_so_the_whole_gpu_is_shown_lost(code: int) -> None:
    fn, _ = failing(code)
    with pytest.raises(GpuLost) as raised:
        call({}, "power", fn)
    assert raised.value.state == GPU_LOST_STATE and "reset" in raised.value.reason


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (FakeNvmlError(NVML_ERROR_NOT_SUPPORTED), UNSUPPORTED),
        (FakeNvmlError(NVML_ERROR_FUNCTION_NOT_FOUND), NOT_IN_DRIVER),
        (FakeNvmlError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH), NOT_IN_DRIVER),
        (AttributeError("nvmlDeviceGetSomethingNew"), NOT_IN_DRIVER),
        (FakeNvmlError(NVML_ERROR_NO_PERMISSION), NO_PERMISSION),
        (FakeNvmlError(NVML_ERROR_GPU_IS_LOST), "GPU is lost"),
        (FakeNvmlError(NVML_ERROR_RESET_REQUIRED), "GPU is lost"),
        (RuntimeError("Unknown Error \x1b[2J"), "error: Unknown Error \\x1b[2J"),
    ],
)
def test_each_error_has_one_reason_and_the_wrapper_gives_the_same_one(error: Exception, reason: str) -> None:
    def fn() -> object:
        raise error

    assert reason_of(error) == reason
    if reason != "GPU is lost":  # the wrapper raises for a lost GPU instead
        assert call({}, "x", fn) == (None, reason)
