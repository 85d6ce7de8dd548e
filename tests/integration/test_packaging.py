"""The installed package, as `pip install .` builds it, not only the editable checkout the tests run from."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_the_files_the_program_loads_at_run_time(tmp_path):
    # A copy without earlier build output, which setuptools would otherwise reuse.
    source = tmp_path / "source"
    skip = shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__", "tests", "screenshots")
    shutil.copytree(ROOT, source, ignore=skip)
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source)]
    subprocess.run([*command, "-w", str(tmp_path)], check=True, capture_output=True, timeout=120)
    [wheel] = tmp_path.glob("gputop_ml-*.whl")

    names = set(zipfile.ZipFile(wheel).namelist())

    assert "gputop/ui/gputop.tcss" in names  # the dashboard's stylesheet (Textual reads it at start)
    assert "gputop/probe/_boot/sitecustomize.py" in names  # what `gputop run` puts on PYTHONPATH
    assert "gputop/demo/job.py" in names  # the training job `gputop demo` runs with python -m gputop.demo.job
