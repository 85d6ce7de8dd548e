"""The words and bars of a GPU card: honest labels, N/A for what cannot be read, columns that line up."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop.model import Gpu, frozen_reasons
from gputop.ui.history import History
from gputop.ui.text.gpu import Palette, Sparks, card_lines, compact_line, subtitle, throttles
from gputop.ui.widgets.gpu_panel import choose_layout
from tests.ui import scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

PLAIN = Palette()
GPU = scenes.gpu(0, scenes.T0)


def plain(lines) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(line.plain for line in lines)


def test_card_labels_utilization_as_gpu_busy_and_shows_sm_activity() -> None:
    text = plain(card_lines(GPU, Sparks(), 76, PLAIN))
    assert "BUSY" in text
    assert "SM " in text


def test_a_gpu_without_gpm_has_no_sm_line() -> None:
    old = replace(GPU, sm_activity_percent=None, unavailable=frozen_reasons({"sm_activity_percent": "unsupported"}))
    assert "SM  " not in plain(card_lines(old, Sparks(), 76, PLAIN)).replace("clocks SM", "")


def test_a_gpu_with_gpm_gets_a_work_line_with_each_metric_and_its_history() -> None:
    work = scenes.real_work_gpu(3, scenes.T0)
    lines = plain(card_lines(work, Sparks(), 120, PLAIN)).splitlines()
    assert "occ 8%" in lines[2]
    assert lines[3].startswith("WORK tensor   2%  DRAM  10%  fp32   6%")
    assert len(lines) == len(plain(card_lines(GPU, Sparks(), 120, PLAIN)).splitlines()) + 1
    sparks = Sparks(work=(("tensor_activity_percent", "▁▂▃▄▅▆"), ("dram_bandwidth_percent", "▆▅▄▃▂▁")))
    with_history = plain(card_lines(work, sparks, 120, PLAIN)).splitlines()[3]
    assert "tensor   2% ▁▂▃▄▅▆  DRAM  10% ▆▅▄▃▂▁  fp32   6%" in with_history
    narrow = plain(card_lines(work, sparks, 44, PLAIN)).splitlines()[3]
    assert "tensor   2% ▁▂▃▄▅▆" in narrow and "fp32" not in narrow  # what does not fit is left out, not cut
    assert len(narrow) <= 44


def test_the_work_line_keeps_history_of_every_gpm_share() -> None:
    history = History()
    for second in range(300):
        gpu = replace(scenes.real_work_gpu(0, scenes.T0), tensor_activity_percent=second / 3)
        history.record(replace(scenes.training_node(), time=scenes.T0 + second, gpus=(gpu,)))
    assert history.gpus[0].work["tensor_activity_percent"].sparkline(10, scenes.T0 + 299) == "▁▂▂▃▄▅▅▆▇▇"
    assert set(history.gpus[0].work) >= {"tensor_activity_percent", "dram_bandwidth_percent", "fp16_activity_percent"}


def test_only_gpus_with_real_work_metrics_get_them_in_compact_rows() -> None:
    assert " TC " in compact_line(scenes.real_work_gpu(1, scenes.T0), "", 80, PLAIN).plain
    assert " TC " not in compact_line(GPU, "", 80, PLAIN).plain
    assert "DRAM" in compact_line(scenes.real_work_gpu(1, scenes.T0), "", 160, PLAIN).plain


def test_unreadable_values_read_na_never_zero() -> None:
    blind = Gpu(0, None, "NVIDIA A100", unavailable=frozen_reasons({"temperature_c": "unsupported"}))
    text = plain(card_lines(blind, Sparks(), 76, PLAIN))
    assert "N/A" in text
    assert " 0%" not in text and "0°C" not in text and " 0 W" not in text


def test_gpu_idle_is_not_a_throttle() -> None:
    assert throttles(replace(GPU, throttle_reasons=("gpu_idle",))) == []
    assert subtitle(replace(GPU, throttle_reasons=("gpu_idle", "sw_power_cap"))) == "throttled: power cap"


def test_a_lost_gpu_shows_its_reason() -> None:
    lost = scenes.training_node(lost=[3]).gpus[3]
    assert scenes.LOST_REASON in plain(card_lines(lost, Sparks(), 76, PLAIN))
    assert "LOST" in compact_line(lost, "", 80, PLAIN).plain


def test_compact_rows_line_up_across_gpus() -> None:
    for width in (80, 160):
        lines = [compact_line(scenes.gpu(i, scenes.T0), "", width, PLAIN).plain for i in range(8)]
        assert len({line.index("BUSY") for line in lines}) == 1
        assert all(len(line) <= width for line in lines)


def test_wide_compact_rows_line_up_whatever_the_memory_figures_are() -> None:
    idle = replace(GPU, memory_used_bytes=512 * 1024**2)  # 512MiB: a cell shorter than 60.0GiB
    refused = replace(GPU, memory_used_bytes=None, unavailable=frozen_reasons({"memory_used_bytes": "no permission"}))

    lines = [compact_line(gpu, "", 160, PLAIN).plain for gpu in (GPU, idle, refused)]

    assert len({line.index("BUSY") for line in lines}) == 1
    assert " 512MiB / 80.0GiB " in lines[1] and "N/A (no permission)" in lines[2]


def test_cards_when_they_fit_one_line_each_when_they_do_not() -> None:
    gpus = [scenes.gpu(i, scenes.T0) for i in range(8)]
    assert choose_layout(gpus, 160, 36) == (False, 2)
    assert choose_layout(gpus, 80, 13) == (True, 1)
    assert choose_layout(gpus[:1], 80, 13) == (False, 1)
