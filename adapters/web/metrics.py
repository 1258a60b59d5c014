"""What `rollouts serve`'s /metrics reports: its metric families, and the whole registry that defines the text.

The registry reads every value from the views at each scrape (prometheus_client formats); the
server answers with adapters/web/exposition.py, which gives the same bytes while formatting again
only what moved since its last scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import groupby
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ...projections import files, history_queries
from ...projections.registry import ALL, BY_NAME

if TYPE_CHECKING:
    from ...projections.store import ProjectionStore

Samples = list[tuple[list[str], float]]  # a config's samples of one family: label values, value
HISTORY = [BY_NAME["history"]]  # the one view a scrape catches up (the others report their lag)


class ViewsCollector(Collector):
    """Reads the projection store `store()` returns, at each scrape (the caller holds the read lock)."""

    def __init__(self, store: Callable[[], ProjectionStore]) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        store = self.store()
        head = store.source.head()
        yield lag_family(head, positions(store))  # before this scrape catches the history view up
        store.catch_up(HISTORY)
        db = store.db("history")
        yield head_family(head)
        deployments = deployments_family()
        for config, rows in groupby(history_queries.phase_counts(db), key=lambda row: row[0]):
            add_phases(deployments, config, tuple((phase, n) for _, phase, n in rows))
        yield deployments
        finished = finished_family()
        for config, complete, failed in history_queries.finished_counts(db):
            add_finished(finished, config, (complete, failed))
        yield finished
        yield duration_family(*history_queries.duration_buckets(db))
        measured, rollbacks = measurements_family(), rollbacks_family()
        for row in history_queries.verification_counts(db):
            add_measurements(measured, row[0], row)
            add_rollbacks(rollbacks, row[0], row)
        yield measured
        yield rollbacks
        yield value_family(history_queries.last_values(db))


def registry(store: Callable[[], ProjectionStore]) -> CollectorRegistry:
    """A registry holding only the views' metrics (no process metrics of the library's default one)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(ViewsCollector(store))
    return found


def positions(store: ProjectionStore) -> dict[str, int]:
    """Where each view stands (0: nowhere yet)."""
    found = {}
    for p in ALL:
        at = files.tracked(store.db(p.name), p.name)
        found[p.name] = at.position if at else 0
    return found


# -- the families -----------------------------------------------------------------------------------


def lag_family(head: int, at: Mapping[str, int]) -> GaugeMetricFamily:
    return _gauge(
        "rollouts_projection_lag_events",
        "Events each view was behind the log when scraped (the scrape then catches history up).",
        ["projection"],
        [([name], max(0, head - position)) for name, position in at.items()],
    )


def head_family(head: int) -> GaugeMetricFamily:
    return _gauge("rollouts_log_head_position", "The position of the newest event in the log.", [], [([], head)])


def deployments_family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "rollouts_deployments", "Deployments by config and the phase they are in now.", labels=["config", "phase"]
    )


def add_phases(family: GaugeMetricFamily, config: str, counts: Sequence[tuple[str, int]]) -> None:
    _add(family, phase_samples(config, counts))


def phase_samples(config: str, counts: Sequence[tuple[str, int]]) -> Samples:
    """`config`'s samples: how many of its deployments are in each phase (those some are in)."""
    return [([config, phase], n) for phase, n in counts]


def finished_family() -> CounterMetricFamily:
    return CounterMetricFamily(
        "rollouts_deployments_finished",
        "Ends of deployment attempts, by config and outcome (complete or failed; a retry follows a failed end).",
        labels=["config", "outcome"],
    )


def add_finished(family: CounterMetricFamily, config: str, ends: tuple[int, int]) -> None:
    _add(family, finished_samples(config, ends))


def finished_samples(config: str, ends: tuple[int, int]) -> Samples:
    """`config`'s samples: how many of its deployments' attempts ended (complete, failed)."""
    complete, failed = ends
    return [([config, "complete"], complete), ([config, "failed"], failed)]


def measurements_family() -> CounterMetricFamily:
    return CounterMetricFamily(
        "rollouts_verification_measurements",
        "Measurements of verifications by config and outcome (passed, failed, inconclusive).",
        labels=["config", "outcome"],
    )


def add_measurements(family: CounterMetricFamily, config: str, row: tuple[Any, ...]) -> None:
    _add(family, measurement_samples(config, row))


def measurement_samples(config: str, row: tuple[Any, ...]) -> Samples:
    """`config`'s samples, from its (config, passed, failed, inconclusive, rollbacks) row (none without one)."""
    if not sum(row[1:4]):
        return []
    return [([config, outcome], n) for outcome, n in zip(("passed", "failed", "inconclusive"), row[1:4], strict=True)]


def rollbacks_family() -> CounterMetricFamily:
    return CounterMetricFamily("rollouts_rollbacks", "Automatic rollbacks triggered, by config.", labels=["config"])


def add_rollbacks(family: CounterMetricFamily, config: str, row: tuple[Any, ...]) -> None:
    _add(family, rollback_samples(config, row))


def rollback_samples(config: str, row: tuple[Any, ...]) -> Samples:
    return [([config], row[4])] if row[4] else []


def value_family(values: Sequence[tuple[str, str, float]]) -> GaugeMetricFamily:
    """Each analysis template's last numeric value, by config (7.9)."""
    text = "The last numeric value an analysis template's measurement gave, by config and template."
    return _gauge("rollouts_measurement_value", text, ["config", "template"], [([c, t], v) for c, t, v in values])


def _add(family: GaugeMetricFamily | CounterMetricFamily, samples: Samples) -> None:
    for labels, value in samples:
        family.add_metric(labels, value)


def duration_family(buckets: list[tuple[float, int]], total: int, seconds: float) -> HistogramMetricFamily:
    return HistogramMetricFamily(
        "rollouts_rollout_duration_seconds",
        "Seconds from a deployment's creation to each of its ends (Complete or Failed; a retry ends again).",
        buckets=[(_le(bound), n) for bound, n in buckets] + [("+Inf", total)],
        sum_value=seconds,
    )


def _gauge(name: str, text: str, labels: list[str], values: list[tuple[list[str], float]]) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, text, labels=labels)
    for label_values, value in values:
        gauge.add_metric(label_values, value)
    return gauge


def _le(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{bound:.1f}"
