"""What a scrape returns: the collector's metrics, with the snapshot's part encoded once per snapshot and format."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

from gputop.export.collector import Exposition, SnapshotCollector
from gputop.model import WARNING, Advice
from tests.export.scrape import parse, value
from tests.export.test_metrics import NOW, exposition, snapshot

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


class Source:
    """The sampler's latest snapshot and the advisor's findings, as the exporter reads them, and a clock."""

    def __init__(self) -> None:
        self.snap = snapshot()
        self.advice: tuple[Advice, ...] = ()
        self.now = NOW

    def exposition(self) -> Exposition:
        return Exposition(
            SnapshotCollector(lambda: self.snap, per_process=True, clock=lambda: self.now, advice=lambda: self.advice)
        )


def samples(body: bytes, content_type: str) -> dict[tuple, float]:
    """Every sample but the scrape duration (which differs at each scrape), by name and labels."""
    text = body.decode()
    if content_type.startswith("application/openmetrics-text"):
        parsed = [s for family in openmetrics_families(text) for s in family.samples]
    else:
        parsed = parse(text)
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value for s in parsed if s.name != "gputop_scrape_duration_seconds"
    }


@pytest.mark.parametrize("accept", ["", PROMETHEUS_ACCEPT])
def test_a_scrape_has_what_the_collector_gives_in_the_format_asked_for(accept):
    source = Source()
    rendered = source.exposition()

    for _ in range(2):  # made, then from the cache
        body, content_type = rendered.render(accept)

        assert samples(body, content_type) == samples(exposition(source.snap, per_process=True).encode(), "text/plain")
        assert content_type.startswith("application/openmetrics-text" if accept else "text/plain")
        assert body.count(b"\ngputop_scrape_duration_seconds ") == 1


def test_a_new_snapshot_or_new_findings_are_scraped_at_once_and_the_age_at_every_scrape():
    source = Source()
    rendered = source.exposition()
    rendered.render("")

    source.now += 2
    assert value(parse(rendered.render("")[0].decode()), "gputop_last_sample_age_seconds") == pytest.approx(2.25)

    source.snap = replace(source.snap, time=NOW)
    assert value(parse(rendered.render("")[0].decode()), "gputop_last_sample_timestamp_seconds") == NOW

    source.advice = (Advice("data-starved", WARNING, "title", "detail", "action", 4242, since=0.0),)
    found = parse(rendered.render("")[0].decode())
    assert value(found, "gputop_advice_active", id="data-starved", pid="4242") == 1


def test_before_the_first_snapshot_there_is_only_the_scrape_duration():
    source = Source()
    source.snap = None  # type: ignore[assignment]

    for accept in ("", PROMETHEUS_ACCEPT):
        body, content_type = source.exposition().render(accept)
        text = body.decode()
        assert [s.name for s in parse(text.removesuffix("# EOF\n"))] == ["gputop_scrape_duration_seconds"]
        assert text.endswith("# EOF\n") == content_type.startswith("application/openmetrics-text")
