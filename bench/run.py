#!/usr/bin/env python
"""Rollouts benchmarks: each figure beside a baseline measured in the same run, as a ratio.

    python bench/run.py [--quick] [--json]

Figures (DESIGN sections 5-9; every value and baseline is a median of several runs):

1. rebuild        projection rebuild (all three read models) events/s vs eventsourcing's own
                  read + decode of the same log (select_notifications + mapper.to_domain_event),
                  both timed by bench/rebuild.py's ceiling() and rebuild(), on bench/generate.py's log
2. commands       in-process `RolloutsApp.latest(supersede)` ops/s vs a bare eventsourcing
                  load-command-save loop on a trivial aggregate, same SQLite settings
3. cli_*          wall time of `rollouts rollout latest`, `rollout history -o json`, `--help`
                  vs `python -c "import eventsourcing.application, pydantic, click, sqlite_utils"`
4. spawn_latency  `latest` committed -> deployer running (its first act writes time.time()),
                  with `controller run --interval 0.01 -q` running; median and p99
5. idle_reconcile one idle `Controller.reconcile()` with a long history vs with 1k events
6. e2e            rollouts/s, one controller and `true` deployers; then two controllers
7. rss            controller VmRSS at the start and at the end of a long run of rollouts
8. chain          in-process `latest --supersede` ops/s on the hash-chained recorder vs the
                  library's plain SQLite recorder (bench/chain.py)
9. log_verify     `log verify` events/s over figure 1's log vs reading the same rows and hashing
                  their stored bytes with hashlib, in a process of its own (bench/chain.py; at 1M:
                  python bench/chain.py)
10. pg_*          on the PostgreSQL server of `--store` (default: the local test server), each in
                  schemas of its own (bench/postgres.py): `latest --supersede` ops/s vs a bare
                  eventsourcing loop; latest -> deployer running (LISTEN/NOTIFY), median and p99;
                  end-to-end rollouts/s, one controller; rebuild vs the library's read + decode.
                  No server reachable: printed as skipped, never ok
11. *_10k         one controller pass with 10,000 configs vs the same with 100: idle, and busy
                  (open deployments another live controller holds: 1,000 vs 100), per deployment

`--json` prints {"name": {"value", "baseline", "ratio", "goal", "ok"}} as the last line.
Everything runs in temporary homes; every process started here is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from adapters.application import RolloutsApp
from adapters.controller import commands, twins
from adapters.eventstore import open_app, store_env
from adapters.home import Home
from domain import ids
from domain.spec import Spec

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # the other scripts of bench/, imported as modules
# The processes timed here run as an installed copy does, from cached bytecode: with the
# PYTHONDONTWRITEBYTECODE that some sandboxes set, each would compile the project's modules again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
import chain  # noqa: E402
import generate  # noqa: E402
import rebuild as rebuild_bench  # noqa: E402

PYTHON = sys.executable
ROLLOUTS = [str(Path(PYTHON).with_name("rollouts"))]
if not Path(ROLLOUTS[0]).exists():
    ROLLOUTS = [PYTHON, "-m", "adapters.cli"]
ACTOR = "bench@rollouts"
TERMINAL_TOPICS = tuple(
    f"domain.deployment:Deployment.{t}" for t in ("DeployerSucceeded", "DeployerFailed", "DeployerLost", "Cancelled")
)


@dataclass(frozen=True)
class Sizes:
    reps: int  # repetitions behind each median
    rebuild_events: int  # figure 1: size of the generated log
    idle_big_events: int  # figure 5: the long history (a prefix of the same log)
    command_configs: int  # figure 2
    command_ops: int
    cli_reps: int  # figure 3
    latency_samples: int  # figure 4
    idle_passes: int  # figure 5, per repetition and home
    e2e_rollouts: int  # figure 6, per run
    rss_rollouts: int  # figure 7
    rss_configs: int
    rss_cap_s: float  # stop triggering after this long (the figure then says how many ran)
    heavy_reps: int  # repetitions of the long runs (rebuild, end to end)


QUICK = Sizes(
    reps=3,
    rebuild_events=20_000,
    idle_big_events=20_000,
    command_configs=40,
    command_ops=150,
    cli_reps=5,
    latency_samples=20,
    idle_passes=50,
    e2e_rollouts=30,
    rss_rollouts=500,
    rss_configs=40,
    rss_cap_s=20,
    heavy_reps=2,
)
FULL = Sizes(
    reps=5,
    rebuild_events=200_000,
    idle_big_events=100_000,
    command_configs=100,
    command_ops=800,
    cli_reps=15,
    latency_samples=100,
    idle_passes=200,
    e2e_rollouts=150,
    rss_rollouts=10_000,
    rss_configs=200,
    rss_cap_s=240,
    heavy_reps=3,
)


def meta() -> dict[str, Any]:
    return {"actor": ACTOR, "correlation_id": os.urandom(8).hex()}


def median(values: list[float]) -> float:
    return statistics.median(values)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# -- results -------------------------------------------------------------------------------------


@dataclass
class Figure:
    name: str
    label: str
    unit: str
    value: float
    baseline: float | None
    goal: str  # ">=0.6x", "<=1.2x" (ratio to the baseline), "<=100" or ">=25" (the value itself)
    note: str = ""
    noise: float = 0.0  # a ratio goal also holds this much short of its limit (the baseline's own spread)
    skipped: str = ""  # why it was not measured (then never ok)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.value / self.baseline  # type: ignore[operator]

    @property
    def ok(self) -> bool:
        if self.skipped:
            return False
        op, target = self.goal[:2], self.goal[2:]
        against = self.ratio if target.endswith("x") else self.value
        if against is None:
            return False
        limit = float(target.rstrip("x"))
        return against >= limit - self.noise if op == ">=" else against <= limit + self.noise

    def as_json(self) -> dict[str, Any]:
        ratio = self.ratio
        if self.skipped:
            goal = self.goal if self.goal.endswith("x") else f"{self.goal} {self.unit}"
            return {"value": None, "baseline": None, "ratio": None, "goal": goal, "ok": False, "skipped": self.skipped}
        return {
            "value": round(self.value, 4),
            "baseline": None if self.baseline is None else round(self.baseline, 4),
            "ratio": None if ratio is None else round(ratio, 3),
            "goal": self.goal if self.goal.endswith("x") else f"{self.goal} {self.unit}",
            "ok": self.ok,
        }


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "null"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def print_table(figures: list[Figure], mode: str, elapsed: float) -> None:
    rows = [("figure", "value", "baseline", "ratio", "goal", "ok")]
    for f in figures:
        goal = f.goal if f.goal.endswith("x") else f"{f.goal} {f.unit}"
        ratio = f.ratio
        if f.skipped:
            rows.append((f.label, "skipped", "", "", goal, "SKIP"))
            continue
        rows.append(
            (
                f.label,
                fmt(f.value, f.unit),
                fmt(f.baseline, f.unit),
                "null" if ratio is None else f"{ratio:.2f}x",
                goal,
                "ok" if f.ok else "MISS",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"rollouts bench ({mode}, {elapsed:.0f} s, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    for i, row in enumerate(rows):
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in pairs]
        print("  ".join(cells))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    notes = [f"  {f.name}: {f.note}" for f in figures if f.note]
    notes += [f"  {f.name}: skipped: {f.skipped}" for f in figures if f.skipped]
    if notes:
        print("notes:")
        print("\n".join(notes))


# -- processes and homes -------------------------------------------------------------------------


class Workspace:
    """Temporary homes, and every process started for them; `close()` ends all of it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rollouts-bench-"))
        shm = Path("/dev/shm")
        # The generated log is only input: build it where fsync is free, then copy it to disk.
        self.scratch = Path(tempfile.mkdtemp(prefix="rollouts-bench-", dir=shm if shm.is_dir() else None))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.count = 0

    def home(self, label: str) -> Home:
        self.count += 1
        return Home(self.root / f"{self.count:02d}-{label}").ensure()

    def env(self, home: Home) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUTS_")}
        return {**env, "ROLLOUTS_HOME": str(home.path), "ROLLOUTS_ACTOR": ACTOR}

    def controller(self, home: Home, interval: float) -> subprocess.Popen[bytes]:
        argv = [*ROLLOUTS, "controller", "run", "--interval", str(interval), "-q"]
        errlog = home.path / f"controller-{len(self.procs)}.err"
        with open(errlog, "wb") as log:
            proc = subprocess.Popen(argv, env=self.env(home), cwd=home.path, stdin=subprocess.DEVNULL, stderr=log)
        proc.errlog = errlog  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def close(self) -> None:
        for proc in list(self.procs):
            self.stop(proc)
        self._kill_strays()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _kill_strays(self) -> None:
        """Shims and deployers still running for one of our homes (detached; found by their argv)."""
        marker = str(self.root).encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline:
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGKILL)


def check_alive(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is not None:
            errlog = getattr(proc, "errlog", None)
            tail = errlog.read_text()[-500:] if errlog and errlog.exists() else ""
            raise RuntimeError(f"controller {proc.pid} exited with {proc.returncode}: {tail}")


def make_configs(app: Any, prefix: str, count: int, spec: Spec) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        app.create_config(name, spec, meta())
    return names


class Terminal:
    """Follows the log for deployments reaching a terminal event (originator ids, as str)."""

    def __init__(self, app: Any) -> None:
        self.recorder = app.recorder
        self.after = self.recorder.max_notification_id() or 0
        self.outcomes: dict[str, str] = {}

    def poll(self) -> list[str]:
        new = []
        while True:
            batch = self.recorder.select_notifications(
                start=self.after, limit=500, topics=TERMINAL_TOPICS, inclusive_of_start=False
            )
            for n in batch:
                key = str(n.originator_id)
                if key not in self.outcomes:
                    new.append(key)
                self.outcomes[key] = n.topic.rpartition(".")[2]
            if batch:
                self.after = batch[-1].id
            if len(batch) < 500:
                return new

    def wait(self, keys: set[str], timeout: float, *procs: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + timeout
        while not keys <= self.outcomes.keys():
            if time.monotonic() > deadline:
                missing = len(keys - self.outcomes.keys())
                raise RuntimeError(f"{missing} deployments not terminal after {timeout:.0f} s")
            check_alive(*procs)
            time.sleep(0.01)
            self.poll()


def deployment_key(config: str, revision: int) -> str:
    return str(ids.deployment_id(ids.config_id(config), revision))


# -- figure 1: rebuild, and the log it reads (also the histories of figure 5) ---------------------


STEP_NAME = re.compile(r"^(?P<config>.+)-(?P<revision>\d+)-(?:deploy|hook-(?:pre|post))-\d+(?:-\d+)?$")


def seed_runtime(home: Home) -> None:
    """An ended runtime row per deployer or hook the log says was created (all but the last 10 pruned)."""
    from adapters.runtime.local import LocalRuntime

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
    app = RolloutsApp(env={**store_env(home, None), "AGGREGATE_CACHE_MAXSIZE": "100000"})
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


def projection_store(app: Any, home: Home) -> Any:
    from adapters.log_source import RecorderSource
    from projections.store import ProjectionStore

    return ProjectionStore(home.projections, RecorderSource(app.recorder))


def bench_rebuild(ws: Workspace, home: Home, sizes: Sizes) -> list[Figure]:
    """bench/rebuild.py's ceiling() and rebuild() (all three, into an empty folder)."""
    app = open_app(home, None)
    rebuild_s: list[float] = []
    read_s: list[float] = []
    try:
        head = app.recorder.max_notification_id()
        rebuild_bench.ceiling(app)  # warm the page cache and the topic caches, untimed
        for i in range(sizes.heavy_reps):
            count, seconds, _ = rebuild_bench.ceiling(app)
            read_s.append(seconds)
            seconds, _ = rebuild_bench.rebuild(app, ws.root / f"rebuild-scratch-{i}")
            rebuild_s.append(seconds)
            if count != head:
                raise RuntimeError(f"read {count} events, the log has {head}")
    finally:
        app.close()
    return [
        Figure(
            "rebuild_events_per_s",
            f"1 rebuild, all projections ({head:,} events)",
            "ev/s",
            head / median(rebuild_s),
            head / median(read_s),
            ">=1.0x",
            "bench/rebuild.py's ceiling() and rebuild()",
        )
    ]


# -- figure 2: command throughput ----------------------------------------------------------------


class Counter(Aggregate):
    """The trivial aggregate of the baseline."""

    @event("Registered")
    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0

    @event("Bumped")
    def bump(self) -> None:
        self.count += 1


class BareApp(Application):
    name = "bare"


def bench_commands(ws: Workspace, sizes: Sizes) -> list[Figure]:
    ours, bare = [], []
    for _ in range(sizes.reps):
        home = ws.home("commands")
        app = open_app(home, None)
        names = make_configs(app, "cmd", sizes.command_configs, Spec(command=["true"]))
        t = time.perf_counter()
        for i in range(sizes.command_ops):
            app.latest(names[i % len(names)], None, True, meta())
        ours.append(sizes.command_ops / (time.perf_counter() - t))
        app.close()

        path = ws.home("bare").path / "events.db"
        env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path), "SQLITE_LOCK_TIMEOUT": "10"}
        plain = BareApp(env=env)
        counters = [Counter(f"c{i}") for i in range(sizes.command_configs)]
        for counter in counters:
            plain.save(counter)
        keys = [c.id for c in counters]
        t = time.perf_counter()
        for i in range(sizes.command_ops):
            counter = plain.repository.get(keys[i % len(keys)])
            counter.bump()
            plain.save(counter)
        bare.append(sizes.command_ops / (time.perf_counter() - t))
        plain.close()
    return [
        Figure(
            "command_ops_per_s",
            f"2 latest --supersede, in-process ({sizes.command_configs} configs)",
            "op/s",
            median(ours),
            median(bare),
            ">=0.5x",
        )
    ]


# -- figure 3: CLI wall time ---------------------------------------------------------------------


def bench_cli(ws: Workspace, sizes: Sizes) -> list[Figure]:
    home = ws.home("cli")
    app = open_app(home, None)
    fresh = make_configs(app, "cli", sizes.cli_reps + 1, Spec(command=["true"]))
    make_configs(app, "hist", 1, Spec(command=["true"]))
    for revision in range(1, 21):  # a history of 20 finished revisions
        app.latest("hist-0", f"release {revision}", False, meta())
        m = meta()
        name = ids.deployer_name("hist-0", revision, 1)
        commands.claim(app, "hist-0", revision, "bench-claimant", m)
        commands.report(app, "hist-0", revision, lambda d, n=name, m=m: d.report_exited(n, 0, None, m), m)
    app.close()
    env = ws.env(home)

    def wall(argv: list[str]) -> float:
        t = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=home.path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = time.perf_counter() - t
        if done.returncode != 0:
            raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-300:]}")
        return elapsed

    baseline_argv = [PYTHON, "-c", "import eventsourcing.application, pydantic, click, sqlite_utils"]
    history_argv = [*ROLLOUTS, "rollout", "history", "hist-0", "-o", "json"]
    help_argv = [*ROLLOUTS, "--help"]
    wall(baseline_argv)  # warm the page cache and the projections, untimed
    wall([*ROLLOUTS, "rollout", "latest", fresh[-1]])
    wall(history_argv)
    times: dict[str, list[float]] = {"base": [], "latest": [], "history": [], "help": []}
    for i in range(sizes.cli_reps):
        times["base"].append(wall(baseline_argv))
        times["latest"].append(wall([*ROLLOUTS, "rollout", "latest", fresh[i]]))
        times["history"].append(wall(history_argv))
        times["help"].append(wall(help_argv))
    base = median(times["base"]) * 1000
    return [
        Figure("cli_latest_ms", "3 `rollout latest NAME`", "ms", median(times["latest"]) * 1000, base, "<=1.2x"),
        Figure(
            "cli_history_json_ms",
            "3 `rollout history NAME -o json`",
            "ms",
            median(times["history"]) * 1000,
            base,
            "<=1.2x",
        ),
        Figure("cli_help_ms", "3 `rollouts --help`", "ms", median(times["help"]) * 1000, base, "<=0.5x"),
    ]


# -- figure 4: latest committed -> deployer running ----------------------------------------------


def shim_spawn_ms(samples: int) -> float:
    """The shim's own start: its interpreter and imports, up to its usage message."""
    from adapters.runtime.interpreter import module_argv
    from adapters.runtime.local import SHIM

    argv = module_argv(SHIM)
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return median(times) * 1000


def bench_latency(ws: Workspace, sizes: Sizes) -> list[Figure]:
    home = ws.home("latency")
    stamps = home.path / "stamps"
    stamps.mkdir()
    app = open_app(home, None)
    # The deployer's first act: its start time, to a file named after it.
    spec = Spec(command=["sh", "-c", 'date +%s.%N > "$STAMPS/$ROLLOUT_DEPLOYER"'], env={"STAMPS": str(stamps)})
    app.create_config("lat", spec, meta())
    controller = ws.controller(home, 0.01)
    terminal = Terminal(app)
    latencies = []
    try:
        for i in range(sizes.latency_samples + 1):
            revision = app.latest("lat", None, False, meta())
            t0 = time.time()
            stamp = stamps / ids.deployer_name("lat", revision, 1)
            deadline = time.monotonic() + 30
            while not stamp.exists() or not stamp.read_text():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no deployer ran for lat v{revision} within 30 s")
                check_alive(controller)
                time.sleep(0.001)
            if i:  # the first one warms the controller up
                latencies.append((float(stamp.read_text()) - t0) * 1000)
            terminal.wait({deployment_key("lat", revision)}, 30, controller)
            time.sleep(random.uniform(0, 0.02))  # do not always land at the same point of a pass
    finally:
        ws.stop(controller)
        app.close()
    base = shim_spawn_ms(max(5, sizes.reps * 3))
    return [
        Figure(
            "spawn_latency_median_ms",
            f"4 latest -> deployer running, median (n={len(latencies)})",
            "ms",
            median(latencies),
            base,
            "<=100",
            "baseline: a shim's start as an interpreter of its own (python -m adapters.runtime.shim, to its usage"
            " message); the controller forks its shims from a fork server instead",
        ),
        Figure(
            "spawn_latency_p99_ms",
            "4 latest -> deployer running, p99",
            "ms",
            nearest_rank(latencies, 0.99),
            None,
            "<=300",
        ),
    ]


# -- figure 5: idle reconcile pass ---------------------------------------------------------------


def idle_controller(home: Home, expect_open: int = 0) -> tuple[Any, Any, Any]:
    from adapters.controller.loop import Controller, claimant_id
    from adapters.runtime.local import LocalRuntime

    app = open_app(home, None)
    runtime = LocalRuntime(home.path)
    ctl = Controller(app, projection_store(app, home), runtime, claimant_id(home), ACTOR, str(home.path))
    if expect_open:
        from adapters.leases import Leases

        Leases(app).renew(OTHER)
    open_count, acted = ctl.reconcile()  # catches the desired view up from zero: not timed
    if open_count != expect_open or acted:
        raise RuntimeError(f"{home.path}: the history should be idle, saw {open_count} open, {acted} actions")
    return ctl, app, runtime


def bench_idle(small: Home, big: Home, sizes: Sizes, big_events: int) -> list[Figure]:
    loaded = [idle_controller(small), idle_controller(big)]
    per_pass: list[list[float]] = [[], []]
    try:
        for _ in range(sizes.reps):
            for i, (ctl, _, _) in enumerate(loaded):
                for _ in range(sizes.idle_passes):
                    t = time.perf_counter()
                    ctl.reconcile()
                    per_pass[i].append(time.perf_counter() - t)
    finally:
        for _, app, runtime in loaded:
            runtime.close()
            app.close()
    return [
        Figure(
            "idle_reconcile_ms",
            f"5 idle reconcile pass, {big_events:,} vs 1k events",
            "ms",
            median(per_pass[1]) * 1000,
            median(per_pass[0]) * 1000,
            "<=1.2x",
        )
    ]


# -- figure 6: end-to-end rollouts/s -------------------------------------------------------------


def warm_up(home: Home, app: Any, terminal: Terminal, procs: list[subprocess.Popen[bytes]]) -> None:
    """Roll out throwaway configs until a controller has created a deployer and every one runs
    (one leads, the others stand by): all are up, the leader past its first passes and first
    create (imports, fork server), before the measured window."""
    waiting = {proc.pid for proc in procs}
    for round_ in range(20):
        names = make_configs(app, f"warm{round_}", 2 * len(procs), Spec(command=["true"]))
        terminal.wait({deployment_key(name, app.latest(name, None, False, meta())) for name in names}, 60, *procs)
        with contextlib.closing(sqlite3.connect(home.runtime / "runtime.db")) as db:
            created = {pid for (pid,) in db.execute("SELECT DISTINCT creator_pid FROM deployers")}
        if created and twins.running(home.runtime / "controllers") == len(procs):
            return
    raise RuntimeError(f"controllers {sorted(waiting)} created no deployer while warming up")


def e2e_run(ws: Workspace, controllers: int, rollouts: int) -> float:
    home = ws.home(f"e2e{controllers}")
    app = open_app(home, None)
    names = make_configs(app, "e2e", rollouts, Spec(command=["true"]))
    procs = [ws.controller(home, 0.05) for _ in range(controllers)]
    try:
        terminal = Terminal(app)
        warm_up(home, app, terminal, procs)
        t = time.perf_counter()
        keys = {deployment_key(name, app.latest(name, None, False, meta())) for name in names}
        terminal.wait(keys, 300, *procs)
        elapsed = time.perf_counter() - t
        failed = [k for k in keys if terminal.outcomes[k] != "DeployerSucceeded"]
        if failed:
            raise RuntimeError(f"{len(failed)} of {rollouts} rollouts did not succeed")
    finally:
        for proc in procs:
            ws.stop(proc)
        app.close()
    return rollouts / elapsed


def bench_e2e(ws: Workspace, sizes: Sizes) -> list[Figure]:
    one, two = [], []
    for _ in range(sizes.heavy_reps):
        one.append(e2e_run(ws, 1, sizes.e2e_rollouts))
        two.append(e2e_run(ws, 2, sizes.e2e_rollouts))
    one_rate = median(one)
    # Twins split no work (one leads, the others stand by): "not lower" is a tie, so a shortfall
    # within the one-controller runs' own spread (the median down to the slowest) is noise.
    spread = (one_rate - min(one)) / one_rate
    runs = f"runs, 1 controller: {', '.join(f'{r:.0f}' for r in one)} /s; 2: {', '.join(f'{r:.0f}' for r in two)} /s"
    return [
        Figure(
            "e2e_rollouts_per_s_1ctl",
            f"6 end to end, 1 controller ({sizes.e2e_rollouts} at once)",
            "/s",
            one_rate,
            None,
            ">=25",
        ),
        Figure(
            "e2e_rollouts_per_s_2ctl",
            "6 end to end, 2 controllers (baseline: 1)",
            "/s",
            median(two),
            one_rate,
            ">=1.0x",
            f"{runs}; ok down to {1 - spread:.2f}x, the slowest 1-controller run",
            noise=spread,
        ),
    ]


# -- figure 7: controller memory -----------------------------------------------------------------


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def bench_rss(ws: Workspace, sizes: Sizes) -> list[Figure]:
    home = ws.home("rss")
    app = open_app(home, None)
    names = make_configs(app, "mem", sizes.rss_configs, Spec(command=["true"]))
    controller = ws.controller(home, 0.05)
    terminal = Terminal(app)
    try:
        # Warm-up: one round over every config, so that "start" is a controller that has worked.
        keys = {deployment_key(n, app.latest(n, None, False, meta())) for n in names}
        terminal.wait(keys, 300, controller)
        terminal.poll()
        start = rss_kb(controller.pid)
        t = time.perf_counter()
        idle: deque[str] = deque(names)
        pending: dict[str, str] = {}
        triggered = done = 0
        last_progress = time.monotonic()
        target = sizes.rss_rollouts
        while done < target:
            if time.perf_counter() - t > sizes.rss_cap_s:
                target = triggered  # out of time: let what runs finish, trigger nothing more
            while idle and triggered < target:
                name = idle.popleft()
                pending[deployment_key(name, app.latest(name, None, False, meta()))] = name
                triggered += 1
            finished = [k for k in terminal.poll() if k in pending]
            for key in finished:
                idle.append(pending.pop(key))
                done += 1
            if finished:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > 60:
                raise RuntimeError(f"no rollout finished for 60 s ({done} of {target} done)")
            check_alive(controller)
            time.sleep(0.01)
        elapsed = time.perf_counter() - t
        end = rss_kb(controller.pid)
        capped = ""
        if done < sizes.rss_rollouts:
            capped = f"; CAPPED at {sizes.rss_cap_s:.0f} s of {sizes.rss_rollouts:,} asked"
        failed = sum(1 for v in terminal.outcomes.values() if v != "DeployerSucceeded")
    finally:
        ws.stop(controller)
        app.close()
    return [
        Figure(
            "controller_rss_kb",
            f"7 controller RSS after {done:,} rollouts (baseline: start)",
            "kB",
            end,
            start,
            "<=1.2x",
            f"{done / elapsed:.1f} rollouts/s sustained over {len(names)} configs, {failed} not succeeded;"
            f" start = after one warm-up rollout per config{capped}",
        )
    ]


# -- figures 8 and 9: the hash chain (bench/chain.py) --------------------------------------------


def chain_figure(name: str, label: str, found: dict[str, Any]) -> Figure:
    return Figure(name, label, found["unit"], found["value"], found["baseline"], found["goal"])


def bench_chain_append(ws: Workspace, sizes: Sizes) -> list[Figure]:
    found = chain.bench_append(sizes.reps, configs=sizes.command_configs, ops=sizes.command_ops)
    return [chain_figure("chain_append_ratio", "8 latest --supersede, chained vs plain recorder", found)]


def bench_verify(home: Home, sizes: Sizes) -> list[Figure]:
    """In a process of its own, as `rollouts log verify` runs: this one has grown by then, and the
    forks of a walk in parts cost more the larger the process."""
    runs = max(sizes.reps, 7)  # a walk of the quick log takes 40-60 ms: the median of a few is still noise
    argv = [PYTHON, str(BENCH / "chain.py"), "--only", "verify", "--home", str(home.path), "--runs", str(runs)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench/chain.py exited {done.returncode}: {done.stderr[-300:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])["verify"]
    label = f"9 log verify, {found['events']:,} events, vs read + hashlib"
    return [chain_figure("log_verify_events_per_s", label, found)]


# -- figure 11: a pass with 10,000 configs vs 100 ------------------------------------------------

OTHER = "bench-other-controller"  # a live controller of another home, holding the busy passes' claims


def scale_home(ws: Workspace, configs: int, open_: int) -> Home:
    """`configs` configs (saved many at a time), the first `open_` with a deployment claimed by OTHER."""
    from domain import rollout
    from domain.config import DeploymentConfig

    home = ws.home(f"scale-{configs}-{open_}")
    app = open_app(home, None)
    try:
        spec = Spec(command=["true"]).to_data()
        pending: list[Any] = []
        for i in range(configs):
            config = DeploymentConfig(name=f"s{i:05d}", spec=spec, meta=meta())
            pending.append(config)
            if i < open_:
                (deployment,) = [
                    a
                    for a in rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=meta())
                    if a is not config
                ]
                rollout.claim(config, deployment, OTHER, meta())
                pending.append(deployment)
            if len(pending) >= 1000:
                app.save(*pending)
                pending = []
        if pending:
            app.save(*pending)
    finally:
        app.close()
    return home


def pass_times(home: Home, passes: int, reps: int, expect_open: int) -> list[float]:
    from adapters.leases import Leases

    ctl, app, runtime = idle_controller(home, expect_open)
    times: list[float] = []
    try:
        for _ in range(reps):
            Leases(app).renew(OTHER)  # OTHER stays alive: its claims are left to it
            for _ in range(passes):
                t = time.perf_counter()
                open_count, acted = ctl.reconcile()
                times.append(time.perf_counter() - t)
                if (open_count, acted) != (expect_open, 0):
                    raise RuntimeError(
                        f"{home.path}: expected {expect_open} open and no action, saw {open_count}, {acted}"
                    )
    finally:
        runtime.close()
        app.close()
    return times


def bench_scale(ws: Workspace, sizes: Sizes) -> list[Figure]:
    idle_small, idle_big = scale_home(ws, 100, 0), scale_home(ws, 10_000, 0)
    busy_small, busy_big = scale_home(ws, 100, 100), scale_home(ws, 10_000, 1_000)
    idle = [pass_times(h, sizes.idle_passes, sizes.reps, 0) for h in (idle_small, idle_big)]
    busy = [
        pass_times(h, max(3, sizes.idle_passes // 10), sizes.reps, n) for h, n in ((busy_small, 100), (busy_big, 1000))
    ]
    return [
        Figure(
            "idle_pass_10k_configs_ms",
            "11 idle pass, 10k configs vs 100",
            "ms",
            median(idle[1]) * 1000,
            median(idle[0]) * 1000,
            "<=1.5x",
        ),
        Figure(
            "busy_pass_10k_configs_ms_per_deployment",
            "11 busy pass per open deployment, 10k configs (1k open) vs 100 (100 open)",
            "ms",
            median(busy[1]) * 1000 / 1000,
            median(busy[0]) * 1000 / 100,
            "<=1.5x",
            "open deployments claimed by another live controller: read, planned, left to it",
        ),
    ]


# -- figure 10: PostgreSQL (bench/postgres.py) ---------------------------------------------------

PG_FIGURES = (
    ("pg_command_ops_per_s", "10 PG latest --supersede, in-process, vs bare eventsourcing", "op/s", ">=0.5x"),
    ("pg_spawn_latency_median_ms", "10 PG latest -> deployer running, median", "ms", "<=50"),
    ("pg_spawn_latency_p99_ms", "10 PG latest -> deployer running, p99", "ms", "<=300"),
    ("pg_e2e_rollouts_per_s", "10 PG end to end, 1 controller", "/s", ">=100"),
    ("pg_rebuild_events_per_s", "10 PG rebuild, all projections, vs library read + decode", "ev/s", ">=0.8x"),
)


def bench_postgres(store: str, quick: bool) -> list[Figure]:
    import postgres

    why = postgres.reachable(store)
    if why is not None:
        return [
            Figure(n, label, unit, math.nan, None, goal, skipped=f"no server: {why}")
            for n, label, unit, goal in PG_FIGURES
        ]
    found = postgres.run_all(store, quick)
    return [
        Figure(n, label, unit, found[n]["value"], found[n]["baseline"], goal) for n, label, unit, goal in PG_FIGURES
    ]


# -- main ----------------------------------------------------------------------------------------


def build_logs(ws: Workspace, sizes: Sizes) -> tuple[Home, Home, Home, int]:
    """The rebuild log (bench/generate.py's), and copies of its prefixes made idle for figure 5
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


@contextlib.contextmanager
def signals_end_cleanly() -> Iterator[None]:
    def stop(signum: int, _: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller runs (under ~90 s)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object, last line")
    parser.add_argument(
        "--only", help="comma-separated sections: rebuild,commands,chain,cli,latency,idle,e2e,rss,pg,scale"
    )
    parser.add_argument(
        "--store",
        default=os.environ.get("ROLLOUTS_BENCH_STORE", "postgresql://postgres@127.0.0.1:5432/test"),
        help="PostgreSQL server for the pg_ figures (schemas of their own, dropped after); skipped when unreachable",
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    only = set(args.only.split(",")) if args.only else None
    started = time.perf_counter()
    figures: list[Figure] = []
    ws = Workspace()

    def log(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {text}", file=sys.stderr, flush=True)

    def wanted(section: str) -> bool:
        return only is None or section in only

    with signals_end_cleanly():
        try:
            if wanted("rebuild") or wanted("idle"):
                log(f"generating a log of {sizes.rebuild_events:,} events through bench/generate.py")
                small, big, full, big_events = build_logs(ws, sizes)
                if wanted("rebuild"):
                    log("1 rebuild")
                    figures += bench_rebuild(ws, full, sizes)
                    log("9 log verify")
                    figures += bench_verify(full, sizes)
                if wanted("idle"):
                    log("5 idle reconcile")
                    figures += bench_idle(small, big, sizes, big_events)
            for section, bench in (
                ("commands", bench_commands),
                ("chain", bench_chain_append),
                ("cli", bench_cli),
                ("latency", bench_latency),
                ("e2e", bench_e2e),
                ("rss", bench_rss),
            ):
                if wanted(section):
                    log(section)
                    figures += bench(ws, sizes)
            if wanted("scale"):
                log("11 scale: 10k configs vs 100")
                figures += bench_scale(ws, sizes)
            if wanted("pg"):
                log(f"10 PostgreSQL ({args.store})")
                figures += bench_postgres(args.store, args.quick)
        finally:
            ws.close()
    figures.sort(key=lambda f: f.label)
    elapsed = time.perf_counter() - started
    print_table(figures, "quick" if args.quick else "full", elapsed)
    if args.json:
        print(json.dumps({f.name: f.as_json() for f in figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
