"""Reading what the command line gives the estimate: sizes, input shapes, optimizer arguments, factory names."""

from __future__ import annotations

import argparse

import pytest

from gputop.cli.args import byte_size
from gputop.cli.estimate import gpu_size, margin_percent
from gputop.estimate.errors import EstimateError, describe
from gputop.estimate.factory import load_factory
from gputop.estimate.inputs import InputSpec, parse_inputs, parse_optimizer_args
from gputop.estimate.render import percent as render_percent

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("text", "size"),
    [("80GiB", 80 * 1024**3), ("512MiB", 512 * 1024**2), ("40GB", 40 * 10**9), ("1.5GiB", 3 * 1024**3 // 2)],
)
def test_sizes_read_binary_and_decimal_units(text, size):
    assert byte_size(text) == size


def test_a_plain_number_is_bytes():
    assert byte_size("4096") == 4096


@pytest.mark.parametrize(
    "text", ["", "GiB", "80 parsecs", "-1GiB", "0", "nanGiB", "1e400GiB", "٨٠GiB", "0.5", "1e-10GiB", "1e-300"]
)
def test_bad_sizes_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        byte_size(text)


def test_input_shapes_with_and_without_dtypes():
    assert parse_inputs("3x224x224, 128:int64") == (InputSpec((3, 224, 224)), InputSpec((128,), "int64"))


@pytest.mark.parametrize("text", ["3x", "x3", "3x0", "abc", "3:complex7", ""])
def test_bad_input_shapes_name_the_part_that_is_wrong(text):
    with pytest.raises(ValueError, match=r"shape|dtype"):
        parse_inputs(text)


def test_optimizer_arguments_are_python_literals():
    assert parse_optimizer_args("lr=0.1, betas=(0.9, 0.95), nesterov=True") == {
        "lr": 0.1,
        "betas": (0.9, 0.95),
        "nesterov": True,
    }


@pytest.mark.parametrize("text", ["0.1", "lr=", "lr=__import__('os')", "**x", "lr=a"])
def test_optimizer_arguments_that_are_not_literals_are_refused(text):
    with pytest.raises(ValueError):
        parse_optimizer_args(text)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "package.module:function"),
        ("gputop_no_such_module:f", "cannot import gputop_no_such_module: ModuleNotFoundError"),
        ("gputop.formatting:no_such_function", "gputop.formatting has no function no_such_function"),
    ],
)
def test_a_factory_that_cannot_be_loaded_says_why(spec, message):
    with pytest.raises(EstimateError, match=message):
        load_factory(spec)


@pytest.mark.parametrize(
    ("raised", "told"),
    [
        (ValueError("no weights file\nat /models"), "ValueError: no weights file"),
        (RuntimeError(), "RuntimeError"),
        (SystemExit(), "SystemExit: the model's code asked to exit"),
        (SystemExit(7), "SystemExit(7): the model's code asked to exit"),
        (SystemExit("config.yaml is missing"), "SystemExit: config.yaml is missing"),
        (GeneratorExit(), "GeneratorExit"),
    ],
)
def test_what_the_users_code_raised_is_told_in_one_line(raised, told):
    assert describe(raised) == told


@pytest.mark.parametrize(("text", "size"), [("80", 80 * 1024**3), ("24.5", 49 * 1024**3 // 2), ("24GB", 24 * 10**9)])
def test_a_gpus_memory_given_as_a_bare_number_is_gib(text, size):
    assert gpu_size(text) == size


@pytest.mark.parametrize(("text", "percent"), [("0.05", 5), ("5", 5), ("5%", 5), ("0.5%", 0.5), ("0", 0)])
def test_a_margin_under_1_without_a_percent_sign_is_a_fraction(text, percent):
    assert margin_percent(text) == pytest.approx(percent)


@pytest.mark.parametrize(("share", "text"), [(0.1, "10%"), (0.025, "2.5%"), (0.0005, "0.05%")])
def test_the_margin_is_said_back_with_the_digits_it_has(share, text):
    assert render_percent(share) == text
