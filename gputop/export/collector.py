"""The prometheus-client collector: the latest snapshot as metric families, made at each scrape or write.

It only reads the snapshot the sampler thread last finished, so a scrape (on the exporter's event loop) never
calls NVML or psutil and never waits for a slow driver. ``Exposition`` encodes the part that depends on the
snapshot alone once per snapshot, so many scrapers of one snapshot cost little more than one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from gputop.export.metrics import advice_families, dcgm_labelled, snapshot_families
from gputop.model import Advice, Snapshot

# choose_encoder puts the format version a client asks for into the content type, so the cache keys come from
# clients: a few formats are kept per snapshot (Prometheus asks for one), the rest are encoded at each scrape.
MAX_CACHED_FORMATS = 4
_NO_ADVICE: tuple[Advice, ...] = ()


class SnapshotCollector(Collector):
    """Metric families of the snapshot ``latest()`` returns, plus the exporter's own timing.

    Before the first snapshot there is only ``gputop_scrape_duration_seconds``. ``advice`` returns the advisor's
    active findings, exported beside the snapshot's metrics. ``report_age`` is False for a textfile, where the age
    at writing time would read as fresh for as long as the file lies there. ``dcgm_hostname``: add dcgm-exporter's
    label names to every GPU series, with this ``Hostname`` (None: gputop's labels alone).
    """

    def __init__(
        self,
        latest: Callable[[], Snapshot | None],
        per_process: bool = False,
        report_age: bool = True,
        clock: Callable[[], float] = time.time,
        advice: Callable[[], Sequence[Advice]] | None = None,
        dcgm_hostname: str | None = None,
    ) -> None:
        self._latest = latest
        self.dcgm_hostname = dcgm_hostname
        self._advice = advice
        self.per_process = per_process
        self.report_age = report_age
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        snap, advice = self.current()
        yield from self.snapshot_part(snap, advice)
        yield from self.scrape_part(snap, started)

    def current(self) -> tuple[Snapshot | None, Sequence[Advice]]:
        """The snapshot to export now and the advisor's findings beside it."""
        return self._latest(), _NO_ADVICE if self._advice is None else self._advice()

    def snapshot_part(self, snap: Snapshot | None, advice: Sequence[Advice]) -> list[Metric]:
        """The families that depend on the snapshot and the findings only."""
        if snap is None:
            return []
        families = snapshot_families(snap, self.per_process)
        if self._advice is not None:
            families += advice_families(advice, self.per_process)
        families.append(
            GaugeMetricFamily(
                "gputop_last_sample_timestamp_seconds", "When the exported snapshot was taken (Unix time).", snap.time
            )
        )
        if self.dcgm_hostname is not None:
            return dcgm_labelled(families, self.dcgm_hostname, snap.gpus)
        return families

    def scrape_part(self, snap: Snapshot | None, started: float) -> list[Metric]:
        """The families that change at every scrape: the snapshot's age, and the time since ``started``."""
        families: list[Metric] = []
        if snap is not None and self.report_age:
            families.append(
                GaugeMetricFamily(
                    "gputop_last_sample_age_seconds",
                    "Age of the exported snapshot when it was scraped.",
                    max(0.0, self._clock() - snap.time),
                )
            )
        families.append(
            GaugeMetricFamily(
                "gputop_scrape_duration_seconds",
                "Time taken to turn the snapshot into metrics for this scrape.",
                time.perf_counter() - started,
            )
        )
        return families


class _Families(Collector):
    """Families already made, in the shape prometheus-client's encoders read."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


class Exposition:
    """A scrape's body in the format its ``Accept`` header asks for, the same text ``collector`` would give.

    Encoding is most of a scrape's cost (about 2.5 ms for eight GPUs in OpenMetrics) and the snapshot changes once
    per interval, while scrapers may come many times in one: the part that depends on the snapshot and findings
    alone is encoded once per snapshot and format, the sample age and scrape duration at every scrape.
    """

    def __init__(self, collector: SnapshotCollector) -> None:
        self._collector = collector
        self._snap: Snapshot | None = None
        self._advice: Sequence[Advice] = _NO_ADVICE
        self._bodies: dict[str, bytes] = {}

    def render(self, accept: str) -> tuple[bytes, str]:
        """The body and its content type."""
        started = time.perf_counter()
        encoder, content_type = choose_encoder(accept)
        snap, advice = self._collector.current()
        # A new snapshot or new findings are new objects: identity tells them apart at no cost.
        if snap is not self._snap or advice is not self._advice:
            self._snap, self._advice, self._bodies = snap, advice, {}
        body = self._bodies.get(content_type)
        if body is None:
            # OpenMetrics ends with "# EOF", which belongs after the per-scrape part.
            body = encoder(_Families(self._collector.snapshot_part(snap, advice))).removesuffix(b"# EOF\n")
            if len(self._bodies) < MAX_CACHED_FORMATS:
                self._bodies[content_type] = body
        return body + encoder(_Families(self._collector.scrape_part(snap, started))), content_type
