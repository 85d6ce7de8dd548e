"""The dashboard's command line is read without the subcommands' modules, and reads as the whole parser does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gputop import cli
from gputop.cli.args import UsageError

DASHBOARD_LINES = (
    [],
    ["-d", "0.5"],
    ["--interval=2", "--readonly"],
    ["--pid", "1", "--job", "02f76fe8"],
    ["--once", "--json"],
    ["--host", "local", "--ssh-option", "Port=2222"],
    ["--read"],  # an abbreviation, as argparse allows
)


@pytest.mark.fast
@pytest.mark.parametrize("argv", DASHBOARD_LINES)
def test_the_dashboards_options_read_as_the_whole_parser_reads_them(argv: list[str]) -> None:
    assert vars(cli.parse_args(argv)) == vars(cli.build_parser().parse_args(argv))


@pytest.mark.fast
@pytest.mark.parametrize("argv", [["report", "--window", "5", "pid", "1"], ["-d", "1", "doctor"], ["typo"]])
def test_a_command_or_a_stray_word_goes_to_the_whole_parser(argv: list[str]) -> None:
    def parsed(parse: object) -> object:
        try:
            return vars(parse(argv))  # type: ignore[operator]
        except UsageError as exc:
            return str(exc)

    assert parsed(cli.parse_args) == parsed(cli.build_parser().parse_args)


@pytest.mark.fast
def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--help", "--he", "-h"):
        with pytest.raises(SystemExit):
            cli.parse_args([flag])
        assert "estimate" in capsys.readouterr().out


def test_the_dashboards_command_line_imports_no_subcommand() -> None:
    code = (
        "import sys; from gputop.cli import COMMANDS, parse_args; parse_args(['-d', '1']); "
        "print(sorted(n for n in COMMANDS if f'gputop.cli.{n}' in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
