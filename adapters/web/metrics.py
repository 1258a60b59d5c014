"""The Prometheus collector of `rollouts serve`: each scrape reads the views (prometheus_client formats)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from projections import files, history_queries
from projections.registry import ALL


class ViewsCollector(Collector):
    """Reads the projection store `store()` returns, at each scrape (the caller holds the read lock)."""

    def __init__(self, store: Callable[[], Any]) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        store = self.store()
        head = store.source.head()
        yield _lag(store, head)  # before this scrape catches the history view up
        store.catch_up([p for p in ALL if p.name == "history"])
        db = store.db("history")
        yield _gauge("rollouts_log_head_position", "The position of the newest event in the log.", [], [([], head)])
        yield _gauge(
            "rollouts_deployments",
            "Deployments by config and the phase they are in now.",
            ["config", "phase"],
            [([config, phase], n) for config, phase, n in history_queries.phase_counts(db)],
        )
        finished = CounterMetricFamily(
            "rollouts_deployments_finished",
            "Ends of deployment attempts, by config and outcome (complete or failed; a retry follows a failed end).",
            labels=["config", "outcome"],
        )
        for config, complete, failed in history_queries.finished_counts(db):
            finished.add_metric([config, "complete"], complete)
            finished.add_metric([config, "failed"], failed)
        yield finished
        yield _histogram(*history_queries.duration_buckets(db))


class Exposition:
    """The text of a scrape, made again only when the log or a view moved since the last one.

    Every value is a function of the log up to each view's position (no clock is read), so while
    the head and the positions stand still the text cannot change; formatting a few thousand
    samples costs far more than reading the views (~100 ms for 1,000 configs)."""

    def __init__(self, store: Callable[[], Any]) -> None:
        self.store = store
        self.registry = registry(store)
        self._last: tuple[tuple[Any, ...], bytes] | None = None

    def forget(self) -> None:
        """Make the next text anew (as after a new event)."""
        self._last = None

    def text(self) -> bytes:
        key = _where(self.store())
        if self._last is None or self._last[0] != key:
            self._last = (key, generate_latest(self.registry))
        return self._last[1]


def _where(store: Any) -> tuple[Any, ...]:
    """Which log, where its head is, and where each view stands (a view's content follows from those)."""
    head = store.source.head()
    return store.log_id(), head, tuple(files.tracked(store.db(p.name), p.name) for p in ALL)


def registry(store: Callable[[], Any]) -> CollectorRegistry:
    """A registry holding only the views' metrics (no process metrics of the library's default one)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(ViewsCollector(store))
    return found


def _gauge(name: str, text: str, labels: list[str], values: list[tuple[list[str], float]]) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, text, labels=labels)
    for label_values, value in values:
        gauge.add_metric(label_values, value)
    return gauge


def _lag(store: Any, head: int) -> GaugeMetricFamily:
    rows = []
    for p in ALL:
        at = files.tracked(store.db(p.name), p.name)
        rows.append(([p.name], max(0, head - (at.position if at else 0))))
    return _gauge(
        "rollouts_projection_lag_events",
        "Events each view was behind the log when scraped (the scrape then catches history up).",
        ["projection"],
        rows,
    )


def _histogram(buckets: list[tuple[float, int]], total: int, seconds: float) -> HistogramMetricFamily:
    return HistogramMetricFamily(
        "rollouts_rollout_duration_seconds",
        "Seconds from a deployment's creation to each of its ends (Complete or Failed; a retry ends again).",
        buckets=[(_le(bound), n) for bound, n in buckets] + [("+Inf", total)],
        sum_value=seconds,
    )


def _le(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{bound:.1f}"
