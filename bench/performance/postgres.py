#!/usr/bin/env python
"""Rollouts on PostgreSQL, each figure beside a baseline measured in the same run on the same server.

    python bench/performance/postgres.py [--store postgresql://postgres@127.0.0.1:5432/test] [--quick]

1. pg_command_ops_per_s   in-process `latest --supersede` ops/s vs a bare eventsourcing
                          load-command-save loop on a trivial aggregate (goal >= 0.5x)
2. pg_spawn_latency_*     `latest` committed -> deployer running, median (goal <= 50 ms) and p99,
                          with `controller run -q` waiting on its log (LISTEN/NOTIFY)
3. pg_e2e_rollouts_per_s  rollouts/s with one running controller (warmed up) and `true` deployers,
                          first trigger to last terminal event (goal >= 100/s)
4. pg_rebuild             rebuild of all projections from a PostgreSQL log vs the library's read +
                          decode from the same server (goal >= 0.8x), the medians of three runs of
                          each taken in turn (one with --quick); the log is bench/performance/rebuild.py's
                          cached SQLite log, moved with `log import`'s writer
5. pg_claim_check_ms      `rollouts claim check` as a deployer runs it (a live claim of a running
                          controller; ROLLOUT_CLAIM, ROLLOUT_HOME and ROLLOUT_STORE), whole process,
                          vs `python -c "import psycopg; psycopg.connect(URL).execute('select 1')"`,
                          the floor of any Python process that asks the database (goal <= 1.2x);
                          the two taken in turn, medians

Every run uses schemas of its own, dropped at the end. The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import bootstrap, open_app
from rollouts.domain import ids
from rollouts.domain.spec import Spec

SERVER = "postgresql://postgres@127.0.0.1:5432/test"
if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
# The processes timed here run as an installed copy does, from cached bytecode: with the
# PYTHONDONTWRITEBYTECODE that some sandboxes set, each would compile the project's modules again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
from bench.performance.generate import cached_log  # noqa: E402
from bench.performance.in_process import BareApp, Counter  # noqa: E402  (figure 2's baseline, on PostgreSQL here)
from bench.performance.rebuild import ceiling  # noqa: E402


class Bench:
    def __init__(self, server: str) -> None:
        self.server = server
        self.schemas: list[str] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="rollouts-bench-pg-"))

    def store(self) -> str:
        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:10]}"
        self.schemas.append(schema)
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        return f"{self.server}?schema={schema}"

    def settle(self) -> None:
        """VACUUM (ANALYZE) the tables of the last schema, as after any bulk load: the first reads of
        rows just written would set their hint bits, and autovacuum come by, while they are timed."""
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.schemas[-1],)
            ).fetchall()
            for (table,) in tables:
                conn.execute(f'VACUUM (ANALYZE) "{self.schemas[-1]}"."{table}"')

    def home(self, name: str) -> Home:
        return Home(self.tmp / name).ensure()

    def close(self) -> None:
        import shutil

        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        shutil.rmtree(self.tmp, ignore_errors=True)


def figure(value: float, baseline: float | None, goal: str, unit: str) -> dict[str, Any]:
    against = value / baseline if goal.endswith("x") and baseline else value
    limit = float(goal[2:].rstrip("x"))
    ok = against >= limit if goal.startswith(">=") else against <= limit
    ratio = round(value / baseline, 3) if baseline else None
    return {
        "value": round(value, 2),
        "baseline": baseline and round(baseline, 2),
        "ratio": ratio,
        "goal": goal,
        "unit": unit,
        "ok": ok,
    }


def commands(bench: Bench, configs: int, ops: int) -> dict[str, Any]:
    store = bench.store()
    app = open_app(bench.home("commands"), store)
    names = [f"c{i}" for i in range(configs)]
    for name in names:
        app.create_config(name, Spec(command=["true"]), new_meta("bench"))
    t = time.perf_counter()
    for i in range(ops):
        app.latest(names[i % configs], None, True, new_meta("bench"))
    ours = ops / (time.perf_counter() - t)
    app.close()

    env = {
        k: v
        for k, v in bootstrap(bench.home("bare"), bench.store()).backend.env().items()
        if k != "APPLICATION_RECORDER_TOPIC"
    }
    plain = BareApp(env=env)
    counters = [Counter(f"c{i}") for i in range(configs)]
    plain.save(*counters)
    t = time.perf_counter()
    for i in range(ops):
        counter = plain.repository.get(counters[i % configs].id)
        counter.bump()
        plain.save(counter)
    bare = ops / (time.perf_counter() - t)
    plain.close()
    return figure(ours, bare, ">=0.5x", "op/s")


def controller(home: Home, store: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ROLLOUTS_HOME": str(home.path), "ROLLOUTS_STORE": store, "ROLLOUTS_ACTOR": "bench"}
    argv = [sys.executable, "-m", "rollouts", "controller", "run", "-q", *args]
    return subprocess.Popen(argv, env=env, cwd=home.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def latency(bench: Bench, samples: int) -> tuple[dict[str, Any], dict[str, Any]]:
    store, home = bench.store(), bench.home("latency")
    stamps = home.path / "stamps"
    stamps.mkdir()
    app = open_app(home, store)
    spec = Spec(command=["sh", "-c", 'date +%s.%N > "$STAMPS/$ROLLOUT_DEPLOYER"'], env={"STAMPS": str(stamps)})
    app.create_config("lat", spec, new_meta("bench"))
    proc = controller(home, store, "--interval", "1")
    found: list[float] = []
    try:
        for i in range(samples + 1):
            revision = app.latest("lat", None, False, new_meta("bench"))
            t0 = time.time()
            stamp = stamps / ids.deployer_name("lat", revision, 1)
            deadline = time.monotonic() + 30
            while not stamp.exists() or not stamp.read_text():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"no deployer ran for lat v{revision}")
                time.sleep(0.001)
            if i:
                found.append((float(stamp.read_text()) - t0) * 1000)
            while app.deployment(app.config("lat"), revision).is_open:
                time.sleep(0.005)
    finally:
        proc.terminate()
        proc.wait(30)
        app.close()
    found.sort()
    p99 = found[max(0, int(len(found) * 0.99 + 0.5) - 1)]
    return figure(statistics.median(found), None, "<=50", "ms"), figure(p99, None, "<=300", "ms")


def e2e(bench: Bench, rollouts: int) -> dict[str, Any]:
    """Rollouts/s of one running controller, warmed up (its fork server, its caches), from the first
    trigger to the last terminal event; the controller's start is not timed."""
    from bench.shared.harness import Terminal, deployment_key

    store, home = bench.store(), bench.home("e2e")
    app = open_app(home, store)
    names = [f"e{i}" for i in range(rollouts)]
    for name in [*names, "warm0", "warm1"]:
        app.create_config(name, Spec(command=["true"]), new_meta("bench"))
    proc = controller(home, store, "--interval", "0.05")
    try:
        terminal = Terminal(app)
        warm = {deployment_key(n, app.latest(n, None, False, new_meta("bench"))) for n in ("warm0", "warm1")}
        terminal.wait(warm, 60)
        t = time.perf_counter()
        keys = {deployment_key(name, app.latest(name, None, False, new_meta("bench"))) for name in names}
        terminal.wait(keys, 600)
        rate = rollouts / (time.perf_counter() - t)
        failed = [k for k in keys if terminal.outcomes[k] != "DeployerSucceeded"]
        if failed:
            raise RuntimeError(f"{len(failed)} of {rollouts} rollouts did not succeed")
    finally:
        proc.terminate()
        proc.wait(30)
        app.close()
    return figure(rate, None, ">=100", "rollouts/s")


def rebuild(bench: Bench, events: int, runs: int) -> dict[str, Any]:
    """The median of `runs` rebuilds against the median of as many reads, taken in turn."""
    from rollouts.adapters.store.reader import RecorderSource
    from rollouts.adapters.store.transfer import export_lines, load
    from rollouts.projections.store import ProjectionStore

    source = open_app(cached_log(events, 300, False), None)
    app = open_app(bench.home("rebuild"), bench.store())
    load(app.recorder, export_lines(source.recorder), fork=True)  # the cached log is not sealed: a fork
    source.close()
    bench.settle()
    head = app.recorder.max_notification_id()
    reads, rebuilds = [], []
    for run in range(runs):  # interleaved, as bench/performance/rebuild.py: a slow moment slows both sides
        count, read_s, _ = ceiling(app)
        assert count == head
        reads.append(read_s)
        store = ProjectionStore(bench.tmp / f"rebuild-views-{run}", RecorderSource(app.recorder))
        store.catalog  # noqa: B018 - created before the clock starts
        t = time.perf_counter()
        store.rebuild()
        rebuilds.append(time.perf_counter() - t)
        store.close()
    app.close()
    return figure(head / statistics.median(rebuilds), head / statistics.median(reads), ">=0.8x", "ev/s")


def reachable(server: str) -> str | None:
    """None when `server` answers; else why not (one line)."""
    import psycopg

    try:
        with psycopg.connect(server, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as error:  # noqa: BLE001 - any failure means: skipped, and why
        return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
    return None


def claim_check(bench: Bench, samples: int) -> dict[str, Any]:
    store, home = bench.store(), bench.home("claim")
    seen = home.path / "claim-env"
    app = open_app(home, store)
    script = 'env | grep "^ROLLOUT_\\(CLAIM\\|HOME\\|STORE\\)=" > "$SEEN.tmp" && mv "$SEEN.tmp" "$SEEN"; sleep 600'
    app.create_config("fence", Spec(command=["sh", "-c", script], env={"SEEN": str(seen)}), new_meta("bench"))
    app.latest("fence", None, False, new_meta("bench"))
    proc = controller(home, store, "--interval", "1")
    try:
        deadline = time.monotonic() + 60
        while not seen.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the fence deployer did not start")
            time.sleep(0.05)
        deployer = dict(line.split("=", 1) for line in seen.read_text().splitlines())
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUTS_")} | deployer
        check = [sys.executable, "-m", "rollouts", "claim", "check"]
        floor = [sys.executable, "-c", f"import psycopg; psycopg.connect({bench.server!r}).execute('select 1')"]

        def wall(argv: list[str]) -> float:
            t = time.perf_counter()
            done = subprocess.run(argv, env=env, cwd=home.path, capture_output=True)
            elapsed = time.perf_counter() - t
            if done.returncode != 0:
                raise RuntimeError(f"{argv[-2:]} exited {done.returncode}: {done.stderr.decode()[-300:]}")
            return elapsed

        wall(check), wall(floor)  # warm the page cache, untimed
        checks, floors = [], []
        for _ in range(samples):
            checks.append(wall(check))
            floors.append(wall(floor))
    finally:
        app.cancel("fence", new_meta("bench"))
        proc.terminate()
        proc.wait(30)
        app.close()
    return figure(statistics.median(checks) * 1000, statistics.median(floors) * 1000, "<=1.2x", "ms")


def run_all(server: str, quick: bool) -> dict[str, dict[str, Any]]:
    """Every figure of this file, as bench/run.py reports them (keys start with pg_)."""
    bench = Bench(server)
    summary: dict[str, Any] = {}
    try:
        summary["pg_command_ops_per_s"] = commands(bench, 40 if quick else 100, 150 if quick else 800)
        median, p99 = latency(bench, 20 if quick else 100)
        summary["pg_spawn_latency_median_ms"], summary["pg_spawn_latency_p99_ms"] = median, p99
        summary["pg_e2e_rollouts_per_s"] = e2e(bench, 30 if quick else 300)
        summary["pg_rebuild_events_per_s"] = rebuild(bench, *((20_000, 1) if quick else (200_000, 3)))
        summary["pg_claim_check_ms"] = claim_check(bench, 10 if quick else 30)
    finally:
        bench.close()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=SERVER, help="a PostgreSQL database the benchmark may add schemas to")
    parser.add_argument("--quick", action="store_true", help="small sizes")
    args = parser.parse_args(argv)
    why = reachable(args.store)
    if why is not None:
        print(f"error: no PostgreSQL at {args.store}: {why}", file=sys.stderr)
        return 5
    summary = run_all(args.store, args.quick)
    for name, f in summary.items():
        ratio = f" ({f['ratio']}x of {f['baseline']:,})" if f["ratio"] is not None else ""
        print(f"{name}: {f['value']:,} {f['unit']}{ratio}, goal {f['goal']}, ok={f['ok']}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
