#!/usr/bin/env python
"""The hash chain's costs, each beside a baseline measured in the same run.

    python bench/performance/chain.py [--events 1000000] [--runs 3] [--appends 800] [--only verify [--home PATH]]

1. append   in-process `latest --supersede` ops/s on the chained recorder vs the library's plain
            SQLite recorder (same app, same settings, runs interleaved); goal >= 0.9x
2. verify   `log verify` (adapters.verify.verify_log) events/s over a generated log vs reading the same rows
            (one ordered scan with sqlite3) and hashing their stored bytes with hashlib; goals >= 0.7x,
            and at most 8 s for 1M events

The log of figure 2 is bench/performance/generate.py's cached log (generated once, reused). The last line is a
JSON summary: {"append": {...}, "verify": {...}} with value, baseline, ratio, goal, ok.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import bootstrap, open_app
from rollouts.adapters.store.verify import verify_log
from rollouts.domain.spec import Spec

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.performance.generate import cached_log  # noqa: E402

PLAIN = "eventsourcing.sqlite:SQLiteApplicationRecorder"


def append_rate(folder: Path, chained: bool, configs: int, ops: int) -> float:
    app = bootstrap(Home(folder)).open_app(**({} if chained else {"APPLICATION_RECORDER_TOPIC": PLAIN}))
    names = [f"c{i}" for i in range(configs)]
    for name in names:
        app.create_config(name, Spec(command=["true"]), new_meta("bench"))
    t = time.perf_counter()
    for i in range(ops):
        app.latest(names[i % configs], None, True, new_meta("bench"))
    rate = ops / (time.perf_counter() - t)
    app.close()
    return rate


def bench_append(runs: int, configs: int = 100, ops: int = 800) -> dict[str, Any]:
    ours, plain = [], []
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="rollouts-bench-chain-") as tmp:
            ours.append(append_rate(Path(tmp) / f"a{run}", True, configs, ops))
            plain.append(append_rate(Path(tmp) / f"b{run}", False, configs, ops))
        print(f"append run {run + 1}: chained {ours[-1]:,.0f} op/s, plain {plain[-1]:,.0f} op/s", file=sys.stderr)
    value, baseline = statistics.median(ours), statistics.median(plain)
    return figure(value, baseline, ">=0.9x", "op/s")


def hash_rows(recorder: Any) -> int:
    """The baseline: the same rows read in one ordered scan of the file, each one's stored bytes hashed."""
    conn = sqlite3.connect(f"file:{recorder.datastore.pool.db_name}?mode=ro", uri=True)
    table = recorder.events_table_name
    sql = f"SELECT rowid, originator_id, originator_version, topic, state FROM {table} ORDER BY rowid"
    count = 0
    sha = hashlib.sha256
    try:
        for row in conn.execute(sql):
            sha(row[4]).hexdigest()
            count += 1
    finally:
        conn.close()
    return count


def bench_verify(home: Home, runs: int) -> dict[str, Any]:
    app = open_app(home, None)
    recorder = app.recorder
    hash_rows(recorder)  # warm the page cache for both
    ours, base, seconds = [], [], []
    for run in range(runs):
        t = time.perf_counter()
        count = hash_rows(recorder)
        base.append(count / (time.perf_counter() - t))
        t = time.perf_counter()
        verdict = verify_log(recorder)
        seconds.append(time.perf_counter() - t)
        ours.append(verdict.events / seconds[-1])
        assert verdict.ok and verdict.events == count, verdict.breaks[:3]
        print(
            f"verify run {run + 1}: {verdict.events:,} events in {seconds[-1]:.2f} s ({ours[-1]:,.0f} ev/s),"
            f" baseline {base[-1]:,.0f} ev/s",
            file=sys.stderr,
        )
    app.close()
    result = figure(statistics.median(ours), statistics.median(base), ">=0.7x", "events/s")
    result["seconds"] = round(statistics.median(seconds), 2)
    result["events"] = count
    return result


def figure(value: float, baseline: float, goal: str, unit: str) -> dict[str, Any]:
    ratio = value / baseline
    return {
        "value": round(value, 1),
        "baseline": round(baseline, 1),
        "ratio": round(ratio, 3),
        "goal": goal,
        "unit": unit,
        "ok": ratio >= float(goal[2:-1]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="size of the log to verify")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--appends", type=int, default=800, help="latest --supersede calls per append run")
    parser.add_argument("--configs", type=int, default=300, help="configs in the generated history")
    parser.add_argument("--only", choices=["append", "verify"], help="one figure alone")
    parser.add_argument("--home", type=Path, help="verify the log of this home, not a generated one")
    args = parser.parse_args(argv)
    summary: dict[str, dict[str, Any]] = {}
    if args.only != "verify":
        summary["append"] = bench_append(args.runs, ops=args.appends)
    if args.only != "append":
        home = Home(args.home) if args.home else cached_log(args.events, args.configs, False)
        summary["verify"] = bench_verify(home, args.runs)
    verify = summary.get("verify")
    if verify is not None and verify["events"] >= 1_000_000:  # and at most 8 s per million events
        verify["ok"] = verify["ok"] and verify["seconds"] * 1e6 / verify["events"] <= 8
    for name, f in summary.items():
        ratio = f"{f['ratio']}x (goal {f['goal']}) ok={f['ok']}"
        print(f"{name}: {f['value']:,.0f} {f['unit']} vs {f['baseline']:,.0f}: {ratio}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
