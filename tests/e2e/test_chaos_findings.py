"""Regression tests for the failures the chaos runner (bench/chaos/run.py) found, one per failure.

Each test is named after what went wrong, and each failed before its fix.
The deployer's own output is the ground truth, as in test_seed_scenarios.py.
"""

from __future__ import annotations

import json
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ground_truth import check, group_alive, kill_leftovers, read, wait_for

from rollouts.adapters.home import Home
from rollouts.adapters.service import commands
from rollouts.adapters.service.application import RolloutsApp, new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.store.reader import RecorderSource
from rollouts.domain.spec import Spec
from rollouts.projections.store import BY_NAME, ProjectionStore

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


SUPERSEDED = "web-1-deploy-1"
SUCCESSOR = "web-2-deploy-1"


@pytest.fixture
def gt(tmp_path: Path, rollouts: Any) -> Iterator[Path]:
    path = tmp_path / "ground-truth"
    yield path
    kill_leftovers(path, rollouts.home)


def stubborn_first_revision(gt: Path, beats: Path) -> list[str]:
    """Revision 1 ignores SIGTERM and writes a beat every 50 ms until SIGKILLed; later ones end at once."""
    out, beat = shlex.quote(str(gt)), shlex.quote(str(beats))
    script = (
        f'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N) $$" >> {out}; '
        'if [ "$ROLLOUT_VERSION" = 1 ]; then trap "" TERM; '
        f'while :; do echo "$(date +%s.%N)" >> {beat}; sleep 0.05; done; fi; '
        f'sleep 0.1; echo "end $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {out}'
    )
    return ["sh", "-c", script]


def last_beat(beats: Path) -> float:
    return float(beats.read_text().split()[-1])


def ok(result: Any) -> Any:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result


def runtime_row(home: Path, name: str) -> sqlite3.Row | None:
    with sqlite3.connect(home / "runtime" / "runtime.db", timeout=30) as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT * FROM deployers WHERE name = ?", (name,)).fetchone()


def latest_phase(rollouts: Any, name: str) -> str:
    return json.loads(ok(rollouts.sh("rollout", "history", name, "-o", "json")).stdout)[-1]["phase"]


def controllers(rollouts: Any, count: int) -> list[subprocess.Popen[str]]:
    argv = [sys.executable, "-m", "rollouts", "controller", "run", "--interval", "0.05", "--timeout", "90"]
    return [
        subprocess.Popen(argv, cwd=rollouts.cwd, env=rollouts.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]


def supersede_once_running(rollouts: Any, gt: Path, beats: Path) -> None:
    ok(rollouts.run("config", "create", "web", "--", *stubborn_first_revision(gt, beats)))
    ok(rollouts.run("rollout", "latest", "web"))
    wait_for(lambda: beats.exists() and beats.read_text(), what=f"{SUPERSEDED} to run")
    ok(rollouts.sh("rollout", "latest", "web", "--supersede"))


def assert_successor_started_after_the_superseded_died(gt: Path, beats: Path) -> None:
    starts = {run.name: run.start for run in read(gt)}
    assert set(starts) == {SUPERSEDED, SUCCESSOR}, starts
    assert last_beat(beats) < starts[SUCCESSOR], (
        f"{SUPERSEDED} was still alive {last_beat(beats) - starts[SUCCESSOR]:.2f}s after {SUCCESSOR} started"
    )


def test_deployer_ignoring_sigterm_still_dying_when_a_twin_controller_started_the_next_revision(
    rollouts: Any, gt: Path, tmp_path: Path
) -> None:
    """Chaos seed 11: controller A committed 'stopped' and waited out its SIGTERM grace;
    controller B counted 'stopped' as ended, confirmed the cancel and started revision 2
    beside revision 1 (4.85 s of overlap, invisible to `audit`)."""
    beats = tmp_path / "beats"
    running = controllers(rollouts, 2)
    try:
        supersede_once_running(rollouts, gt, beats)
        wait_for(lambda: latest_phase(rollouts, "web") == "Complete", 40, "revision 2 to complete")
    finally:
        for proc in running:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    assert_successor_started_after_the_superseded_died(gt, beats)
    check(gt, [dict(runtime_row(rollouts.home, n) or {}) for n in (SUPERSEDED, SUCCESSOR)], exactly_once=[SUCCESSOR])
    ok(rollouts.sh("audit"))


def test_controller_killed_in_its_stop_grace_left_the_deployment_waiting_for_ever(
    rollouts: Any, gt: Path, tmp_path: Path
) -> None:
    """The stopper commits 'stopped', then dies before its SIGKILL: the deployer ran on and
    the row never got ended_at, so no later controller ever ended the attempt. Now the next
    controller to observe the row past its stop deadline kills the group and ends it."""
    beats = tmp_path / "beats"
    (first,) = controllers(rollouts, 1)
    supersede_once_running(rollouts, gt, beats)
    wait_for(lambda: (runtime_row(rollouts.home, SUPERSEDED) or {"state": ""})["state"] == "stopped", 20)
    first.kill()  # in its grace: SIGTERM sent and ignored, SIGKILL not yet
    first.wait()
    row = runtime_row(rollouts.home, SUPERSEDED)
    assert row is not None and row["ended_at"] is None and group_alive(row["pgid"])
    time.sleep(0.3)
    assert time.time() - last_beat(beats) < 0.3, "the superseded deployer should still run here"

    started = time.monotonic()
    ok(rollouts.sh("controller", "run", "--interval", "0.05", "--until-idle", "--timeout", "40"))
    assert time.monotonic() - started < 30
    assert latest_phase(rollouts, "web") == "Complete"
    assert not group_alive(row["pgid"]), "the superseded deployer outlived the recovery"
    assert_successor_started_after_the_superseded_died(gt, beats)
    ok(rollouts.sh("audit"))


def test_supersede_refused_when_the_previous_revision_ended_between_two_reads(tmp_path: Path) -> None:
    """Chaos: `latest --supersede` read the config (v1 open), then v1 failed and released the
    slot, then it read v1 as Failed and was refused with "CancelRequested is not allowed in
    phase Failed". The torn-read check compared against versions taken after the decision
    had applied its own events, so it missed the racing save. The decision is now taken again."""
    home = Home(tmp_path / "home")
    home.ensure()
    user, controller = open_app(home, None), open_app(home, None)
    meta = new_meta("test@rollouts")
    user.create_config("web", Spec(command=["true"]), meta)
    user.latest("web", None, False, meta)
    step = commands.claim(controller, "web", 1, "ctl", new_meta("ctl"))
    assert step is not None
    commands.report(controller, "web", 1, lambda d: d.report_created(step, "local:x", meta), meta)
    commands.report(controller, "web", 1, lambda d: d.report_started(step, meta), meta)

    read_deployment = RolloutsApp.deployment
    raced: list[bool] = []

    def deployment_read_after_a_racing_failure(config: Any, revision: int) -> Any:
        if not raced:
            raced.append(True)  # between the config read and this one, v1 fails and frees the slot
            commands.report(controller, "web", 1, lambda d: d.report_exited(step, 1, "exit 1", meta), meta)
        return read_deployment(user, config, revision)

    user.deployment = deployment_read_after_a_racing_failure  # type: ignore[method-assign]
    assert user.latest("web", None, True, meta) == 2
    assert raced
    del user.deployment
    config = user.config("web")
    assert config.latest_revision == 2
    assert user.deployment(config, 1).phase == "Failed"
    user.close()
    controller.close()


def populate(home: Path, events: int) -> None:
    """Ten configs, rolled out (superseding) until the log holds `events` events."""
    app = open_app(Home(home), None)
    meta = new_meta("test@rollouts")
    for i in range(10):
        app.create_config(f"app{i}", Spec(command=["true"]), meta)
    while (app.recorder.max_notification_id() or 0) < events:
        for i in range(10):
            app.latest(f"app{i}", None, True, meta)
    app.close()


class Gated:
    """A log source whose first read waits for `go`, with `reading` set once it is there."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.reading = threading.Event()
        self.go = threading.Event()

    def head(self) -> int:
        return self.source.head()

    def read(self, after: int, limit: int) -> Any:
        self.reading.set()
        assert self.go.wait(30)
        return self.source.read(after, limit)

    def identity(self) -> str:
        return self.source.identity()


def test_concurrent_shadow_rebuilds_failed_with_disk_io_error(tmp_path: Path) -> None:
    """Chaos: a shadow rebuild removed stray files after releasing the catalog lock, so it
    deleted the file that the next, queued shadow rebuild had just started ("disk I/O error")."""
    home = Home(tmp_path / "home")
    home.ensure()
    populate(home.path, 1500)
    app = open_app(home, None)
    folder, history = home.projections, BY_NAME["history"]
    gated = Gated(RecorderSource(app.recorder))
    first, second = ProjectionStore(folder, gated), ProjectionStore(folder, RecorderSource(app.recorder))
    gated.go.set()
    first.catch_up([history])
    gated.go.clear()
    files_before = set(folder.glob("history-*.db"))
    remove_strays = first.catalog.remove_strays

    def remove_once_the_next_build_had_time_to_begin(name: str, keep: set[Path]) -> None:
        deadline = time.monotonic() + 2  # under the lock (the fix) nobody can begin: wait it out
        while time.monotonic() < deadline and not set(folder.glob("history-*.db")) - keep - files_before:
            time.sleep(0.01)
        remove_strays(name, keep)

    first.catalog.remove_strays = remove_once_the_next_build_had_time_to_begin  # type: ignore[method-assign]
    failures: list[BaseException] = []

    def rebuild(store: ProjectionStore) -> None:
        try:
            store.rebuild([history], shadow=True)
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            failures.append(error)

    builders = [threading.Thread(target=rebuild, args=(store,)) for store in (first, second)]
    builders[0].start()
    assert gated.reading.wait(30)  # the first holds the catalog lock, mid-build
    builders[1].start()
    time.sleep(0.3)  # the second now waits for the lock
    gated.go.set()
    for thread in builders:
        thread.join(60)
    assert not failures, failures
    for store in (first, second):
        store.close()
    store = ProjectionStore(folder, RecorderSource(app.recorder))
    current = store.catalog.current("history")
    assert current is not None and current.exists(), "the catalog points at a deleted file"
    assert [(row["name"], row["lag"], row["stale"]) for row in store.status() if row["name"] == "history"] == [
        ("history", 0, False)
    ]
    store.close()
    app.close()
