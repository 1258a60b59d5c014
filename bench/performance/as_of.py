#!/usr/bin/env python
"""`--as-of` on one config of a long log, beside the same command on the live view, in one run.

    python bench/performance/as_of.py [--events 1000000] [--runs 15]

On bench/performance/generate.py's cached log (about `--events` events over 300 configs), for one config at
three positions (a quarter, half and all of the log):

  in-process   the time of `rollout history NAME --as-of P -o json` run through click in this
               process (the command's own work: fold the config's streams up to P into a private
               view, then the live view's query), against `rollout history NAME -o json` on the
               live view, caught up beforehand; goal: the as-of median under 300 ms
  subprocess   the same two commands as a user runs them (`python -m rollouts ...`), interpreter
               start included, median wall time

The answer is checked too: as-of the head equals the live view's answer.
The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rollouts.adapters.cli import cli
from rollouts.adapters.home import Home
from rollouts.adapters.service.bootstrap import open_app

ROOT = Path(__file__).resolve().parents[2]  # the checkout, where `bench` is
if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(ROOT)
from bench.performance.generate import cached_log  # noqa: E402

GOAL_MS = 300.0


def in_process(home: Home, args: list[str]) -> tuple[float, str]:
    result = CliRunner().invoke(cli, ["--home", str(home.path), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    t = time.perf_counter()
    result = CliRunner().invoke(cli, ["--home", str(home.path), *args], catch_exceptions=False)
    return (time.perf_counter() - t) * 1000, result.output


def as_user(home: Home, args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rollouts", "--home", str(home.path), *args], env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    return (time.perf_counter() - t) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--configs", type=int, default=300)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--config", default="svc-007")
    args = parser.parse_args(argv)
    home = cached_log(args.events, args.configs, False)
    live = ["rollout", "history", args.config, "-o", "json"]
    _, answer = in_process(home, live)  # catches the live views up once, outside the timing
    app = open_app(home, None)
    head = app.recorder.max_notification_id() or 0
    app.close()
    _, at_head = in_process(home, [*live, "--as-of", str(head)])
    assert json.loads(at_head) == json.loads(answer), "as-of the head differs from the live view"

    ours: dict[int, list[float]] = {p: [] for p in (head // 4, head // 2, head)}
    base: list[float] = []
    shell_ours: list[float] = []
    shell_base: list[float] = []
    for _ in range(args.runs):
        base.append(in_process(home, live)[0])
        for position, times in ours.items():
            times.append(in_process(home, [*live, "--as-of", str(position)])[0])
    for _ in range(max(3, args.runs // 3)):
        shell_base.append(as_user(home, live))
        shell_ours.append(as_user(home, [*live, "--as-of", str(head // 2)]))

    live_ms = statistics.median(base)
    summary: dict[str, Any] = {"events": head, "config": args.config, "live_ms": round(live_ms, 1)}
    for position, times in ours.items():
        value = statistics.median(times)
        summary[f"as_of_{position}"] = {
            "value": round(value, 1),
            "baseline": round(live_ms, 1),
            "ratio": round(value / live_ms, 2),
            "p90": round(sorted(times)[int(len(times) * 0.9) - 1], 1),
            "goal": f"<{GOAL_MS:.0f} ms",
            "unit": "ms",
            "ok": value < GOAL_MS,
        }
        print(f"--as-of {position:>9,}: median {value:6.1f} ms (live view {live_ms:.1f} ms), goal <{GOAL_MS:.0f} ms")
    summary["subprocess"] = {
        "as_of_ms": round(statistics.median(shell_ours), 1),
        "live_ms": round(statistics.median(shell_base), 1),
    }
    print(
        f"as a user runs it (interpreter start included): as-of {summary['subprocess']['as_of_ms']:.0f} ms,"
        f" live {summary['subprocess']['live_ms']:.0f} ms"
    )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
