"""Projection rebuild throughput against eventsourcing's own read+decode ceiling, measured in one run.

    python bench/performance/rebuild.py                 # 1,000,000 events (generated once, cached under /tmp)
    python bench/performance/rebuild.py --quick         # 20,000 events
    python bench/performance/rebuild.py --events 200000 --runs 3 --profile

The log is bench/performance/generate.py's, generated through the domain once and cached in
/tmp/rollouts-bench-rebuild-v2-<N>/.

Measured, median of --runs runs each, interleaved:
  (a) ceiling: recorder.select_notifications(start, 1000, inclusive_of_start=False) and
      mapper.to_domain_event(n) for every notification;
  (b) ours: ProjectionStore.rebuild() of all three projections from zero, in place, into
      an empty projections folder.
Both are reported in events of the log per second; the goal is (b)/(a) >= 1.0.
Then, untimed, I5: the rebuilt views equal views caught up from zero batch by batch (the live
path), table by table (`--no-check` skips it). `--serial` folds every view in this process
(below build.PARALLEL_FROM events it always does). The last line of output is one JSON document.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.generate import cached_log  # noqa: E402
from rollouts.adapters.service.bootstrap import open_app  # noqa: E402
from rollouts.adapters.store.reader import RecorderSource  # noqa: E402
from rollouts.projections.store import ALL, ProjectionStore  # noqa: E402

GOAL = 1.0


# -- measuring --------------------------------------------------------------------------


def ceiling(app: Any) -> tuple[int, float, float]:
    """eventsourcing's own read+decode of the whole log: (events, wall seconds, CPU seconds)."""
    recorder, mapper = app.recorder, app.mapper
    start, count = 0, 0
    t, cpu = time.perf_counter(), time.process_time()
    while True:
        batch = recorder.select_notifications(start, 1000, inclusive_of_start=False)
        if not batch:
            break
        for n in batch:
            mapper.to_domain_event(n)
        count += len(batch)
        start = batch[-1].id
    return count, time.perf_counter() - t, time.process_time() - cpu


def children_cpu() -> float:
    """CPU seconds of the ended child processes (a rebuild's worker) so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def rebuild(app: Any, scratch: Path, profile: cProfile.Profile | None = None) -> tuple[float, float]:
    """ProjectionStore.rebuild() of all projections from zero into an empty folder.

    Returns wall seconds and CPU seconds (its worker process's included)."""
    folder = scratch / "projections"
    shutil.rmtree(folder, ignore_errors=True)
    store = ProjectionStore(folder, RecorderSource(app.recorder))
    store.catalog  # noqa: B018 - created before the clock starts
    t, cpu, workers = time.perf_counter(), time.process_time(), children_cpu()
    if profile:
        profile.enable()
    store.rebuild(ALL)  # one read and decode of the log, folded into every projection
    if profile:
        profile.disable()
    total, cpu = time.perf_counter() - t, time.process_time() - cpu + children_cpu() - workers
    head = RecorderSource(app.recorder).head()
    for p in ALL:
        db = store.db(p.name)
        position = db.execute("SELECT position FROM tracking WHERE name = ?", (p.name,)).fetchone()[0]
        assert position == head, f"{p.name} rebuilt to {position}, head {head}"
    return total, cpu


def check_equal(app: Any, scratch: Path) -> int:
    """I5: the views rebuilt from zero equal those caught up batch by batch; returns the rows compared."""
    rebuilt = ProjectionStore(scratch / "projections", RecorderSource(app.recorder))
    live = ProjectionStore(scratch / "live", RecorderSource(app.recorder))
    live.catch_up(ALL)
    compared = 0
    for p in ALL:
        ours, theirs = rebuilt.db(p.name), live.db(p.name)
        for table in p.tables:
            a = set(ours.execute(f"SELECT * FROM {table}").fetchall())
            b = set(theirs.execute(f"SELECT * FROM {table}").fetchall())
            if a != b:
                raise AssertionError(f"I5: {p.name}.{table} rebuilt differs from live: {len(a - b)} vs {len(b - a)}")
            compared += len(a)
    rebuilt.close()
    live.close()
    return compared


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="log size (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="20,000 events")
    parser.add_argument("--configs", type=int, default=300, help="configs in the generated history")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement (median)")
    parser.add_argument("--regenerate", action="store_true", help="ignore the cached log")
    parser.add_argument("--profile", action="store_true", help="cProfile one more rebuild, top functions on stderr")
    parser.add_argument("--serial", action="store_true", help="fold every view in this process (no workers)")
    parser.add_argument("--no-check", action="store_true", help="skip the I5 check (rebuilt == caught up)")
    args = parser.parse_args(argv)
    if args.serial:
        from rollouts.projections import build

        build.PARALLEL_FROM = 1 << 62
    events = 20_000 if args.quick else args.events

    home = cached_log(events, args.configs, args.regenerate)
    app = open_app(home, None)
    scratch = Path(tempfile.mkdtemp(prefix="rollouts-bench-rebuild-"))
    try:
        head = RecorderSource(app.recorder).head()
        ceiling(app)  # warm the page cache and the topic/class caches for both sides
        a_rates: list[float] = []
        b_rates: list[float] = []
        a_cpu: list[float] = []
        b_cpu: list[float] = []
        for run in range(args.runs):
            count, seconds, cpu = ceiling(app)
            assert count == head
            a_rates.append(count / seconds)
            a_cpu.append(count / cpu)
            seconds, cpu = rebuild(app, scratch)
            b_rates.append(head / seconds)
            b_cpu.append(head / cpu)
            print(
                f"run {run + 1}: ceiling {a_rates[-1]:,.0f} ev/s ({a_cpu[-1]:,.0f} per CPU s), "
                f"rebuild {b_rates[-1]:,.0f} ev/s ({b_cpu[-1]:,.0f} per CPU s)",
                file=sys.stderr,
            )
        a, b = statistics.median(a_rates), statistics.median(b_rates)
        ac, bc = statistics.median(a_cpu), statistics.median(b_cpu)
        result = {
            "bench": "rebuild",
            "events": head,
            "configs": args.configs,
            "runs": args.runs,
            "ceiling_events_per_s": round(a),
            "rebuild_events_per_s": round(b),
            "ratio": round(b / a, 3),
            "goal": GOAL,
            "ok": b / a >= GOAL,
            "ceiling_events_per_cpu_s": round(ac),
            "rebuild_events_per_cpu_s": round(bc),
            "ratio_cpu": round(bc / ac, 3),
            "log": str(home.events_db),
        }
        print(f"log: {head:,} events ({home.events_db})")
        print(f"(a) eventsourcing read+decode ceiling: {a:,.0f} events/s, {ac:,.0f} per CPU second")
        print(f"(b) ProjectionStore.rebuild(), all three: {b:,.0f} events/s, {bc:,.0f} per CPU second")
        verdict = "OK" if b / a >= GOAL else "BELOW GOAL"
        print(f"ratio (b)/(a): {b / a:.3f} wall, {bc / ac:.3f} CPU (goal >= {GOAL}): {verdict}")
        print(f"median of {args.runs} runs each, interleaved")
        if not args.no_check:
            rows = check_equal(app, scratch)
            print(f"I5: the rebuilt views equal the views caught up batch by batch ({rows:,} rows)")
            result["i5_rows_equal"] = rows
        if args.profile:
            profile = cProfile.Profile()
            rebuild(app, scratch, profile)
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(30)
            print(out.getvalue(), file=sys.stderr)
        print(json.dumps(result))
        return 0
    finally:
        app.close()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
