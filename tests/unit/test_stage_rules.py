"""Stages (DESIGN 7.10) in the domain: the policy in the spec, eligibility (a test per guard), the promotion's
cause and artifact, once per upstream revision for an automatic one, and the queue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from rollouts.domain import phases, promotion, rollout, stage
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError
from rollouts.domain.spec import Spec

META = {"actor": "a", "correlation_id": "c"}
T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = stage.StagePolicy("web-staging", ("IMAGE",), soak=60)


def events(*, verify: bool = False, outcomes: tuple[str, ...] = (), end: str = "ok", at: datetime = T0) -> list[Any]:
    """The events of an upstream deployment: created with IMAGE=v1, claimed, its deployer exited 0, then its
    measurements (`outcomes`), ending at `at`."""
    spec: dict[str, Any] = {"command": ["d"], "env": {"IMAGE": "v1"}}
    if verify:
        spec |= {"verify": ["v"], "verify_count": len(outcomes) or 1}
    nxt = {"kind": "verify", "name": "m", "index": 1} if verify else None
    found = [
        ("Created", T0, {"spec": spec, "cause": "manual"}),
        ("DeployerClaimed", T0, {"step": {"kind": "deployer", "name": "d"}}),
        ("DeployerStarted", T0, {}),
    ]
    if end == "failed":
        return [*found, ("DeployerFailed", at, {"reason": "deployer d failed: exit code 1"})]
    found.append(("DeployerSucceeded", at if not verify else T0, {"next": nxt}))
    for i, outcome in enumerate(outcomes):
        last = i == len(outcomes) - 1
        found.append(
            ("MeasurementRecorded", at if last else T0, {"step": 1, "outcome": outcome, "next": None if last else nxt})
        )
    return found


def upstream(**kw: Any) -> stage.UpstreamRevision:
    return stage.fold_upstream("web-staging", 3, events(**kw))


def test_spec_stores_stage_fields_only_when_set() -> None:
    plain = Spec(command=["x"])
    assert not {"upstream", "artifact", "soak", "promote"} & set(plain.to_data())
    staged = Spec(command=["x"], upstream="web-staging", artifact=["IMAGE"], soak=5, promote="auto")
    assert staged.to_data()["upstream"] == "web-staging"
    assert not {"upstream", "artifact", "soak", "promote"} & set(staged.rollout_part())
    assert stage.policy_of(staged.to_data()) == stage.StagePolicy("web-staging", ("IMAGE",), 5, "auto")
    assert stage.policy_of(plain.to_data()) is None


@pytest.mark.parametrize(
    "fields",
    [
        {"upstream": "web"},  # no artifact
        {"artifact": ["IMAGE"]},  # no upstream
        {"upstream": "Web", "artifact": ["IMAGE"]},  # not a name
        {"upstream": "web", "artifact": ["ROLLOUT_X"]},  # reserved
        {"upstream": "web", "artifact": ["A", "A"]},
        {"soak": 5},  # not a stage
        {"promote": "auto"},
    ],
)
def test_spec_refuses_a_half_stage(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Spec(command=["x"], **fields)


def test_eligible_when_complete_verified_and_soaked() -> None:
    found = upstream(verify=True, outcomes=("passed",))
    assert found.phase == phases.COMPLETE and found.verified and found.completed_at == T0
    assert stage.eligibility(found, POLICY, T0 + timedelta(seconds=60)).eligible


def test_guard_failed() -> None:
    verdict = stage.eligibility(upstream(end="failed"), POLICY, T0 + timedelta(days=1))
    assert not verdict.eligible and "failed: deployer d failed" in (verdict.why or "")


def test_guard_not_complete() -> None:
    found = stage.fold_upstream("web-staging", 3, events()[:3])
    verdict = stage.eligibility(found, POLICY, T0 + timedelta(days=1))
    assert not verdict.eligible and "is Running, not Complete" in (verdict.why or "")


def test_guard_not_verified() -> None:
    found = upstream()
    found.verified = False  # (Complete without a passed verification: what I9 forbids, checked here too)
    verdict = stage.eligibility(found, POLICY, T0 + timedelta(days=1))
    assert not verdict.eligible and "not verified" in (verdict.why or "")


def test_verification_promoted_past_counts() -> None:
    spec = {"command": ["d"], "env": {"IMAGE": "v1"}, "verify": ["v"], "verify_count": 3}
    found = stage.fold_upstream(
        "web-staging",
        3,
        [
            ("Created", T0, {"spec": spec, "cause": "manual"}),
            ("DeployerClaimed", T0, {"step": {"kind": "deployer", "name": "d"}}),
            ("MeasurementRecorded", T0, {"step": 1, "outcome": "inconclusive", "next": {"kind": "pause"}}),
            ("Promoted", T0, {"step": 1, "full": False, "next": None}),
        ],
    )
    assert found.phase == phases.COMPLETE and found.verified


def test_guard_soaking() -> None:
    verdict = stage.eligibility(upstream(), POLICY, T0 + timedelta(seconds=45))
    assert not verdict.eligible and verdict.seconds_left == 15 and "soaking for 15 more seconds" in (verdict.why or "")


def test_guard_automatic_rollback() -> None:
    found = upstream()
    found.cause = "automatic rollback to 2"
    assert not stage.eligibility(found, POLICY, T0 + timedelta(days=1)).eligible


def test_guard_missing_artifact_key() -> None:
    policy = stage.StagePolicy("web-staging", ("IMAGE", "TAG"))
    verdict = stage.eligibility(upstream(), policy, T0)
    assert not verdict.eligible and "no value for TAG" in (verdict.why or "")


def test_newest_eligible_skips_what_is_not() -> None:
    found = {1: upstream(), 2: upstream(), 3: upstream(end="failed")}
    for n, u in found.items():
        u.revision = n
    best, first = stage.newest_eligible(found.__getitem__, 3, POLICY, T0 + timedelta(days=1))
    assert best is not None and best.revision == 2
    assert first is not None and first.revision == 3 and not first.eligible
    none, _ = stage.newest_eligible(found.__getitem__, 3, POLICY, T0 + timedelta(days=1), above=2)
    assert none is None


def test_cause_round_trips() -> None:
    cause = stage.promotion_cause("web-staging", 12)
    assert cause == "promotion of web-staging revision 12"
    assert stage.promoted_from(cause) == ("web-staging", 12)
    assert stage.promoted_from("manual") is None and stage.promoted_from(None) is None


def test_cycles_refused_chains_not() -> None:
    ups = {"b": "a", "c": "b"}
    stage.check_no_cycle("d", "c", ups.get)  # a -> b -> c -> d
    with pytest.raises(stage.StageCycle):
        stage.check_no_cycle("a", "c", ups.get)
    with pytest.raises(stage.StageCycle):
        stage.check_no_cycle("a", "a", ups.get)


def test_pipeline_in_order() -> None:
    ups = {"b": "a", "c": "b"}
    downs = {"a": ["b"], "b": ["c"]}
    assert stage.pipeline("c", ups.get, lambda n: downs.get(n, [])) == ["a", "b", "c"]


def test_artifact_keys_refused_in_env() -> None:
    with pytest.raises(stage.ArtifactKey):
        stage.check_env(POLICY, ["IMAGE", "OTHER"])
    stage.check_env(POLICY, ["OTHER"])
    stage.check_env(None, ["IMAGE"])


def prod(promote: str = "auto") -> DeploymentConfig:
    spec = Spec(command=["d"], env={"REGION": "eu"}, upstream="web-staging", artifact=["IMAGE"], promote=promote)
    return DeploymentConfig(name="web-prod", spec=spec.to_data(), meta=META)


def opened(config: DeploymentConfig, aggregates: list[Any]) -> Deployment:
    return next(a for a in aggregates if isinstance(a, Deployment) and a.revision == config.latest_revision)


def test_promotion_carries_the_artifact_and_its_cause() -> None:
    config = prod()
    policy = stage.policy_of(config.spec)
    assert policy is not None
    made = opened(config, promotion.promote(config, [], upstream(), policy, T0, META, queue=False, automatic=True))
    assert made.cause == "promotion of web-staging revision 3"
    assert made.spec["env"] == {"REGION": "eu", "IMAGE": "v1"} and config.spec["env"]["IMAGE"] == "v1"
    assert promotion.promoted_upto(config, "web-staging") == 3


def test_automatic_promotion_once_per_revision() -> None:
    config = prod()
    policy = stage.policy_of(config.spec)
    assert policy is not None
    deployments = promotion.promote(config, [], upstream(), policy, T0, META, queue=True, automatic=True)
    with pytest.raises(DomainError, match="already"):
        promotion.promote(
            config, [opened(config, deployments)], upstream(), policy, T0, META, queue=True, automatic=True
        )
    # by hand, the same revision may be rolled out again (once the one open ended)
    promotion.promote(config, [opened(config, deployments)], upstream(), policy, T0, META, queue=True)


def test_promotion_refused_when_not_eligible() -> None:
    config = prod()
    policy = stage.policy_of(config.spec)
    assert policy is not None
    with pytest.raises(DomainError, match="soaking"):
        promotion.promote(
            config, [], upstream(), stage.StagePolicy("web-staging", ("IMAGE",), 600), T0, META, queue=False
        )
    assert config.latest_revision == 0


def test_queue_waits_and_supersedes_the_waiting_one() -> None:
    config = DeploymentConfig(name="app", spec=Spec(command=["d"]).to_data(), meta=META)
    first = opened(config, rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=META))
    with pytest.raises(DomainError):  # without --queue: refused while one is open
        config.check_can_roll_out()
    second = opened(config, promotion.enqueue(config, [first], cause="manual", message=None, meta=META))
    assert first.phase == phases.NEW and not first.cancel_requested and config.open_revisions == [1, 2]
    third = opened(config, promotion.enqueue(config, [first, second], cause="manual", message=None, meta=META))
    assert second.phase == phases.FAILED and second.reason == "superseded by 3"
    assert first.phase == phases.NEW and config.open_revisions == [1, 3] and third.revision == 3
    with pytest.raises(DomainError):  # the queued one waits for the open one
        config.check_can_claim(3)
    config.check_can_claim(1)  # which may be claimed, though no longer the latest


def test_queue_refused_while_paused() -> None:
    config = DeploymentConfig(name="app", spec=Spec(command=["d"]).to_data(), meta=META)
    first = opened(config, rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=META))
    config.pause(META)
    with pytest.raises(DomainError, match="paused"):
        promotion.enqueue(config, [first], cause="manual", message=None, meta=META)


def test_superseded_only_while_new() -> None:
    config = DeploymentConfig(name="app", spec=Spec(command=["d"]).to_data(), meta=META)
    first = opened(config, rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=META))
    rollout.claim(config, first, "me", META)
    with pytest.raises(DomainError):
        first.supersede(2, META)
