"""Stages (DESIGN 7.10) through the command line, with real deployer processes: the options and their
refusals, `rollout latest` of a stage (eligible or the reason why not), `--queue`, `rollouts stages`,
`rollout status`, and the controller's automatic promotions: once per eligible upstream revision through
restarts and two controllers on one log (SQLite and PostgreSQL), pauses, and a stage's automatic rollback."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.cli_results import as_json, ok

if TYPE_CHECKING:
    from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def history(rollouts: Rollouts, name: str) -> list[dict[str, Any]]:
    return as_json(rollouts.run("rollout", "history", name, "-o", "json"))


def until_idle(rollouts: Rollouts) -> None:
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "--interval", "0.1"))


def pipeline(rollouts: Rollouts, promote: str = "manual", soak: int = 0, prod: tuple[str, ...] = ()) -> None:
    """dev (IMAGE=app:1, verified by `true`) -> staging -> prod; prod's deployer prints its IMAGE."""
    ok(
        rollouts.run(
            "config", "create", "dev", "--env", "IMAGE=app:1", "--verify", "true", "--verify-count", "1", "--", "true"
        )
    )
    ok(
        rollouts.run(
            "config", "create", "staging", "--from", "dev", "--artifact", "IMAGE", "--promote", promote, "--", "true"
        )
    )
    args = ("--from", "staging", "--artifact", "IMAGE", "--soak", str(soak), "--promote", promote, *prod)
    ok(rollouts.run("config", "create", "prod", *args, "--", "sh", "-c", "echo $IMAGE"))


def promotions(rollouts: Rollouts, name: str) -> list[tuple[str, int]]:
    return [
        (r["promoted_from"]["config"], r["promoted_from"]["revision"])
        for r in history(rollouts, name)
        if r["promoted_from"]
    ]


def test_refusals_of_a_stage_config(rollouts: Rollouts) -> None:
    pipeline(rollouts)
    cycle = rollouts.run("config", "set", "dev", "--from", "prod", "--artifact", "IMAGE")
    assert cycle.exit_code == 2 and "cycle of stages (dev -> prod -> staging -> dev)" in cycle.stderr
    env = rollouts.run("config", "set", "prod", "--env", "IMAGE=hand-made")
    assert env.exit_code == 2 and "IMAGE is an artifact key" in env.stderr
    assert rollouts.run("config", "create", "x", "--from", "dev", "--", "true").exit_code == 2  # no --artifact
    assert rollouts.run("config", "create", "y", "--from", "nowhere", "--artifact", "A", "--", "true").exit_code == 4
    assert rollouts.run("config", "create", "z", "--soak", "5", "--", "true").exit_code == 2
    nothing = rollouts.run("rollout", "latest", "prod")
    assert nothing.exit_code == 1 and "staging has no revision yet" in nothing.stderr
    not_stage = rollouts.run("rollout", "latest", "dev", "--revision", "1")
    assert not_stage.exit_code == 2 and "not a stage" in not_stage.stderr


def test_manual_promotion_down_a_chain_with_soak(rollouts: Rollouts) -> None:
    pipeline(rollouts, soak=3)
    ok(rollouts.run("rollout", "latest", "dev"))
    until_idle(rollouts)
    assert ok(rollouts.run("rollout", "latest", "staging")).stdout.strip() == "1"
    until_idle(rollouts)
    soaking = rollouts.run("rollout", "latest", "prod")
    assert soaking.exit_code == 1 and "revision 1 of staging is soaking for" in soaking.stderr
    shown = as_json(rollouts.run("stages", "prod", "-o", "json"))
    assert [s["config"] for s in shown] == ["dev", "staging", "prod"]
    assert shown[2]["waiting"]["version"] == 1 and shown[2]["waiting"]["seconds_left"] > 0
    time.sleep(3)
    ok(rollouts.run("rollout", "latest", "prod", "--revision", "1", "--reason", "ship it"))
    until_idle(rollouts)
    last = history(rollouts, "prod")[-1]
    assert last["cause"] == "promotion of staging revision 1" and last["promoted_from"] == {
        "config": "staging",
        "revision": 1,
    }
    assert last["phase"] == "Complete" and ok(rollouts.run("logs", "prod")).stdout.strip() == "app:1"
    table = ok(rollouts.run("stages", "prod")).stdout
    assert "prod" in table and "IMAGE=app:1" in table and "staging v1" in table
    assert as_json(rollouts.run("audit", "-o", "json"))["ok"]


def test_a_failed_upstream_revision_is_never_promoted(rollouts: Rollouts) -> None:
    pipeline(rollouts)
    ok(rollouts.run("config", "set", "dev", "--env", "IMAGE=app:2", "--verify", "false"))
    ok(rollouts.run("rollout", "latest", "dev"))
    until_idle(rollouts)
    refused = rollouts.run("rollout", "latest", "staging")
    assert refused.exit_code == 1 and "revision 1 of dev failed: verification failed" in refused.stderr
    assert rollouts.run("rollout", "latest", "staging", "--revision", "1").exit_code == 1


def test_queue_waits_and_a_newer_one_supersedes_the_waiting_one(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--", "true"))
    ok(rollouts.run("rollout", "latest", "web"))
    assert rollouts.run("rollout", "latest", "web").exit_code == 1  # without --queue: refused, as before
    assert ok(rollouts.run("rollout", "latest", "web", "--queue")).stdout.strip() == "2"
    assert ok(rollouts.run("rollout", "latest", "web", "--queue")).stdout.strip() == "3"
    rows = history(rollouts, "web")
    assert [(r["version"], r["phase"], r["reason"]) for r in rows] == [
        (1, "New", None),
        (2, "Failed", "superseded by 3"),
        (3, "New", None),
    ]
    assert "queued behind version 1" in ok(rollouts.run("rollout", "status", "web")).stdout
    until_idle(rollouts)  # version 1, never claimed before, runs first (no longer the latest), then 3
    rows = history(rollouts, "web")
    assert [r["phase"] for r in rows] == ["Complete", "Failed", "Complete"]
    assert rows[0]["finished_at"] <= rows[2]["started_at"]
    assert as_json(rollouts.run("audit", "-o", "json"))["ok"]


def test_queued_revision_starts_only_when_the_open_one_ended(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--", "sh", "-c", "sleep 1; echo $ROLLOUT_VERSION"))
    ok(rollouts.run("rollout", "latest", "web"))
    ok(rollouts.sh("controller", "run", "--once"))  # version 1 claimed and started
    ok(rollouts.run("rollout", "latest", "web", "--queue"))
    until_idle(rollouts)
    rows = history(rollouts, "web")
    assert [r["phase"] for r in rows] == ["Complete", "Complete"]
    assert rows[1]["created_at"] < rows[0]["finished_at"]  # queued while 1 ran, and it did not cancel it
    assert as_json(rollouts.run("audit", "-o", "json"))["ok"]  # I2


def test_auto_promotes_each_eligible_revision_once_through_restarts(rollouts: Rollouts) -> None:
    pipeline(rollouts, promote="auto")
    for image in ("app:1", "app:2"):
        ok(rollouts.run("config", "set", "dev", "--env", f"IMAGE={image}"))
        ok(rollouts.run("rollout", "latest", "dev"))
        for _ in range(12):  # a controller restarted at every pass: each decides on the log alone
            ok(rollouts.sh("controller", "run", "--once"))
    until_idle(rollouts)
    assert promotions(rollouts, "staging") == [("dev", 1), ("dev", 2)]
    assert promotions(rollouts, "prod") == [("staging", 1), ("staging", 2)]
    assert ok(rollouts.run("logs", "prod")).stdout.strip() == "app:2"
    assert as_json(rollouts.run("audit", "-o", "json"))["ok"]


def test_two_controllers_promote_once(rollouts_on: Rollouts, tmp_path: Any) -> None:
    rollouts = rollouts_on
    pipeline(rollouts, promote="auto")
    ok(rollouts.run("rollout", "latest", "dev"))
    homes = (
        [rollouts.env]
        if rollouts.store is None
        else [rollouts.env, {**rollouts.env, "ROLLOUTS_HOME": str(tmp_path / "h2")}]
    )
    argv = ["controller", "run", "--until-idle", "--timeout", "60", "--interval", "0.05"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rollouts", *argv],
            cwd=rollouts.cwd,
            env=homes[i % len(homes)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for proc in procs:
        assert proc.wait(timeout=90) == 0, proc.stderr.read() if proc.stderr else ""
    until_idle(rollouts)
    assert promotions(rollouts, "staging") == [("dev", 1)]
    assert promotions(rollouts, "prod") == [("staging", 1)]
    assert [r["phase"] for r in history(rollouts, "prod")] == ["Complete"]
    assert as_json(rollouts.run("audit", "-o", "json"))["ok"]


def test_a_paused_auto_stage_takes_the_newest_once_resumed(rollouts: Rollouts) -> None:
    pipeline(rollouts, promote="auto")
    ok(rollouts.run("rollout", "pause", "staging"))
    for image in ("app:1", "app:2"):
        ok(rollouts.run("config", "set", "dev", "--env", f"IMAGE={image}"))
        ok(rollouts.run("rollout", "latest", "dev"))
        until_idle(rollouts)
    assert promotions(rollouts, "staging") == []
    ok(rollouts.run("rollout", "resume", "staging"))
    until_idle(rollouts)
    assert promotions(rollouts, "staging") == [("dev", 2)]  # the newest of those that became eligible
    assert as_json(rollouts.run("audit", "-o", "json"))["ok"]


def test_a_stages_automatic_rollback_restores_its_artifact_and_promotes_nothing_again(rollouts: Rollouts) -> None:
    pipeline(rollouts, promote="auto")
    deploy = ["sh", "-c", 'test "$IMAGE" != app:bad']
    ok(rollouts.run("config", "set", "staging", "--auto-rollback", "--", *deploy))
    for image in ("app:1", "app:bad"):
        ok(rollouts.run("config", "set", "dev", "--env", f"IMAGE={image}"))
        ok(rollouts.run("rollout", "latest", "dev"))
        until_idle(rollouts)
    rows = history(rollouts, "staging")
    assert [(r["phase"], r["cause"]) for r in rows] == [
        ("Complete", "promotion of dev revision 1"),
        ("Failed", "promotion of dev revision 2"),
        ("Complete", "automatic rollback to 1"),
    ]
    assert as_json(rollouts.run("config", "show", "staging", "-o", "json"))["spec"]["env"]["IMAGE"] == "app:1"
    until_idle(rollouts)
    assert len(history(rollouts, "staging")) == 3  # dev revision 2 is not promoted again
    assert promotions(rollouts, "prod") == [("staging", 1)]  # a rollback is not promoted down the chain
    assert as_json(rollouts.run("audit", "-o", "json"))["ok"]


def test_status_of_a_stage_says_what_soaks_upstream(rollouts: Rollouts) -> None:
    pipeline(rollouts, promote="auto")
    ok(rollouts.run("rollout", "latest", "dev"))
    until_idle(rollouts)  # staging and prod promoted by the controller
    ok(rollouts.run("config", "set", "prod", "--soak", "3600"))
    ok(rollouts.run("config", "set", "dev", "--env", "IMAGE=app:2"))
    ok(rollouts.run("rollout", "latest", "dev"))
    until_idle(rollouts)  # staging takes dev v2; prod waits for it to soak
    status = ok(rollouts.run("rollout", "status", "prod")).stdout
    assert re.search(
        r"prod version 1 \(attempt 1\): Complete; upstream staging version 2 soaking, 3\d{3}s left", status
    )
    assert promotions(rollouts, "prod") == [("staging", 1)]
