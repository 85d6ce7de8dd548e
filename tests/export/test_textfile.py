"""``gputop export --textfile DIR``: DIR/gputop.prom for node_exporter, replaced whole at every refresh."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.export.scrape import names, parse, value
from tests.factories import DEADLINE_S, wait_until
from tests.fakenvml.state import FakeState
from tests.machines import GIB, h100, training_box


def read_when_written(path) -> str:
    return wait_until(lambda: path.exists() and path.read_text())


def measured_names(path) -> set[str] | None:
    """The metric names in the file once rates (CPU, SM activity) are measured: from then on the set stays."""
    found = names(parse(read_when_written(path)))
    return found if "gputop_gpu_sm_activity_ratio" in found else None


def test_textfile_values_equal_the_state_file(driver, exporter, tmp_path):
    driver.write(training_box(2, []))
    running = exporter("--textfile", str(tmp_path), "-d", "0.2")

    samples = parse(read_when_written(tmp_path / "gputop.prom"))

    assert running.first_line == f"gputop: writing Prometheus metrics to {tmp_path / 'gputop.prom'} every 0.2 s"
    assert value(samples, "gputop_gpu_memory_used_bytes", gpu="0") == 20 * GIB
    assert value(samples, "gputop_gpu_memory_used_bytes", gpu="1") == 25 * GIB
    assert value(samples, "gputop_gpu_memory_total_bytes", gpu="1") == 80 * GIB
    assert value(samples, "gputop_gpu_busy_ratio", gpu="1") == 0.87
    assert value(samples, "gputop_gpu_temperature_celsius", gpu="1") == 62
    assert value(samples, "gputop_gpu_power_watts", gpu="1") == 512.345
    assert value(samples, "gputop_gpu_throttle_reason", gpu="1", reason="sw_power_cap") == 1
    assert value(samples, "gputop_driver_info", driver_version="550.90.07", cuda_version="12.4") == 1
    assert "gputop_last_sample_timestamp_seconds" in names(samples)
    assert "gputop_last_sample_age_seconds" not in names(samples)


def test_textfile_is_replaced_atomically_never_half_written(driver, exporter, tmp_path):
    driver.write(FakeState(gpus=[h100(i) for i in range(4)]))
    path = tmp_path / "gputop.prom"
    exporter("--textfile", str(tmp_path), "-d", "0.1")
    expected = wait_until(lambda: measured_names(path))

    # Read for at least 2.5 s, and on until the file has shown three of the driver's values: on a busy machine the
    # exporter may refresh it only a few times in 2.5 s.
    seen_memory = set()
    started = time.monotonic()
    reads = 0
    while time.monotonic() < started + 2.5 or len(seen_memory) < 3:
        assert time.monotonic() < started + DEADLINE_S, f"the file was not refreshed while it was read {reads} times"
        reads += 1
        if reads % 50 == 0:
            driver.write(FakeState(gpus=[h100(i, memory_used=(reads // 50 % 64 + 1) * GIB) for i in range(4)]))
        text = path.read_text()
        samples = parse(text)
        assert text.endswith("\n")
        assert names(samples) == expected
        seen_memory.add(value(samples, "gputop_gpu_memory_used_bytes", gpu="3"))

    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("gputop.prom")] == ["gputop.prom"]


def test_textfile_is_readable_by_other_users(driver, exporter, tmp_path):
    driver.write(training_box(1, []))
    exporter("--textfile", str(tmp_path), "-d", "0.2")
    read_when_written(tmp_path / "gputop.prom")

    assert os.stat(tmp_path / "gputop.prom").st_mode & 0o044 == 0o044


def test_textfile_is_removed_when_the_exporter_stops(driver, exporter, tmp_path):
    driver.write(training_box(1, []))
    running = exporter("--textfile", str(tmp_path), "-d", "0.2")
    read_when_written(tmp_path / "gputop.prom")

    code, err = running.stop()

    assert (code, err) == (0, "")
    assert list(tmp_path.iterdir()) == [tmp_path / "state.txt"]


def test_export_works_where_textual_is_not_installed(driver, tmp_path):
    driver.write(training_box(1, []))
    code = (
        "import sys; sys.modules['textual'] = None; from gputop.cli import main; "
        f"raise SystemExit(main(['export', '--textfile', {str(tmp_path)!r}, '-d', '0.1']))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=driver.env(), stderr=subprocess.PIPE, text=True)
    try:
        samples = parse(read_when_written(tmp_path / "gputop.prom"))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=DEADLINE_S)

    assert value(samples, "gputop_gpu_memory_used_bytes", gpu="0") == 20 * GIB
    assert (proc.returncode, "Traceback" in err) == (0, False)
