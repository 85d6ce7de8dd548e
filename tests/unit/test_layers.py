"""The package's layers, read from every module's imports (docs/architecture.md, "Layout and what may import what"):
the command line is the top, a run of ``gputop run`` just below it, the probe stands alone, the model is the
bottom, Textual stays in the dashboard's own modules, and a screen takes only screens from another screen's
module."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

PACKAGE = Path(__file__).resolve().parents[2] / "gputop"
ALL = sorted(PACKAGE.rglob("*.py"))
PURE_UI = [
    *sorted((PACKAGE / "ui" / "text").rglob("*.py")),
    PACKAGE / "ui" / "feed.py",
    PACKAGE / "ui" / "replay" / "__init__.py",
    PACKAGE / "ui" / "replay" / "source.py",
    PACKAGE / "ui" / "replay" / "cache.py",
    PACKAGE / "ui" / "replay" / "findings.py",
    PACKAGE / "ui" / "replay" / "time.py",
    PACKAGE / "ui" / "hosts" / "__init__.py",
    PACKAGE / "ui" / "hosts" / "feed.py",
]
"""The dashboard's modules that are tested with plain values: no Textual in them."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("gputop", *(parts[:-1] if path.name == "__init__.py" else parts)))


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


@functools.cache
def imports(path: Path) -> tuple[tuple[str, str | None], ...]:
    """``(module, name)`` for every import in ``path``, at its top or inside a function, the module absolute;
    ``name`` is what ``from module import name`` takes (None for ``import module``). Read once per module: every
    rule below asks it of every module."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.extend((base, alias.name) for alias in node.names)
    return tuple(found)


def top_level_imports(path: Path) -> set[str]:
    """The modules ``path`` loads when it is imported: its imports outside functions (``if TYPE_CHECKING:``
    blocks left out, as they load nothing)."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found.update({node.module or "", *(f"{node.module}.{alias.name}" for alias in node.names)})
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (ast.Try, ast.With)):
                visit(node.body)

    visit(parsed(path).body)
    return found


@functools.cache
def modules_imported(path: Path) -> frozenset[str]:
    """Every module ``path`` may load: ``from a.b import c`` counts as ``a.b`` and ``a.b.c``."""
    names = set()
    for module, name in imports(path):
        names.add(module)
        if name is not None:
            names.add(f"{module}.{name}")
    return frozenset(names)


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def modules_of(package: str) -> list[Path]:
    return [path for path in ALL if within(module_name(path), package)]


def imported_of(path: Path, packages: tuple[str, ...]) -> list[str]:
    """What ``path`` imports from any of ``packages``."""
    return sorted(n for n in modules_imported(path) if any(within(n, package) for package in packages))


def test_the_walk_resolves_relative_imports_and_sees_the_package() -> None:
    assert PACKAGE / "collect" / "sampler.py" in ALL
    assert "gputop.probe.channel" in modules_imported(PACKAGE / "probe" / "probe.py")  # from . import channel
    assert "gputop.probe.hooks" in modules_imported(PACKAGE / "probe" / "__init__.py")  # from .hooks import ...
    assert "gputop.cli.args" in modules_imported(PACKAGE / "cli" / "run.py")
    assert "gputop.run.RunOptions" in modules_imported(PACKAGE / "cli" / "run.py")  # inside main()
    assert "gputop.ui.app" in modules_imported(PACKAGE / "run" / "prepare.py")  # inside a function
    assert "gputop.ui.app" not in top_level_imports(PACKAGE / "run" / "prepare.py")
    assert all(path.exists() for path in PURE_UI)
    assert PACKAGE / "estimate" / "defaults.py" in modules_of("gputop.estimate")
    sampler = PACKAGE / "collect" / "sampler.py"
    assert "gputop.collect.host" in modules_imported(sampler)  # under TYPE_CHECKING: a type is an import too
    assert "gputop.collect.host" not in top_level_imports(sampler)


@pytest.mark.parametrize("path", [p for p in ALL if not within(module_name(p), "gputop.cli")], ids=rel)
def test_only_the_entry_point_imports_the_command_line(path: Path) -> None:
    wrong = sorted(n for n in modules_imported(path) if within(n, "gputop.cli"))
    if path == PACKAGE / "__main__.py":
        assert wrong == ["gputop.cli", "gputop.cli.main"]
    else:
        assert not wrong, f"{rel(path)} imports {wrong}"


@pytest.mark.parametrize(
    "path",
    [p for p in ALL if not within(module_name(p), "gputop.cli") and not within(module_name(p), "gputop.run")],
    ids=rel,
)
def test_only_the_command_line_starts_a_run(path: Path) -> None:
    """``gputop run`` and ``gputop demo`` call ``gputop.run``; nothing it watches with calls back up into it."""
    wrong = sorted(n for n in modules_imported(path) if within(n, "gputop.run"))
    assert not wrong, f"{rel(path)} imports {wrong}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "run").glob("*.py")), ids=rel)
def test_a_run_loads_the_dashboard_only_when_it_shows_one(path: Path) -> None:
    """Headless, where Textual is missing too, a run must start: the dashboard is imported inside the function
    that opens it."""
    assert not [n for n in top_level_imports(path) if within(n, "gputop.ui")], f"{rel(path)} imports the dashboard"


@pytest.mark.parametrize("path", sorted((PACKAGE / "probe").rglob("*.py")), ids=rel)
def test_the_probe_imports_nothing_of_gputop_outside_itself(path: Path) -> None:
    """In the job the probe is loaded from its files as ``gputop_probe``: the job's interpreter may have no gputop."""
    wrong = sorted(n for n in modules_imported(path) if within(n, "gputop") and not within(n, "gputop.probe"))
    assert not wrong, f"{rel(path)} imports {wrong}"


@pytest.mark.parametrize("path", modules_of("gputop.collect"), ids=rel)
def test_a_collector_imports_nothing_that_reads_snapshots(path: Path) -> None:
    """Collectors make the snapshot; the advisor, the dashboard, the store, the exporter and the remote view take it
    from them, never the other way."""
    readers = ("gputop.advisor", "gputop.ui", "gputop.store", "gputop.export", "gputop.remote")
    assert not imported_of(path, readers), f"{rel(path)} imports {imported_of(path, readers)}"


@pytest.mark.parametrize("path", modules_of("gputop.advisor"), ids=rel)
def test_the_advisor_judges_the_snapshots_it_is_handed(path: Path) -> None:
    """Pure rules over snapshots from anywhere (the sampler, a recording, a remote host): the advisor collects none,
    opens no file and draws nothing, so replay and report judge as the dashboard does."""
    wrong = imported_of(path, ("gputop.collect", "gputop.ui", "gputop.store"))
    assert not wrong, f"{rel(path)} imports {wrong}"


@pytest.mark.parametrize("path", modules_of("gputop.estimate"), ids=rel)
def test_the_estimate_imports_only_itself_formatting_and_sanitize(path: Path) -> None:
    """``gputop estimate`` runs before any job, without a GPU: nothing of the monitor comes with it."""
    own = ("gputop.estimate", "gputop.formatting", "gputop.sanitize")
    wrong = sorted(n for n in modules_imported(path) if within(n, "gputop") and not any(within(n, o) for o in own))
    assert not wrong, f"{rel(path)} imports {wrong}"


def test_the_model_imports_nothing_of_gputop() -> None:
    assert not [n for n in modules_imported(PACKAGE / "model.py") if within(n, "gputop")]


@pytest.mark.parametrize("path", [p for p in ALL if not within(module_name(p), "gputop.ui")] + PURE_UI, ids=rel)
def test_textual_stays_in_the_dashboards_own_modules(path: Path) -> None:
    assert not [n for n in modules_imported(path) if within(n, "textual")], f"{rel(path)} imports Textual"


@pytest.mark.parametrize("path", sorted((PACKAGE / "ui" / "screens").glob("*.py")), ids=rel)
def test_a_screen_takes_only_screens_from_another_screens_module(path: Path) -> None:
    taken = [
        f"{module}.{name}"
        for module, name in imports(path)
        if within(module, "gputop.ui.screens") and module != module_name(path) and name is not None
    ]
    assert all(name.endswith("Screen") for name in taken), f"{rel(path)} imports {taken}"
