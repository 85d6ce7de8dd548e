"""The package's layers: only the command line (and ``python -m gputop``) imports ``gputop.cli``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

PACKAGE = Path(__file__).resolve().parents[2] / "gputop"
ALLOWED = {PACKAGE / "cli", PACKAGE / "__main__.py"}


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function, as an absolute name."""
    package = ".".join(("gputop", *path.relative_to(PACKAGE).with_suffix("").parts))
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def outside_cli() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path == allowed or allowed in path.parents for allowed in ALLOWED)
    ]


def test_the_walk_sees_the_package() -> None:
    paths = outside_cli()
    assert PACKAGE / "collect" / "sampler.py" in paths
    assert PACKAGE / "cli" / "__init__.py" not in paths
    assert "gputop.cli.args" in imported_modules(PACKAGE / "cli" / "run.py")


@pytest.mark.parametrize("path", outside_cli(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outside_the_command_line_imports_it(path: Path) -> None:
    wrong = sorted(name for name in imported_modules(path) if name == "gputop.cli" or name.startswith("gputop.cli."))
    assert not wrong, f"{path.relative_to(PACKAGE.parent)} imports {wrong}"
