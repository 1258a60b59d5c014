"""The step is a value in the aggregate and the same three-key dict in the events it has always been."""

from __future__ import annotations

from typing import Any

from rollouts.domain import ids
from rollouts.domain.deployment import Deployment
from rollouts.domain.spec import Spec
from rollouts.domain.step import DEPLOYER, POST, PRE, Step

META = {"actor": "a", "correlation_id": "c"}


def deployment(**hooks: Any) -> Deployment:
    spec = Spec(command=["deploy"], **{f"{k}_hook": {"command": [k]} for k in hooks}).to_data()
    return Deployment(
        config_id=ids.config_id("app"), config="app", revision=1, spec=spec, cause="manual", message=None, meta=META
    )


def event_data(d: Deployment) -> list[tuple[str, dict[str, Any]]]:
    return [(type(e).__name__, e.__dict__) for e in d.collect_events()]


def test_a_claim_carries_its_first_step_as_the_dict_logs_already_hold() -> None:
    d = deployment(pre=True)
    d.collect_events()
    d.claim("ctl", META)
    [(kind, data)] = event_data(d)
    assert (kind, data["step"]) == ("DeployerClaimed", {"kind": "pre", "try": 1, "name": "app-1-hook-pre-1"})
    assert d.step == Step(PRE, 1, "app-1-hook-pre-1")


def test_the_next_step_travels_as_a_dict_and_comes_back_a_step() -> None:
    d = deployment(post=True)
    d.claim("ctl", META)
    d.report_created("app-1-deploy-1", "ref", META)
    d.report_started("app-1-deploy-1", META)
    assert d.step == Step(DEPLOYER, 1, "app-1-deploy-1", created=True, started=True)
    d.collect_events()
    d.report_exited("app-1-deploy-1", 0, None, META)
    [(_, data)] = event_data(d)
    assert data["next"] == {"kind": "post", "try": 1, "name": "app-1-hook-post-1"}
    assert d.step == Step(POST, 1, "app-1-hook-post-1")


def test_a_step_stored_with_more_keys_loads_as_a_step_not_yet_created() -> None:
    """Histories written by hand (tests, repairs) may hold a whole step, its flags included."""
    stored = {"kind": "deployer", "try": 1, "name": "app-1-deploy-1", "created": True, "started": True}
    assert Step.from_data(stored) == Step(DEPLOYER, 1, "app-1-deploy-1")
    assert Step.from_data(stored).as_data() == {"kind": "deployer", "try": 1, "name": "app-1-deploy-1"}
