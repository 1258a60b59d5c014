"""Notifications end to end: real controllers (killed, restarted, two at once) POSTing to a real
HTTP sink on 127.0.0.1; what the sink received is checked against the log itself."""

from __future__ import annotations

import json
import random
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rollouts.domain import phases
from tests.conftest import Rollouts

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.chaos import notify as chaos_notify  # noqa: E402
from bench.shared.sink_server import Received, SinkServer  # noqa: E402

pytestmark = pytest.mark.slow
FAST = {"ROLLOUTS_NOTIFY_TIMEOUT": "1", "ROLLOUTS_NOTIFY_LEASE_SECONDS": "3"}


def expected(r: Rollouts, kinds: set[str]) -> list[tuple[int, str]]:
    """(position, kind) of every change of `kinds` in the log, folded from `events` with the phase table."""
    events = json.loads(r.run("events", "-o", "json").stdout)
    return [(position, kind) for position, kind, *_ in chaos_notify.expected(events) if kind in kinds]


def log_id(r: Rollouts) -> str:
    return json.loads(r.run("log", "verify", "-o", "json").stdout)["log_id"]


def check_delivered(got: list[Received], want: list[tuple[int, str]], key_prefix: str, sink: str, repeats: int) -> int:
    """Each wanted change arrived, in log order; a change sent twice came with the same key and
    body, right after itself; no more than `repeats` such repeats."""
    seen: list[Received] = []
    for g in got:
        assert g.key == f"{key_prefix}:{g.body['position']}:{sink}"
        if seen and seen[-1].key == g.key:
            assert g.body == seen[-1].body
            repeats -= 1
            continue
        seen.append(g)
    assert [(s.body["position"], s.body["kind"]) for s in seen] == want
    assert repeats >= 0, "more repeats than controllers killed"
    return len(got) - len(seen)


def status(r: Rollouts) -> dict[str, Any]:
    return json.loads(r.run("notify", "status", "-o", "json").stdout)[0]


def wait_for_lag_zero(r: Rollouts, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = status(r)
        if now["lag"] == 0 and not expected_pending(r):
            return now
        time.sleep(0.3)
    raise AssertionError(f"notifications still waiting: {status(r)}")


def expected_pending(r: Rollouts) -> bool:
    """Whether a deployment is still open (it will change again)."""
    rows = json.loads(r.run("config", "list", "-o", "json").stdout)
    return any(row.get("latest_phase") in phases.OPEN for row in rows)


def test_killed_controllers_resume_from_the_log_and_deliver_each_change_once_in_order(rollouts: Rollouts) -> None:
    r = rollouts
    r.env.update(FAST)
    rng = random.Random(17)
    with SinkServer(delay_s=0.08) as sink:
        assert (
            r.sh("notify", "add", "ops", "--url", sink.url, "--on", "triggered,running,complete,failed").exit_code == 0
        )
        for name in ("a", "b"):
            assert r.sh("config", "create", name, "--", "sleep", "0.05").exit_code == 0
        kills = 0
        for _ in range(3):
            for name in ("a", "b"):
                assert r.sh("rollout", "latest", name, "--supersede").exit_code == 0
            sent = len(sink.received)
            controller = r.popen("controller", "run", "-q")
            deadline = time.monotonic() + 30
            while len(sink.received) == sent and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))  # with a send taking 0.08 s, often while one is in flight
            controller.send_signal(signal.SIGKILL)  # the controller alone: its deployers outlive it
            controller.wait()
            kills += 1
        shutil.rmtree(r.home / "projections")  # views are not where delivery resumes from
        controller = r.popen("controller", "run", "-q")
        try:
            final = wait_for_lag_zero(r)
        finally:
            controller.send_signal(signal.SIGTERM)
            controller.wait(30)
        want = expected(r, {"triggered", "running", "complete", "failed"})
        assert final["position"] == want[-1][0] and final["last_error"] is None
        repeated = check_delivered(sink.delivered(), want, log_id(r), "ops", repeats=kills)
        print(f"{len(want)} changes, {kills} kills, {repeated} sent again")  # -s shows how often a kill hit a send
        assert len(sink.received) == len(sink.delivered())  # none failed


def test_a_failing_then_hanging_sink_is_retried_in_order_and_the_error_is_recorded_once(rollouts: Rollouts) -> None:
    r = rollouts
    r.env.update({**FAST, "ROLLOUTS_NOTIFY_TIMEOUT": "0.5"})
    with SinkServer(fail_first=3, hang_first=1, hang_s=1.0) as sink:
        assert r.sh("notify", "add", "ops", "--url", sink.url, "--on", "triggered,complete").exit_code == 0
        assert r.sh("config", "create", "web", "--", "true").exit_code == 0
        assert r.sh("rollout", "latest", "web").exit_code == 0
        controller = r.popen("controller", "run", "-q")
        try:
            deadline = time.monotonic() + 10
            while status(r)["last_error"] is None and time.monotonic() < deadline:
                time.sleep(0.1)
            failing = status(r)
            assert failing["last_error"].startswith("HTTP 500") and failing["lag"] >= 1
            final = wait_for_lag_zero(r)
        finally:
            controller.send_signal(signal.SIGTERM)
            controller.wait(30)
        want = expected(r, {"triggered", "complete"})
        check_delivered(sink.delivered(), want, log_id(r), "ops", repeats=0)
        first = want[0][0]
        tries = [g for g in sink.received if g.body["position"] == first]
        assert len(tries) == 5 and [g.ok for g in tries] == [False] * 4 + [True]
        gaps = [b.at - a.at for a, b in zip(tries, tries[1:], strict=False)]
        assert gaps[0] <= 1.2 and max(gaps) <= 10.5
        failures = [
            e["data"]["error"] for e in json.loads(r.sh("events", "--type", "NotificationFailed", "-o", "json").stdout)
        ]
        assert failures == ["HTTP 500 Internal Server Error", "no answer within 0.5 s"]  # not one per try
        assert final["last_error"] is None


def test_two_controllers_on_one_log_deliver_each_change_once(
    rollouts_on: Rollouts, backend_store: str | None, tmp_path: Path
) -> None:
    """SQLite: two controllers of one home. PostgreSQL: two homes (as on two hosts) on one log."""
    r = rollouts_on
    r.env.update(FAST)
    other = Rollouts(tmp_path / "home2", r.cwd) if backend_store else r
    other.env.update({**FAST, **({"ROLLOUTS_STORE": backend_store} if backend_store else {})})
    with SinkServer(delay_s=0.02) as sink:
        assert r.sh("notify", "add", "ops", "--url", sink.url, "--on", "triggered,complete,failed").exit_code == 0
        for name in ("a", "b", "c", "d"):
            assert r.sh("config", "create", name, "--trigger", "config-change", "--", "sleep", "0.1").exit_code == 0
        runs = [x.popen("controller", "run", "--until-idle", "--timeout", "60", "-q") for x in (r, other)]
        codes = [p.wait(90) for p in runs]
        assert codes == [0, 0], [p.stderr.read() for p in runs if p.stderr]
        want = expected(r, {"triggered", "complete", "failed"})
        assert len(want) == 8
        check_delivered(sink.delivered(), want, log_id(r), "ops", repeats=0)
        assert len(sink.received) == 8


def test_a_controller_that_exits_leaves_no_lease_so_the_next_is_idle_at_once(rollouts: Rollouts) -> None:
    """The default lease (30 s with the default timeout): a clean exit releases it; it used to be left held,
    and each later `controller run --until-idle` waited for it to expire."""
    r = rollouts
    with SinkServer() as sink:
        assert r.sh("notify", "add", "ops", "--url", sink.url, "--on", "triggered,complete").exit_code == 0
        assert r.sh("config", "create", "web", "--", "true").exit_code == 0
        for _ in range(2):
            assert r.sh("rollout", "latest", "web").exit_code == 0
            started = time.monotonic()
            done = r.sh("controller", "run", "--until-idle", "--timeout", "20", "-q")
            assert done.exit_code == 0, done.stderr
            assert time.monotonic() - started < 10, "the controller waited for a lease its predecessor kept"
        assert [(g.body["kind"], g.ok) for g in sink.received] == [("triggered", True), ("complete", True)] * 2
