"""The log figures 1 and 5 read: bench/performance/generate.py's history, and copies of its prefixes made idle
(every open deployment cancelled, a runtime row per deployer the log created)."""

from __future__ import annotations

import contextlib
import json
import random
import re
import sqlite3
from pathlib import Path

from bench.performance import generate
from bench.shared.harness import Sizes, Workspace, meta
from rollouts.adapters.home import Home
from rollouts.adapters.service import commands
from rollouts.adapters.service.bootstrap import bootstrap, open_app

STEP_NAME = re.compile(r"^(?P<config>.+)-(?P<revision>\d+)-(?:deploy|hook-(?:pre|post))-\d+(?:-\d+)?$")


def seed_runtime(home: Home) -> None:
    """An ended runtime row per deployer or hook the log says was created (all but the last 10 pruned)."""
    from rollouts.adapters.runtime.local import LocalRuntime

    LocalRuntime(home.path).close()  # creates the table
    events = sqlite3.connect(home.events_db)
    with contextlib.closing(events):
        created = events.execute(
            "SELECT state FROM stored_events WHERE topic LIKE '%.DeployerCreated' OR topic LIKE '%.HookCreated'"
        ).fetchall()
    steps = []
    for (state,) in created:
        data = json.loads(state)
        match = STEP_NAME.match(data["name"])
        if match:
            steps.append((data["name"], match["config"], int(match["revision"]), data["attempt"]))
    latest: dict[str, int] = {}
    for _, config, revision, _ in steps:
        latest[config] = max(latest.get(config, 0), revision)
    now = "2026-01-01T00:00:00+00:00"
    rows = [(n, c, r, a, now, now, int(r <= latest[c] - 10)) for n, c, r, a in steps]
    db = sqlite3.connect(home.runtime / "runtime.db")
    with contextlib.closing(db), db:
        db.executemany(
            "INSERT OR IGNORE INTO deployers (name, config, revision, attempt, state, exit_code,"
            " created_at, ended_at, pruned) VALUES (?, ?, ?, ?, 'exited', 0, ?, ?, ?)",
            rows,
        )


def backup(source: Path, target: Path) -> None:
    """A consistent copy of a live SQLite file (WAL included)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    with contextlib.closing(src), contextlib.closing(dst):
        src.backup(dst)
    target.chmod(0o600)


def finish_open(home: Home) -> None:
    """Cancel every open deployment of the log in `home`, through the commands, so it is idle."""
    db = sqlite3.connect(home.events_db)
    with contextlib.closing(db):
        registered = db.execute("SELECT state FROM stored_events WHERE topic LIKE '%.Registered'").fetchall()
    # The only writer here: eventsourcing's aggregate cache changes no decision, only the loads.
    app = bootstrap(home).open_app(AGGREGATE_CACHE_MAXSIZE="100000")
    try:
        for (state,) in registered:
            name = json.loads(state)["name"]
            if not app.config(name).open_revisions:
                continue
            app.cancel(name, meta())
            for revision in app.config(name).open_revisions:
                m = meta()
                commands.report(app, name, revision, lambda d, m=m: d.is_open and (d.confirm_cancelled(m) or True), m)
    finally:
        app.close()


# -- the log, built once per run -----------------------------------------------------------------


def build_logs(ws: Workspace, sizes: Sizes) -> tuple[Home, Home, Home, int]:
    """The rebuild log (bench/performance/generate.py's), and copies of its prefixes made idle for figure 5
    (1k events, a long history)."""
    small, big, full = ws.home("idle-1k"), ws.home("idle-big"), ws.home("rebuild")
    checkpoints = [(1000, small), (sizes.idle_big_events, big), (sizes.rebuild_events, full)]
    app = open_app(full, None)
    try:
        gen = generate.Generator(app, random.Random(sizes.rebuild_events), 300)
        for target, home in checkpoints:
            while (app.recorder.max_notification_id() or 0) < target:
                for _ in range(150):
                    gen.act(gen.rng.choice(gen.names))
                gen.save()
            if home is not full:
                # Made idle on tmpfs (fsync is not what this step is about), then copied to disk.
                staging = Home(ws.scratch / home.path.name).ensure()
                backup(full.events_db, staging.events_db)
                finish_open(staging)
                backup(staging.events_db, home.events_db)
    finally:
        app.close()
    big_events = 0
    for home in (small, big):
        seed_runtime(home)
        db = sqlite3.connect(home.events_db)
        with contextlib.closing(db):
            big_events = db.execute("SELECT max(rowid) FROM stored_events").fetchone()[0]
    return small, big, full, big_events
