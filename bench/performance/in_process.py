"""Figures 1, 2, 8 and 9 of bench/run.py, measured in this process or one of its scripts: rebuild events/s,
command throughput, the hash chain's cost on appends, and `log verify` events/s."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from bench.performance import chain
from bench.performance import rebuild as rebuild_bench
from bench.performance.figures import Figure, median
from bench.shared.harness import PYTHON, Sizes, Workspace, make_configs, meta
from rollouts.adapters.home import Home
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain.spec import Spec

CHAIN = Path(__file__).resolve().parent / "chain.py"  # run as a script of its own for `log verify`

# -- figure 1: rebuild ---------------------------------------------------------------------------


def bench_rebuild(ws: Workspace, home: Home, sizes: Sizes) -> list[Figure]:
    """bench/performance/rebuild.py's ceiling() and rebuild() (all three, into an empty folder)."""
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
            "bench/performance/rebuild.py's ceiling() and rebuild()",
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


# -- figures 8 and 9: the hash chain (bench/performance/chain.py) --------------------------------------------


def chain_figure(name: str, label: str, found: dict[str, Any]) -> Figure:
    return Figure(name, label, found["unit"], found["value"], found["baseline"], found["goal"])


def bench_chain_append(ws: Workspace, sizes: Sizes) -> list[Figure]:
    found = chain.bench_append(sizes.reps, configs=sizes.command_configs, ops=sizes.command_ops)
    return [chain_figure("chain_append_ratio", "8 latest --supersede, chained vs plain recorder", found)]


def bench_verify(home: Home, sizes: Sizes) -> list[Figure]:
    """In a process of its own, as `rollouts log verify` runs: this one has grown by then, and the
    forks of a walk in parts cost more the larger the process."""
    runs = max(sizes.reps, 7)  # a walk of the quick log takes 40-60 ms: the median of a few is still noise
    argv = [PYTHON, str(CHAIN), "--only", "verify", "--home", str(home.path), "--runs", str(runs)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench/performance/chain.py exited {done.returncode}: {done.stderr[-300:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])["verify"]
    label = f"9 log verify, {found['events']:,} events, vs read + hashlib"
    return [chain_figure("log_verify_events_per_s", label, found)]
