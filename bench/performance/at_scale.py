"""Figures at the sizes issue #34 names (1M events; 1,000 configs for /metrics), each measured by a script of
its own (bench/performance/: rebuild.py, audit.py, serve.py) run as a subprocess whose last line is JSON.

The scripts generate their logs once and cache them under /tmp (bench/performance/generate.py's cached_log): the first
full run spends a few minutes generating two logs of 1M events. `--quick` runs the same scripts small.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.performance.figures import Figure

BENCH = Path(__file__).resolve().parent
PYTHON = sys.executable


def script(name: str, *args: str) -> dict[str, Any]:
    """Run bench/performance/`name` with `args`; its last line of output, as JSON (its progress goes to our stderr)."""
    done = subprocess.run(
        [PYTHON, str(BENCH / name), *args], stdout=subprocess.PIPE, text=True, check=False, cwd=BENCH.parents[1]
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"bench/performance/{name} {' '.join(args)} exited {done.returncode}")
    return json.loads(lines[-1])


def bench_rebuild_at_scale(quick: bool) -> list[Figure]:
    found = script("rebuild.py", *(("--quick", "--runs", "2") if quick else ("--events", "1000000", "--runs", "3")))
    label = f"1 rebuild at scale ({found['events']:,} events) vs library read + decode"
    value, baseline = found["rebuild_events_per_s"], found["ceiling_events_per_s"]
    return [Figure("rebuild_1m_events_per_s", label, "ev/s", value, baseline, ">=1.0x")]


def bench_audit_at_scale(quick: bool) -> list[Figure]:
    found = script("audit.py", *(("--quick", "--runs", "2") if quick else ("--events", "1000000", "--runs", "3")))
    label = f"13 `rollouts audit` process ({found['events']:,} events) vs library read + decode"
    value, baseline = found["audit_events_per_s"], found["ceiling_events_per_s"]
    note = f"{found['audit_seconds']} s, cpu {found['audit_cpu_seconds']} s"
    return [Figure("audit_events_per_s", label, "ev/s", value, baseline, ">=0.6x", note=note)]


def bench_serve_at_scale(quick: bool) -> list[Figure]:
    sizes = ("--events", "20000", "--configs", "100", "--requests", "50", "--starts", "5") if quick else ()
    found = script("serve.py", *sizes)
    at = f"{found['events']:,} events, {found['configs']:,} configs"
    after, remade = found["metrics_after_event"], found["metrics_remade"]
    base = after["baseline_ms"]  # the CLI's in-process `rollout history NAME -o json`, median
    return [
        Figure("metrics_after_event_p50_ms", f"14 /metrics after one event, median ({at})", "ms",
               after["median_ms"], base, "<=1.0x"),
        Figure("metrics_after_event_p99_ms", f"14 /metrics after one event, p99 ({at})", "ms",
               after["p99_ms"], base, "<=1.0x"),
        Figure("metrics_remade_ms", f"14 /metrics made from nothing: a new server's first scrape, median ({at})", "ms",
               remade["median_ms"], remade["baseline_ms"], "<=2.0x"),
    ]  # fmt: skip
