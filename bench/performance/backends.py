#!/usr/bin/env python
"""SQLite beside PostgreSQL, measured in one run: command throughput and trigger-to-deployer latency.

    python bench/performance/backends.py [--commands N] [--rollouts N] [--store postgresql://...]

For each store: in-process `latest --supersede` commands/s over 20 configs, and the time
from `rollout latest` committed to the deployer process running (its first act writes
time.time()), with `controller run --interval 0.01` running against the same store.
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain.spec import Spec

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def throughput(store: str | None, work: Path, commands: int) -> float:
    app = open_app(Home(work / "tp"), store)
    configs = [f"tp{i}" for i in range(20)]
    for name in configs:
        app.create_config(name, Spec(command=["true"]), new_meta("bench"))
    started = time.perf_counter()
    for i in range(commands):
        app.latest(configs[i % len(configs)], None, True, new_meta("bench"))
    elapsed = time.perf_counter() - started
    app.close()
    return commands / elapsed


def latency(store: str | None, work: Path, rollouts: int) -> list[float]:
    """Milliseconds from `latest` returning to the deployer's first instruction."""
    home = work / "lat"
    marks = work / "marks"
    marks.mkdir()
    app = open_app(Home(home), store)
    # The deployer's first act stamps the time; sh starts in a millisecond, a Python would take ~100.
    stamp = f"date +%s.%N > {marks / 'm.tmp'} && mv {marks / 'm.tmp'} {marks / 'm'}"
    app.create_config("lat", Spec(command=["sh", "-c", stamp]), new_meta("bench"))
    argv = [sys.executable, "-m", "rollouts", "--home", str(home)] + (["--store", store] if store else [])
    controller = subprocess.Popen([*argv, "controller", "run", "--interval", "0.01", "-q"])
    samples = []
    try:
        for _ in range(rollouts):
            (marks / "m").unlink(missing_ok=True)
            app.latest("lat", None, True, new_meta("bench"))
            committed = time.time()
            deadline = time.monotonic() + 20
            while not (marks / "m").exists() or not (marks / "m").read_text():
                if time.monotonic() > deadline:
                    raise RuntimeError("the deployer never started")
                time.sleep(0.001)
            samples.append((float((marks / "m").read_text()) - committed) * 1000)
            while app.config("lat").open_revisions:
                time.sleep(0.005)
    finally:
        controller.terminate()
        controller.wait(timeout=30)
        app.close()
    return samples


def measure(store: str | None, commands: int, rollouts: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        ops = throughput(store, Path(tmp), commands)
        lat = sorted(latency(store, Path(tmp), rollouts))
    return {
        "commands_per_s": round(ops, 1),
        "latency_median_ms": round(statistics.median(lat), 1),
        "latency_p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=500)
    parser.add_argument("--rollouts", type=int, default=40)
    parser.add_argument("--store", default=None, help=f"PostgreSQL URL (default {POSTGRES} with a fresh schema)")
    args = parser.parse_args()
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    pg = args.store or f"{POSTGRES}?schema={schema}"
    results = {
        "sqlite": measure(None, args.commands, args.rollouts),
        "postgres": measure(pg, args.commands, args.rollouts),
    }
    if not args.store:
        import psycopg

        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    print(f"{'store':<10}{'commands/s':>12}{'latency median ms':>20}{'p99 ms':>10}")
    for name, r in results.items():
        print(f"{name:<10}{r['commands_per_s']:>12}{r['latency_median_ms']:>20}{r['latency_p99_ms']:>10}")
    ratio = results["postgres"]["commands_per_s"] / results["sqlite"]["commands_per_s"]
    print(json.dumps({**results, "postgres_vs_sqlite_commands": round(ratio, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
