"""Figures at the sizes issues #34 and #49 name (1M events; 1,000 configs for /metrics; 2M events against 1M),
each measured by a script of its own (bench/performance/: rebuild.py, audit.py, serve.py, growth.py) run as a
subprocess whose last line is JSON.

The scripts generate their logs once and cache them under /tmp (bench/performance/generate.py's cached_log): the first
full run spends a few minutes generating two logs of 1M events and one of 2M. `--quick` runs the same scripts small.
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


GROWTH_CLI = {  # growth.py's command -> (figure name, what the label calls it)
    "status": ("cli_2m_status_ms", "`rollout status NAME`"),
    "history_json": ("cli_2m_history_json_ms", "`rollout history NAME -o json`"),
    "latest": ("cli_2m_latest_ms", "`rollout latest NAME --supersede`"),
}
GROWTH_RSS = {
    "rebuild": ("peak_rss_2m_rebuild_mib", "`rollouts projections rebuild`"),
    "audit": ("peak_rss_2m_audit_mib", "`rollouts audit`"),
}


def growth(part: str, quick: bool) -> tuple[dict[str, Any], str]:
    """growth.py's figures of `part` (cli or rss), and the sizes they were measured at, for the labels."""
    found = script("growth.py", "--part", part, *(("--quick",) if quick else ()))
    return found[part], f"{found['large']:,} events vs {found['small']:,}"


def bench_cli_growth(quick: bool) -> list[Figure]:
    found, at = growth("cli", quick)
    figures = []
    for command, (name, what) in GROWTH_CLI.items():
        f = found[command]
        label = f"17 {what} process at {at}"
        note = f"runs ms, large: {f['runs']['large']}; small: {f['runs']['small']}"
        figures.append(Figure(name, label, "ms", f["value"], f["baseline"], f["goal"], note=note))
    return figures


def bench_rss_growth(quick: bool) -> list[Figure]:
    found, at = growth("rss", quick)
    figures = []
    for command, (name, what) in GROWTH_RSS.items():
        f = found[command]
        label = f"18 {what} peak RSS of its processes at {at}"
        seconds = ", ".join(f"{s} s at {int(size):,}" for size, s in f["seconds"].items())
        note = f"{f['note']}; wall, median: {seconds}"
        figures.append(Figure(name, label, "MiB", f["value"], f["baseline"], f["goal"], note=note))
    return figures
