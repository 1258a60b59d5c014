"""The /metrics text of `rollouts serve`, kept between scrapes and formatted again only where the views moved.

The text is the bytes `generate_latest` gives for the whole registry of adapters/web/metrics.py,
made in pieces, still by prometheus_client: each family's HELP and TYPE lines are
`generate_latest` of the family without samples; a config's sample lines are the library's line
for one sample of the family (made once, with placeholders: Template) with the config's label
values and values put in, or, for a label value that needs escaping, cut line by line from
`generate_latest` of a family holding that config's samples (the library writes one line per
sample, in the order they were added); the small families (lag, head, the histogram) are
`generate_latest` of themselves at each scrape.

Which configs changed: those of the deployments that the log's events since the last scrape
belong to (only deployment events change the rows the families read). Past MAX_EVENTS of them,
or on another log or view version, every config is read again."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from itertools import groupby
from typing import TYPE_CHECKING, Any

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from ...projections import files, history_queries
from ...projections.files import Tracked
from ...projections.rebuild import paused_gc
from ...projections.records import topic_parts
from ...projections.registry import ALL
from . import metrics

if TYPE_CHECKING:
    import sqlite_utils

    from ...projections.store import ProjectionStore

# Which log, where its head is, and where each view stands (a view's content follows from those).
ScrapeKey = tuple[str, int, tuple[Tracked | None, ...]]

MAX_EVENTS = 10_000  # new events since the last scrape past which every config is read again


class Exposition:
    """The text of a scrape, made again only when the log or a view moved since the last one.

    Every value is a function of the log up to each view's position (no clock is read), so while
    the head and the positions stand still the text cannot change."""

    def __init__(self, store: Callable[[], ProjectionStore]) -> None:
        self.store = store
        self._last: tuple[ScrapeKey, bytes] | None = None
        self._history = HistoryText()

    def forget(self) -> None:
        """Make the next text anew, every config read and formatted again (as at the first scrape)."""
        self._last = None
        self._history = HistoryText()

    def text(self) -> bytes:
        store = self.store()
        key = _where(store)
        if self._last is None or self._last[0] != key:
            _, head, at = key
            lag = metrics.lag_family(head, {p.name: t.position if t else 0 for p, t in zip(ALL, at, strict=True)})
            try:
                # No cycle collection meanwhile: the text makes no cycles, and from nothing (some 5,000
                # lines at 1,000 configs) its objects would cost some 20 collections, each walking them again.
                with paused_gc():
                    store.catch_up(metrics.HISTORY)  # after the lag was read, as the registry does
                    self._history.read(store)
                    parts = [_formatted(lag, metrics.head_family(head)), *self._history.parts()]
            except BaseException:
                self.forget()  # what was kept may be half updated
                raise
            self._last = (key, b"".join(parts))
        return self._last[1]


def _where(store: ProjectionStore) -> ScrapeKey:
    """Which log, where its head is, and where each view stands."""
    head = store.source.head()
    return store.log_id(), head, tuple(files.tracked(store.db(p.name), p.name) for p in ALL)


class HistoryText:
    """The families read from the history view, as of the position it was last read at."""

    def __init__(self) -> None:
        self.at: Tracked | None = None
        self.deployments = PerConfig(metrics.deployments_family, metrics.phase_samples)
        self.finished = PerConfig(metrics.finished_family, metrics.finished_samples)
        self.durations: tuple[list[tuple[float, int]], int, float] = ([], 0, 0.0)
        self.measured = PerConfig(metrics.measurements_family, metrics.measurement_samples)
        self.rollbacks = PerConfig(metrics.rollbacks_family, metrics.rollback_samples)
        self.values: list[tuple[str, str, float]] = []

    def read(self, store: ProjectionStore) -> None:
        db = store.db("history")
        with files.snapshot(db):  # the rows and the position they stand at, of one commit
            at = files.tracked(db, "history")
            configs = self._touched(store, db, at)
            counts = history_queries.phase_counts(db, configs)
            ends = {c: (complete, failed) for c, complete, failed in history_queries.finished_counts(db, configs)}
            verified = {row[0]: row for row in history_queries.verification_counts(db, configs)}
            if configs is None or configs:
                self.durations = history_queries.duration_buckets(db)  # (a dozen rows)
                self.values = history_queries.last_values(db)  # (templates' rows alone, by a partial index)
        # (a config's rows come together)
        phases = {c: tuple((p, n) for _, p, n in rows) for c, rows in groupby(counts, key=_config)}
        self.deployments.update(phases, configs)
        self.finished.update(ends, configs)
        self.measured.update({c: r for c, r in verified.items() if sum(r[1:4])}, configs)
        self.rollbacks.update({c: r for c, r in verified.items() if r[4]}, configs)
        self.at = at

    def parts(self) -> list[bytes]:
        return [
            self.deployments.text(),
            self.finished.text(),
            _formatted(metrics.duration_family(*self.durations)),
            self.measured.text(),
            self.rollbacks.text(),
            _formatted(metrics.value_family(self.values)),
        ]

    def _touched(self, store: ProjectionStore, db: sqlite_utils.Database, at: Tracked | None) -> set[str] | None:
        """The configs whose rows changed since the view was last read (None: perhaps any)."""
        last = self.at
        if at is None or last is None or (at.version, at.log_id) != (last.version, last.log_id):
            return None
        new = at.position - last.position
        if not 0 <= new <= MAX_EVENTS:
            return None
        streams = {
            str(n.originator_id)
            for n in (store.source.read(last.position, new) if new else ())
            if n.id <= at.position and topic_parts(n.topic)[0] == "deployment"
        }
        return history_queries.configs_of(db, streams)


class PerConfig:
    """One family's sample lines for each config, formatted again only for a config whose rows changed."""

    def __init__(
        self,
        family: Callable[[], GaugeMetricFamily | CounterMetricFamily],
        samples: Callable[[str, Any], metrics.Samples],
    ) -> None:
        self.family = family
        self.samples = samples  # samples(config, rows): that config's samples, from its rows
        self.header = _formatted(family())  # HELP and TYPE
        self.template = Template(family)
        self.lines: dict[str, tuple[Any, bytes]] = {}
        self._order: list[str] = []  # the configs in self.lines, sorted
        self._text: bytes | None = None

    def update(self, values: dict[str, Any], configs: Collection[str] | None) -> None:
        """The rows (`values`) of each config in `configs` (None: every config); one left out has no samples."""
        lines = self.lines
        if configs is None:  # every config: those not in `values` have none
            gone = lines.keys() - values.keys()
            changed = [(c, v) for c, v in values.items() if c not in lines or lines[c][0] != v]
        else:
            gone = {c for c in configs if c not in values and c in lines}
            changed = [(c, values[c]) for c in configs if c in values and (c not in lines or lines[c][0] != values[c])]
        if gone:
            for config in gone:
                del lines[config]
            self._order, self._text = sorted(lines), None
        if changed:
            self._format(changed)

    def _by_library(self, samples: metrics.Samples) -> bytes:
        """The sample lines of a config with a label value to escape: cut from the library's text of them."""
        family = self.family()
        for labels, number in samples:
            family.add_metric(labels, number)
        lines = _formatted(family).split(b"\n")[2:-1]  # after HELP and TYPE
        if len(lines) != len(family.samples):
            raise RuntimeError(f"prometheus_client wrote {len(lines)} lines for {len(family.samples)} samples")
        return b"".join(line + b"\n" for line in lines)

    def text(self) -> bytes:
        if self._text is None:
            lines = self.lines
            self._text = self.header + b"".join([lines[c][1] for c in self._order])
        return self._text

    def _format(self, changed: list[tuple[str, Any]]) -> None:
        lines, known = self.lines, len(self.lines)
        made, samples = self.template.lines, self.samples
        for config, value in changed:
            its = samples(config, value)
            text = made(its)  # from the template, or (a label value to escape) by the library
            lines[config] = (value, self._by_library(its) if text is None else text)
        if len(lines) != known:
            self._order = sorted(lines)
        self._text = None


class _Only:
    """A collector of the given families (what generate_latest formats)."""

    def __init__(self, *families: Metric) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def _formatted(*families: Metric) -> bytes:
    return generate_latest(_Only(*families))


class Template:
    """The line generate_latest writes for a sample of one family, cut where its label values and its value
    go: made by the library once per count of labels (with placeholders), then filled in for each sample.

    The same bytes as the library's for label values that no escaping changes (SAFE); `lines` says None
    for any other (the caller has the library format those)."""

    def __init__(self, family: Callable[[], GaugeMetricFamily | CounterMetricFamily]) -> None:
        self.family = family
        self.formats: dict[int, str] = {}  # by count of labels: the line as a %-format (label values, value)
        self.safe: set[str] = set()  # label values seen to need no escaping
        self.values: dict[int, str] = {}  # floatToGoString of the integer values seen

    def lines(self, samples: metrics.Samples) -> bytes | None:
        """The lines of `samples` (None: one has a label value to escape)."""
        safe, values, formats = self.safe, self.values, self.formats
        made = []
        for labels, value in samples:
            for label in labels:
                if label not in safe:
                    if not _SAFE(label) or len(safe) > MAX_SAFE:
                        return None
                    safe.add(label)
            if type(value) is int:
                text = values.get(value)
                if text is None:
                    text = floatToGoString(value)
                    if len(values) < MAX_SAFE:
                        values[value] = text
            else:
                text = floatToGoString(value)
            made.append((formats.get(len(labels)) or self._format(len(labels))) % (*labels, text))
        return "".join(made).encode()

    def _format(self, count: int) -> str:
        family = self.family()
        family.add_metric([f"@{i}@" for i in range(count)], 0)
        lines = _formatted(family).decode().split("\n")[2:-1]  # after HELP and TYPE
        if len(lines) != 1 or not lines[0].endswith(" 0.0"):
            raise RuntimeError(f"prometheus_client wrote {lines!r} for one sample of value 0")
        pieces = _PLACEHOLDER.split(lines[0].removesuffix("0.0").replace("%", "%%"))
        if pieces[1::2] != [str(i) for i in range(count)]:
            raise RuntimeError(f"prometheus_client wrote the label values of {lines[0]!r} out of order")
        found = "%s".join(pieces[::2]) + "%s\n"
        self.formats[count] = found
        return found


MAX_SAFE = 100_000  # label values remembered as safe (past it, the library formats the rest), and values
_SAFE = re.compile(r"[A-Za-z0-9_.:/+ -]*").fullmatch  # label values that no escaping changes
_PLACEHOLDER = re.compile(r"@(\d+)@")


def _config(row: tuple[str, str, int]) -> str:
    return row[0]
