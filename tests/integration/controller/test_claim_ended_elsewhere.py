"""A controller whose claim was ended elsewhere (another host recorded its deployer Lost once its lease
lapsed) stops its own deployer at its next pass, at once: the next attempt may already run (DESIGN 7.7)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rollouts.adapters.home import Home
from rollouts.adapters.runtime import procs
from rollouts.adapters.service import commands
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def test_a_claim_ended_elsewhere_stops_its_deployer_at_the_next_pass(rollouts: Rollouts, tmp_path: Path) -> None:
    r = rollouts
    pid_file = tmp_path / "pid"
    assert r.sh("config", "create", "web", "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 60").exit_code == 0
    r.sh("rollout", "latest", "web")
    assert r.sh("controller", "run", "--once").exit_code == 0  # claims, starts the deployer, exits (it runs on)
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    start = procs.start_time_of(pid)
    app = open_app(Home(r.home), None)  # another controller, sure this one's lease has lapsed, ends the claim
    try:
        ended = commands.report(
            app, "web", 1, lambda d: d.report_lost("web-1-deploy-1", "claimant lease expired", new_meta("b")), {}
        )
        assert ended is not None
    finally:
        app.close()
    assert procs.is_alive(pid, start)  # nothing has told this host yet
    ran = r.sh("controller", "run", "--once")
    assert ran.exit_code == 0, ran.stderr
    assert "stop web-1-deploy-1: its claim was ended elsewhere" in ran.stderr
    deadline = time.monotonic() + 15
    while procs.is_alive(pid, start):
        assert time.monotonic() < deadline, "the deployer of a claim ended elsewhere still runs"
        time.sleep(0.1)
    listed = r.sh("deployers", "list", "--all").stdout
    assert "web-1-deploy-1" in listed and "stopped" in listed
