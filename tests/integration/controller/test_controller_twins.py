"""Twin controllers of one home: one leads, the others stand by; locks end with their process."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rollouts.adapters.controller.twins import Twins

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


REPO = Path(__file__).resolve().parents[3]


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return found


def test_one_twin_leads_until_it_closes_and_every_twin_is_counted(tmp_path: Path) -> None:
    first, second = Twins(tmp_path / "c"), Twins(tmp_path / "c")
    try:
        assert (first.lead(), second.lead()) == (True, False)
        assert (first.running(), second.running()) == (2, 2)
        assert first.lead()  # still: leading lasts until close
        first.close()
        assert second.running() == 1
        assert second.lead()
        third = Twins(tmp_path / "c")
        assert not third.lead() and third.running() == 2
        third.close()
    finally:
        first.close()
        second.close()


def test_a_twin_whose_process_died_no_longer_leads_nor_counts(tmp_path: Path) -> None:
    code = "import sys, time\nfrom pathlib import Path\nfrom rollouts.adapters.controller.twins import Twins\n"
    code += "t = Twins(Path(sys.argv[1]))\nprint(t.lead(), flush=True)\ntime.sleep(60)\n"
    other = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "c")], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "True"
        me = Twins(tmp_path / "c")
        assert not me.lead() and me.running() == 2
        other.kill()
        other.wait()
        wait_for(me.lead, "the dead twin's lead to end", timeout=5)
        assert me.running() == 1
        me.close()
    finally:
        other.kill()
        other.wait()


def test_lock_files_are_private(tmp_path: Path) -> None:
    twin = Twins(tmp_path / "c")
    try:
        twin.lead()
        assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
        assert all(path.stat().st_mode & 0o777 == 0o600 for path in (tmp_path / "c").iterdir())
    finally:
        twin.close()


# -- real controllers ---------------------------------------------------------------------


@pytest.fixture
def started(rollouts: Any, tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(label: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "rollouts", "controller", "run", "--interval", "0.05", "--timeout", "60"]
        with open(tmp_path / f"{label}.err", "w") as err:
            proc = subprocess.Popen(argv, cwd=rollouts.cwd, env=rollouts.env, stdout=subprocess.DEVNULL, stderr=err)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def rolled_out(rollouts: Any, version: int) -> bool:
    rows = json.loads(rollouts.run("rollout", "history", "web", "-o", "json").stdout)
    return len(rows) >= version and rows[version - 1]["phase"] == "Complete"


def creator(rollouts: Any, name: str) -> int:
    with sqlite3.connect(rollouts.home / "runtime" / "runtime.db", timeout=30) as db:
        return db.execute("SELECT creator_pid FROM deployers WHERE name = ?", (name,)).fetchone()[0]


def test_a_second_controller_stands_by_and_leads_as_soon_as_the_first_is_killed(
    rollouts: Any, started: Callable[[str], subprocess.Popen[str]], tmp_path: Path
) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    leader = started("a")
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    wait_for(lambda: rolled_out(rollouts, 1), "version 1 to complete")  # the first leads
    standby = started("b")
    wait_for(lambda: "standing by" in (tmp_path / "b.err").read_text(), "the second to stand by")
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    wait_for(lambda: rolled_out(rollouts, 2), "version 2 to complete")
    assert creator(rollouts, "web-1-deploy-1") == creator(rollouts, "web-2-deploy-1") == leader.pid
    assert "created" not in (tmp_path / "b.err").read_text()  # it did nothing: it stood by

    leader.send_signal(signal.SIGKILL)
    leader.wait()
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    wait_for(lambda: rolled_out(rollouts, 3), "version 3 to complete under the standby")
    assert creator(rollouts, "web-3-deploy-1") == standby.pid
    assert "leading" in (tmp_path / "b.err").read_text()
