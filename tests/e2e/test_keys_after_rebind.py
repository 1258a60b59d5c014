"""Notification keys never repeat (DESIGN 7.8): an older copy of the log put back and a home rebound onto
it reuses positions for new changes; the log takes an id of its own there, so their keys are new, and
the changes it had before keep the keys they were sent with."""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Rollouts

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, where `bench` is
from bench.shared.sink_server import SinkServer  # noqa: E402

pytestmark = pytest.mark.slow
FAST = {"ROLLOUTS_NOTIFY_TIMEOUT": "1", "ROLLOUTS_NOTIFY_LEASE_SECONDS": "3"}


def deliver_all(r: Rollouts) -> None:
    controller = r.popen("controller", "run", "-q")
    try:
        deadline = time.monotonic() + 60
        while True:
            status = json.loads(r.sh("notify", "status", "-o", "json").stdout)
            ended = any(p in r.sh("rollout", "status", "web").stdout for p in (": Complete", ": Failed"))
            if status and status[0]["lag"] == 0 and ended:
                break
            assert time.monotonic() < deadline, (status, r.sh("rollout", "status", "web").stdout)
            time.sleep(0.2)
    finally:
        controller.send_signal(signal.SIGTERM)
        controller.wait(30)


def backup(db: Path, to: Path) -> None:
    with sqlite3.connect(db) as source, sqlite3.connect(to) as copy:
        source.backup(copy)


def test_a_rebind_onto_an_older_copy_gives_new_changes_new_keys(rollouts: Rollouts, tmp_path: Path) -> None:
    r = rollouts
    r.env.update(FAST)
    with SinkServer() as sink:
        assert r.sh("notify", "add", "ops", "--url", sink.url, "--on", "triggered,complete,failed").exit_code == 0
        assert r.sh("config", "create", "web", "--", "true").exit_code == 0
        r.sh("rollout", "latest", "web")
        deliver_all(r)
        backup(r.home / "events.db", tmp_path / "old.db")
        r.sh("rollout", "latest", "web", "--reason", "second, to be lost")
        deliver_all(r)
        before = {g.key for g in sink.delivered()}
        old_id = json.loads(r.sh("log", "verify", "-o", "json").stdout)["log_id"]
        backup(tmp_path / "old.db", r.home / "events.db")  # the older copy put back
        assert r.sh("rollout", "latest", "web").exit_code == 5  # refused: the log went back
        rebound = r.sh("home", "rebind", "--yes")
        assert rebound.exit_code == 0 and f"log {old_id} went back" in rebound.stdout, rebound
        r.sh("rollout", "latest", "web", "--reason", "third, after the rebind")  # its deployer's name was used
        # by the lost history, so the runtime refuses it (Lost): a failure is a change the sink hears of too
        deliver_all(r)
        got: dict[str, Any] = {}
        for g in sink.delivered():
            assert got.setdefault(g.key, g.body) == g.body, f"key {g.key} named two changes"
    new_id = json.loads(r.sh("log", "verify", "-o", "json").stdout)["log_id"]
    assert new_id != old_id
    after = set(got) - before
    assert after and all(k.startswith(f"{new_id}:") for k in after), after  # new changes: the new log's keys
    assert all(k.startswith(f"{old_id}:") for k in before)


def test_a_rebind_onto_another_log_keeps_that_logs_id(rollouts: Rollouts, tmp_path: Path) -> None:
    other = Rollouts(tmp_path / "other", rollouts.cwd)
    other.sh("config", "create", "web", "--", "true")
    rollouts.sh("config", "create", "api", "--", "true")
    other_id = json.loads(other.sh("log", "verify", "-o", "json").stdout)["log_id"]
    backup(other.home / "events.db", rollouts.home / "events.db")
    rebound = rollouts.sh("home", "rebind", "--yes")
    assert rebound.exit_code == 0 and "went back" not in rebound.stdout
    assert json.loads(rollouts.sh("log", "verify", "-o", "json").stdout)["log_id"] == other_id
