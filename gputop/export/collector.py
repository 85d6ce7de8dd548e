"""The prometheus-client collector: the latest snapshot as metric families, made at each scrape or write.

It only reads the snapshot the sampler thread last finished, so a scrape (on the HTTP server's thread) never
calls NVML or psutil and never waits for a slow driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gputop.export.metrics import advice_families, snapshot_families
from gputop.model import Advice, Snapshot


class SnapshotCollector(Collector):
    """Metric families of the snapshot ``latest()`` returns, plus the exporter's own timing.

    Before the first snapshot there is only ``gputop_scrape_duration_seconds``. ``advice`` returns the advisor's
    active findings, exported beside the snapshot's metrics. ``report_age`` is False for a textfile, where the age
    at writing time would read as fresh for as long as the file lies there.
    """

    def __init__(
        self,
        latest: Callable[[], Snapshot | None],
        per_process: bool = False,
        report_age: bool = True,
        clock: Callable[[], float] = time.time,
        advice: Callable[[], Sequence[Advice]] | None = None,
    ) -> None:
        self._latest = latest
        self._advice = advice
        self.per_process = per_process
        self.report_age = report_age
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        snap = self._latest()
        if snap is not None:
            yield from snapshot_families(snap, self.per_process)
            if self._advice is not None:
                yield from advice_families(self._advice(), self.per_process)
            yield GaugeMetricFamily(
                "gputop_last_sample_timestamp_seconds", "When the exported snapshot was taken (Unix time).", snap.time
            )
            if self.report_age:
                yield GaugeMetricFamily(
                    "gputop_last_sample_age_seconds",
                    "Age of the exported snapshot when it was scraped.",
                    max(0.0, self._clock() - snap.time),
                )
        yield GaugeMetricFamily(
            "gputop_scrape_duration_seconds",
            "Time taken to turn the snapshot into metrics for this scrape.",
            time.perf_counter() - started,
        )
