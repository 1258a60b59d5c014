"""`rollouts audit` on histories that break I1-I3, written straight through the domain's event methods."""

from __future__ import annotations

import json
from pathlib import Path

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain import rollout
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.spec import Spec

META = new_meta("mallory@test")


def history_with(home: Path, corrupt: str) -> None:
    """A config `web` with deployments; then one forbidden event appended by calling its event method."""
    app = open_app(Home(home), None)
    config = DeploymentConfig(name="web", spec=Spec(command=["true"]).to_data(), meta=META)
    first = rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=META)[-1]
    rollout.claim(config, first, "ctl", META)
    step = first.step
    assert step is not None
    aggregates: list[DeploymentConfig | Deployment] = [config, first]
    if corrupt == "claimed twice":
        first._claimed(attempt=1, name=step.name, step=step.as_data(), claimant="ctl", meta=META)
    elif corrupt == "two active":
        second = Deployment(
            config_id=config.id, config="web", revision=2, spec=config.spec, cause="manual", message=None, meta=META
        )
        second._claimed(attempt=1, name="web-2-deploy-1", step=second.first_step().as_data(), claimant="ctl", meta=META)
        aggregates.append(second)
    elif corrupt == "backwards":
        first.report_exited(step.name, 0, None, META)
        first._retry_requested(attempt=2, meta=META)  # Complete -> New: only a Failed one may be retried
    app.save(*aggregates)
    app.close()


def audit(rollouts, *args: str):  # type: ignore[no-untyped-def]
    return rollouts.sh("audit", *args)


def test_a_clean_history_audits_ok(rollouts) -> None:  # type: ignore[no-untyped-def]
    history_with(rollouts.home, "nothing")
    result = audit(rollouts, "-o", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["ok"] is True


def test_a_deployer_claimed_twice_is_reported_as_i1(rollouts) -> None:  # type: ignore[no-untyped-def]
    history_with(rollouts.home, "claimed twice")
    result = audit(rollouts)
    assert result.exit_code == 1
    assert "VIOLATION I1" in result.stdout and "web-1-deploy-1 claimed twice" in result.stdout
    document = json.loads(audit(rollouts, "-o", "json").stdout)
    assert document["ok"] is False
    assert ("I1", "web", 1) in [(v["rule"], v["config"], v["version"]) for v in document["violations"]]


def test_two_deployments_active_at_once_are_reported_as_i2(rollouts) -> None:  # type: ignore[no-untyped-def]
    history_with(rollouts.home, "two active")
    result = audit(rollouts, "web")
    assert result.exit_code == 1
    assert "VIOLATION I2" in result.stdout and "revision 2 active while revision 1 was active too" in result.stdout
    violations = json.loads(audit(rollouts, "-o", "json").stdout)["violations"]
    assert {v["rule"] for v in violations} == {"I2"}


def test_a_phase_going_backwards_is_reported_as_i3(rollouts) -> None:  # type: ignore[no-untyped-def]
    history_with(rollouts.home, "backwards")
    result = audit(rollouts)
    assert result.exit_code == 1
    assert "VIOLATION I3" in result.stdout
    assert "RetryRequested happened in phase Complete" in result.stdout
    violations = json.loads(audit(rollouts, "-o", "json").stdout)["violations"]
    assert violations and {v["rule"] for v in violations} == {"I3"}
    assert all(v["message"] and "\n" not in v["message"] for v in violations)
