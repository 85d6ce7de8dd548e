"""What changed between two runs of a job: each setting and number as A → B, and each finding gone, new or still
there; and whether two command lines run the same job."""

from __future__ import annotations

from typing import Literal

from gputop.compare.summary import MEMORY_PARTS, SETTINGS, FindingSeen, RunSummary, Setting
from gputop.frozen import immutable

Measure = Literal["setting", "rate", "share", "seconds", "bytes", "fraction", "joules"]
"""How a row's two values are compared: a setting as it is; a rate, seconds and joules by their ratio; a share
and a fraction (MFU) by the difference in points; bytes by the difference."""
FindingState = Literal["gone", "new", "still"]

_PYTHON_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})


@immutable
class Row:
    """One thing compared: its group (``settings``, ``throughput``, ``step``, ``memory``, ``cost``), its name,
    and its value in A and in B (None: not known in that run)."""

    group: str
    name: str
    measure: Measure
    a: Setting | float
    b: Setting | float

    @property
    def changed(self) -> bool:
        return self.a != self.b

    @property
    def ratio(self) -> float | None:
        """B over A for a rate, seconds or joules known in both (A not zero)."""
        pair = self._pair()
        if self.measure not in ("rate", "seconds", "joules") or pair is None or not pair[0]:
            return None
        return pair[1] / pair[0]

    @property
    def points(self) -> float | None:
        """B minus A in percentage points, for a share or a fraction known in both."""
        pair = self._pair()
        return None if self.measure not in ("share", "fraction") or pair is None else (pair[1] - pair[0]) * 100

    @property
    def difference(self) -> float | None:
        """B minus A, for bytes known in both."""
        pair = self._pair()
        return None if self.measure != "bytes" or pair is None else pair[1] - pair[0]

    def _pair(self) -> tuple[float, float] | None:
        a, b = self.a, self.b
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            return None
        return float(a), float(b)


@immutable
class FindingChange:
    finding: FindingSeen
    state: FindingState


@immutable
class Comparison:
    a: RunSummary
    b: RunSummary
    rows: tuple[Row, ...]
    findings: tuple[FindingChange, ...]

    def row(self, name: str) -> Row | None:
        return next((row for row in self.rows if row.name == name), None)


def compare(a: RunSummary, b: RunSummary) -> Comparison:
    """Every setting and number of the two runs (those known in neither left out), and every finding of either."""
    rows: list[Row] = [Row("settings", name, "setting", a.setting(name), b.setting(name)) for name in SETTINGS]
    rows += [
        Row("throughput", "steps/s", "rate", a.steps_per_s, b.steps_per_s),
        Row("throughput", "samples/s", "rate", a.samples_per_s, b.samples_per_s),
        Row("throughput", "data wait", "share", a.data_wait_share, b.data_wait_share),
    ]
    phases_a, phases_b = dict(a.phases_s), dict(b.phases_s)
    phases = list(phases_a) + [phase for phase in phases_b if phase not in phases_a]
    rows += [Row("step", phase, "seconds", phases_a.get(phase), phases_b.get(phase)) for phase in phases]
    rows += [Row("memory", part, "bytes", a.memory_of(part), b.memory_of(part)) for part in MEMORY_PARTS]
    rows += [
        Row("cost", "MFU", "fraction", a.mfu, b.mfu),
        Row("cost", "J/sample", "joules", a.energy_per_sample_j, b.energy_per_sample_j),
    ]
    known = tuple(row for row in rows if row.a is not None or row.b is not None)
    return Comparison(a, b, known, finding_changes(a.findings, b.findings))


def finding_changes(a: tuple[FindingSeen, ...], b: tuple[FindingSeen, ...]) -> tuple[FindingChange, ...]:
    """Each rule of A gone or still there (B's form where still), then each rule new in B."""
    in_b = {f.id: f for f in b}
    in_a = {f.id for f in a}
    changes = [FindingChange(in_b.get(f.id, f), "still" if f.id in in_b else "gone") for f in a]
    changes += [FindingChange(f, "new") for f in b if f.id not in in_a]
    return tuple(changes)


def job_of(command: str) -> str:
    """What names the job of a command line, its arguments left out: the program by its base name and, for a
    Python interpreter, its script or ``-m`` module (``python train.py --workers 7`` is ``python train.py``);
    another program (``torchrun``), by its first word that names a Python file, else its whole line. Two runs of
    one job differ in their arguments: ``--workers 1`` then ``--workers 7`` is the change a comparison is for."""
    words = command.split(" ")
    program = words[0].rpartition("/")[2] or words[0]
    if program.startswith(("python", "pypy")):
        program = "python"
    i = 1
    while i < len(words) and words[i].startswith("-"):
        if words[i] in ("-m", "-c"):
            return " ".join((program, *words[i : i + 2]))
        i += 2 if words[i] in _PYTHON_OPTIONS_WITH_VALUE else 1
    if program == "python" and i < len(words):
        return f"{program} {words[i]}"
    script = next((word for word in words[1:] if word.endswith(".py")), None)
    return command if script is None else f"{program} {script}"


def same_job(a: RunSummary, b: RunSummary) -> bool:
    """Whether the two runs ran the same job, as far as their command lines are known."""
    if a.command is None or b.command is None:
        return True
    return job_of(a.command) == job_of(b.command)
