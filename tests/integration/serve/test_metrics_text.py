"""/metrics as `rollouts serve` makes it, in pieces kept between scrapes (adapters/web/exposition.py), is
byte for byte what prometheus_client's generate_latest gives for the whole registry (adapters/web/metrics.py),
after any sequence of changes.

The changes are random: users and a controller acting through the domain on a few configs
(bench/performance/generate.py's Generator: triggers, claims, runs, failures, retries, cancels, spec changes,
pauses; a clock that jumps so ends fall in every duration bucket), CLI commands in-process on
another config, and a view rebuilt from the log; one event or many between scrapes, more than
the pieces follow event by event now and then, the history view caught up by someone else or by
the scrape itself."""

from __future__ import annotations

import gc
import math
import random
import re
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from rollouts.adapters.cli.state import State
from rollouts.adapters.home import Home
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.web import checkpoints, exposition, metrics
from rollouts.projections import history, history_queries
from tests.conftest import Rollouts

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout, where `bench` is
from bench.performance.generate import Generator  # noqa: E402

STEPS = 60
HISTORY_LAG = re.compile(rb'^rollouts_projection_lag_events\{projection="history"\} .*$', re.MULTILINE)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """The events' clock, moved on by hand (each event a little later than the one before)."""
    now = [datetime(2030, 1, 1, tzinfo=UTC)]

    def tick() -> datetime:
        now[0] += timedelta(microseconds=1)
        return now[0]

    def jump(seconds: float) -> None:
        now[0] += timedelta(seconds=seconds)

    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", tick)
    return jump


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Rollouts]:
    (tmp_path / "work").mkdir()
    yield Rollouts(tmp_path / "home", tmp_path / "work")


def whole(state: State) -> bytes:
    return generate_latest(metrics.registry(lambda: state.projections))


@pytest.mark.parametrize("seed", range(4))
def test_the_text_made_in_pieces_is_the_whole_registrys_after_any_changes(
    home: Rollouts, clock: Callable[[float], None], monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    monkeypatch.setattr(exposition, "MAX_EVENTS", 40)  # past 40 new events: every config read again
    rng = random.Random(seed)
    app = open_app(Home(home.home), None)
    users = Generator(app, random.Random(seed), configs=6)
    state = State(str(home.home), None, "tester@test")
    served = exposition.Exposition(lambda: state.projections)
    home.run("config", "create", "web", "--", "true")
    try:
        for _ in range(STEPS):
            change(rng, users, home, clock)
            if rng.random() < 0.5:  # someone else caught the views up: nothing for the scrape to read
                state.read("history", "audit", "desired")
                assert served.text() == whole(state)
            else:  # the scrape catches history up; the whole registry's later scrape finds it at the head
                text = served.text()
                assert HISTORY_LAG.sub(b"", text) == HISTORY_LAG.sub(b"", whole(state))
            if rng.random() < 0.2:
                assert served.text() == served.text()  # nothing moved: the same text
        state.read("history")
        assert_sums_are_the_deployments(state.projections.db("history"))
    finally:
        state.close()
        app.close()


def change(rng: random.Random, users: Generator, home: Rollouts, clock: Callable[[float], None]) -> None:
    """One random change to the log (or none), or a view rebuilt from it."""
    what = rng.random()
    if what < 0.7:
        for _ in range(rng.choice([0, 1, 1, 2, 3, 10, 60])):
            clock(10 ** rng.uniform(-2.5, 2.3))  # deployments end from a fraction of a second to hours on
            users.act(rng.choice(users.names))
        users.save()
    elif what < 0.95:
        clock(10 ** rng.uniform(-1, 3.7))
        verb = rng.choice(["latest", "latest --supersede", "cancel", "pause", "resume", "retry"])
        home.run("rollout", *verb.split(), "web")  # refused or not: either is a state to scrape
    else:
        assert home.run("projections", "rebuild", "history").exit_code == 0


# What the history view's sums stand for: these queries over every deployment (what /metrics read before 6).
PHASES_OF_DEPLOYMENTS = "SELECT config, phase, count(*) FROM deployments GROUP BY config, phase ORDER BY config, phase"
VERIFIED_OF_DEPLOYMENTS = (
    "SELECT config, sum(passed), sum(failed), sum(inconclusive), count(rollback_of) FROM deployments"
    " GROUP BY config HAVING sum(passed) + sum(failed) + sum(inconclusive) + count(rollback_of) > 0 ORDER BY config"
)


def assert_sums_are_the_deployments(db: Any) -> None:
    assert history_queries.phase_counts(db) == db.execute(PHASES_OF_DEPLOYMENTS).fetchall()
    assert history_queries.verification_counts(db) == [tuple(r) for r in db.execute(VERIFIED_OF_DEPLOYMENTS)]
    some = [c for (c,) in db.execute("SELECT DISTINCT config FROM deployments")][::2]
    assert history_queries.phase_counts(db, some) == [r for r in db.execute(PHASES_OF_DEPLOYMENTS) if r[0] in some]
    assert history_queries.duration_buckets(db) == durations_of_endings(db)
    finished = finished_of_endings(db)
    assert history_queries.finished_counts(db) == finished
    assert history_queries.finished_counts(db, some) == [row for row in finished if row[0] in some]


def durations_of_endings(db: Any) -> tuple[list[tuple[float, int]], int, float]:
    """The histogram from every `endings` row: counts by bucket, and math.fsum of their seconds."""
    rows = db.execute("SELECT le, count, seconds FROM endings").fetchall()
    cumulative = [(b, sum(n for le, n, _ in rows if le is not None and le <= b)) for b in history.DURATION_BUCKETS]
    return cumulative, sum(n for _, n, _ in rows), math.fsum(seconds for _, _, seconds in rows)


def finished_of_endings(db: Any) -> list[tuple[str, int, int]]:
    ends: dict[str, list[int]] = {}
    for config, outcome, n in db.execute("SELECT config, outcome, count FROM endings"):
        ends.setdefault(config, [0, 0])[outcome != "complete"] += n
    return [(config, complete, failed) for config, (complete, failed) in sorted(ends.items())]


def sums(db: Any) -> list[list[tuple[Any, ...]]]:
    return [
        db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
        for t in ("phase_counts", "verification_counts", "finished", "durations")
    ]


def test_the_sums_of_a_rebuilt_history_are_those_caught_up_a_few_events_at_a_time(
    home: Rollouts, clock: Callable[[float], None]
) -> None:
    rng = random.Random(7)
    app = open_app(Home(home.home), None)
    users = Generator(app, random.Random(7), configs=5)
    state = State(str(home.home), None, "tester@test")
    try:
        for _ in range(40):
            for _ in range(5):
                clock(10 ** rng.uniform(-2.5, 2.3))
                users.act(rng.choice(users.names))
            users.save()
            state.read("history")  # a few events at a time: each a batch of its own
        live = sums(state.projections.db("history"))
        assert_sums_are_the_deployments(state.projections.db("history"))
        assert home.run("projections", "rebuild", "history").exit_code == 0
        assert sums(state.read("history").db("history")) == live
    finally:
        state.close()
        app.close()


def test_sample_lines_made_from_templates_are_the_librarys_and_labels_to_escape_go_to_the_library() -> None:
    made = exposition.PerConfig(metrics.deployments_family, metrics.phase_samples)
    values = {
        "web": (("New", 1), ("Running", 12345678)),
        "a-b.c": (("Complete", 2.5), ("Failed", 1e22)),
        'say "hi"\\n': (("New", 3),),  # escaped by the library
        "line\nbreak": (("Pending", float("inf")),),
    }
    made.update(values, None)
    whole = metrics.deployments_family()
    for config in sorted(values):
        metrics.add_phases(whole, config, values[config])
    assert made.text() == generate_latest(exposition._Only(whole))  # type: ignore[arg-type]


def test_a_server_leaves_the_views_wal_to_a_thread_that_checkpoints_it_off_the_requests_path(
    home: Rollouts, tmp_path: Path
) -> None:
    home.run("config", "create", "web", "--", "true")
    state = State(str(home.home), None, "tester@test")
    state.autocheckpoint = False
    try:
        db = state.read("history").db("history")
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        path = state.projections.open_paths()[0]
        for i in range(3000):  # some 3,000 pages of WAL: SQLite's own would have checkpointed at 1,000
            db.execute("INSERT INTO endings (key, config) VALUES (?, ?)", (f"k{i}", "x" * 4000))
        assert checkpoints.wal_bytes(path) > 3 * checkpoints.WAL_BYTES
        done = checkpoints.Checkpoints()
        done.after([path, tmp_path / "gone.db"])
        done.wait()
        busy, pages, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert (busy, copied) == (0, pages)  # nothing was left to copy: the thread had copied it all
    finally:
        state.close()


def test_a_wal_checkpointed_once_is_not_due_again_until_as_many_new_pages_are_in_it(
    home: Rollouts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint leaves the WAL file as long as it was: what is due is what no checkpoint copied yet."""
    home.run("config", "create", "web", "--", "true")
    state = State(str(home.home), None, "tester@test")
    state.autocheckpoint = False
    try:
        db = state.read("history").db("history")
        path = state.projections.open_paths()[0]
        for i in range(2000):
            db.execute("INSERT INTO endings (key, config) VALUES (?, ?)", (f"k{i}", "x" * 4000))
        done = checkpoints.Checkpoints()
        done.after([path])
        done.wait()
        db.execute("INSERT INTO endings (key, config) VALUES ('one more', 'x')")  # the WAL starts over
        assert checkpoints.wal_bytes(path) > 2 * checkpoints.WAL_BYTES  # the file did not shrink
        assert 0 < checkpoints.wal_pages(path) < 10
        started: list[object] = []
        monkeypatch.setattr(checkpoints, "checkpoint", started.append)
        done.after([path])
        done.wait()
        assert started == []  # a few new pages: not due
        for i in range(checkpoints.WAL_PAGES):
            db.execute("INSERT INTO endings (key, config) VALUES (?, ?)", (f"n{i}", "x" * 4000))
        assert checkpoints.wal_pages(path) >= checkpoints.WAL_PAGES
        done.after([path])
        done.wait()
        assert started == [[path]]
    finally:
        state.close()


def test_no_cycle_collection_runs_while_the_text_is_made_and_it_runs_again_after(
    home: Rollouts, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.run("config", "create", "web", "--", "true")
    home.run("rollout", "latest", "web")
    state = State(str(home.home), None, "tester@test")
    made = exposition.Exposition(lambda: state.projections)
    seen: list[bool] = []
    read = exposition.HistoryText.read

    def reading(self: exposition.HistoryText, store: Any) -> None:
        seen.append(gc.isenabled())
        read(self, store)

    monkeypatch.setattr(exposition.HistoryText, "read", reading)
    try:
        assert b'rollouts_deployments{config="web",phase="New"} 1.0' in made.text()
        assert seen == [False] and gc.isenabled()
    finally:
        state.close()
