"""Analysis templates (DESIGN 7.9) through the CLI with real processes: recorded in the log, refused where a
value cannot be run, measured by each step beside --verify with their own counts, their revision fixed at
the attempt's claim, and held to that revision by `audit`. (Providers that ask Prometheus or an HTTP server
have tests of their own against real servers.)"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

if TYPE_CHECKING:
    from tests.conftest import Rollouts

# A command template whose runs write what they were asked (the resolved placeholders).
SAY = 'sh -c "echo {{args.zone}} {{rollout.config}} {{rollout.version}} {{rollout.step}} >> trace"'


def ok(rollouts: Rollouts, *args: str, env: dict[str, str] | None = None) -> str:
    result = rollouts.sh(*args, env=env)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def measurements(rollouts: Rollouts, revision: int = 1) -> list[dict[str, Any]]:
    rows = json.loads(
        ok(rollouts, "events", "web", "--revision", str(revision), "--type", "MeasurementRecorded", "-o", "json")
    )
    return [r["data"] for r in rows]


def test_templates_are_versioned_in_the_log_and_refused_where_they_cannot_run(rollouts: Rollouts) -> None:
    assert "analysis template smoke created (revision 1)" in ok(
        rollouts, "analysis", "create", "smoke", "--provider", "command", "--command", SAY, "--arg", "zone"
    )
    before = rollouts.event_count()
    for args, says in (
        (["create", "bad", "--provider", "prometheus", "--query", "up"], "--address"),
        (["create", "bad", "--provider", "http", "--url", "http://x", "--success", "open('x')"], "--success"),
        (
            ["create", "bad", "--provider", "command", "--command", "true", "--count", "2", "--failure-limit", "2"],
            "fail",
        ),
        (["set", "smoke", "--command", "echo {{args.other}}"], "unknown placeholder"),
        (["create", "smoke", "--provider", "command", "--command", "true"], "already exists"),
    ):
        refused = rollouts.sh("analysis", *args)
        assert refused.exit_code in (1, 2) and refused.stderr.startswith("error: ") and says in refused.stderr, refused
        assert len(refused.stderr.splitlines()) == 1 and "Traceback" not in refused.stderr
    assert rollouts.event_count() == before
    for args, says in (
        (["--analysis", "smoke"], "argument 'zone' has no value"),
        (["--analysis", "nope"], "analysis template 'nope' not found"),
        (["--analysis", "smoke", "--analysis-arg", "zone=eu", "--analysis-arg", "x=1"], "--analysis-arg x"),
    ):
        refused = rollouts.sh("config", "create", "web", *args, "--", "true")
        assert (refused.exit_code, refused.stderr.count("\n")) == (2, 1) and says in refused.stderr, refused
    assert rollouts.event_count() == before
    ok(rollouts, "config", "create", "web", "--analysis", "smoke", "--analysis-arg", "zone=eu", "--", "true")
    shown = json.loads(ok(rollouts, "analysis", "show", "smoke", "-o", "json"))
    assert (shown["revision"], shown["used_by"], shown["spec"]["count"]) == (1, ["web"], 3)
    deleted = rollouts.sh("analysis", "delete", "smoke")
    assert (deleted.exit_code, deleted.stderr) == (1, "error: analysis template smoke is used by config web\n")
    ok(rollouts, "config", "set", "web", "--analysis", "")
    ok(rollouts, "analysis", "delete", "smoke")
    assert json.loads(ok(rollouts, "analysis", "list", "-o", "json")) == []


def test_each_step_measures_verify_and_each_template_with_its_own_count(rollouts: Rollouts) -> None:
    ok(rollouts, "analysis", "create", "smoke", "--provider", "command", "--command", SAY, "--arg", "zone=eu")
    ok(rollouts, "analysis", "set", "smoke", "--count", "2", "--interval", "0")
    options = ["--steps", "50,100", "--verify", "true", "--verify-count", "1", "--analysis", "smoke"]
    ok(rollouts, "config", "create", "web", *options, "--", "true")
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--interval", "0.1", "-q")
    found = [(m["name"], m["step"], m.get("template"), m["outcome"]) for m in measurements(rollouts)]
    assert found == [
        ("web-1-verify-1-1", 1, None, "passed"),
        ("web-1-verify-1-2", 1, "smoke@2", "passed"),
        ("web-1-verify-1-3", 1, "smoke@2", "passed"),
        ("web-1-verify-1-4", 2, None, "passed"),
        ("web-1-verify-1-5", 2, "smoke@2", "passed"),
        ("web-1-verify-1-6", 2, "smoke@2", "passed"),
    ]
    assert (rollouts.cwd / "trace").read_text().splitlines() == ["eu web 1 1", "eu web 1 1", "eu web 1 2", "eu web 1 2"]
    assert json.loads(ok(rollouts, "rollout", "history", "web", "-o", "json"))[0]["phase"] == "Complete"
    assert ok(rollouts, "audit").startswith("ok: ")


def test_a_failed_template_measurement_fails_the_step_at_once(rollouts: Rollouts) -> None:
    ok(rollouts, "analysis", "create", "smoke", "--provider", "command", "--command", "sh -c 'exit 1'")
    ok(rollouts, "config", "create", "web", "--analysis", "smoke", "--", "true")
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--interval", "0.1", "-q")
    row = json.loads(ok(rollouts, "rollout", "history", "web", "-o", "json"))[0]
    assert (row["phase"], row["reason"]) == (
        "Failed",
        "verification failed: measurement web-1-verify-1-1 failed (exited with code 1)",
    )
    assert [m["outcome"] for m in measurements(rollouts)] == ["failed"]  # at once: no second measurement
    assert ok(rollouts, "audit").startswith("ok: ")


def test_the_revision_is_fixed_at_the_claim_and_audit_holds_each_run_to_it(rollouts: Rollouts) -> None:
    ok(rollouts, "analysis", "create", "smoke", "--provider", "command", "--command", SAY, "--arg", "zone=eu")
    ok(
        rollouts,
        "config",
        "create",
        "web",
        "--steps",
        "50,100",
        "--step-pause",
        "manual",
        "--analysis",
        "smoke",
        "--",
        "true",
    )
    ok(rollouts, "analysis", "set", "smoke", "--count", "1")
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--interval", "0.1", "-q")  # step 1, then the manual pause
    ok(rollouts, "analysis", "set", "smoke", "--arg", "zone=us", "--reason", "moved")  # revision 3, mid-rollout
    ok(rollouts, "rollout", "promote", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--interval", "0.1", "-q")
    assert [m.get("template") for m in measurements(rollouts)] == ["smoke@2", "smoke@2"]
    assert (rollouts.cwd / "trace").read_text().split()[::4] == ["eu", "eu"]  # the claimed revision's default
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--interval", "0.1", "-q")
    ok(rollouts, "rollout", "promote", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--interval", "0.1", "-q")
    assert {m.get("template") for m in measurements(rollouts, 2)} == {"smoke@3"}
    assert ok(rollouts, "audit").startswith("ok: ")
    # A run whose stored template revision is not its claim's (a changed row, or a controller lied): reported.
    runtime = sqlite3.connect(rollouts.home / "runtime" / "runtime.db")
    runtime.execute("UPDATE deployers SET env = replace(env, 'smoke@3', 'smoke@2') WHERE name = 'web-2-verify-1-1'")
    runtime.commit()
    runtime.close()
    audited = rollouts.sh("audit")
    assert audited.exit_code == 1
    assert "web-2-verify-1-1 ran analysis template smoke@2 where its attempt's claim fixed revision 3" in audited.stdout
