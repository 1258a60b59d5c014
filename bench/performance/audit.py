"""`rollouts audit`, the whole process, against eventsourcing's own read+decode of the same log, measured in one run.

    python bench/performance/audit.py                  # 1,000,000 events (generated once, cached under /tmp)
    python bench/performance/audit.py --quick          # 20,000 events
    python bench/performance/audit.py --events 200000 --runs 5

The log is bench/performance/generate.py's (cached_log), copied into a scratch home whose views are rebuilt
first (untimed): the cache is shared and never written here. Measured, median of --runs runs each,
interleaved:
  (a) ceiling: recorder.select_notifications(...) and mapper.to_domain_event(n) for every
      notification, in this process (as bench/performance/rebuild.py measures it);
  (b) ours: `python -m rollouts audit` on the scratch home, the whole process from its start to its
      exit (it must say ok: exit 0).
Both are reported in events of the log per second; the goal is (b)/(a) >= 0.6 (issue #49). The last line of
output is one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.generate import cached_log  # noqa: E402
from bench.performance.rebuild import ceiling  # noqa: E402
from rollouts.adapters.service.bootstrap import open_app  # noqa: E402
from rollouts.adapters.store.reader import RecorderSource  # noqa: E402

GOAL = 0.6


def scratch_home(cached: Path) -> Path:
    """A home of its own holding a copy of the cached log, its views rebuilt (untimed)."""
    home = Path(tempfile.mkdtemp(prefix="rollouts-bench-audit-"))
    for path in cached.glob("events.db*"):
        shutil.copy2(path, home / path.name)
    rollouts(home, "projections", "rebuild")
    return home


def rollouts(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROLLOUTS_HOME": str(home)}
    env.pop("ROLLOUTS_STORE", None)
    argv = [sys.executable, "-m", "rollouts", *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"rollouts {' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def audit(home: Path) -> tuple[float, float]:
    """One whole `rollouts audit`: (wall seconds, CPU seconds of it and its processes)."""
    t, cpu = time.perf_counter(), children_cpu()
    done = rollouts(home, "audit")
    seconds, cpu = time.perf_counter() - t, children_cpu() - cpu
    if not done.stdout.startswith("ok:"):
        raise SystemExit(f"audit did not say ok: {done.stdout}")
    return seconds, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="log size (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="20,000 events")
    parser.add_argument("--configs", type=int, default=300, help="configs in the generated history")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement (median)")
    parser.add_argument("--regenerate", action="store_true", help="ignore the cached log")
    args = parser.parse_args(argv)
    events = 20_000 if args.quick else args.events

    cached = cached_log(events, args.configs, args.regenerate)
    home = scratch_home(cached.path)
    app = open_app(cached, None)  # read only
    try:
        head = RecorderSource(app.recorder).head()
        ceiling(app)  # warm the page cache and the topic/class caches
        a_rates: list[float] = []
        b_rates: list[float] = []
        b_cpu: list[float] = []
        for run in range(args.runs):
            count, seconds, _ = ceiling(app)
            assert count == head
            a_rates.append(count / seconds)
            seconds, cpu = audit(home)
            b_rates.append(head / seconds)
            b_cpu.append(cpu)
            print(
                f"run {run + 1}: read+decode {a_rates[-1]:,.0f} ev/s, audit {seconds:.2f} s"
                f" ({b_rates[-1]:,.0f} ev/s, cpu {cpu:.2f} s)",
                file=sys.stderr,
            )
        a, b = statistics.median(a_rates), statistics.median(b_rates)
        result = {
            "bench": "audit",
            "events": head,
            "configs": args.configs,
            "runs": args.runs,
            "ceiling_events_per_s": round(a),
            "audit_events_per_s": round(b),
            "audit_seconds": round(head / b, 2),
            "audit_cpu_seconds": round(statistics.median(b_cpu), 2),
            "ratio": round(b / a, 3),
            "goal": GOAL,
            "ok": b / a >= GOAL,
            "log": str(cached.events_db),
        }
        print(f"log: {head:,} events ({cached.events_db})")
        print(f"(a) eventsourcing read+decode ceiling: {a:,.0f} events/s")
        print(f"(b) rollouts audit, whole process: {head / b:.2f} s, {b:,.0f} events/s")
        verdict = "OK" if b / a >= GOAL else "BELOW GOAL"
        print(f"ratio (b)/(a): {b / a:.3f} (goal >= {GOAL}): {verdict}")
        print(f"median of {args.runs} runs each, interleaved")
        print(json.dumps(result))
        return 0
    finally:
        app.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
