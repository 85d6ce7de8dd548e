"""Running the estimate tests' torch work in a process of its own (``in_torch.py``) and reading its document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def in_torch(what: str, *args: str, timeout: float = 600, module: str = "in_torch") -> Any:
    """The JSON document ``python -m tests.estimate.MODULE WHAT ARGS...`` prints."""
    result = subprocess.run(
        [sys.executable, "-m", f"tests.estimate.{module}", what, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
