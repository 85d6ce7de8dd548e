"""``gputop --job ID``: the id as the job view shows it, anything else one line on stderr and exit status 2."""

from __future__ import annotations

import pytest

from gputop import cli
from gputop.cli.args import job_id

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("text", ["02f76fe8", "0", "0123456789abcdef"])
def test_a_job_id_is_1_to_16_lowercase_hex_digits(text: str) -> None:
    assert job_id(text) == text


@pytest.mark.parametrize("text", ["", "02F76FE8", "0123456789abcdef0", "xyz", "02f7 6fe8", "٠"])
def test_anything_else_is_not_a_job_id(text: str) -> None:
    with pytest.raises(Exception, match="not a job id"):
        job_id(text)


def test_a_malformed_job_id_is_one_line_and_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--job", "NOT-A-JOB"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("gputop: error: ") and "not a job id" in err


def test_a_well_formed_job_id_is_kept_for_the_dashboard() -> None:
    assert cli.build_parser().parse_args(["--job", "02f76fe8"]).job == "02f76fe8"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--json", "--job", "02f76fe8"], "--job opens the dashboard's job view; --json shows every job's ranks"),
        (["--once", "--job", "02f76fe8"], "--job opens the dashboard's job view; --once shows every job's ranks"),
        (["--host", "a", "--job", "02f76fe8"], "--host and --hosts-file cannot be combined with --job"),
    ],
)
def test_job_with_an_option_it_cannot_go_with_is_one_line_and_exit_2(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gputop: error: {error}") and err.count("\n") == 1
