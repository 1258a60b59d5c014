#!/usr/bin/env python
"""The floor under figure 12: how fast the processes of a stepped rollout alone can run, beside plain e2e.

    python bench/performance/steps_floor.py [--rollouts 150] [--runs 3]

Each run measures, one after the other, figure 6's plain end to end (one controller, `true`
deployers, ROLLOUTS at once) and the processes that figure 12's configs (3 steps x 2
measurements) make for the same number of rollouts: 9 `true` processes each, started through
LocalRuntime as the controller starts them (the fork server, a shim per process, the runtime's
table), in 9 waves of ROLLOUTS, each wave once the one before has ended; no controller, no log.
The ratio of the two is the most figure 12 could reach against plain e2e on this machine while its
processes are real; bench/run.py's figure 12 takes the same floor (bench/performance/steps.py's
processes_alone, measured in its run) as its baseline.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.processes import e2e_run  # noqa: E402
from bench.performance.steps import PROCESSES, processes_alone  # noqa: E402
from bench.shared.harness import Workspace  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=150)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    ws = Workspace()
    try:
        for _ in range(args.runs):
            plain = e2e_run(ws, 1, args.rollouts)
            alone = processes_alone(args.rollouts)
            load = os.getloadavg()[0]
            print(f"plain e2e {plain:.1f}/s; {PROCESSES} processes a rollout alone {alone:.1f}/s;", end=" ")
            print(f"floor {alone / plain:.2f}x (load {load:.1f})", flush=True)
    finally:
        ws.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
