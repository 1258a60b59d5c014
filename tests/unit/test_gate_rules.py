"""Freezes and approvals in the domain and the plan: every refusal, with no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rollouts.adapters.controller.plan import Kind, gated, plan
from rollouts.domain import ids, rollout
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError, UsageError
from rollouts.domain.freeze import ALL_ID, FreezeAll, in_force
from rollouts.domain.gate_audit import audit_gates
from rollouts.domain.spec import Spec

ALICE = {"actor": "alice"}
BOB = {"actor": "bob"}
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SOON = NOW + timedelta(seconds=5)


def config(approval: bool = False) -> DeploymentConfig:
    return DeploymentConfig(name="web", spec=Spec(command=["true"], require_approval=approval).to_data(), meta=ALICE)


def triggered(c: DeploymentConfig) -> Deployment:
    return rollout.trigger(c, [], cause="manual", message=None, supersede=False, meta=ALICE)[-1]


def pending(aggregate: Any) -> list[str]:
    return [type(e).__name__ for e in aggregate.collect_events()]


def test_a_frozen_config_is_not_claimed_until_its_freeze_ends() -> None:
    c = config()
    d = triggered(c)
    c.freeze_config(SOON, "release week", NOW, BOB)
    with pytest.raises(DomainError, match=r"web is frozen \(config\) until .*: release week"):
        rollout.claim(c, d, "ctl", ALICE, now=NOW)
    assert d.phase == "New" and c.slot is None
    rollout.claim(c, d, "ctl", ALICE, now=SOON)
    assert d.phase == "Pending"


def test_a_freeze_of_all_holds_every_config_and_an_unfreeze_lifts_it() -> None:
    c = config()
    d = triggered(c)
    every = FreezeAll(meta=BOB)
    every.freeze_all(None, "incident", NOW, BOB)
    with pytest.raises(DomainError, match=r"frozen \(all\) until it is lifted: incident"):
        rollout.claim(c, d, "ctl", ALICE, freeze_all=every.freeze, now=SOON + timedelta(days=999))
    every.unfreeze_all(NOW, BOB)
    with pytest.raises(DomainError, match="no freeze of --all in force"):
        every.unfreeze_all(NOW, BOB)
    rollout.claim(c, d, "ctl", ALICE, freeze_all=every.freeze, now=NOW)


@pytest.mark.parametrize(("until", "reason"), [(NOW, "x"), (NOW - timedelta(seconds=1), "x"), (SOON, " ")])
def test_a_freeze_that_ends_before_now_or_gives_no_reason_is_refused(until: datetime, reason: str) -> None:
    c = config()
    c.collect_events()
    with pytest.raises(UsageError):
        c.freeze_config(until, reason, NOW, BOB)
    assert pending(c) == [] and c.freeze is None


def test_unfreezing_a_config_that_is_not_frozen_or_whose_freeze_ended_is_refused() -> None:
    c = config()
    with pytest.raises(DomainError, match="web is not frozen"):
        c.unfreeze(NOW, BOB)
    c.freeze_config(SOON, "x", NOW, BOB)
    with pytest.raises(DomainError, match="web is not frozen"):
        c.unfreeze(SOON, BOB)
    c.unfreeze(NOW, BOB)
    assert c.freeze is None and not in_force(c.freeze, NOW)


def test_a_deployment_that_needs_approval_is_claimed_only_once_another_actor_approved_it() -> None:
    c = config(approval=True)
    d = triggered(c)
    assert d.needs_approval and d.requested_by == "alice"
    with pytest.raises(DomainError, match="waits for an approval"):
        rollout.claim(c, d, "ctl", ALICE, now=NOW)
    with pytest.raises(DomainError, match="alice asked for revision 1 attempt 1: another actor must approve it"):
        d.approve(ALICE)
    d.approve(BOB)
    with pytest.raises(DomainError, match="not waiting for an approval"):
        d.approve(BOB)
    rollout.claim(c, d, "ctl", ALICE, now=NOW)
    assert d.phase == "Pending" and d.approved_by == "bob"


def test_a_retry_needs_a_new_approval_by_someone_other_than_who_retried() -> None:
    c = config(approval=True)
    d = triggered(c)
    d.approve(BOB)
    rollout.claim(c, d, "ctl", ALICE, now=NOW)
    d.report_lost(d.step.name if d.step else "", "gone", ALICE)
    rollout.settle(c, d, ALICE)
    rollout.retry(c, d, BOB)
    assert d.attempt == 2 and d.awaits_approval and d.requested_by == "bob"
    with pytest.raises(DomainError, match="bob asked for revision 1 attempt 2"):
        d.approve(BOB)
    d.approve(ALICE)
    rollout.claim(c, d, "ctl", ALICE, now=NOW)


def test_approving_a_deployment_that_needs_none_is_refused() -> None:
    d = triggered(config())
    with pytest.raises(DomainError, match="needs no approval"):
        d.approve(BOB)


def test_the_setting_is_left_out_of_a_spec_that_does_not_use_it_and_changes_no_rollout() -> None:
    assert "require_approval" not in Spec(command=["x"]).to_data()
    on = Spec(command=["x"], require_approval=True)
    assert on.to_data()["require_approval"] is True
    assert on.rollout_part() == Spec(command=["x"]).rollout_part()


def row(**changes: Any) -> dict[str, Any]:
    base = {"stream": "s", "config": "web", "revision": 1, "attempt": 1, "phase": "New", "step": None}
    return base | {"cancel": 0, "claimant": None, "claimed_at": None, "timeout": 60, "approval": 0} | changes


def frozen(stream: Any, until: datetime | None) -> dict[str, dict[str, Any]]:
    return {str(stream): {"until": until and until.isoformat(), "reason": "r", "by": "b", "scope": "x", "at": "t"}}


@pytest.mark.parametrize(
    ("d", "freezes", "claimed"),
    [
        (row(), {}, True),
        (row(approval=1), {}, False),
        (row(), frozen(ids.config_id("web"), SOON), False),
        (row(), frozen(ids.config_id("web"), NOW), True),  # ended at NOW
        (row(), frozen(ids.config_id("api"), None), True),
        (row(), frozen(ALL_ID, None), False),
    ],
)
def test_the_plan_claims_nothing_gated(d: dict[str, Any], freezes: dict[str, Any], claimed: bool) -> None:
    actions = plan([d], {}, "me", NOW, frozenset(), freezes)
    assert [a.kind for a in actions] == ([Kind.CLAIM] if claimed else [])
    assert gated(d, freezes, NOW) is not claimed


def test_the_gate_audit_reads_freezes_by_position_and_claims_by_their_own_time() -> None:
    spec = {"spec": {"require_approval": False}, "meta": ALICE}
    events = [
        (1, "Created", "web", 1, "2026-12-01T11:00:00+00:00", spec),
        (2, "Frozen", "web", None, "2026-12-01T11:00:01+00:00", {"until": SOON.isoformat(), "reason": "r"}),
        (3, "DeployerClaimed", "web", 1, SOON.isoformat(), {}),  # at until: the freeze is over
        (4, "Frozen", None, None, "2026-12-01T11:00:02+00:00", {"until": None, "reason": "r"}),
        (5, "DeployerClaimed", "web", 1, SOON.isoformat(), {}),
        (6, "Unfrozen", None, None, "2026-12-01T11:00:03+00:00", {}),
        (7, "DeployerClaimed", "web", 1, NOW.isoformat(), {}),  # inside the config's freeze, by its time
    ]
    found = [(v.position, v.rule) for v in audit_gates(events).violations]
    assert found == [(5, "G1"), (7, "G1")]
