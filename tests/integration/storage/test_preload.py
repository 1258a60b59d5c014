"""Loads served by a preload window (adapters.preload) are the library's loads, read at once (both stores)."""

from __future__ import annotations

import sqlite3
from copy import deepcopy
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.application import AggregateNotFoundError, Application, Repository, project_aggregate
from eventsourcing.utils import Environment

from rollouts.adapters.home import Home
from rollouts.adapters.service import commands
from rollouts.adapters.service.application import RolloutsApp, new_meta
from rollouts.adapters.service.bootstrap import bootstrap, open_app
from rollouts.adapters.store import preload
from rollouts.adapters.store.preload import copy_of
from rollouts.domain import ids, rollout
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.spec import Spec


def meta() -> dict[str, Any]:
    return new_meta("tester@test")


def state(aggregate: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(aggregate).items() if not k.startswith("_pending")}


class SnapshottingApp(RolloutsApp):
    """The application as it was before it stopped taking snapshots (logs written then hold them): the
    preload window keeps the library's repository contract, a snapshot store included."""

    name = RolloutsApp.name  # (the library names a subclass's tables after the subclass)
    snapshotting_intervals = {DeploymentConfig: 50}

    def construct_env(self, name: str, env: Any = None) -> Environment:
        return Application.construct_env(self, name, env)


def open_snapshotting(home: Home, store: str | None) -> SnapshottingApp:
    services = bootstrap(home, store)
    services.home.ensure()
    app = services.backend.open_app(lambda base: SnapshottingApp(env=base))
    return app


@pytest.fixture(params=["no snapshots", "snapshots"])
def apps(request: pytest.FixtureRequest, tmp_path: Path, backend_store: str | None) -> Any:
    """A writer and a reader on one log: the application as it runs (no snapshots), and as it ran."""
    home = Home(tmp_path / "h")
    opened = open_snapshotting if request.param == "snapshots" else open_app
    writer, reader = opened(home, backend_store), opened(home, backend_store)
    yield writer, reader
    writer.close()
    reader.close()


def history(app: RolloutsApp) -> list[Any]:
    """A config past its snapshot interval (its load starts from a snapshot), a short one, their deployments."""
    app.create_config("long", Spec(command=["true"]), meta())
    app.create_config("short", Spec(command=["true"]), meta())
    for _ in range(30):  # each supersedes the last: two config events at least, past the interval of 50
        app.latest("long", None, True, meta())
    app.latest("short", None, False, meta())
    long, short = ids.config_id("long"), ids.config_id("short")
    return [long, short, ids.deployment_id(long, 30), ids.deployment_id(short, 1)]


def test_a_preloaded_load_equals_the_librarys_load_cached_or_not(apps: Any) -> None:
    writer, reader = apps
    streams = history(writer)
    if writer.snapshots is not None:  # (the load of the long config then starts from its snapshot)
        assert writer.snapshots.recorder.select_events(streams[0], limit=1)
    reader.repository.get(streams[1])  # cached before the window; the others are not
    writer.latest("short", None, True, meta())  # and moved since: the window fast-forwards it
    with reader.preloaded(streams):
        preloaded = [state(reader.repository.get(s)) for s in streams]
    # The library's own reconstruction: the last snapshot, then the events after it, one query each
    plain = [state(Repository._reconstruct_aggregate(writer.repository, s, None, project_aggregate)) for s in streams]
    assert preloaded == plain


def test_the_application_takes_no_snapshot_and_reads_none_whatever_the_environment_says(
    tmp_path: Path, backend_store: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot is outside the hash chain: the config a command decides on is its chained events' fold.
    Asked through the library's settings, snapshots stay off; one an earlier version left is not read."""
    home = Home(tmp_path / "h")
    earlier = open_snapshotting(home, backend_store)
    long = history(earlier)[0]
    assert earlier.recorder.snapshot_rows()  # the earlier version took one past 50 events
    version = earlier.repository.get(long).version
    earlier.close()
    for name in ("IS_SNAPSHOTTING_ENABLED", "ROLLOUTS_IS_SNAPSHOTTING_ENABLED"):
        monkeypatch.setenv(name, "y")
    app = open_app(home, backend_store)
    try:
        assert app.snapshots is None and app.repository.snapshot_store is None
        taken = len(app.recorder.snapshot_rows())
        for _ in range(60):
            app.latest("long", None, True, meta())
        assert len(app.recorder.snapshot_rows()) == taken  # none taken past 50 more events
        with app.preloaded([long]):
            assert app.repository.get(long).version == version + 120  # (each latest: two config events)
    finally:
        app.close()


def test_a_preloaded_load_is_a_copy_and_an_absent_aggregate_is_not_found(apps: Any) -> None:
    writer, reader = apps
    streams = history(writer)
    missing = uuid4()
    with reader.preloaded([*streams, missing]):
        config = reader.repository.get(streams[1])
        config.pause(meta())  # a decision changes its copy...
        assert not reader.repository.get(streams[1]).paused  # ...never what the next load gets
        with pytest.raises(AggregateNotFoundError):
            reader.repository.get(missing)


def test_loads_in_a_window_read_nothing_new_and_loads_after_it_read_afresh(apps: Any) -> None:
    writer, reader = apps
    streams = history(writer)
    with reader.preloaded(streams):
        before = reader.repository.get(streams[1]).latest_revision
        writer.latest("short", None, True, meta())  # committed meanwhile: the window's loads do not see it
        assert reader.repository.get(streams[1]).latest_revision == before
    assert reader.repository.get(streams[1]).latest_revision == before + 1


def test_the_claims_of_many_streams_read_at_once_are_each_ones_latest_claim(apps: Any) -> None:
    """claims_of (one query for a pass's creates) answers as claim_of does for each stream alone:
    the latest claim (a retry's, not its first attempt's), and nothing for a stream never claimed."""
    writer, _ = apps
    for name in ("a", "b", "c"):
        writer.create_config(name, Spec(command=["true"]), meta())
        writer.latest(name, None, False, meta())
    for name in ("a", "b"):
        commands.claim(writer, name, 1, "me", meta())
    deployer = ids.deployer_name("a", 1, 1)
    commands.report(writer, "a", 1, lambda d: d.report_exited(deployer, 1, "failed", meta()), meta())
    writer.retry("a", meta())
    commands.claim(writer, "a", 1, "me", meta())  # attempt 2: a claim of its own, later in the log
    streams = [ids.deployment_id(ids.config_id(n), 1) for n in ("a", "b", "c")]
    one_by_one = {s: found for s in streams if (found := writer.recorder.claim_of(s)) is not None}
    assert set(one_by_one) == set(streams[:2])
    assert writer.recorder.claims_of([*streams, streams[0]]) == one_by_one


def test_a_copy_of_an_aggregate_equals_deepcopys_and_shares_nothing_that_can_change() -> None:
    """copy_of (each load of a window) is deepcopy at less cost: equal state, no mutable part shared,
    containers shared inside the aggregate still shared in the copy, frozen atoms shared."""
    config = DeploymentConfig(name="web", spec=Spec(command=["deploy"], verify=["check"]).to_data(), meta=meta())
    deployment = rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=meta())[-1]
    rollout.claim(config, deployment, "ctl", meta())
    name = deployment.step.name if deployment.step else ""
    deployment.report_created(name, "local", meta())
    deployment.report_started(name, meta())
    deployment.report_exited(name, 0, None, meta())  # a measurement now: tallies, a step
    config.collect_events()
    deployment.collect_events()
    deployment.shared = [deployment.tallies, deployment.tallies]  # an alias, as deepcopy keeps it
    for aggregate in (config, deployment):
        copied, deep = copy_of(aggregate), deepcopy(aggregate)
        assert type(copied) is type(aggregate) and vars(copied) == vars(deep) == vars(aggregate)
        for field, value in vars(aggregate).items():
            if isinstance(value, dict | list):
                assert getattr(copied, field) is not value, field
    copied = copy_of(deployment)
    assert copied.shared[0] is copied.shared[1] is copied.tallies
    assert copied.step is deployment.step  # a frozen Step of atoms: nothing to copy
    copied.tallies.setdefault(9, {})["failed"] = 1
    assert 9 not in deployment.tallies


class Hooked:
    """An object with a pickling hook of its own: copied as deepcopy copies it, hook and all."""

    def __init__(self) -> None:
        self.items = [1, 2]
        self.hooked = False

    def __getstate__(self) -> dict[str, Any]:
        return {**vars(self), "hooked": True}


def test_an_object_with_a_copy_hook_of_its_own_is_copied_by_deepcopy() -> None:
    copied = copy_of(Hooked())
    assert copied.hooked and copied.items == [1, 2]


def test_the_logs_connections_keep_their_prepared_statements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library asks sqlite3 for a statement cache of `True`, one statement: every other statement of a
    command was prepared again on each use (a load's snapshot-and-events statement: ~0.4 ms to prepare)."""
    asked: list[object] = []
    connect = sqlite3.connect

    def spy(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        asked.append(kwargs.get("cached_statements", 128))  # 128: sqlite3's default
        return connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    app = open_app(Home(tmp_path / "h"), None)
    try:
        app.create_config("web", Spec(command=["true"]), meta())
        app.latest("web", None, True, meta())
        assert app.repository.get(ids.config_id("web")).latest_revision == 1
    finally:
        app.close()
    assert asked
    assert all(type(n) is int and n >= 100 for n in asked), asked


def test_a_load_from_the_cache_outside_a_window_is_copy_ofs_copy(apps: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library deep-copies what its cache holds for each load (a quarter of a `latest --supersede`);
    copy_of makes the same copy, and a decision's change to it never reaches the next load."""
    writer, reader = apps
    streams = history(writer)
    copied: list[Any] = []
    monkeypatch.setattr(preload, "copy_of", lambda aggregate: copied.append(aggregate) or copy_of(aggregate))
    first = reader.repository.get(streams[1])  # not cached yet: made from the log, then cached and copied
    first.pause(meta())
    again = reader.repository.get(streams[1])
    assert not again.paused and again is not first
    assert len(copied) == 2 and all(c is copied[0] for c in copied)  # the cache's own, copied each time
    plain = Repository._reconstruct_aggregate(writer.repository, streams[1], None, project_aggregate)
    assert state(again) == state(plain)
    assert reader.repository.get(streams[1], version=1).version == 1  # an older version: no cache, no copy
    assert len(copied) == 2


def test_one_streams_events_after_equals_the_statement_for_many(
    apps: Any, backend_store: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command's load of one stream (SQLite: the library's two statements in one read, not the union
    of many streams' statement) reads what the statement for many streams reads of it."""
    writer, _ = apps
    streams = history(writer)
    recorder, snapshots = writer.recorder, writer.snapshots and writer.snapshots.recorder
    unions: list[int] = []
    union = recorder._events_after_sql
    if backend_store is None:
        monkeypatch.setattr(recorder, "_events_after_sql", lambda n, table: unions.append(n) or union(n, table))
    for stream in [*streams, uuid4()]:
        for version in (None, 0, 3, 40):
            one = recorder.events_after([(stream, version)], snapshots)
            many = recorder.events_after([(stream, version), (uuid4(), None)], snapshots)
            assert [sorted(part, key=lambda e: e.originator_version) for part in one] == [
                sorted(part, key=lambda e: e.originator_version) for part in many
            ]
    assert bool(recorder.events_after([(streams[0], None)], snapshots)[1]) == (snapshots is not None)  # its snapshot
    if backend_store is None:
        assert unions == [2] * 4 * (len(streams) + 1)  # the reads of two streams alone


def test_lists_of_streams_go_in_few_statement_shapes_and_the_padding_changes_no_answer(
    apps: Any, backend_store: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: a statement per list length filled each connection's statement cache with near copies (a
    controller held ~6 MB of them after 10,000 rollouts); lengths go as powers of two, padded with
    values that change nothing (the last id again; a `w` row of no stream)."""
    writer, _ = apps
    streams = history(writer)
    recorder, snapshots = writer.recorder, writer.snapshots and writer.snapshots.recorder
    for n in range(1, len(streams) + 1):  # 3 of them: padded to 4 with a row of no stream
        wanted = [(s, None) for s in streams[:n]]
        many = recorder.events_after(wanted, snapshots)
        alone = [recorder.events_after([w], snapshots) for w in wanted]
        for part in (0, 1):
            assert sorted((e.originator_id, e.originator_version) for e in many[part]) == sorted(
                (e.originator_id, e.originator_version) for a in alone for e in a[part]
            )
    claimed = {s: recorder.claim_of(s) for s in streams}
    if backend_store is not None:
        return
    texts: set[str] = set()
    query = recorder._query
    monkeypatch.setattr(recorder, "_query", lambda sql, params: texts.add(sql) or query(sql, params))
    for n in range(1, 601):
        asked = [*streams, *(uuid4() for _ in range(n))][:n]
        assert recorder.claims_of(asked) == {s: c for s in asked if (c := claimed.get(s)) is not None}
    assert len(texts) <= 10, len(texts)  # 1, 2, 4, ... 512 values


def test_a_forgotten_aggregate_is_read_again_from_the_log_and_equals_the_cached_one(apps: Any) -> None:
    """forget() only empties the cache: the next load reads the stream from the log, whole, and returns
    what the cached load returned; an aggregate not cached, or absent, is forgotten as nothing."""
    writer, reader = apps
    streams = history(writer)
    cached = state(reader.repository.get(streams[3]))
    assert streams[3] in reader.repository.cache.cache
    reader.repository.forget(streams[3])
    assert streams[3] not in reader.repository.cache.cache
    assert state(reader.repository.get(streams[3])) == cached  # read again, and cached again
    assert streams[3] in reader.repository.cache.cache
    reader.repository.forget(uuid4())
    reader.repository.forget(streams[3])
    reader.repository.forget(streams[3])
    writer.latest("short", None, True, meta())  # the forgotten deployment moved since (cancelled): seen so
    assert state(reader.repository.get(streams[3])) == state(writer.repository.get(streams[3]))
