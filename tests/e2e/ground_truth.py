"""Ground truth kept outside the system: each deployer writes its own start and end to a file.

The seed-scenario tests never trust the event log or the runtime table alone
to say how often a deployer ran: every deployer is a real `sh` process that
appends `start NAME EPOCH PGID` when it begins and `end NAME EPOCH` when it
finishes, to a file the rollout system knows nothing about.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from rollouts.adapters.runtime import procs

T = TypeVar("T")
NAME = re.compile(r"^(?P<config>[a-z0-9-]+?)-(?P<version>\d+)-(?:deploy|hook-pre|hook-post)-\d+(?:-\d+)?$")


def deployer_argv(gt: Path, *, sleep: float = 0.2, gate: Path | None = None) -> list[str]:
    """A deployer that records itself in `gt`; with `gate` it waits for that file before sleeping."""
    out = shlex.quote(str(gt))
    wait = f"while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.05; done; " if gate else ""
    script = (
        f'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N) $$" >> {out}; '
        f"{wait}sleep {sleep}; "
        f'echo "end $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {out}'
    )
    return ["sh", "-c", script]


@dataclass
class Run:
    """One start of a deployer process, as the deployer itself wrote it."""

    name: str
    start: float
    pgid: int
    end: float | None = None

    @property
    def config(self) -> str:
        match = NAME.match(self.name)
        assert match, f"unexpected deployer name {self.name!r}"
        return match["config"]


def read(gt: Path) -> list[Run]:
    runs: list[Run] = []
    if not gt.exists():
        return runs
    for line in gt.read_text().splitlines():
        kind, name, stamp, *rest = line.split()
        if kind == "start":
            runs.append(Run(name, float(stamp), int(rest[0])))
        else:
            open_runs = [r for r in runs if r.name == name and r.end is None]
            assert open_runs, f"'end' of {name} without a 'start': {line!r}"
            open_runs[-1].end = float(stamp)
    return runs


def starts(gt: Path) -> Counter[str]:
    return Counter(r.name for r in read(gt))


def epoch(iso: str | None) -> float | None:
    return None if iso is None else datetime.fromisoformat(iso).timestamp()


def check(
    gt: Path,
    runtime_rows: Iterable[Mapping[str, Any]],
    *,
    exactly_once: Iterable[str] = (),
    never: Iterable[str] = (),
) -> list[Run]:
    """Assert I1 and I2 as the processes saw them; returns the runs.

    Every deployer started at most once (`exactly_once` names exactly once,
    `never` names not at all), and no two deployers of one config were alive
    at the same time. A deployer killed before writing `end` counts as alive
    until the runtime's `ended_at`, or for ever if the runtime has none.
    """
    runs = read(gt)
    counts = Counter(r.name for r in runs)
    twice = {name: n for name, n in counts.items() if n > 1}
    assert not twice, f"deployers started more than once: {twice}"
    for name in exactly_once:
        assert counts[name] == 1, f"{name} started {counts[name]} times, expected once ({dict(counts)})"
    for name in never:
        assert counts[name] == 0, f"{name} started {counts[name]} times, expected never"
    ended = {row["name"]: epoch(row.get("ended_at")) for row in runtime_rows}
    by_config: dict[str, list[tuple[float, float, str]]] = {}
    for r in runs:
        until = r.end if r.end is not None else ended.get(r.name) or math.inf
        by_config.setdefault(r.config, []).append((r.start, until, r.name))
    for config, intervals in by_config.items():
        intervals.sort()
        for (_, prev_end, prev), (start, _, name) in zip(intervals, intervals[1:], strict=False):
            assert start >= prev_end, (
                f"{config}: {name} started at {start:.3f} while {prev} was alive until {prev_end:.3f}"
            )
    return runs


def group_alive(pgid: int) -> bool:
    return not procs.group_gone(pgid)


def kill_leftovers(gt: Path, home: Path) -> None:
    """Test teardown: stop what still runs so that no test leaks processes into the next."""
    db = home / "runtime" / "runtime.db"
    if db.exists():
        with sqlite3.connect(db, timeout=30) as conn:
            shims = conn.execute("SELECT shim_pid, shim_start FROM deployers WHERE shim_pid IS NOT NULL").fetchall()
        for pid, start in shims:
            if procs.is_alive(pid, start):
                os.kill(pid, signal.SIGKILL)
    for run in read(gt):
        if group_alive(run.pgid):
            procs.signal_group(run.pgid, signal.SIGKILL)


def wait_for(check_: Callable[[], T], timeout: float = 20.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while not (result := check_()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return result


DRIVER = """
import os, signal, sys

from rollouts.adapters.service import commands
from rollouts.adapters.controller.loop import Controller, claimant_id
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.home import Home
from rollouts.adapters.store.reader import RecorderSource
from rollouts.adapters.runtime.local import LocalRuntime
from rollouts.projections.store import ProjectionStore

home, point = Home(sys.argv[1]), sys.argv[2]
app = open_app(home, None)
runtime = LocalRuntime(home.path)
store = ProjectionStore(home.projections, RecorderSource(app.recorder))


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


if point == "before-create":  # claim committed, runtime.create not called yet
    runtime.create = die
elif point == "after-insert":  # runtime row committed, shim not spawned yet
    runtime._spawn = die
elif point == "after-create":  # deployer spawned, DeployerCreated not appended yet
    commands.report = die
else:
    sys.exit(f"unknown point {point}")
controller = Controller(app, store, runtime, claimant_id(home), "driver@test", os.getcwd())
controller.run(once=False, until_idle=True, interval=0.05, timeout=20)
sys.exit(3)  # the kill point was never reached
"""


def run_driver(home: Path, point: str, *, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """A controller in its own process that SIGKILLs itself at `point` (deterministic crash)."""
    return subprocess.run(
        [sys.executable, "-c", DRIVER, str(home), point],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=30,
    )
