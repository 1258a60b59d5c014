"""Steps, verification, pauses and the automatic rollback with real processes through the CLI (DESIGN 7.6).

Ground truth comes from the processes: each deployer and measurement appends its name, step, weight and
the time to a trace file, so a run that happened twice, early or out of order shows there whatever the
log says.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

if TYPE_CHECKING:
    from tests.conftest import Rollouts

TRACE = (
    'echo "$ROLLOUT_DEPLOYER ${ROLLOUT_STEP}/${ROLLOUT_STEPS} ${ROLLOUT_WEIGHT} ${ROLLOUT_VERIFY:-0}'
    ' $(date +%s.%N)" >> "$TRACE"\n'
)
# A measurement: exits with the code in $VERDICT (0 passed, 1 failed, anything else inconclusive).
MEASURE = TRACE + 'exit "${VERDICT:-0}"\n'
SLOW_MEASURE = TRACE + "sleep 60\n"


class Work:
    def __init__(self, folder: Path) -> None:
        self.trace = folder / "trace"
        (folder / "deploy.sh").write_text(TRACE)
        (folder / "measure.sh").write_text(MEASURE)
        (folder / "slow.sh").write_text(SLOW_MEASURE)
        self.folder = folder

    def deploy(self) -> list[str]:
        return ["sh", str(self.folder / "deploy.sh")]

    def measure(self, slow: bool = False) -> str:
        return f"sh {self.folder / ('slow.sh' if slow else 'measure.sh')}"

    def ran(self) -> list[list[str]]:
        """(name, step/steps, weight, ROLLOUT_VERIFY, time) of every run, in order."""
        return [line.split() for line in self.trace.read_text().splitlines()] if self.trace.exists() else []


@pytest.fixture
def work(rollouts: Rollouts) -> Work:
    return Work(rollouts.cwd)


def ok(rollouts: Rollouts, *args: str) -> str:
    result = rollouts.sh(*args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def history(rollouts: Rollouts, name: str) -> list[dict[str, Any]]:
    return json.loads(ok(rollouts, "rollout", "history", name, "-o", "json"))


def events_of(rollouts: Rollouts, type_: str) -> list[dict[str, Any]]:
    return json.loads(ok(rollouts, "events", "--type", type_, "-o", "json"))


def test_steps_run_in_order_with_their_weights_each_verified_before_the_next(rollouts: Rollouts, work: Work) -> None:
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--steps", "25,100",
       "--verify", work.measure(), "--verify-count", "2", "--verify-interval", "0", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    assert [r[:4] for r in work.ran()] == [
        ["web-1-deploy-1-step-1", "1/2", "25", "0"],
        ["web-1-verify-1-1", "1/2", "25", "1"],
        ["web-1-verify-1-2", "1/2", "25", "2"],
        ["web-1-deploy-1-step-2", "2/2", "100", "0"],
        ["web-1-verify-1-3", "2/2", "100", "3"],
        ["web-1-verify-1-4", "2/2", "100", "4"],
    ]
    [row] = history(rollouts, "web")
    assert row["phase"] == "Complete"
    assert (row["step"], row["step_count"], row["weight"], row["paused"], row["rollback_of"]) == (2, 2, 100, None, None)
    counts = {k: v for k, v in row["verification"].items() if k != "measurements"}
    assert counts == {"passed": 4, "failed": 0, "inconclusive": 0}
    measured = row["verification"]["measurements"]  # 7.9: each with its step, outcome, and no template
    assert [(m["k"], m["step"], m["template"], m["outcome"]) for m in measured] == [
        (k, (k + 1) // 2, None, "passed") for k in range(1, 5)
    ]
    assert "I8-I11" in ok(rollouts, "audit")  # I9 and I10 among the rules checked
    [detail] = json.loads(ok(rollouts, "rollout", "history", "web", "--revision", "1", "-o", "json"))
    runs = [(r["name"], r["kind"], r["state"], r["exit_code"]) for r in detail["steps"]]
    assert runs[:3] == [
        ("web-1-deploy-1-step-1", "deployer", "succeeded", 0),
        ("web-1-verify-1-1", "verify", "passed", 0),
        ("web-1-verify-1-2", "verify", "passed", 0),
    ]


def test_a_failed_verification_rolls_back_once_to_the_last_complete_version(rollouts: Rollouts, work: Work) -> None:
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--env", "VERDICT=0", "--steps", "50,100",
       "--verify", work.measure(), "--verify-count", "1", "--auto-rollback", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    ok(rollouts, "config", "set", "web", "--env", "VERDICT=1")
    ok(rollouts, "rollout", "latest", "web")
    watch = rollouts.popen("rollout", "status", "web", "--watch", "--timeout", "60")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    out, _ = watch.communicate(timeout=60)
    assert watch.returncode == 1
    assert "rolled back automatically as version 3" in out
    rows = history(rollouts, "web")
    assert [(r["version"], r["phase"], r["cause"], r["rollback_of"]) for r in rows] == [
        (1, "Complete", "manual", None),
        (2, "Failed", "manual", None),
        (3, "Complete", "automatic rollback to 1", 2),
    ]
    assert rows[1]["reason"].startswith("verification failed: measurement web-2-verify-1-1 failed")
    assert rows[2]["message"].startswith("version 2 failed: verification failed")
    ran = [r[0] for r in work.ran() if r[0].startswith("web-3")]
    assert ran == ["web-3-deploy-1", "web-3-verify-1-1"]  # one step, then its verification
    assert json.loads(ok(rollouts, "config", "show", "web", "-o", "json"))["spec"]["env"]["VERDICT"] == "0"
    assert len(events_of(rollouts, "RollbackTriggered")) == 1
    ok(rollouts, "audit")
    text = metrics_text(rollouts)
    assert b'rollouts_verification_measurements_total{config="web",outcome="passed"} 3.0' in text
    assert b'rollouts_verification_measurements_total{config="web",outcome="failed"} 1.0' in text
    assert b'rollouts_rollbacks_total{config="web"} 1.0' in text
    page = timeline_of(rollouts, "web")
    assert 'data-version="2" data-attempt="1"' in page and 'data-rollback="3"' in page
    assert "measurement 1 (step 1): failed" in page and "(rolled back as v3)" in page


def timeline_of(rollouts: Rollouts, name: str) -> str:
    """The timeline /configs/NAME shows."""
    from datetime import UTC, datetime

    from rollouts.adapters.cli.state import State
    from rollouts.adapters.web.timeline import svg
    from rollouts.projections.attempt_queries import attempts

    state = State(str(rollouts.home), None, "tester@test")
    try:
        return svg(attempts(state.read("audit").db("audit"), name), datetime.now(UTC))
    finally:
        state.close()


def metrics_text(rollouts: Rollouts) -> bytes:
    """/metrics as `serve` makes it, checked against the whole registry's text."""
    from prometheus_client import generate_latest

    from rollouts.adapters.cli.state import State
    from rollouts.adapters.web import exposition, metrics

    state = State(str(rollouts.home), None, "tester@test")
    try:
        text = exposition.Exposition(lambda: state.projections).text()
        assert text == generate_latest(metrics.registry(lambda: state.projections))
        return text
    finally:
        state.close()


def test_inconclusive_measurements_pause_for_a_human_until_promote(rollouts: Rollouts, work: Work) -> None:
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--env", "VERDICT=3",
       "--verify", work.measure(), "--verify-count", "2", "--verify-interval", "0", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")  # idle: a pause for a human keeps none
    status = ok(rollouts, "rollout", "status", "web")
    assert "Running" in status and "measurements 0 passed/0 failed/1 inconclusive of 2" in status
    assert "paused: measurements of step 1 were inconclusive; go on with: rollouts rollout promote web" in status
    assert history(rollouts, "web")[0]["paused"] == "inconclusive"
    ok(rollouts, "--as", "carol", "rollout", "promote", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    assert history(rollouts, "web")[0]["phase"] == "Complete"
    [promoted] = events_of(rollouts, "Promoted")
    assert promoted["actor"] == "carol"
    ok(rollouts, "audit")


def test_a_measurement_past_its_timeout_is_stopped_and_inconclusive(rollouts: Rollouts, work: Work) -> None:
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--verify", work.measure(slow=True),
       "--verify-timeout", "1", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    started = time.monotonic()
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60", "--interval", "0.2")
    assert time.monotonic() - started < 30
    [recorded] = events_of(rollouts, "MeasurementRecorded")
    assert recorded["data"]["outcome"] == "inconclusive"
    assert history(rollouts, "web")[0]["paused"] == "inconclusive"


def test_a_controller_killed_between_measurements_goes_on_where_it_was(rollouts: Rollouts, work: Work) -> None:
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--verify", work.measure(),
       "--verify-count", "3", "--verify-interval", "2", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    controller = rollouts.popen("controller", "run", "--interval", "0.2")
    deadline = time.monotonic() + 30
    while not events_of(rollouts, "MeasurementRecorded") and time.monotonic() < deadline:
        time.sleep(0.2)
    controller.send_signal(signal.SIGKILL)
    controller.wait(timeout=10)
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60", "--interval", "0.2")
    runs = work.ran()
    names = [r[0] for r in runs]
    assert names == ["web-1-deploy-1", "web-1-verify-1-1", "web-1-verify-1-2", "web-1-verify-1-3"]
    times = [float(r[4]) for r in runs[1:]]
    assert all(b - a >= 1.9 for a, b in zip(times, times[1:], strict=False)), times  # spaced from the log's facts
    verification = history(rollouts, "web")[0]["verification"]
    assert {k: v for k, v in verification.items() if k != "measurements"} == {
        "passed": 3,
        "failed": 0,
        "inconclusive": 0,
    }
    ok(rollouts, "audit")


def test_a_rollback_to_an_automatic_rollback_keeps_the_configs_steps(rollouts: Rollouts, work: Work) -> None:
    """The last Complete revision may itself be an automatic rollback, which ran as one step: rolling back
    to it (automatically, or by `undo`) restores the spec it restored, steps included, not its one step."""
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--env", "VERDICT=0", "--steps", "50,100",
       "--verify", work.measure(), "--verify-count", "1", "--auto-rollback", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    for _ in range(2):  # v2 fails, v3 rolls back to v1; v4 fails, v5 rolls back to v3
        ok(rollouts, "config", "set", "web", "--env", "VERDICT=1")
        ok(rollouts, "rollout", "latest", "web")
        ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    rows = history(rollouts, "web")
    assert [(r["version"], r["phase"], r["cause"]) for r in rows[2:]] == [
        (3, "Complete", "automatic rollback to 1"),
        (4, "Failed", "manual"),
        (5, "Complete", "automatic rollback to 3"),
    ]
    assert [r[0] for r in work.ran() if r[0].startswith("web-5")] == ["web-5-deploy-1", "web-5-verify-1-1"]
    spec = json.loads(ok(rollouts, "config", "show", "web", "-o", "json"))["spec"]
    assert (spec["steps"], spec["env"]["VERDICT"]) == ([50, 100], "0")
    skipped = ok(rollouts, "rollout", "undo", "web", "--to-revision", "5")  # the spec runs it already: 7.11
    assert "skipped rollback" in skipped
    ok(rollouts, "config", "set", "web", "--env", "LATER=1")  # something else than revision 5 ran
    ok(rollouts, "rollout", "undo", "web", "--to-revision", "5")  # by hand, to the rollback of the rollback
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    assert [r[0] for r in work.ran() if r[0].startswith("web-6-deploy")] == [
        "web-6-deploy-1-step-1",
        "web-6-deploy-1-step-2",
    ]
    ok(rollouts, "audit")


def test_two_controllers_trigger_one_rollback_for_one_failure(rollouts: Rollouts, work: Work) -> None:
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--env", "VERDICT=0",
       "--verify", work.measure(), "--verify-count", "1", "--auto-rollback", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    ok(rollouts, "config", "set", "web", "--env", "VERDICT=1")
    ok(rollouts, "rollout", "latest", "web")
    twins = [rollouts.popen("controller", "run", "--until-idle", "--timeout", "60", "--interval", "0.1") for _ in "ab"]
    for twin in twins:
        twin.communicate(timeout=90)
    assert [e["data"]["failed"] for e in events_of(rollouts, "RollbackTriggered")] == [2]
    assert [r["phase"] for r in history(rollouts, "web")] == ["Complete", "Failed", "Complete"]
    assert sorted(set(r[0] for r in work.ran())) == sorted(r[0] for r in work.ran())  # each process ran once
    ok(rollouts, "audit")


def test_abort_stops_the_rollout_and_rolls_back_without_the_policy(rollouts: Rollouts, work: Work) -> None:
    ok(rollouts, "config", "create", "web", "--env", f"TRACE={work.trace}", "--steps", "10,100",
       "--step-pause", "manual", "--", *work.deploy())  # fmt: skip
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    ok(rollouts, "rollout", "promote", "web", "--full")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    ok(rollouts, "rollout", "abort", "web", "--reason", "error rate up")
    ok(rollouts, "controller", "run", "--until-idle", "--timeout", "60")
    rows = history(rollouts, "web")
    assert [(r["phase"], r["reason"], r["rollback_of"]) for r in rows] == [
        ("Complete", None, None),
        ("Failed", "aborted: error rate up", None),
        ("Complete", None, 2),
    ]
    assert rollouts.sh("rollout", "abort", "web").exit_code == 1  # nothing open
    listed = json.loads(ok(rollouts, "deployers", "list", "--all", "-o", "json"))
    assert not [d["name"] for d in listed if "-pause-" in d["name"]]  # a pause is no process, stopped or not
    ok(rollouts, "audit")
