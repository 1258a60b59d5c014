#!/usr/bin/env python
"""The floor under figure 12: how fast the processes of a stepped rollout alone can run, beside plain e2e.

    python bench/performance/steps_floor.py [--rollouts 150] [--runs 3]

Each run measures, one after the other, figure 6's plain end to end (one controller, `true`
deployers, ROLLOUTS at once) and the processes that figure 12's configs (3 steps x 2
measurements) make for the same number of rollouts: 9 `true` processes each, started through
LocalRuntime as the controller starts them (the fork server, a shim per process, the runtime's
table), in 9 waves of ROLLOUTS, each wave once the one before has ended; no controller, no log.
The ratio of the two is the most figure 12 can reach on this machine while its processes are real.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.processes import e2e_run  # noqa: E402
from bench.shared.harness import Workspace  # noqa: E402
from rollouts.adapters.home import Home  # noqa: E402
from rollouts.adapters.runtime.local import LocalRuntime  # noqa: E402

PROCESSES = 9  # per rollout of figure 12: 3 deployers and 2 measurements after each


def processes_alone(rollouts: int) -> float:
    """Rollouts/s if a stepped rollout cost only its processes: 9 waves of `rollouts` `true` processes."""
    root = Path(tempfile.mkdtemp(prefix="rollouts-floor-"))
    home = Home(root)
    home.runtime.mkdir(parents=True, exist_ok=True)
    runtime = LocalRuntime(home, heartbeat_max_age=8.0, cache_kib=256)  # as a running controller's
    try:
        runtime.start_fork_server()
        began = time.perf_counter()
        for wave in range(PROCESSES):
            with runtime.batched():
                for i in range(rollouts):
                    name = f"c{i}-1-verify-1-{wave + 1}"
                    runtime.create(name, config=f"c{i}", revision=1, attempt=1, argv=["true"], env={}, cwd=str(root))
            while runtime.active():
                time.sleep(0.005)
        return rollouts / (time.perf_counter() - began)
    finally:
        runtime.close()
        shutil.rmtree(root, ignore_errors=True)


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
