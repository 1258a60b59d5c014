"""The seed scenarios of DESIGN section 8, end to end with real processes and the real CLI.

Each scenario is one of the ways OpenShift's DeploymentConfig controller ran a
deployer twice, or ran it beside a newer one. The truth is taken outside the
system: every deployer appends its own start and end to a file (see
ground_truth.py), and each test checks that file, then `rollouts audit`.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError
from ground_truth import check, deployer_argv, group_alive, kill_leftovers, read, run_driver, starts, wait_for

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

FREEZE = {"ROLLOUTS_FREEZE_PROJECTIONS": "1"}
CREATIONS = ("DeployerClaimed", "DeployerCreated", "HookCreated")


# -- fixtures and helpers ------------------------------------------------------


@pytest.fixture
def gt(tmp_path: Path, rollouts: Any) -> Iterator[Path]:
    """The ground-truth file; whatever still runs at the end of the test is killed."""
    path = tmp_path / "ground-truth"
    yield path
    kill_leftovers(path, rollouts.home)


@pytest.fixture
def background(rollouts: Any, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `rollouts ARGS...` as a background process (output to a file); ended at teardown."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        log = open(tmp_path / f"background-{len(started)}.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "rollouts", *args],
            cwd=rollouts.cwd,
            env=rollouts.env,
            text=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        (tmp_path / f"background-{len(started)}.log").rename(tmp_path / f"background-{len(started)}-pid{proc.pid}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def ok(result: Any) -> Any:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result


def cli(rollouts: Any, *args: str, sh: bool = False) -> Any:
    """The CLI in-process (fast), or as a subprocess with `sh` (while other processes use the home)."""
    if sh:
        return rollouts.sh(*args)
    return rollouts.run(*args)


def as_json(result: Any) -> Any:
    return json.loads(ok(result).stdout)


def history(rollouts: Any, name: str, *, sh: bool = False) -> list[dict[str, Any]]:
    return as_json(cli(rollouts, "rollout", "history", name, "-o", "json", sh=sh))


def latest_row(rollouts: Any, name: str, *, sh: bool = False) -> dict[str, Any]:
    return history(rollouts, name, sh=sh)[-1]


def deployers(rollouts: Any) -> list[dict[str, Any]]:
    return as_json(cli(rollouts, "deployers", "list", "--all", "-o", "json"))


def events(rollouts: Any, *, sh: bool = False) -> list[dict[str, Any]]:
    return as_json(cli(rollouts, "events", "-o", "json", sh=sh))


def creations(rollouts: Any, *, sh: bool = False) -> list[tuple[str, str]]:
    """(type, deployer name) of every event that starts a deployer's life, in log order."""
    return [(e["type"], e["data"]["name"]) for e in events(rollouts, sh=sh) if e["type"] in CREATIONS]


def created_names(rollouts: Any, *, sh: bool = False) -> list[str]:
    return [name for kind, name in creations(rollouts, sh=sh) if kind != "DeployerClaimed"]


def controller(rollouts: Any, *args: str, env: dict[str, str] | None = None) -> Any:
    return ok(rollouts.sh("controller", "run", "--interval", "0.05", *args, env=env))


def until_idle(rollouts: Any) -> Any:
    return controller(rollouts, "--until-idle", "--timeout", "20")


def wait_phase(rollouts: Any, name: str, *phases: str, timeout: float = 20) -> dict[str, Any]:
    """Poll until NAME's latest deployment is in one of `phases`."""

    def done() -> dict[str, Any] | None:
        row = latest_row(rollouts, name)
        return row if row["phase"] in phases else None

    return wait_for(done, timeout, f"{name} to reach {phases}")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0


def finish(rollouts: Any, gt: Path, **expect: Any) -> None:
    """The checks that end every scenario: the ground truth, then `rollouts audit`."""
    check(gt, deployers(rollouts), **expect)
    ok(cli(rollouts, "audit"))


def make_config(rollouts: Any, name: str, argv: list[str]) -> None:
    ok(cli(rollouts, "config", "create", name, "--", *argv))


def snapshot(home: Path, to: Path) -> Path:
    """Copy the projections folder away (no controller runs while this is called)."""
    gc.collect()  # close connections the in-process CLI left behind
    shutil.copytree(home / "projections", to)
    return to


def restore(copy: Path, home: Path) -> None:
    gc.collect()
    shutil.rmtree(home / "projections")
    shutil.copytree(copy, home / "projections")


def desired_rows(folder: Path) -> list[tuple[str, int]]:
    """(phase, created) of each row of the desired view in a projections folder."""
    with sqlite3.connect(folder / "catalog.db") as catalog:
        (file,) = catalog.execute("SELECT file FROM current WHERE name = 'desired'").fetchone()
    with sqlite3.connect(folder / file) as db:
        return db.execute("SELECT phase, created FROM open_deployments ORDER BY stream").fetchall()


# -- 1. conflict after create --------------------------------------------------


def test_phase_write_conflicting_after_create_does_not_create_twice(
    rollouts: Any, gt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rival writer lands between the controller's load and its DeployerCreated save.

    The controller here runs in-process so that the rival (`rollout latest
    --supersede` from another process) can be timed exactly: after
    runtime.create spawned the deployer and before the append of
    DeployerCreated. The append conflicts for real (IntegrityError); the
    write is decided again on fresh state and the deployer is never created
    a second time. Another controller process then finishes the rollouts.
    """
    from rollouts.adapters.controller.loop import Controller, claimant_id
    from rollouts.adapters.home import Home
    from rollouts.adapters.runtime.local import LocalRuntime
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.store.reader import RecorderSource
    from rollouts.projections.store import ProjectionStore

    make_config(rollouts, "web", deployer_argv(gt, sleep=0.5))
    ok(cli(rollouts, "rollout", "latest", "web"))
    home = Home(rollouts.home)
    app = open_app(home, None)
    runtime = LocalRuntime(home.path)
    store = ProjectionStore(home.projections, RecorderSource(app.recorder))
    ctl = Controller(app, store, runtime, claimant_id(home), "tester@test", str(rollouts.cwd))
    creates: list[str] = []
    conflicts: list[Exception] = []
    rival: list[Any] = []
    real_create, real_save = runtime.create, app.save

    def create(name: str, **kwargs: Any) -> None:
        creates.append(name)
        real_create(name, **kwargs)

    def save(*aggregates: Any, **kwargs: Any) -> Any:
        if creates and not rival:  # the first write after the deployer was spawned
            rival.append(ok(rollouts.sh("rollout", "latest", "web", "--supersede")))
            try:
                return real_save(*aggregates, **kwargs)
            except IntegrityError as error:
                conflicts.append(error)
                raise
        return real_save(*aggregates, **kwargs)

    monkeypatch.setattr(runtime, "create", create)
    monkeypatch.setattr(app, "save", save)
    try:
        for _ in range(4):  # claim and create v1 (the conflict), stop and cancel v1, claim and create v2, ...
            ctl.reconcile()
    finally:
        runtime.close()
        app.close()
    assert rival and rival[0].stdout.strip() == "2"
    assert len(conflicts) == 1, "the rival write did not make the DeployerCreated append conflict"
    assert creates[0] == "web-1-deploy-1" and creates.count("web-1-deploy-1") == 1

    until_idle(rollouts)
    v1, v2 = history(rollouts, "web")
    assert (v1["phase"], v1["reason"]) == ("Failed", "cancelled")
    assert v2["phase"] == "Complete"
    assert created_names(rollouts) == ["web-1-deploy-1", "web-2-deploy-1"]
    finish(rollouts, gt, exactly_once=["web-1-deploy-1", "web-2-deploy-1"])


# -- 2. deleted running deployer -----------------------------------------------


def test_deleted_running_deployer_fails_and_is_not_recreated(
    rollouts: Any, gt: Path, tmp_path: Path, background: Callable[..., subprocess.Popen[str]]
) -> None:
    """`deployers delete` on a running deployer: Failed (lost), never re-created; retry runs -deploy-2."""
    gate = tmp_path / "gate"
    make_config(rollouts, "web", deployer_argv(gt, sleep=0.1, gate=gate))
    ok(cli(rollouts, "rollout", "latest", "web"))
    ctl = background("controller", "run", "--interval", "0.05", "--timeout", "40")
    wait_for(lambda: starts(gt)["web-1-deploy-1"] == 1, what="web-1-deploy-1 to start")

    ok(rollouts.sh("deployers", "delete", "web-1-deploy-1"))
    failed = wait_phase(rollouts, "web", "Failed", "Complete")
    assert failed["phase"] == "Failed"
    assert "lost" in failed["reason"] and "deleted" in failed["reason"], failed["reason"]

    time.sleep(1.0)  # some twenty more passes of the running controller
    controller(rollouts, "--once")
    assert [(d["name"], d["state"]) for d in deployers(rollouts)] == [("web-1-deploy-1", "deleted")]
    assert starts(gt) == {"web-1-deploy-1": 1}
    assert created_names(rollouts, sh=True) == ["web-1-deploy-1"]

    gate.touch()
    ok(cli(rollouts, "rollout", "retry", "web"))
    done = wait_phase(rollouts, "web", "Complete", "Failed")
    assert (done["phase"], done["attempt"]) == ("Complete", 2)
    stop(ctl)
    assert created_names(rollouts) == ["web-1-deploy-1", "web-1-deploy-2"]
    runs = {r.name: r for r in read(gt)}
    assert runs["web-1-deploy-1"].end is None and runs["web-1-deploy-2"].end is not None
    finish(rollouts, gt, exactly_once=["web-1-deploy-1", "web-1-deploy-2"])


# -- 3. stale re-queued event --------------------------------------------------


def test_stale_requeued_event_does_not_recreate_a_finished_deployer(rollouts: Any, gt: Path, tmp_path: Path) -> None:
    """The controller is shown old states of a finished deployment: it creates nothing.

    First the desired view is restored from copies taken while the
    deployment was New, then claimed (Pending) with no deployer created yet,
    and served frozen to controller passes; then the old events
    are delivered again, once through the projection (a no-op, I5) and once
    straight into the view's rows, which then lie at the head of the log.
    """
    make_config(rollouts, "web", deployer_argv(gt, sleep=0.1))
    ok(cli(rollouts, "rollout", "latest", "web"))
    ok(cli(rollouts, "projections", "rebuild", "desired"))
    as_new = snapshot(rollouts.home, tmp_path / "as-new")
    assert desired_rows(as_new) == [("New", 0)]
    crashed = run_driver(rollouts.home, "before-create", cwd=rollouts.cwd, env=rollouts.env)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr  # claimed, never created
    ok(cli(rollouts, "projections", "rebuild", "desired"))
    as_claimed = snapshot(rollouts.home, tmp_path / "as-claimed")
    assert desired_rows(as_claimed) == [("Pending", 0)]
    until_idle(rollouts)
    assert latest_row(rollouts, "web")["phase"] == "Complete"
    before = creations(rollouts)
    assert before == [("DeployerClaimed", "web-1-deploy-1"), ("DeployerCreated", "web-1-deploy-1")]

    for copy in (as_new, as_claimed):
        restore(copy, rollouts.home)
        for _ in range(2):
            controller(rollouts, "--once", env=FREEZE)
        assert starts(gt) == {"web-1-deploy-1": 1}
        assert [d["name"] for d in deployers(rollouts)] == ["web-1-deploy-1"]
        assert creations(rollouts) == before, f"restored {copy.name}"

    ok(cli(rollouts, "projections", "rebuild", "desired"))
    redeliver_old_events(rollouts.home)
    for _ in range(2):
        controller(rollouts, "--once")
    assert starts(gt) == {"web-1-deploy-1": 1}
    assert creations(rollouts) == before

    ok(cli(rollouts, "projections", "rebuild", "desired"))
    ok(cli(rollouts, "rollout", "latest", "web"))
    until_idle(rollouts)
    assert latest_row(rollouts, "web")["phase"] == "Complete"
    finish(rollouts, gt, exactly_once=["web-1-deploy-1", "web-2-deploy-1"])


def redeliver_old_events(home: Path) -> None:
    """Deliver the Created and DeployerClaimed events of the finished deployment once more."""
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.store.reader import RecorderSource
    from rollouts.projections.desired import Desired
    from rollouts.projections.files import immediate
    from rollouts.projections.records import decode
    from rollouts.projections.store import ProjectionStore

    app = open_app(Home(home), None)
    try:
        source = RecorderSource(app.recorder)
        store = ProjectionStore(Home(home).projections, source)
        db = store.db("desired")
        old = [r for r in map(decode, source.read(0, 100)) if r.type in ("Created", "DeployerClaimed")]
        rows = list(db.query("SELECT * FROM open_deployments"))
        store._apply(Desired(), db, old, old[-1].position)  # through the projection: already applied
        assert list(db.query("SELECT * FROM open_deployments")) == rows, "an event delivered again changed the view"
        with immediate(db):  # a view gone back in time while its position says head (a broken watch cache)
            Desired().apply(db, old)
        assert [r["phase"] for r in db.query("SELECT * FROM open_deployments")] == ["Pending"]
        db.conn.close()
    finally:
        app.close()


# -- 4. projections restored from an old copy ----------------------------------


def test_projection_restored_from_old_copy_never_recreates_a_deployer(
    rollouts: Any, gt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old projections copied back over newer ones: frozen or not, nothing is created twice."""
    for name in ("web", "api"):
        make_config(rollouts, name, deployer_argv(gt, sleep=0.1))
        ok(cli(rollouts, "rollout", "latest", name))
    controller(rollouts, "--once")  # claims and creates both; nobody has seen them start yet
    assert [r["phase"] for r in history(rollouts, "web")] == ["Pending"]
    old = snapshot(rollouts.home, tmp_path / "old-projections")
    until_idle(rollouts)
    ok(cli(rollouts, "rollout", "latest", "web"))
    until_idle(rollouts)
    truth = {name: history(rollouts, name) for name in ("web", "api")}
    assert [r["phase"] for r in truth["web"]] == ["Complete", "Complete"]
    assert [r["phase"] for r in truth["api"]] == ["Complete"]
    log = events(rollouts)
    before = creations(rollouts)

    restore(old, rollouts.home)
    monkeypatch.setenv("ROLLOUTS_FREEZE_PROJECTIONS", "1")
    assert [r["phase"] for r in history(rollouts, "web")] == ["Pending"], "frozen views are served as they are"
    monkeypatch.delenv("ROLLOUTS_FREEZE_PROJECTIONS")
    for _ in range(2):
        controller(rollouts, "--once", env=FREEZE)
    assert creations(rollouts) == before

    restore(old, rollouts.home)
    until_idle(rollouts)  # catches the old views up; nothing is open any more
    assert creations(rollouts) == before
    assert {name: history(rollouts, name) for name in ("web", "api")} == truth
    assert events(rollouts) == log

    ok(cli(rollouts, "projections", "rebuild"))
    assert {name: history(rollouts, name) for name in ("web", "api")} == truth
    assert events(rollouts) == log
    finish(rollouts, gt, exactly_once=["web-1-deploy-1", "api-1-deploy-1", "web-2-deploy-1"])


# -- 5. two controllers at once ------------------------------------------------


def test_two_controllers_at_once_run_each_deployer_once(
    rollouts: Any, gt: Path, background: Callable[..., subprocess.Popen[str]]
) -> None:
    """Two controllers at once on one home: one that runs until stopped, and single passes
    (`controller run --once`, each its own process) made over and over beside it. (A second
    controller that runs until stopped would only stand by.) 5 configs x 3 rollouts are issued
    while they run.

    Versions 1 and 2 of each config are superseded (`rollout latest
    --supersede`) as soon as their deployer has started, so the controllers
    race on claims, creates, stops and slot releases; version 3 completes.
    """
    names = [f"app{i}" for i in range(5)]
    for name in names:
        make_config(rollouts, name, deployer_argv(gt, sleep=1.0))
    controllers = [background("controller", "run", "--interval", "0.05", "--timeout", "60")]
    done = threading.Event()
    passes: list[Any] = []

    def race() -> None:
        while not done.is_set():
            passes.append(rollouts.sh("controller", "run", "--once"))

    racer = threading.Thread(target=race)
    racer.start()
    for version in (1, 2, 3):
        for name in names:
            if version > 1:  # supersede the previous version once its deployer runs
                previous = f"{name}-{version - 1}-deploy-1"
                wait_for(lambda previous=previous: starts(gt)[previous], what=f"{previous} to start")
            result = ok(cli(rollouts, "rollout", "latest", name, "--supersede"))
            assert result.stdout.strip() == str(version)
    for name in names:
        wait_phase(rollouts, name, "Complete", "Failed", timeout=30)
    done.set()
    racer.join()
    for proc in controllers:
        stop(proc)
    assert passes and all(p.exit_code == 0 for p in passes), [p.stderr for p in passes if p.exit_code]

    for name in names:
        rows = history(rollouts, name)
        assert [r["version"] for r in rows] == [1, 2, 3]
        assert rows[-1]["phase"] == "Complete"
        assert all(r["phase"] == "Complete" or r["reason"] == "cancelled" for r in rows[:-1]), rows
    log = creations(rollouts)
    claimed = [name for kind, name in log if kind == "DeployerClaimed"]
    created = [name for kind, name in log if kind == "DeployerCreated"]
    assert len(claimed) == len(set(claimed)) == 15 and len(created) == len(set(created))
    assert set(created) <= set(claimed)
    runs = check(gt, deployers(rollouts), exactly_once=claimed)  # each was waited for: each started
    assert {r.name for r in runs} == set(claimed), "a deployer ran that the log never called for"
    assert any(r.end is None for r in runs), "no deployer was superseded while it ran"
    ok(cli(rollouts, "audit"))


# -- 6. controller crashes -----------------------------------------------------


@pytest.mark.parametrize("point", ["before-create", "after-insert"])
def test_controller_killed_between_claim_and_create(rollouts: Any, gt: Path, point: str) -> None:
    """SIGKILL after the claim committed: before runtime.create, or after its row but before the shim.

    A fresh controller finishes: it creates the deployer (before-create), or
    finds a row whose creator died with no shim and fails the attempt as
    lost (after-insert), which only `rollout retry` reopens, under a new name.
    """
    make_config(rollouts, "web", deployer_argv(gt, sleep=0.1))
    ok(cli(rollouts, "rollout", "latest", "web"))
    crashed = run_driver(rollouts.home, point, cwd=rollouts.cwd, env=rollouts.env)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert creations(rollouts) == [("DeployerClaimed", "web-1-deploy-1")]

    until_idle(rollouts)
    if point == "before-create":
        assert latest_row(rollouts, "web")["phase"] == "Complete"
        assert created_names(rollouts) == ["web-1-deploy-1"]
        finish(rollouts, gt, exactly_once=["web-1-deploy-1"])
        return
    row = latest_row(rollouts, "web")
    assert row["phase"] == "Failed" and "lost" in row["reason"], row
    assert [(d["name"], d["state"]) for d in deployers(rollouts)] == [("web-1-deploy-1", "lost")]
    assert starts(gt) == {}
    ok(cli(rollouts, "rollout", "retry", "web"))
    until_idle(rollouts)
    assert latest_row(rollouts, "web")["phase"] == "Complete"
    finish(rollouts, gt, never=["web-1-deploy-1"], exactly_once=["web-1-deploy-2"])


def test_controller_killed_between_create_and_record(rollouts: Any, gt: Path) -> None:
    """SIGKILL after the deployer was spawned, before DeployerCreated: recorded later, run once."""
    make_config(rollouts, "web", deployer_argv(gt, sleep=0.3))
    ok(cli(rollouts, "rollout", "latest", "web"))
    crashed = run_driver(rollouts.home, "after-create", cwd=rollouts.cwd, env=rollouts.env)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert creations(rollouts) == [("DeployerClaimed", "web-1-deploy-1")]
    assert [d["name"] for d in deployers(rollouts)] == ["web-1-deploy-1"]

    until_idle(rollouts)
    assert latest_row(rollouts, "web")["phase"] == "Complete"
    assert created_names(rollouts) == ["web-1-deploy-1"]
    finish(rollouts, gt, exactly_once=["web-1-deploy-1"])


def test_shim_killed_while_its_deployer_runs_is_lost_and_leaves_no_process(rollouts: Any, gt: Path) -> None:
    """SIGKILL the shim of a running deployer: Failed as lost, and its whole process group is gone."""
    make_config(rollouts, "web", deployer_argv(gt, sleep=30))
    ok(cli(rollouts, "rollout", "latest", "web"))
    controller(rollouts, "--once")  # claims and creates
    run = wait_for(lambda: next(iter(read(gt)), None), what="the deployer to start")

    def running() -> tuple[int, int] | None:
        with sqlite3.connect(rollouts.home / "runtime" / "runtime.db") as db:
            sql = "SELECT shim_pid, pgid FROM deployers WHERE name = 'web-1-deploy-1' AND state = 'running'"
            return db.execute(sql).fetchone()

    shim_pid, pgid = wait_for(running, what="the runtime to record the deployer running")
    assert pgid == run.pgid and group_alive(pgid)
    os.kill(shim_pid, signal.SIGKILL)

    until_idle(rollouts)
    row = latest_row(rollouts, "web")
    assert row["phase"] == "Failed" and "lost" in row["reason"], row
    assert [(d["name"], d["state"]) for d in deployers(rollouts)] == [("web-1-deploy-1", "lost")]
    assert not group_alive(pgid), "the deployer's processes outlived its shim"
    assert read(gt)[0].end is None
    finish(rollouts, gt, exactly_once=["web-1-deploy-1"])


# -- product bugs the scenarios ran into ---------------------------------------

READ_CATALOG = """
import sys
from pathlib import Path
from rollouts.projections.files import Catalog
current = Catalog(Path(sys.argv[1])).current(sys.argv[2])
print(current and current.name)
"""


def catalog_in_a_fresh_process(folder: Path, name: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", READ_CATALOG, str(folder), name], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_catalog_held_open_by_a_long_lived_process_sees_and_keeps_writes(rollouts: Any) -> None:
    """A process holding the projections catalog open (as a controller does) while others swap views."""
    from rollouts.projections.files import Catalog

    make_config(rollouts, "web", ["true"])
    ok(cli(rollouts, "rollout", "history", "web"))
    folder = rollouts.home / "projections"
    gc.collect()
    live = Catalog(folder)
    for _ in range(2):  # an operator's shadow rebuilds, each a process of its own
        ok(rollouts.sh("projections", "rebuild", "desired", "--shadow"))
    seen = (live.current("desired").name, catalog_in_a_fresh_process(folder, "desired"))  # type: ignore[union-attr]
    live.point("probe", folder / "probe-1.db")
    kept = catalog_in_a_fresh_process(folder, "probe")
    live.db.conn.close()
    assert (seen[0], kept) == (seen[1], "probe-1.db"), f"live saw {seen[0]}, others {seen[1]}; live's write: {kept}"


def test_a_view_caught_up_by_a_twin_controller_is_not_rebuilt(rollouts: Any) -> None:
    """Two controllers share one home's desired view: one catching it up must not make the other rebuild it."""
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.store.reader import RecorderSource
    from rollouts.projections.store import BY_NAME, ProjectionStore

    make_config(rollouts, "web", ["true"])
    ok(cli(rollouts, "rollout", "latest", "web"))
    gc.collect()
    app = open_app(Home(rollouts.home), None)
    warnings: list[str] = []
    store = ProjectionStore(Home(rollouts.home).projections, RecorderSource(app.recorder), warn=warnings.append)
    store.catch_up([BY_NAME["desired"]])
    real_head = store.source.head
    twin: list[Any] = []

    def head_then_twin_moves_on() -> int:
        head = real_head()
        if not twin:  # a write, and a twin controller's catch-up of the shared view, right after our read
            twin.append(ok(rollouts.sh("rollout", "cancel", "web")))
            ok(rollouts.sh("projections", "rebuild", "desired"))
        return head

    store.source.head = head_then_twin_moves_on  # type: ignore[method-assign]
    try:
        store.catch_up([BY_NAME["desired"]])
    finally:
        app.close()
    assert warnings == []
