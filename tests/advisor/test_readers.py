"""Readers: what the rules read of each sample is declared once, and a window keeps what each one gave."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from gputop.advisor.readers import Reader, ReaderFamily
from gputop.advisor.samples import JobSample
from gputop.advisor.window import JobWindow
from tests.advisor.build import loader, sample, view, window

ADVISOR = Path(__file__).resolve().parents[2] / "gputop" / "advisor"


def _above(limit: float, s: JobSample) -> bool:
    return s.time > limit


ABOVE = ReaderFamily("above", _above)


@pytest.mark.fast
def test_a_reader_reads_each_sample_once_whatever_its_function_holds():
    read: list[JobSample] = []  # a list: nothing a cache could key on

    def time_of(s: JobSample) -> float:
        read.append(s)
        return s.time

    reader = Reader("time, counted", time_of)
    w = window(lambda t: sample(t, view(loader())))
    w.median(reader)
    w.values(reader)
    JobWindow(w.samples).median(reader)

    assert len(read) == len(w.samples)


@pytest.mark.fast
def test_readers_of_one_function_are_told_apart():
    def wait(s: JobSample) -> float | None:
        return s.loader.data_wait_share if s.loader is not None else None

    first, second = Reader("wait", wait), Reader("wait", wait)

    assert first.id != second.id


@pytest.mark.fast
def test_a_family_gives_the_same_reader_for_the_same_key():
    assert ABOVE(1.0) is ABOVE(1.0)
    assert ABOVE(1.0) is not ABOVE(2.0)


@pytest.mark.fast
def test_readers_of_a_family_for_different_keys_read_different_values():
    w = window(lambda t: sample(t, view(loader(wait=0.25))))

    assert w.share(ABOVE(-1.0)) == 1.0
    assert w.share(ABOVE(1e9)) == 0.0


@pytest.mark.fast
def test_a_family_past_its_limit_starts_again():
    family = ReaderFamily("above, two at most", _above, limit=2)
    first = family(1.0)
    family(2.0)

    family(3.0)

    assert family(1.0) is not first
    assert family(1.0) is family(1.0)


def _made_per_call(node: ast.AST, inside: bool = False) -> list[int]:
    """The lines of the ``Reader(...)`` and ``ReaderFamily(...)`` calls inside a function or a lambda, so made at
    every call of it (the family's own, which makes each key's reader once, aside)."""
    if isinstance(node, ast.ClassDef) and node.name == "ReaderFamily":
        return []
    found = []
    call = node.func if isinstance(node, ast.Call) else None
    if inside and isinstance(call, ast.Name) and call.id in ("Reader", "ReaderFamily"):
        found.append(node.lineno)
    inside = inside or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    for child in ast.iter_child_nodes(node):
        found += _made_per_call(child, inside)
    return found


@pytest.mark.fast
def test_the_advisors_readers_are_declared_at_the_top_of_their_modules():
    made = {
        str(path.relative_to(ADVISOR)): lines
        for path in sorted(ADVISOR.rglob("*.py"))
        if (lines := _made_per_call(ast.parse(path.read_text(), str(path))))
    }

    assert made == {}


def test_a_function_where_a_reader_belongs_is_a_type_error(tmp_path: Path):
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "rule.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from gputop.advisor.window import JobWindow


            def busy(w: JobWindow) -> float | None:
                return w.median(lambda s: s.gpu_busy_percent)
            """
        )
    )

    out, _, status = api.run([str(snippet), "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"])

    assert status == 1
    assert 'incompatible type "Callable' in out and 'expected "Reader[float | None]"' in out
