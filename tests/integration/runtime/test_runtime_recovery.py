"""The local runtime cleans up after a shim that died at the worst moment, with real processes."""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from rollouts.adapters.runtime import procs
from rollouts.adapters.runtime.local import LocalRuntime

if TYPE_CHECKING:
    from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

NAME = "app-1-deploy-1"


@pytest.fixture
def runtime(tmp_path: pathlib.Path) -> Iterator[LocalRuntime]:
    rt = LocalRuntime(tmp_path / "home")
    yield rt
    rt.close()


def test_a_shim_killed_before_recording_its_deployer_running_left_the_deployers_children_alive(
    runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    """The shim dies after starting the deployer but before writing its pgid: the runtime then
    knew no group to kill and marked the row lost while the deployer's children ran on."""
    pids = tmp_path / "pids"
    stand_in: list[subprocess.Popen[bytes]] = []

    def spawn_a_shim_that_dies_before_running_is_recorded(name: str) -> None:
        # In its own session like a real shim; it starts a child, then waits to be killed.
        shim = subprocess.Popen(
            ["sh", "-c", 'sleep 30 & echo $! > "$0"; read _; kill -9 $$', str(pids)],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        stand_in.append(shim)
        runtime._execute(
            "UPDATE deployers SET shim_pid = ?, shim_start = ? WHERE name = ?",
            (shim.pid, procs.start_time_of(shim.pid), name),
        )

    runtime._spawn = spawn_a_shim_that_dies_before_running_is_recorded  # type: ignore[method-assign]
    runtime.create(NAME, config="app", revision=1, attempt=1, argv=["true"], env={}, cwd="/")
    deadline = time.monotonic() + 5
    while not (pids.exists() and pids.read_text().strip()):
        assert time.monotonic() < deadline, "the stand-in shim never started its child"
        time.sleep(0.01)
    child = int(pids.read_text())
    child_start = procs.start_time_of(child)
    (shim,) = stand_in
    shim.communicate(b"die\n", timeout=5)  # SIGKILLed; its child is orphaned, still in the session

    assert procs.is_alive(child, child_start)
    (row,) = [o for o in runtime.observe() if o.name == NAME]
    assert (row.state, row.reason) == ("lost", "shim vanished")
    assert not procs.is_alive(child, child_start), "the deployer's child outlived its shim"


@pytest.mark.parametrize("passes", [1, 2], ids=["created, not yet reported", "reported running"])
def test_a_deleted_runtime_db_ends_its_deployments_lost_on_the_next_pass_and_starts_none_again(
    rollouts: Rollouts, tmp_path: pathlib.Path, passes: int
) -> None:
    """They stayed Running until their timeout; a step claimed but not yet reported created was created
    a second time, in the new, empty table."""
    started = tmp_path / "started"
    command = ["sh", "-c", f"echo $$ >> {started}; exec sleep 60"]
    assert rollouts.sh("config", "create", "web", "--", *command).exit_code == 0
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0
    for _ in range(passes):
        assert rollouts.sh("controller", "run", "--once", "-q").exit_code == 0
        _wait_for(lambda: started.exists() and started.read_text().endswith("\n"))
    try:
        for file in (rollouts.home / "runtime").glob("runtime.db*"):
            file.unlink()
        assert rollouts.sh("controller", "run", "--once", "-q").exit_code == 0
        status = rollouts.sh("rollout", "status", "web")
        assert status.exit_code == 1, status
        assert status.stdout.startswith("web version 1 (attempt 1): Failed: lost: web-1-deploy-1: the runtime has no")
        time.sleep(0.5)
        assert len(started.read_text().split()) == 1  # never started again
    finally:
        for pid in started.read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)


def _wait_for(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
