"""Freezes and approvals end to end: real controller processes and deployers; the gate commands as subprocesses,
the rest in-process (to keep the suite lean)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

pytestmark = pytest.mark.slow
FREEZE_S = 6  # long enough for a controller process to start and look inside it


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    return result


def phase(rollouts: Rollouts, name: str) -> str:
    return json.loads(ok(rollouts.run("rollout", "history", name, "-o", "json")).stdout)[-1]["phase"]


def until_idle(rollouts: Rollouts) -> float:
    """Run `controller run --until-idle` and return how long it took (it must not wait for a gate)."""
    started = time.monotonic()
    ok(rollouts.sh("controller", "run", "--until-idle", "--interval", "0.2", "--timeout", "30"))
    return time.monotonic() - started


def claim_times(rollouts: Rollouts, name: str) -> list[datetime]:
    events = json.loads(ok(rollouts.run("events", name, "--type", "DeployerClaimed", "-o", "json")).stdout)
    return [datetime.fromisoformat(e["timestamp"]) for e in events]


def test_freezes_hold_new_deployments_in_new_until_they_end_or_are_lifted(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--", "true"))
    ok(rollouts.run("rollout", "latest", "web"))
    until = (datetime.now(UTC) + timedelta(seconds=FREEZE_S)).replace(microsecond=0)
    ok(rollouts.sh("freeze", "web", "--until", until.isoformat(), "--reason", "release week"))
    assert "frozen (config) by tester@test: release week" in ok(rollouts.run("rollout", "status", "web")).stdout
    # --until-idle does not wait for the freeze; a controller that keeps running claims once it ends
    assert until_idle(rollouts) < FREEZE_S and phase(rollouts, "web") == "New"
    controller = rollouts.popen("controller", "run", "--interval", "0.2", "--timeout", str(FREEZE_S + 20))
    try:
        ok(rollouts.run("rollout", "status", "web", "--watch", "--timeout", str(FREEZE_S + 15)))
    finally:
        controller.terminate()
        controller.communicate(timeout=30)
    assert claim_times(rollouts, "web")[-1] >= until

    # --all holds every config, a config created after the freeze included, until unfreeze --all
    ok(rollouts.run("--as", "ops", "freeze", "--all", "--reason", "incident 4711"))
    ok(rollouts.run("config", "create", "api", "--", "true"))
    ok(rollouts.run("rollout", "latest", "api"))
    ok(rollouts.run("rollout", "latest", "web"))
    until_idle(rollouts)
    assert (phase(rollouts, "web"), phase(rollouts, "api")) == ("New", "New")
    assert "frozen (all) by ops: incident 4711, until unfrozen" in ok(rollouts.run("rollout", "status", "api")).stdout
    ok(rollouts.sh("unfreeze", "--all"))
    until_idle(rollouts)
    assert (phase(rollouts, "web"), phase(rollouts, "api")) == ("Complete", "Complete")

    # a freeze by name without --until lasts until unfreeze NAME; other configs go on
    ok(rollouts.run("freeze", "web", "--reason", "hold"))
    ok(rollouts.run("rollout", "latest", "web"))
    ok(rollouts.run("rollout", "latest", "api"))
    until_idle(rollouts)
    assert (phase(rollouts, "web"), phase(rollouts, "api")) == ("New", "Complete")
    ok(rollouts.run("unfreeze", "web"))
    until_idle(rollouts)
    assert phase(rollouts, "web") == "Complete"
    audit = json.loads(rollouts.run("audit", "-o", "json").stdout)
    assert audit["ok"] is True, audit


def test_approvals_need_a_second_actor_for_each_deployment_and_each_retry(rollouts: Rollouts) -> None:
    # the deployer fails on its first run, then succeeds
    ok(
        rollouts.run(
            "config", "create", "web", "--require-approval", "--", "sh", "-c", "[ -e ran ] || { touch ran; exit 1; }"
        )
    )
    ok(rollouts.run("--as", "alice", "rollout", "latest", "web"))
    until_idle(rollouts)
    assert phase(rollouts, "web") == "New"
    refused = rollouts.run("--as", "alice", "rollout", "approve", "web")
    assert refused.exit_code == 1 and "another actor must approve it" in refused.stderr
    ok(rollouts.sh("--as", "bob", "rollout", "approve", "web"))
    until_idle(rollouts)
    assert phase(rollouts, "web") == "Failed"

    ok(rollouts.run("--as", "bob", "rollout", "retry", "web"))
    until_idle(rollouts)
    assert phase(rollouts, "web") == "New"
    assert rollouts.run("--as", "bob", "rollout", "approve", "web", "--version", "1").exit_code == 1
    ok(rollouts.run("--as", "alice", "rollout", "approve", "web", "--version", "1"))
    until_idle(rollouts)
    assert phase(rollouts, "web") == "Complete"
    detail = ok(rollouts.run("rollout", "history", "web", "--revision", "1")).stdout
    assert "Attempt:     2" in detail and "Approval:    by alice" in detail
    approvals = json.loads(ok(rollouts.run("events", "web", "--type", "Approved", "-o", "json")).stdout)
    assert [(e["actor"], e["attempt"]) for e in approvals] == [("bob", 1), ("alice", 2)]
    audit = json.loads(rollouts.run("audit", "-o", "json").stdout)
    assert audit["ok"] is True, audit
