"""Projections as pure, deterministic folds of the log (I5): rebuilds, re-deliveries, crashes, copies, races.

Histories are generated through the domain: the application's commands for users,
and adapters.controller.commands (claim, report) with a fake claimant for the
controller, so deployments go through New, Pending, Running, Complete and Failed.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

import rollouts.projections.build as build_module
import rollouts.projections.build_worker as worker_module
import rollouts.projections.fold_files as fold_files_module
import rollouts.projections.rows as rows_module
import rollouts.projections.store as store_module
from rollouts.adapters.home import Home
from rollouts.adapters.service import commands
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.store.reader import RecorderSource, Row
from rollouts.domain import phases, rollout
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError, NotFound
from rollouts.domain.spec import HOOK_POLICIES, Hook, Spec
from rollouts.domain.step import DEPLOYER, Step
from rollouts.projections import files, health
from rollouts.projections.audit_view import AuditView
from rollouts.projections.desired import Desired
from rollouts.projections.history import History
from rollouts.projections.projection import Projection
from rollouts.projections.records import Record, decode, decode_stamped
from rollouts.projections.registry import BY_NAME
from rollouts.projections.source import SQLiteLog, direct_log
from rollouts.projections.store import ALL, ProjectionStore
from rollouts.projections.writer import WriterError
from tests.broken_files import not_a_database_error

REPO = Path(__file__).resolve().parents[3]
CLAIMANT = "fake-controller"
NO_STEP = Step(DEPLOYER, 1, "")  # the name of no step: a report about it is stale (open deployments past New have one)
Dump = dict[str, list[tuple[Any, ...]]]


# -- homes, stores and dumps ------------------------------------------------------


class Log:
    """One home with its application open."""

    def __init__(self, path: Path, store: str | None = None) -> None:
        self.home = Home(path)
        self.home.ensure()
        self.app = open_app(self.home, store)

    def head(self) -> int:
        return self.app.recorder.max_notification_id() or 0

    def store(self, folder: Path | None = None, warnings: list[str] | None = None, **kw: Any) -> ProjectionStore:
        source = kw.pop("source", None) or RecorderSource(self.app.recorder)
        warn = warnings.append if warnings is not None else None
        return ProjectionStore(folder or self.home.projections, source, warn=warn, **kw)

    def close(self) -> None:
        self.app.close()


class Prefix:
    """The log as it was at position `upto` (same identity)."""

    def __init__(self, source: Any, upto: int) -> None:
        self.source = source
        self.upto = upto

    def head(self) -> int:
        return min(self.source.head(), self.upto)

    def read(self, after: int, limit: int) -> Sequence[Any]:
        return [n for n in self.source.read(after, limit) if n.id <= self.upto]

    def identity(self) -> str:
        return self.source.identity()


def close_store(store: ProjectionStore) -> None:
    """Close every connection the store holds, so no process has the folder open."""
    store.close()


def dump(store: ProjectionStore, only: Sequence[Projection] = ALL) -> Dump:
    """Every row of every table of every projection, sorted (no catch-up); and each file's tables and
    indexes (a rebuild makes some indexes after its rows: it must end with all of them)."""
    out: Dump = {}
    for p in only:
        db = store.db(p.name)
        out[f"{p.name}.sqlite_master"] = sorted(db.execute(SCHEMA).fetchall())
        for table in p.tables:
            rows = db.execute(f"SELECT * FROM {table}").fetchall()
            out[f"{p.name}.{table}"] = sorted(rows, key=repr)
    return out


SCHEMA = "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('table', 'index')"


def positions(store: ProjectionStore) -> dict[str, int]:
    return {p.name: files.tracked(store.db(p.name), p.name).position for p in ALL}  # type: ignore[union-attr]


def fresh(log: Log, where: Path, upto: int | None = None, only: Sequence[Projection] = ALL) -> Dump:
    """A rebuild from zero into a new folder (of the log truncated at `upto`)."""
    source: Any = RecorderSource(log.app.recorder)
    if upto is not None:
        source = Prefix(source, upto)
    shutil.rmtree(where, ignore_errors=True)
    store = log.store(where, source=source)
    store.rebuild(only)
    try:
        return dump(store, only)
    finally:
        close_store(store)


def assert_same(actual: Dump, expected: Dump) -> None:
    assert actual.keys() == expected.keys()
    for table in expected:
        if actual[table] != expected[table]:
            only_a = set(actual[table]) - set(expected[table])
            only_e = set(expected[table]) - set(actual[table])
            raise AssertionError(
                f"{table}: {len(actual[table])} rows vs {len(expected[table])} expected; "
                f"unexpected {sorted(only_a, key=repr)[:3]}; missing {sorted(only_e, key=repr)[:3]}"
            )


def copy_db(src: Path, dst: Path) -> None:
    """A consistent copy of an SQLite file (its WAL included), via the backup API."""
    dst.unlink(missing_ok=True)
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def event_types(log: Log) -> set[str]:
    with sqlite3.connect(log.home.events_db) as db:
        return {t.rsplit(".", 1)[1] for (t,) in db.execute("SELECT DISTINCT topic FROM stored_events")}


# -- histories --------------------------------------------------------------------


def random_spec(rng: random.Random) -> Spec:
    hooks = {
        k: Hook(command=[k.split("_")[0], "hook"], policy=rng.choice(HOOK_POLICIES))
        for k in ("pre_hook", "post_hook")
        if rng.random() < 0.35
    }
    return Spec(
        command=["deploy", str(rng.randint(1, 9))],
        env={f"K{i}": str(rng.randint(0, 99)) for i in range(rng.randint(0, 3))},
        timeout=rng.choice([5, 60, 600]),
        history_limit=rng.randint(1, 5),
        trigger=rng.choice(["manual", "manual", "config-change"]),
        **hooks,
    )


class RandomHistory:
    """Random user commands through RolloutsApp, and controller claims and reports through
    adapters.controller.commands, on a handful of configs. Refused commands append nothing."""

    def __init__(self, log: Log, rng: random.Random, configs: int = 10) -> None:
        self.log = log
        self.app = log.app
        self.rng = rng
        self.names = [f"app{i}" for i in range(configs)]
        self.created: list[str] = []
        self.busy: set[str] = set()  # configs that may have an open deployment: where the controller looks first
        self.refused = 0
        self.ops = [
            (self.create, 3),
            (self.latest, 6),
            (self.latest_supersede, 4),
            (self.cancel, 3),
            (self.retry, 5),
            (self.undo, 3),
            (self.pause, 2),
            (self.resume, 3),
            (self.config_set, 6),
            (self.controller, 55),
            (self.stale_report, 2),
        ]

    def meta(self, **extra: Any) -> dict[str, Any]:
        return new_meta(self.rng.choice(["alice@x", "bob@y", "ci@z"]), **extra)

    def step(self) -> None:
        op = self.rng.choices([o for o, _ in self.ops], [w for _, w in self.ops])[0]
        if not self.created:
            op = self.create
        name = self.name()
        try:
            op(name)
        except (DomainError, NotFound):
            self.refused += 1
        if op not in (self.controller, self.stale_report, self.pause, self.resume, self.cancel):
            self.busy.add(name)

    def name(self) -> str:
        if not self.created:
            return self.rng.choice(self.names)
        return self.rng.choice(self.created)

    # user commands
    def create(self, name: str) -> None:
        name = self.rng.choice(self.names)
        self.app.create_config(name, random_spec(self.rng), self.meta())
        self.created.append(name)

    def latest(self, name: str) -> None:
        self.app.latest(name, self.rng.choice([None, "why not"]), False, self.meta())

    def latest_supersede(self, name: str) -> None:
        self.app.latest(name, "supersede", True, self.meta())

    def cancel(self, name: str) -> None:
        self.app.cancel(name, self.meta())

    def retry(self, name: str) -> None:
        self.app.retry(name, self.meta())

    def undo(self, name: str) -> None:
        latest = self.app.config(name).latest_revision
        to = self.rng.choice([None, self.rng.randint(1, max(1, latest))])
        self.app.undo(name, to, self.meta())

    def pause(self, name: str) -> None:
        self.app.pause(name, self.meta())

    def resume(self, name: str) -> None:
        self.app.resume(name, self.meta())

    def config_set(self, name: str) -> None:
        rng = self.rng
        fresh_spec = random_spec(rng).to_data()
        key = rng.choice(["env", "command", "timeout", "pre_hook", "post_hook", "trigger", "history_limit"])

        def change(spec: Spec) -> Spec:
            return Spec.model_validate({**spec.to_data(), key: fresh_spec[key]})

        self.app.set_config(name, change, self.meta())

    # controller side
    def controller(self, name: str) -> None:
        """One controller step on the oldest open deployment of a config."""
        if self.busy and self.rng.random() < 0.9:
            name = self.rng.choice(sorted(self.busy))
        opened = self.app.open_deployments(self.app.config(name))
        if not opened:
            self.busy.discard(name)
            return
        d = opened[0] if self.rng.random() < 0.8 else self.rng.choice(opened)
        meta = self.meta(notification_id=self.log.head(), claimant=CLAIMANT)
        if d.phase == phases.NEW:
            commands.claim(self.app, name, d.revision, CLAIMANT, meta)
            return
        step = d.step or NO_STEP
        r = self.rng.random()
        change: Callable[[Deployment], bool]
        if d.cancel_requested and r < 0.8:
            change = lambda x: (x.confirm_cancelled(meta), True)[1]  # noqa: E731
        elif r < 0.04:
            change = lambda x: (x.time_out(x.typed_spec().timeout, meta), True)[1]  # noqa: E731
        elif r < 0.08:
            change = lambda x: x.report_lost(step.name, "deleted by a user", meta)  # noqa: E731
        elif not step.created:
            change = lambda x: x.report_created(step.name, f"fake:{step.name}", meta)  # noqa: E731
        elif not step.started and r < 0.9:
            change = lambda x: x.report_started(step.name, meta)  # noqa: E731
        else:
            code = self.rng.choice([0, 0, 0, 0, 1, 2, 137])
            change = lambda x: x.report_exited(step.name, code, None, meta)  # noqa: E731
        commands.report(self.app, name, d.revision, change, meta)

    def stale_report(self, name: str) -> None:
        """A report about an older attempt's deployer: ignored, appends nothing."""
        config = self.app.config(name)
        if not config.latest_revision:
            return
        d = self.app.deployment(config, config.latest_revision)
        old = f"{name}-{d.revision}-deploy-{max(1, d.attempt - 1)}"
        meta = self.meta(claimant=CLAIMANT)
        commands.report(self.app, name, d.revision, lambda x: x.report_exited(old, 0, None, meta), meta)


def bulk_history(
    log: Log, rng: random.Random, events: int, prefix: str = "bulk", configs: int = 40, per_save: int = 25
) -> None:
    """A long history through the domain, fast: aggregates kept in memory, several per save.

    The same decisions the application and the controller take (rollout.trigger, claim,
    settle, the Deployment reports), on aggregates that stay fresh because only we write.
    """
    app = log.app
    cfgs: dict[str, DeploymentConfig] = {}
    opened: dict[str, list[Deployment]] = {}
    latest: dict[str, Deployment] = {}
    batch: dict[Any, Any] = {}
    start = log.head()

    def meta() -> dict[str, Any]:
        return new_meta("bulk@x", claimant=CLAIMANT)

    def touch(*aggregates: Any) -> None:
        for a in aggregates:
            batch[a.id] = a

    def operate(name: str) -> None:
        if name not in cfgs:
            cfgs[name] = DeploymentConfig(name=name, spec=random_spec(rng).to_data(), meta=meta())
            opened[name] = []
            touch(cfgs[name])
            return
        config = cfgs[name]
        open_ = opened[name]
        r = rng.random()
        if config.paused:
            config.resume(meta())
            touch(config)
        elif r < 0.04:
            config.change_spec(random_spec(rng).to_data(), meta())
            touch(config)
        elif r < 0.06:
            config.pause(meta())
            touch(config)
        elif not open_ or r < 0.09:
            last = latest.get(name)
            if last is not None and last.phase == phases.FAILED and not open_ and rng.random() < 0.3:
                touch(*rollout.retry(config, last, meta()))
                open_.append(last)
                return
            new = rollout.trigger(config, open_, cause="manual", message=None, supersede=bool(open_), meta=meta())
            touch(*new)
            latest[name] = new[-1]
            open_.append(new[-1])
        elif r < 0.1:
            touch(*rollout.cancel(config, open_, meta()))
        else:
            d = open_[0]
            m = meta()
            step = d.step or NO_STEP
            if d.phase == phases.NEW:
                if len(open_) == 1:
                    touch(*rollout.claim(config, d, CLAIMANT, m))
                return
            if d.cancel_requested:
                d.confirm_cancelled(m)
            elif not step.created:
                d.report_created(step.name, "fake", m)
            elif not step.started:
                d.report_started(step.name, m)
            elif r < 0.12:
                d.report_lost(step.name, "gone", m)
            else:
                d.report_exited(step.name, rng.choice([0, 0, 0, 0, 0, 1]), None, m)
            rollout.settle(config, d, m)
            touch(config, d)
        for d in list(open_):
            if d.is_terminal:
                open_.remove(d)

    names = [f"{prefix}{i}" for i in range(configs)]
    while log.head() - start < events:
        for _ in range(per_save):
            operate(rng.choice(names))
        app.save(*batch.values())
        batch.clear()


# -- subprocesses -------------------------------------------------------------------

CHILD = r"""
import json, sys, time
import rollouts.projections.build as B
import rollouts.projections.store as S
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.home import Home
from rollouts.adapters.store.reader import RecorderSource
from rollouts.projections.store import ProjectionStore

home, mode, S.BATCH = Home(sys.argv[1]), sys.argv[2], int(sys.argv[3])
B.REBUILD_BATCH = S.BATCH
app = open_app(home, None)

class Loud(RecorderSource):
    def read(self, after, limit):
        print("read", after, flush=True)
        time.sleep(0.002)  # leaves the parent time to kill us in the middle
        return super().read(after, limit)

import rollouts.projections.log_file as L  # a rebuild reads a local SQLite log itself
def loud(self, after, *rest, inner=L.LogFile.records):
    print("read", after, flush=True)
    time.sleep(0.002)
    return inner(self, after, *rest)
L.LogFile.records = loud

applied = {p.name: [] for p in S.ALL}
for p in S.ALL:
    def apply(db, records, p=p, inner=type(p).apply):
        applied[p.name].extend(r.position for r in records)
        return inner(p, db, records)
    p.apply = apply

store = ProjectionStore(home.projections, Loud(app.recorder), warn=lambda t: print("warning", t, flush=True))
print("ready", flush=True)
if "wait" in sys.argv[4:]:
    sys.stdin.readline()
if mode == "catch-up":
    store.catch_up()
elif mode == "rebuild":
    store.rebuild()
elif mode == "shadow":
    store.rebuild(shadow=True)
print("applied", json.dumps(applied), flush=True)
if "close" in sys.argv[4:]:  # close what we opened, as the CLI does before it exits
    store.close()
"""


def child(home: Home, mode: str, batch: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home.path), mode, str(batch), *extra],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- fixtures -----------------------------------------------------------------------

RANDOM_EVENTS = 1200
BIG_EVENTS = 2500


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Module scratch space on tmpfs when there is one: the log's fsyncs are not what is tested here."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        where = Path(tempfile.mkdtemp(prefix="rollouts-projections-", dir=shm))
        yield where
        shutil.rmtree(where, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("scratch")


@pytest.fixture
def tmp(scratch: Path, request: pytest.FixtureRequest) -> Path:
    where = scratch / request.node.name.replace("/", "_")
    where.mkdir()
    return where


@pytest.fixture(scope="module")
def random_log(scratch: Path) -> tuple[Path, Dump]:
    """A long random history with catch-ups at random points, with random batch sizes.

    Returns the home (closed) and the live tables as they were built incrementally."""
    rng = random.Random(20240611)
    where = scratch / "random-home"
    mp = pytest.MonkeyPatch()
    log = Log(where)
    live = log.store()
    history = RandomHistory(log, rng)
    try:
        while log.head() < RANDOM_EVENTS:
            history.step()
            if rng.random() < 0.04:
                mp.setattr(store_module, "BATCH", rng.choice([1, 2, 7, 50, 1000]))
                live.catch_up(rng.sample(ALL, rng.randint(1, len(ALL))))
        mp.setattr(store_module, "BATCH", 3)
        live.catch_up()
    finally:
        mp.undo()
    assert set(positions(live).values()) == {log.head()}
    tables = dump(live)
    close_store(live)
    log.close()
    return where, tables


@pytest.fixture
def random_home(random_log: tuple[Path, Dump], tmp: Path) -> Iterator[tuple[Log, Dump]]:
    """A copy of the random home, projections included, and its live tables."""
    src, tables = random_log
    shutil.copytree(src, tmp / "home")
    log = Log(tmp / "home")
    yield log, tables
    log.close()


@pytest.fixture(scope="module")
def big_log(scratch: Path) -> Path:
    """A longer log, built through the domain in bulk, without projections: the events.db to copy."""
    log = Log(scratch / "big-home")
    bulk_history(log, random.Random(7), BIG_EVENTS)
    log.close()
    return log.home.events_db


@pytest.fixture
def big_home(big_log: Path, tmp: Path) -> Iterator[Log]:
    Home(tmp / "home").ensure()
    copy_db(big_log, tmp / "home" / "events.db")
    log = Log(tmp / "home")
    yield log
    log.close()


# -- I5: rebuilt from zero, they equal the live tables ---------------------------------


def test_the_random_history_reaches_every_phase_and_most_event_types(random_home: tuple[Log, Dump]) -> None:
    log, tables = random_home
    assert {row[3] for row in tables["history.deployments"]} >= {phases.COMPLETE, phases.FAILED}
    wanted = {
        "Registered",
        "SpecChanged",
        "Paused",
        "Resumed",
        "RolloutTriggered",
        "SlotClaimed",
        "RolloutEnded",
        "RolloutReopened",
        "Created",
        "DeployerClaimed",
        "DeployerCreated",
        "DeployerStarted",
        "DeployerSucceeded",
        "DeployerFailed",
        "DeployerLost",
        "HookCreated",
        "HookStarted",
        "HookSucceeded",
        "HookFailed",
        "CancelRequested",
        "Cancelled",
        "RetryRequested",
    }
    assert wanted <= event_types(log)
    assert len(tables["audit.events"]) == log.head()


def test_a_rebuild_from_zero_in_place_equals_the_live_tables(random_home: tuple[Log, Dump], tmp: Path) -> None:
    log, live = random_home
    assert_same(fresh(log, tmp / "elsewhere"), live)
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    store.rebuild()
    assert_same(dump(store), live)
    assert positions(store) == {p.name: log.head() for p in ALL}
    assert warnings == []
    close_store(store)


def test_a_rebuild_whose_folds_forget_rows_as_it_goes_equals_the_live_tables(
    random_home: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild's folds know every row of their new files until they forget some (rows.Table): past that,
    a row they do not know must be read back, not taken for missing. Here they forget every few batches."""
    log, live = random_home
    monkeypatch.setattr(rows_module, "CACHE_ROWS", 8)
    monkeypatch.setattr(fold_files_module, "FLUSH", 3)
    monkeypatch.setattr(build_module, "REBUILD_BATCH", 2)
    store = log.store()
    store.rebuild()
    assert_same(dump(store), live)
    close_store(store)


def test_a_rebuild_with_a_worker_process_equals_the_live_tables(
    random_home: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large log's Python folds are run by another process (build_worker); here every log is large."""
    log, live = random_home
    monkeypatch.setattr(build_module, "PARALLEL_FROM", 0)
    store = log.store()
    store.rebuild()
    assert_same(dump(store), live)
    assert positions(store) == {p.name: log.head() for p in ALL}
    close_store(store)


def test_a_worker_told_no_indexes_folds_the_same_rows_without_the_indexes_that_enforce_nothing(
    random_home: tuple[Log, Dump], tmp: Path
) -> None:
    """As audit's refold asks it (its files are compared by key, then removed): the rows are the rebuild's,
    the unique indexes stay (INSERT OR REPLACE keeps to them), the others are not made."""
    log, live = random_home
    found = direct_log(RecorderSource(log.app.recorder))
    assert isinstance(found, SQLiteLog)
    names = [p.name for p in ALL if p.name != "audit"]
    for indexes in (True, False):
        paths = {name: tmp / f"{name}-{indexes}.db" for name in names}
        worker = worker_module.start(paths, found, log.head(), log.app.recorder.log_id() or "", 100, indexes)
        assert worker.result() == log.head()
        for name, path in paths.items():
            db = sqlite3.connect(path)
            made = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall()
            plain = [n for n, sql in made if not sql.startswith("CREATE UNIQUE")]
            assert bool(plain) == indexes, (name, made)
            for table in BY_NAME[name].tables:
                rows = sorted(db.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                assert rows == live[f"{name}.{table}"], (name, table)
            db.close()


def test_a_worker_that_fails_fails_the_rebuild_and_leaves_the_live_files(
    random_home: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, live = random_home
    monkeypatch.setattr(build_module, "PARALLEL_FROM", 0)
    start = worker_module.start
    monkeypatch.setattr(
        worker_module, "start", lambda paths, log, *rest: start(paths, log._replace(table="gone"), *rest)
    )
    store = log.store()

    def db_files() -> list[str]:
        return sorted(p.name for p in store.folder.glob("*.db"))

    before = db_files()
    with pytest.raises(worker_module.WorkerFailed, match="no such table"):
        store.rebuild()
    assert db_files() == before
    store.catch_up()
    assert_same(dump(store), live)
    close_store(store)


def test_a_shadow_rebuild_from_zero_equals_the_live_tables(random_home: tuple[Log, Dump]) -> None:
    log, live = random_home
    store = log.store()
    before = {p.name: store.catalog.current(p.name) for p in ALL}
    store.rebuild(shadow=True)
    after = {p.name: store.catalog.current(p.name) for p in ALL}
    assert all(before[n] != after[n] for n in before), "a shadow rebuild swaps to a new file"
    assert_same(dump(store), live)
    assert positions(store) == {p.name: log.head() for p in ALL}
    on_disk = {f.name for f in log.home.projections.glob("*.db")}
    assert on_disk == {"catalog.db", *(path.name for path in after.values())}  # type: ignore[union-attr]
    close_store(store)


def test_a_shadow_rebuild_never_goes_back_behind_what_the_live_file_served(
    random_home: tuple[Log, Dump], tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events appended while the shadow builds, and applied to the live file meanwhile, are in the swapped file."""
    log, _ = random_home
    store = log.store()
    other = log.store()  # another reader keeps the live file moving
    monkeypatch.setattr(store_module, "BATCH", 100)
    more = iter(range(1000))

    def progress(position: int, head: int) -> None:
        if position >= head:
            bulk_history(log, random.Random(next(more)), 20, prefix=f"during{next(more)}-", configs=2, per_save=5)
            other.catch_up()
            served[0] = min(positions(other).values())

    served = [0]
    store.rebuild(shadow=True, progress=progress)
    assert min(positions(store).values()) >= served[0] > 0
    store.catch_up()
    assert_same(dump(store), fresh(log, tmp / "fresh"))
    close_store(store)
    close_store(other)


def test_a_rebuild_in_place_swaps_to_new_files_and_removes_the_old_ones(random_home: tuple[Log, Dump]) -> None:
    log, live = random_home
    store = log.store()
    before = {p.name: store.catalog.current(p.name) for p in ALL}
    (log.home.projections / "history-99.db").write_bytes(b"what a killed rebuild left")
    store.rebuild()
    after = {p.name: store.catalog.current(p.name) for p in ALL}
    assert all(before[n] != after[n] for n in before)
    assert {f.name for f in log.home.projections.glob("*.db")} == {"catalog.db", *(p.name for p in after.values())}  # type: ignore[union-attr]
    assert_same(dump(store), live)
    assert positions(store) == {p.name: log.head() for p in ALL}
    close_store(store)


def test_a_view_swapped_and_removed_between_a_readers_open_and_first_read_is_opened_anew(
    random_home: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader opened the current file of a view just as a rebuild swapped it out and removed it: SQLite
    fails its first read of the removed file (disk I/O error); it opens the file the catalog points to now."""
    log, live = random_home
    reader, rebuilder = log.store(), log.store()
    real = health.file_problem
    swapped: list[Path] = []

    def rebuilt_meanwhile(path: Path) -> str | None:  # called between the open and the first read
        if not swapped:
            swapped.append(path)
            rebuilder.rebuild(shadow=True)
        return real(path)

    monkeypatch.setattr(health, "file_problem", rebuilt_meanwhile)
    assert_same(dump(reader), live)
    assert swapped and not swapped[0].exists()
    close_store(reader)
    close_store(rebuilder)


def test_a_catch_up_that_fed_a_file_a_rebuild_swapped_out_meanwhile_catches_up_the_new_one(
    random_home: tuple[Log, Dump], tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read-your-writes across a rebuild: a reader's catch-up resolved the live file, then a rebuild that had
    started before the newest events swapped in its file (behind them), and the catch-up fed the old one."""
    log, _ = random_home
    reader = log.store()
    reader.catch_up()
    before = log.head()
    bulk_history(log, random.Random(7), 30, prefix="after-", configs=2, per_save=5)  # the writes to read back
    feed = reader._feed
    swapped: list[int] = []

    def rebuilt_meanwhile(dbs: dict[str, Any], start: int, until: int) -> None:
        if not swapped:  # a rebuild from before the writes: its file stands at `before`
            swapped.append(until)
            other = log.store(source=Prefix(RecorderSource(log.app.recorder), before))
            other.rebuild(shadow=True)
            close_store(other)
        feed(dbs, start, until)

    monkeypatch.setattr(reader, "_feed", rebuilt_meanwhile)
    reader.catch_up()
    assert swapped == [log.head()] and log.head() > before
    assert positions(reader) == {p.name: log.head() for p in ALL}
    assert_same(dump(reader), fresh(log, tmp / "fresh"))
    close_store(reader)


def unusual_history(log: Log) -> None:
    """Events whose stored text SQLite cannot turn into the audit row as Python does, or cannot read."""
    app = log.app
    spec = Spec(command=["deploy", "é"], env={"K": "☃"}, timeout=60)
    app.create_config("unusual", spec, new_meta("zoë"))
    app.latest("unusual", "déploiement \x7f", False, new_meta("ci@z"))
    app.pause("unusual", new_meta("bob@y", notification_id=float("nan")))  # JSON that SQLite refuses
    app.resume("unusual", new_meta("bob@y", note='a "quoted" \\ text\n'))


def test_a_rebuild_of_events_sqlite_cannot_render_equals_the_live_tables(random_home: tuple[Log, Dump]) -> None:
    log, _ = random_home
    unusual_history(log)
    live = log.store()
    live.catch_up()  # Python folds every event
    expected = dump(live)
    close_store(live)
    store = log.store()
    store.rebuild()  # SQLite makes the audit rows, Python the unusual ones
    assert_same(dump(store), expected)
    close_store(store)


def test_a_first_event_sqlite_cannot_read_leaves_the_audit_to_python(random_home: tuple[Log, Dump]) -> None:
    log, _ = random_home
    log.app.create_config("nan", Spec(command=["true"]), new_meta("x", notification_id=float("inf")))
    log.app.latest("nan", None, False, new_meta("x"))
    live = log.store()
    live.catch_up()
    expected = dump(live)
    close_store(live)
    store = log.store()
    store.rebuild()
    assert_same(dump(store), expected)
    close_store(store)


# -- from a PostgreSQL log: read by the rebuild itself (pg_log), the audit made by SQLite (audit_staged) -----


@pytest.fixture
def random_pg(random_home: tuple[Log, Dump], postgres_url: str, tmp: Path) -> Iterator[tuple[Log, Dump]]:
    """The random log moved to a PostgreSQL schema (same positions), and the live tables of its home."""
    from rollouts.adapters.store.transfer import export_lines, load

    log, live = random_home
    pg = Log(tmp / "pg-home", postgres_url)
    # (as a fork, without the origin and failures a CLI import appends: the same events, so the same views)
    load(pg.app.recorder, (line.decode() for line in export_lines(log.app.recorder)), fork=True)
    assert pg.head() == log.head()
    yield pg, live
    pg.close()


@pytest.mark.parametrize("worker", [False, True], ids=["one-process", "worker"])
def test_a_rebuild_from_a_postgres_log_equals_the_live_tables(
    worker: bool, random_pg: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, live = random_pg
    monkeypatch.setattr(build_module, "PARALLEL_FROM", 0 if worker else 1 << 62)
    store = log.store()
    store.rebuild()
    assert_same(dump(store), live)
    assert positions(store) == {p.name: log.head() for p in ALL}
    close_store(store)


def test_a_rebuild_from_a_postgres_log_of_events_sqlite_cannot_render_equals_its_live_tables(
    random_pg: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = random_pg
    unusual_history(log)
    log.app.create_config("nan", Spec(command=["true"]), new_meta("x", notification_id=float("inf")))
    log.app.latest("nan", None, False, new_meta("x"))  # a first event SQLite cannot read: Python's audit
    live = log.store()
    live.catch_up()
    expected = dump(live)
    close_store(live)
    for parallel_from in (1 << 62, 0):
        monkeypatch.setattr(build_module, "PARALLEL_FROM", parallel_from)
        store = log.store(log.home.path / f"views-{parallel_from}")
        store.rebuild()
        assert_same(dump(store), expected)
        close_store(store)


def test_a_rebuild_from_a_postgres_log_gives_its_worker_no_password_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp: Path
) -> None:
    """Any user of the machine may read a process's argv: the worker's task, conninfo included, goes on stdin."""
    from rollouts.projections.source import PostgresLog

    seen: list[list[str]] = []

    class Recorded:
        def __init__(self, argv: list[str], **_: Any) -> None:
            seen.append(argv)
            self.stdin = io.BytesIO()

    monkeypatch.setattr(worker_module.subprocess, "Popen", Recorded)
    log = PostgresLog("host=db user=app password=s3cret dbname=rollouts", "public", "rollouts_events")
    worker_module.start({"desired": tmp / "d.db"}, log, 10, "log-id", 100)
    assert seen and not any("s3cret" in part for part in seen[0])
    assert "s3cret" not in repr(log)  # nor in a traceback or a log line that shows it


@pytest.mark.parametrize(
    "odd",
    [
        {},
        {"history_limit": 2**70},
        {"env": {"K": "caf\u00e9 \ud800"}},
        {"weights": [0.5, float("nan"), None]},
        {"limits": {"cpu": float("inf"), "note": "caf\u00e9"}},
    ],
    ids=["usual", "an-integer-past-64-bits", "a-lone-surrogate", "a-nan", "an-infinity"],
)
def test_history_keeps_every_spec_the_log_holds_whole(odd: dict[str, Any], tmp: Path) -> None:
    """A row's spec is compact JSON written by orjson, and by json where orjson refuses (the log may hold
    what the CLI never writes: an older version's, another writer's)."""
    spec = {**Spec(command=["true"], env={"K": "v"}).to_data(), **odd}
    data = {"name": "web", "spec": spec}
    stream = "00000000-0000-0000-0000-000000000001"
    registered = Record(1, stream, 1, "config", "Registered", "t", data, json.dumps(data))  # as the log holds it
    db = sqlite_utils.Database(tmp / "history.db")
    History().create(db)
    History().apply(db, [registered])
    (text,) = db.execute("SELECT spec FROM configs").fetchone()
    assert json.dumps(json.loads(text)) == json.dumps(spec)  # as json reads and writes them: NaN is NaN


def test_a_record_decoded_without_its_data_is_the_full_record_less_its_data(random_home: tuple[Log, Dump]) -> None:
    log, _ = random_home
    unusual_history(log)
    stamp = {"_type_": "datetime_iso", "_data_": "2024-01-01T00:00:00+00:00"}
    crafted = [
        {"timestamp": stamp},
        {"timestamp": stamp, "originator_topic": "x:Y", "a": [1, 2.5, None, True]},
        {"timestamp": {"_type_": "datetime_iso", "_data_": 'odd"stamp'}, "x": 1},
        {"timestamp": {"_type_": "datetime_iso", "_data_": "d\u00e9j\u00e0"}, "x": 1},
        {"x": 1, "timestamp": stamp},
    ]
    texts = [json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode() for d in crafted]
    notifications = [Row(i + 1, "ab" * 16, 1, "m:C.T", t) for i, t in enumerate(texts)]
    notifications += RecorderSource(log.app.recorder).read(0, log.head())
    for n in notifications:
        assert decode_stamped(n) == decode(n)._replace(data={}), n


def test_a_write_that_fails_during_a_rebuild_leaves_the_live_view_and_no_new_file(
    random_home: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, live = random_home
    store = log.store()
    before = {p.name: store.catalog.current(p.name) for p in ALL}

    def failing(self: History, conn: Any) -> Any:
        fold = History.fold(self, conn)
        fold.flush = lambda: conn.executemany("INSERT INTO no_such_table VALUES (?)", [(1,)])  # type: ignore[method-assign]
        return fold

    monkeypatch.setattr(History, "fold_from_zero", lambda self, db, conn, *a: failing(self, conn))
    with pytest.raises(Exception, match="no_such_table|projection write failed"):
        store.rebuild()
    assert {p.name: store.catalog.current(p.name) for p in ALL} == before
    assert {f.name for f in log.home.projections.glob("*.db")} <= {"catalog.db", *(p.name for p in before.values())}  # type: ignore[union-attr]
    assert_same(dump(store), live)
    close_store(store)


# -- I5: an event delivered again changes nothing --------------------------------------


def test_notifications_delivered_again_change_nothing(
    random_home: tuple[Log, Dump], tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, live = random_home
    store = log.store()
    head = log.head()
    dbs = {p.name: store.db(p.name) for p in ALL}
    for batch in (1000, 7):
        monkeypatch.setattr(store_module, "BATCH", batch)
        store._feed(dbs, 0, head)  # everything again, from position zero
        store.catch_up()
        assert_same(dump(store), live)
        assert positions(store) == {p.name: head for p in ALL}
    # batches that straddle the tracked position: only their new part is applied, once
    bulk_history(log, random.Random(11), 300, prefix="again", configs=4)
    records = [r for batch, _ in store._batches(head - 50, log.head()) for r in batch]
    for p in ALL:
        db = store.db(p.name)
        at = head
        for cut in (10, 60, 61, 200, len(records)):
            store._apply(p, db, records[:cut], records[cut - 1].position)
            store._apply(p, db, records[:cut], records[cut - 1].position)  # the same batch twice
            at = max(at, records[cut - 1].position)
            assert files.tracked(db, p.name).position == at  # type: ignore[union-attr]
    expected = fresh(log, tmp / "fresh")
    assert_same(dump(store), expected)
    store.catch_up()
    assert_same(dump(store), expected)
    close_store(store)


# -- crashes ---------------------------------------------------------------------------


@pytest.mark.slow  # real processes
@pytest.mark.parametrize("mode", ["catch-up", "rebuild", "shadow"])
def test_a_sigkill_in_the_middle_leaves_a_consistent_view_that_continues(mode: str, big_home: Log, tmp: Path) -> None:
    rng = random.Random(mode)
    log = big_home
    head = log.head()
    batch = 25
    # a live view at 40% of the log, as an earlier process left it
    old = log.store(source=Prefix(RecorderSource(log.app.recorder), head * 2 // 5))
    old.catch_up()
    close_store(old)
    # reads of one pass over what is left to do: the kill lands in the first (or only) pass
    reads = (head * 3 // 5) // batch if mode == "catch-up" else head // batch
    kill_after = rng.randint(reads // 5, reads * 4 // 5)
    proc = child(log.home, mode, batch)
    seen = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        seen += line.startswith("read")
        if seen >= kill_after:
            time.sleep(rng.uniform(0, 0.01))
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the {mode} ended before the kill: {proc.stderr.read()}"  # type: ignore[union-attr]

    expected = fresh(log, tmp / "fresh")
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    at = positions(store)
    if mode == "catch-up":
        assert any(head * 2 // 5 < a < head for a in at.values()), f"killed at {at}, not in the middle"
    for position in set(at.values()):  # position consistent with rows: equal to a rebuild of the log cut there
        there = [p for p in ALL if at[p.name] == position]
        cut = fresh(log, tmp / "cut", upto=position, only=there) if position < head else expected
        names = {p.name for p in there}
        assert_same(dump(store, there), {k: v for k, v in cut.items() if k.split(".")[0] in names})
    store.catch_up()
    assert warnings == []
    assert_same(dump(store), expected)
    # and it goes on: more events, a catch-up, a shadow rebuild that cleans up what the kill left
    bulk_history(log, random.Random(8), 200, prefix="after", configs=5)
    store.catch_up()
    if mode == "shadow":
        store.rebuild(shadow=True)
        current = {store.catalog.current(p.name).name for p in ALL}  # type: ignore[union-attr]
        assert {f.name for f in log.home.projections.glob("*.db")} == {"catalog.db", *current}
    assert_same(dump(store), fresh(log, tmp / "fresh"))
    close_store(store)


# -- old copies, other logs, other versions ------------------------------------------------


def test_a_view_restored_from_an_old_copy_catches_up_to_exactly_the_same_state(
    random_home: tuple[Log, Dump], tmp: Path
) -> None:
    log, _ = random_home
    old_copy = tmp / "old-projections"
    shutil.copytree(log.home.projections, old_copy)  # nothing holds it open: the fixture closed it
    store = log.store()
    for i in range(6):
        bulk_history(log, random.Random(i), 100, prefix=f"later{i}-", configs=3)
        store.catch_up()
    store.rebuild(shadow=True)  # the live files are not even the same files any more
    close_store(store)
    shutil.rmtree(log.home.projections)
    shutil.copytree(old_copy, log.home.projections)
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    store.catch_up()
    assert warnings == []
    assert_same(dump(store), fresh(log, tmp / "fresh"))
    close_store(store)


def test_a_long_lived_store_whose_folder_was_deleted_rebuilds_it_instead_of_writing_into_deleted_files(
    random_home: tuple[Log, Dump], tmp: Path
) -> None:
    """A running controller kept writing into the unlinked files of a deleted folder: its
    views went on, but nothing on disk did, and every other reader rebuilt from zero."""
    log, _ = random_home
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    store.catch_up()
    shutil.rmtree(log.home.projections)
    bulk_history(log, random.Random(3), 50, prefix="after-", configs=2)
    store.catch_up()
    assert warnings == [f"projections folder {log.home.projections} was removed: rebuilding it"]
    for p in ALL:
        assert store.catalog.current(p.name).exists()  # type: ignore[union-attr]
    close_store(store)
    reader = log.store()
    assert positions(reader) == {p.name: log.head() for p in ALL}, "the files on disk were not rebuilt"
    assert_same(dump(reader), fresh(log, tmp / "fresh"))
    close_store(reader)


def roll_the_log_back(log: Log, tmp: Path) -> None:
    """Projections caught up on a log that is then restored from an older backup: they are ahead of it."""
    backup = tmp / "events-backup.db"
    copy_db(log.home.events_db, backup)
    bulk_history(log, random.Random(9), 300, prefix="lost", configs=5)
    store = log.store()
    store.catch_up()
    close_store(store)
    log.close()
    copy_db(backup, log.home.events_db)
    log.app = open_app(log.home, None)


def test_a_projection_ahead_of_the_log_is_rebuilt_with_a_warning(big_home: Log, tmp: Path) -> None:
    log = big_home
    roll_the_log_back(log, tmp)
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    assert all(row["stale"] for row in store.status()), "status says the view is ahead of the log"
    store.catch_up()
    assert len(warnings) == len(ALL) and all("does not match the event log" in w for w in warnings), warnings
    assert positions(store) == {p.name: log.head() for p in ALL}
    assert_same(dump(store), fresh(log, tmp / "fresh"))
    close_store(store)


class Spinning(Exception):
    pass


class Counted:
    """The log, refusing to be read more than `limit` times (a rebuild that reads it in circles)."""

    def __init__(self, source: Any, limit: int) -> None:
        self.source = source
        self.limit = limit

    def head(self) -> int:
        return self.source.head()

    def read(self, after: int, limit: int) -> Sequence[Any]:
        self.limit -= 1
        if self.limit < 0:
            raise Spinning(f"still reading after position {after}")
        return self.source.read(after, limit)

    def identity(self) -> str:
        return self.source.identity()


def test_a_shadow_rebuild_of_a_projection_ahead_of_the_log_ends(big_home: Log, tmp: Path) -> None:
    log = big_home
    roll_the_log_back(log, tmp)
    store = log.store(source=Counted(RecorderSource(log.app.recorder), 500))
    store.rebuild([store_module.BY_NAME["history"]], shadow=True)
    assert positions(store)["history"] == log.head()
    close_store(store)


def copy_projections_from_another_home(log: Log, where: Path, events: int) -> None:
    other = Log(where)
    bulk_history(other, random.Random(4), events, prefix="other", configs=5)
    store = other.store()
    store.catch_up()
    close_store(store)
    other.close()
    shutil.rmtree(log.home.projections)
    shutil.copytree(other.home.projections, log.home.projections)


@pytest.mark.parametrize("other_is", ["shorter", "longer"])
def test_a_projection_copied_from_another_home_is_rebuilt_with_a_warning(
    other_is: str, random_home: tuple[Log, Dump], tmp: Path
) -> None:
    log, live = random_home
    copy_projections_from_another_home(log, tmp / "other", 400 if other_is == "shorter" else log.head() + 400)
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    store.catch_up()
    assert len(warnings) == len(ALL) and all("does not match the event log" in w for w in warnings), warnings
    assert_same(dump(store), live)
    close_store(store)


def test_status_flags_a_projection_copied_from_another_home(random_home: tuple[Log, Dump], tmp: Path) -> None:
    log, _ = random_home
    copy_projections_from_another_home(log, tmp / "other", 300)
    store = log.store()
    rows = store.status()
    close_store(store)
    assert [row["stale"] for row in rows] == [True] * len(ALL)


@pytest.mark.parametrize("bumped", [Desired, History, AuditView], ids=["desired", "history", "audit"])
def test_a_version_bump_is_detected_flagged_and_rebuilt(
    bumped: type[Projection], random_home: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, live = random_home
    monkeypatch.setattr(bumped, "version", bumped.version + 1)
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    status = {row["name"]: row for row in store.status()}
    assert [n for n, row in status.items() if row["stale"]] == [bumped.name]
    assert status[bumped.name]["stored_version"] == bumped.version - 1
    assert status[bumped.name]["code_version"] == bumped.version
    store.catch_up()
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"projection {bumped.name} is version {bumped.version - 1}")
    status = {row["name"]: row for row in store.status()}
    assert not status[bumped.name]["stale"] and status[bumped.name]["stored_version"] == bumped.version
    assert_same(dump(store), live)
    store.catch_up()
    assert len(warnings) == 1, "rebuilt once, then quiet"
    close_store(store)


# -- concurrency -------------------------------------------------------------------------


@pytest.mark.slow  # real processes
@pytest.mark.parametrize(
    "modes",
    [
        ("catch-up", "catch-up"),
        ("catch-up", "shadow"),
        ("rebuild", "rebuild"),
        pytest.param(("shadow", "shadow")),
    ],
    ids="+".join,
)
def test_two_processes_catching_up_at_once_neither_corrupt_nor_double_apply(
    modes: tuple[str, str], big_home: Log, tmp: Path
) -> None:
    log = big_home
    procs = [child(log.home, mode, 100, "wait") for mode in modes]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in procs:  # go, both at once
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    applied: list[dict[str, list[int]]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "warning" not in out
        applied.append(json.loads(out.rsplit("applied ", 1)[1]))
    if modes == ("catch-up", "catch-up"):
        for p in ALL:  # every position applied exactly once, by one process or the other
            both = sorted(applied[0][p.name] + applied[1][p.name])
            assert both == list(range(1, log.head() + 1)), f"{p.name}: positions applied twice or never"
    store = log.store()
    for p in ALL:
        assert store.catalog.current(p.name).exists(), f"the catalog points {p.name} at a deleted file"  # type: ignore[union-attr]
    assert positions(store) == {p.name: log.head() for p in ALL}
    assert_same(dump(store), fresh(log, tmp / "fresh"))
    close_store(store)


class TwinRebuildsOnPop(dict[str, Any]):
    """The store's open-file table; its first pop runs a twin store's whole in-place rebuild.

    A rebuild pops its old connections right after committing its swap, before it removes
    the files no longer pointed to: this is the moment a queued twin takes the catalog lock."""

    def __init__(self, table: dict[str, Any], twin: ProjectionStore) -> None:
        super().__init__(table)
        self.twin: ProjectionStore | None = twin

    def pop(self, key: str, *default: Any) -> Any:
        if self.twin is not None:
            twin, self.twin = self.twin, None
            twin.rebuild()
        return super().pop(key, *default)


def test_an_in_place_rebuild_finished_by_a_twin_after_ours_was_deleted_by_our_cleanup(big_home: Log, tmp: Path) -> None:
    """Found by the two-process rebuild test: our cleanup kept the files WE built, not the ones
    the catalog pointed to by then, and deleted the files of a twin that swapped in meanwhile."""
    log = big_home
    first, second = log.store(), log.store()
    first.catch_up()
    first._open = TwinRebuildsOnPop(first._open, second)  # type: ignore[assignment]
    first.rebuild()
    store = log.store()
    for p in ALL:
        assert store.catalog.current(p.name).exists(), f"the catalog points {p.name} at a deleted file"  # type: ignore[union-attr]
    assert positions(store) == {p.name: log.head() for p in ALL}
    assert_same(dump(store), fresh(log, tmp / "fresh"))
    for each in (first, second, store):
        close_store(each)


def test_a_catalog_replaced_while_a_rebuild_runs_waits_for_it_and_the_rebuild_still_ends_equal(
    big_home: Log, tmp: Path
) -> None:
    """Found by chaos --scale: a process that found the catalog corrupt made a new one and removed
    every file of the folder, the files a rebuild (holding the old catalog's lock) was writing among
    them; the rebuild failed (exit 5, 70). Replacing the catalog now waits for the build lock, and
    the rebuild, whose catalog is gone, starts again under the new one."""
    log = big_home
    store, warnings = log.store(warnings=(seen := [])), seen
    store.catch_up()
    building, failures = threading.Event(), []

    def progress(position: int, head: int) -> None:
        if not building.is_set():
            building.set()
            time.sleep(0.5)  # the other side writes over the catalog and asks for a new one meanwhile

    def rebuild() -> None:
        try:
            store.rebuild(progress=progress)
        except BaseException as error:  # noqa: BLE001 (reported below)
            failures.append(error)

    rebuilding = threading.Thread(target=rebuild)
    rebuilding.start()
    assert building.wait(timeout=60)
    (log.home.projections / "catalog.db").write_bytes(b"")  # zero length in place, as chaos does
    replacement = files.Catalog(log.home.projections)  # a reader of another process: under setup, then build lock
    replacement.db.close()
    rebuilding.join(timeout=120)
    assert not rebuilding.is_alive() and failures == [], failures
    assert positions(store) == {p.name: log.head() for p in ALL}
    assert any("during a build" in w or "was replaced" in w for w in warnings), warnings
    actual = dump(store)
    close_store(store)
    assert_same(actual, fresh(log, tmp / "fresh"))
    again = log.store()
    assert_same(dump(again), actual)  # what another process reads
    close_store(again)


@pytest.mark.parametrize("shadow", [False, True], ids=["in-place", "shadow"])
def test_old_projections_put_back_while_a_rebuild_runs_do_not_fail_it(
    random_home: tuple[Log, Dump], tmp: Path, shadow: bool
) -> None:
    """Found by chaos --scale on PostgreSQL ("disk I/O error", exit 5): an operator puts old projections
    back (every file of the folder removed, copies put in) while a rebuild runs. The rebuild starts
    again under the catalog put back, and ends equal to a rebuild from zero."""
    log, live = random_home
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    store.catch_up()
    backup = tmp / "backup"
    backup.mkdir()
    for path in store.folder.iterdir():
        shutil.copy2(path, backup / path.name)
    put_back: list[int] = []

    def progress(position: int, head: int) -> None:
        if not put_back:
            put_back.append(position)
            for path in store.folder.iterdir():
                path.unlink()
            for path in backup.iterdir():
                shutil.copy2(path, store.folder / path.name)

    store.rebuild(shadow=shadow, progress=progress)
    assert put_back
    assert any("building again" in w for w in warnings), warnings
    store.catch_up()  # as every read does first: a file the put-back left without a view starts from zero
    assert positions(store) == {p.name: log.head() for p in ALL}
    actual = dump(store)
    close_store(store)
    assert_same(actual, live)
    again = log.store()
    assert_same(dump(again), live)
    close_store(again)


@pytest.mark.parametrize("how", ["rebuild", "shadow", "heal"])
def test_a_build_whose_file_broke_under_it_starts_again_from_the_log(
    random_home: tuple[Log, Dump], tmp: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Found by chaos --scale: bytes written over the file a build was writing (or over a live file it
    held) failed `projections rebuild` and the read or controller healing a view (exit 5 or 70). The
    views are a cache of the log: such a build now starts again, with a warning, and ends equal."""
    log, live = random_home
    failed: list[str] = []
    # A shadow build writes batch by batch (ProjectionStore._apply), the others through build.build.
    where, name = (ProjectionStore, "_apply") if how == "shadow" else (build_module, "build")
    real = getattr(where, name)

    def breaking(*args: Any, **kwargs: Any) -> Any:
        if not failed:
            failed.append("once")
            raise WriterError("a projection write failed") from not_a_database_error(tmp)  # as the writer's thread does
        return real(*args, **kwargs)

    monkeypatch.setattr(where, name, breaking)
    warnings: list[str] = []
    store = log.store(warnings=warnings)
    store.catch_up()
    if how == "heal":
        store.catalog.current("history").write_bytes(b"")  # type: ignore[union-attr] - zero length: a cache miss
        store.catch_up()
    else:
        store.rebuild(shadow=how == "shadow")
    assert failed == ["once"]
    assert any("broke or went during a build" in w and "building again" in w for w in warnings), warnings
    assert_same(dump(store), live)
    close_store(store)


def test_a_build_that_fails_for_another_reason_is_not_started_again(
    random_home: tuple[Log, Dump], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a broken file is a cache miss: a full disk, say, fails the rebuild at once (the live views stay)."""
    log, live = random_home
    calls: list[int] = []

    def full(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(build_module, "build", full)
    store = log.store()
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        store.rebuild()
    assert calls == [1]
    assert_same(dump(store), live)
    close_store(store)


class Killed(Exception):
    pass


class Dying:
    """The log as a process sees it that is killed after `reads` reads."""

    def __init__(self, source: Any, reads: int) -> None:
        self.source = source
        self.reads = reads

    def head(self) -> int:
        return self.source.head()

    def read(self, after: int, limit: int) -> Sequence[Any]:
        if self.reads == 0:
            raise Killed
        self.reads -= 1
        return self.source.read(after, limit)

    def identity(self) -> str:
        return self.source.identity()


def shadow_rebuild_interleaved(log: Log) -> tuple[ProjectionStore, list[Path]]:
    """Two stores shadow-rebuild history; the second starts (in a thread) when the first is half-way.

    Shadow builds of one folder are serialised by the catalog's write lock: the second waits for
    the first's swap, then builds a file of its own. Returns a fresh store and both chosen files."""
    history = store_module.BY_NAME["history"]
    first, second = log.store(), log.store()
    first.catch_up([history])  # the live file exists: only shadow files are chosen below
    chosen: list[Path] = []
    for store in (first, second):

        def recording(name: str, original=store.catalog.next_file) -> Path:  # type: ignore[no-untyped-def]
            chosen.append(original(name))
            return chosen[-1]

        store.catalog.next_file = recording  # type: ignore[method-assign]
    waiting = threading.Thread(target=lambda: second.rebuild([history], shadow=True))

    def progress(position: int, head: int) -> None:
        if not waiting.is_alive() and not chosen[1:] and position >= head // 2:
            waiting.start()

    first.rebuild([history], shadow=True, progress=progress)
    waiting.join(timeout=120)
    assert not waiting.is_alive()
    close_store(first)
    close_store(second)
    return log.store(), chosen


def test_two_shadow_rebuilds_at_once_run_one_after_the_other_into_files_of_their_own(
    big_home: Log, tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "BATCH", 100)
    history = [store_module.BY_NAME["history"]]
    store, chosen = shadow_rebuild_interleaved(big_home)
    current = store.catalog.current("history")
    assert len(chosen) == 2 and chosen[0] != chosen[1], chosen
    assert current == chosen[1] and current.exists(), f"the catalog points history at {current}"
    assert positions(store)["history"] == big_home.head()
    actual = dump(store, history)
    close_store(store)
    assert_same(actual, fresh(big_home, tmp / "fresh", only=history))


@pytest.mark.slow  # real processes
def test_a_shadow_swap_is_seen_by_other_processes_after_another_reader_came_and_went(
    random_home: tuple[Log, Dump],
) -> None:
    """Regression (fixed in 52c2b43): Catalog.setup_lock used to open and close catalog.db itself, which
    dropped this process's SQLite locks on it; a reader closing its connection then deleted the catalog's
    WAL under us and the swap below went to a WAL no other process could see."""
    log, _ = random_home
    store = log.store()
    store.catch_up()
    reader = child(log.home, "catch-up", 1000, "close")  # a read command: opens the projections, closes, exits
    reader.communicate(timeout=60)
    assert reader.returncode == 0
    store.rebuild([store_module.BY_NAME["history"]], shadow=True)
    mine = store.catalog.current("history").name  # type: ignore[union-attr]
    script = "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])"
    query = "SELECT file FROM current WHERE name = 'history'"
    catalog = str(log.home.projections / "catalog.db")
    seen = subprocess.run([sys.executable, "-c", script, catalog, query], capture_output=True, text=True)
    close_store(store)
    assert seen.stdout.strip() == mine


# -- the command line ------------------------------------------------------------------------


def cli_history(rollouts: Any) -> None:
    for args in (
        ("config", "create", "web", "--pre-hook", "true", "--", "true"),
        ("config", "create", "api", "--trigger", "config-change", "--", "true"),
        ("rollout", "latest", "web", "--reason", "first"),
        ("config", "set", "api", "--env", "A=1"),
        ("rollout", "cancel", "web"),
        ("rollout", "retry", "web"),
    ):
        result = rollouts.run(*args)
        assert result.exit_code == 0, (args, result.stderr)


def test_projections_status_json_has_one_object_per_projection(rollouts: Any) -> None:
    cli_history(rollouts)
    result = rollouts.run("projections", "status", "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == ["desired", "history", "audit"]
    head = rollouts.event_count()
    for row in rows:
        assert set(row) == {"name", "code_version", "stored_version", "position", "head", "lag", "rows", "stale"}
        assert row["head"] == head and row["lag"] == head - row["position"] and row["stale"] is False
        assert row["code_version"] == row["stored_version"] == store_module.BY_NAME[row["name"]].version
        assert all(type(row[k]) is int for k in ("code_version", "stored_version", "position", "rows", "lag"))
    assert rollouts.run("rollout", "history", "web", "-o", "json").exit_code == 0  # a read of history
    rows = {r["name"]: r for r in json.loads(rollouts.run("projections", "status", "-o", "json").stdout)}
    assert rows["history"]["position"] == head and rows["history"]["lag"] == 0
    # 2 configs, 3 deployments, no step (nothing claimed), 2 endings (web's cancel, api's superseded v1),
    # 4 phase_counts (web and api: New and Failed), 2 verification_counts (web and api), 2 finished (web and
    # api), and a durations row per bucket the 2 ends fall in (both most often within the first second, on a
    # slow machine perhaps not)
    assert rows["history"]["rows"] - (2 + 3 + 2 + 4 + 2 + 2) in (1, 2)


def test_projections_rebuild_shadow_through_the_cli_gives_the_same_answers(rollouts: Any) -> None:
    cli_history(rollouts)
    history = rollouts.run("rollout", "history", "web", "-o", "json")
    events = rollouts.run("events", "-o", "json")
    result = rollouts.sh("projections", "rebuild", "--shadow")
    assert result.exit_code == 0, result.stderr
    head = rollouts.event_count()
    assert result.stdout.splitlines() == [
        f"rebuilt {name} to position {head} (shadow swap)" for name in ("desired", "history", "audit")
    ]
    assert rollouts.run("rollout", "history", "web", "-o", "json").stdout == history.stdout
    assert rollouts.run("events", "-o", "json").stdout == events.stdout
    on_disk = sorted(f.name.rsplit("-", 1)[0] for f in (rollouts.home / "projections").glob("*-*.db"))
    assert on_disk == ["audit", "desired", "history"], "one file per projection, the old ones removed"
    result = rollouts.run("projections", "rebuild", "history")
    assert result.exit_code == 0 and result.stdout.strip() == f"rebuilt history to position {head}"
    assert rollouts.run("rollout", "history", "web", "-o", "json").stdout == history.stdout
    rows = json.loads(rollouts.run("projections", "status", "-o", "json").stdout)
    assert [(r["position"], r["stale"]) for r in rows] == [(head, False)] * 3


def test_a_deleted_projections_folder_is_rebuilt_by_the_next_read(rollouts: Any) -> None:
    cli_history(rollouts)
    history = rollouts.run("rollout", "history", "web", "-o", "json")
    events = rollouts.run("events", "-o", "json")
    shutil.rmtree(rollouts.home / "projections")
    again = rollouts.sh("rollout", "history", "web", "-o", "json")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(history.stdout)
    assert [r["phase"] for r in json.loads(again.stdout)] == ["New"]
    assert json.loads(rollouts.run("events", "-o", "json").stdout) == json.loads(events.stdout)
    assert (rollouts.home / "projections" / "catalog.db").exists()
    assert (rollouts.home / "projections").stat().st_mode & 0o777 == 0o700


def test_a_version_bump_warns_on_stderr_of_the_next_read(rollouts: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_history(rollouts)
    before = rollouts.run("rollout", "history", "web", "-o", "json")
    monkeypatch.setattr(History, "version", History.version + 1)
    rows = {r["name"]: r for r in json.loads(rollouts.run("projections", "status", "-o", "json").stdout)}
    assert rows["history"]["stale"] is True and rows["desired"]["stale"] is False
    after = rollouts.run("rollout", "history", "web", "-o", "json")
    assert after.exit_code == 0
    old, new = History.version - 1, History.version
    assert after.stderr.startswith(f"warning: projection history is version {old}, the code's is {new}")
    assert after.stdout == before.stdout
    again = rollouts.run("rollout", "history", "web", "-o", "json")
    assert again.stderr == ""
    rows = {r["name"]: r for r in json.loads(rollouts.run("projections", "status", "-o", "json").stdout)}
    assert rows["history"]["stale"] is False and rows["history"]["stored_version"] == new
