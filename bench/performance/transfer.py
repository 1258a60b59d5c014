#!/usr/bin/env python
"""Moving a log (`log export`, `log import`), each beside a baseline measured in the same run.

    python bench/performance/transfer.py [--events 1000000] [--runs 3]

1. export  events/s of adapters.log_transfer.export_lines over bench/performance/rebuild.py's cached log, vs the
           library's recorder reading the same rows (select_notifications, 1,000 a call); goal >= 0.7x
2. import  events/s of adapters.log_transfer.load (each line checked, then inserted by the chained
           recorder, all in one transaction) into a fresh SQLite store, vs the library's plain SQLite
           recorder inserting the same stored events from the same file, 1,000 a transaction; goal >= 0.7x

The last line is a JSON summary: {"export": {...}, "import": {...}}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from rollouts.adapters.home import Home
from rollouts.adapters.service.bootstrap import bootstrap, open_app
from rollouts.adapters.store.transfer import export_lines, load

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.performance.generate import cached_log  # noqa: E402

PLAIN = "eventsourcing.sqlite:SQLiteApplicationRecorder"


def read_rows(recorder: Any) -> int:
    start, count = 0, 0
    while True:
        batch = recorder.select_notifications(start, 1000, inclusive_of_start=False)
        if not batch:
            return count
        count += len(batch)
        start = batch[-1].id


def fresh_recorder(folder: Path, plain: bool) -> Any:
    return bootstrap(Home(folder)).open_app(**({"APPLICATION_RECORDER_TOPIC": PLAIN} if plain else {}))


def insert_plain(recorder: Any, path: Path) -> int:
    batch: list[StoredEvent] = []
    count = 0
    with path.open() as lines:
        for line in lines:
            e = json.loads(line)
            if e.get("end") is True:  # the export's end marker: no event
                continue
            batch.append(StoredEvent(UUID(e["stream"]), e["stream_version"], e["topic"], e["state"].encode()))
            if len(batch) == 1000:
                recorder.insert_events(batch)
                count += len(batch)
                batch = []
    if batch:
        recorder.insert_events(batch)
        count += len(batch)
    return count


def figure(ours: list[float], base: list[float], unit: str) -> dict[str, Any]:
    value, baseline = statistics.median(ours), statistics.median(base)
    return {
        "value": round(value, 1),
        "baseline": round(baseline, 1),
        "ratio": round(value / baseline, 3),
        "goal": ">=0.7x",
        "unit": unit,
        "ok": value / baseline >= 0.7,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--configs", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    app = open_app(cached_log(args.events, args.configs, False), None)
    recorder = app.recorder
    exported = Path(tempfile.mkdtemp(prefix="rollouts-bench-transfer-")) / "log.jsonl"
    ex_ours, ex_base, im_ours, im_base = [], [], [], []
    for run in range(args.runs):
        t = time.perf_counter()
        count = read_rows(recorder)
        ex_base.append(count / (time.perf_counter() - t))
        t = time.perf_counter()
        with exported.open("wb") as out:
            for line in export_lines(recorder):
                out.write(line)
        ex_ours.append(count / (time.perf_counter() - t))
        with tempfile.TemporaryDirectory(prefix="rollouts-bench-import-") as tmp:
            plain, chained = fresh_recorder(Path(tmp) / "plain", True), fresh_recorder(Path(tmp) / "ours", False)
            t = time.perf_counter()
            insert_plain(plain.recorder, exported)
            im_base.append(count / (time.perf_counter() - t))
            t = time.perf_counter()
            with exported.open() as lines:
                found = load(chained.recorder, lines, fork=True)  # a copy of a live log: a fork
            im_ours.append(count / (time.perf_counter() - t))
            assert found.events == count
            plain.close()
            chained.close()
        print(
            f"run {run + 1}: export {ex_ours[-1]:,.0f} ev/s (read {ex_base[-1]:,.0f}),"
            f" import {im_ours[-1]:,.0f} ev/s (plain insert {im_base[-1]:,.0f})",
            file=sys.stderr,
        )
    exported.unlink()
    summary = {"export": figure(ex_ours, ex_base, "events/s"), "import": figure(im_ours, im_base, "events/s")}
    for name, f in summary.items():
        print(f"{name}: {f['value']:,.0f} vs {f['baseline']:,.0f} {f['unit']}: {f['ratio']}x (goal {f['goal']})")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
