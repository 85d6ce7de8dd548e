"""Reading the exporter's output in tests: the Prometheus text format parsed by prometheus-client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


def parse(text: str) -> list[Sample]:
    """Every sample in an exposition; raises ValueError where the text is not valid Prometheus format."""
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def value(samples: list[Sample], metric: str, /, **labels: str) -> float | None:
    """The value of the one sample named ``metric`` whose labels include ``labels``; None when there is none."""
    found = [s.value for s in samples if s.name == metric and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) <= 1, f"{len(found)} samples of {metric} match {labels}"
    return found[0] if found else None


def names(samples: list[Sample]) -> set[str]:
    return {s.name for s in samples}
