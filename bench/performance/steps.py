"""Figure 12 of bench/run.py: steps and verification (DESIGN 7.6).

- verify_overhead_ms: the controller's own time per measurement, the measurement process's run time
  excluded: from the event that made the measurement due to its runtime row's creation, plus from the
  row's end to the event that recorded its outcome (median over the measurements of one rollout run
  alone: with 30 at once each also waits for the others' work in the controller's passes).
- e2e_steps_rollouts_per_s: rollouts/s end to end for configs of 3 steps with 2 measurements per step
  at interval 0 (`true` deployers and measurements), against the steps floor of the same run
  (`processes_alone`: the same rollouts' 9 processes each through the runtime alone, as
  bench/performance/steps_floor.py measures it).
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from rollouts.adapters.home import Home
from rollouts.adapters.runtime.local import LocalRuntime
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain import ids
from rollouts.domain.spec import Spec
from rollouts.projections.records import decode

ENDED = "domain.config:DeploymentConfig.RolloutEnded"
STEPPED = Spec(command=["true"], steps=[33, 66, 100], verify=["true"], verify_count=2, verify_interval=0)
DUE = tuple(f"domain.deployment:Deployment.{t}" for t in ("DeployerSucceeded", "MeasurementRecorded"))
PROCESSES = 9  # per rollout of STEPPED: 3 deployers and 2 measurements after each


def wait_ended(app: Any, configs: set[str], after: int, timeout: float, *procs: Any) -> dict[str, str]:
    """The phase each of `configs` (config ids) ended its rollout in, following the log from `after`."""
    ended: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while not configs <= ended.keys():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(configs - ended.keys())} stepped rollouts not ended after {timeout:.0f} s")
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"controller {proc.pid} exited {proc.returncode}")
        batch = app.recorder.select_notifications(start=after, limit=500, topics=[ENDED], inclusive_of_start=False)
        for n in batch:
            ended[str(n.originator_id)] = decode(n).data["phase"]
        after = batch[-1].id if batch else after
        if not batch:
            time.sleep(0.01)
    return ended


def overhead_ms(app: Any, runtime_db: str) -> list[float]:
    """Per measurement: (row created - due) + (outcome recorded - row ended), in ms."""
    due: dict[str, datetime] = {}
    recorded: dict[str, datetime] = {}
    after = 0
    while True:
        batch = app.recorder.select_notifications(start=after, limit=1000, topics=list(DUE), inclusive_of_start=False)
        for n in batch:
            r = decode(n)
            moment = datetime.fromisoformat(r.timestamp)
            nxt = r.data.get("next")
            if nxt and nxt["kind"] == "verify":
                due[nxt["name"]] = moment
            if r.type == "MeasurementRecorded":
                recorded[r.data["name"]] = moment
        if len(batch) < 1000:
            break
        after = batch[-1].id
    found = []
    with contextlib.closing(sqlite3.connect(runtime_db)) as db:
        for name, created, ended in db.execute("SELECT name, created_at, ended_at FROM deployers"):
            if name in due and name in recorded and created and ended:
                before = datetime.fromisoformat(created) - due[name]
                later = recorded[name] - datetime.fromisoformat(ended)
                found.append((before + later).total_seconds() * 1000)
    return found


def e2e_steps_run(
    ws: Any, rollouts: int, make_configs: Any, warm_up: Any, terminal: Any, meta: Any
) -> tuple[float, float]:
    """(rollouts/s, median verify overhead ms) for `rollouts` stepped configs at once, one controller."""
    home = ws.home("e2esteps")
    app = open_app(home, None)
    names = make_configs(app, "steps", rollouts, STEPPED)
    proc = ws.controller(home, 0.05)
    try:
        warm_up(home, app, terminal(app), [proc])
        after = app.recorder.max_notification_id() or 0
        t = time.perf_counter()
        for name in names:
            app.latest(name, None, False, meta())
        ended = wait_ended(app, {str(ids.config_id(n)) for n in names}, after, 300, proc)
        elapsed = time.perf_counter() - t
        failed = [c for c, phase in ended.items() if phase != "Complete"]
        if failed:
            raise RuntimeError(f"{len(failed)} of {rollouts} stepped rollouts did not complete")
        overheads = overhead_ms(app, str(home.runtime / "runtime.db"))
    finally:
        ws.stop(proc)
        app.close()
    return rollouts / elapsed, statistics.median(overheads) if overheads else float("nan")


def processes_alone(rollouts: int) -> float:
    """The steps floor: rollouts/s if a stepped rollout cost only its processes, `PROCESSES` waves of
    `rollouts` `true` processes started through LocalRuntime as the controller starts them (the fork
    server, a shim per process, the runtime's table), each wave once the one before has ended; no
    controller, no log."""
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
