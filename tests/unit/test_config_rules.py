"""DeploymentConfig rules and the cross-aggregate decisions of domain.rollout: slot, pause, trigger, cancel, retry."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from eventsourcing.domain import Aggregate

from rollouts.domain import phases, rollout
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError
from rollouts.domain.spec import Spec

META = {"actor": "a", "correlation_id": "c"}


def config() -> DeploymentConfig:
    c = DeploymentConfig(name="app", spec=Spec(command=["deploy"]).to_data(), meta=META)
    c.collect_events()
    return c


def trigger(c: DeploymentConfig, *open_: Deployment, supersede: bool = False) -> Deployment:
    saved = rollout.trigger(c, open_, cause="manual", message="why", supersede=supersede, meta=META)
    drain(*saved)
    return saved[-1]  # type: ignore[return-value]


def claimed(c: DeploymentConfig, *open_: Deployment, supersede: bool = False) -> Deployment:
    d = trigger(c, *open_, supersede=supersede)
    drain(*rollout.claim(c, d, "ctl", META))
    return d


def finish(c: DeploymentConfig, d: Deployment, exit_code: int) -> None:
    """The deployer exits and the outcome is saved with the slot's release."""
    d.report_exited(d.step.name, exit_code, None, META)  # type: ignore[union-attr]
    rollout.settle(c, d, META)
    drain(c, d)


def drain(*aggregates: Aggregate) -> None:
    for aggregate in aggregates:
        aggregate.collect_events()


def types(aggregate: Aggregate) -> list[str]:
    return [type(e).__name__ for e in aggregate.collect_events()]


def assert_refused(call: Callable[[], object], *aggregates: Aggregate, match: str) -> None:
    drain(*aggregates)
    with pytest.raises(DomainError, match=match):
        call()
    assert [len(a.collect_events()) for a in aggregates] == [0] * len(aggregates)


# -- the slot --------------------------------------------------------------------


def test_new_config_has_a_free_slot_and_nothing_open() -> None:
    c = config()
    assert (c.slot, c.open_revisions, c.latest_revision, c.paused) == (None, [], 0, False)


def test_trigger_opens_the_next_revision_with_a_copy_of_the_spec() -> None:
    c = config()
    d = trigger(c)
    assert (d.revision, d.phase, d.spec, d.cause, d.message) == (1, phases.NEW, c.spec, "manual", "why")
    assert (c.latest_revision, c.open_revisions) == (1, [1])


def test_claim_takes_the_free_slot_together_with_the_deployment() -> None:
    c = config()
    d = trigger(c)
    assert rollout.claim(c, d, "ctl", META) == [c, d]
    assert c.slot == {"revision": 1, "attempt": 1}
    assert d.phase == phases.PENDING
    assert (types(c), types(d)) == (["SlotClaimed"], ["DeployerClaimed"])


def test_a_claim_that_names_no_claimant_is_refused() -> None:
    c = config()
    d = trigger(c)
    assert_refused(lambda: rollout.claim(c, d, "", META), c, d, match="names no claimant")
    assert d.phase == phases.NEW


def test_claim_while_another_deployment_holds_the_slot_is_refused() -> None:
    c = config()
    first = claimed(c)
    second = trigger(c, first, supersede=True)
    assert_refused(lambda: rollout.claim(c, second, "ctl", META), c, second, match="held by revision 1")
    assert second.phase == phases.NEW


def test_claim_of_a_revision_with_an_older_one_still_open_is_refused() -> None:
    c = config()
    c.trigger("manual", None, False, META)
    c.trigger("manual", None, True, META)
    assert_refused(lambda: c.claim_slot(2, 1, "ctl", META), c, match="must wait for older revisions")


def test_claim_of_a_revision_that_is_not_open_is_refused_and_the_oldest_open_one_may_be_claimed() -> None:
    """7.10: a revision queued behind an older open one leaves that one claimable (a superseded one is
    cancelled in the same save: never open, never claimed)."""
    c = config()
    c.trigger("manual", None, False, META)
    c.trigger("manual", None, True, META)
    assert_refused(lambda: c.claim_slot(3, 1, "ctl", META), c, match="must wait")
    c.claim_slot(1, 1, "ctl", META)
    assert c.slot == {"revision": 1, "attempt": 1}


def test_terminal_outcome_releases_the_slot() -> None:
    c = config()
    d = claimed(c)
    d.report_exited("app-1-deploy-1", 0, None, META)
    rollout.settle(c, d, META)
    assert (c.slot, c.open_revisions) == (None, [])
    assert types(c) == ["RolloutEnded"]


def test_settle_of_an_open_deployment_keeps_the_slot() -> None:
    c = config()
    d = claimed(c)
    rollout.settle(c, d, META)
    assert c.slot == {"revision": 1, "attempt": 1}
    assert types(c) == []


def test_end_of_a_revision_that_is_not_open_appends_nothing() -> None:
    c = config()
    c.end(7, 1, phases.COMPLETE, META)
    assert types(c) == []


def test_next_revision_can_claim_once_the_older_one_ended() -> None:
    c = config()
    first = claimed(c)
    second = trigger(c, first, supersede=True)
    first.confirm_cancelled(META)
    rollout.settle(c, first, META)
    rollout.claim(c, second, "ctl", META)
    assert c.slot == {"revision": 2, "attempt": 1}


# -- pause and resume --------------------------------------------------------------


def test_pause_of_a_paused_config_is_refused() -> None:
    c = config()
    c.pause(META)
    assert_refused(lambda: c.pause(META), c, match="already paused")


def test_resume_of_a_running_config_is_refused() -> None:
    c = config()
    assert_refused(lambda: c.resume(META), c, match="not paused")


def test_pause_then_resume_allows_a_rollout_again() -> None:
    c = config()
    c.pause(META)
    c.resume(META)
    assert types(c) == ["Paused", "Resumed"]
    assert trigger(c).revision == 1


# -- trigger -------------------------------------------------------------------------


@pytest.mark.parametrize("supersede", [False, True])
def test_trigger_while_paused_is_refused(supersede: bool) -> None:
    c = config()
    c.pause(META)
    assert_refused(lambda: trigger(c, supersede=supersede), c, match="paused")
    assert c.latest_revision == 0


@pytest.mark.parametrize("phase", [phases.NEW, phases.PENDING, phases.RUNNING])
def test_trigger_while_a_revision_is_open_is_refused(phase: str) -> None:
    c = config()
    d = trigger(c) if phase == phases.NEW else claimed(c)
    if phase == phases.RUNNING:
        d.report_started("app-1-deploy-1", META)
    assert_refused(lambda: trigger(c, d), c, d, match="revision 1 in progress")


@pytest.mark.parametrize("exit_code", [0, 1])
def test_trigger_after_the_latest_revision_ended_opens_the_next(exit_code: int) -> None:
    c = config()
    finish(c, claimed(c), exit_code)
    assert trigger(c).revision == 2


def test_superseding_a_new_revision_fails_it_at_once_and_releases_it() -> None:
    c = config()
    first = trigger(c)
    saved = rollout.trigger(c, [first], cause="manual", message=None, supersede=True, meta=META)
    assert saved[:2] == [c, first]
    assert (first.phase, first.reason) == (phases.FAILED, "cancelled")
    assert (c.open_revisions, c.slot) == ([2], None)
    assert types(c) == ["RolloutTriggered", "RolloutEnded"]


def test_superseding_a_pending_revision_requests_its_cancel_and_keeps_its_slot() -> None:
    c = config()
    first = claimed(c)
    second = trigger(c, first, supersede=True)
    assert (first.phase, first.cancel_requested) == (phases.PENDING, True)
    assert c.slot == {"revision": 1, "attempt": 1}
    assert (c.open_revisions, second.revision, second.phase) == ([1, 2], 2, phases.NEW)


# -- cancel ----------------------------------------------------------------------


def test_cancel_with_nothing_open_is_refused() -> None:
    c = config()
    finish(c, claimed(c), 0)
    assert_refused(lambda: rollout.cancel(c, [], META), c, match="no rollout in progress")


def test_cancel_fails_a_new_revision_and_releases_it() -> None:
    c = config()
    d = trigger(c)
    assert rollout.cancel(c, [d], META) == [c, d]
    assert (d.phase, d.reason, c.open_revisions) == (phases.FAILED, "cancelled", [])


def test_cancel_of_a_running_revision_requests_it_and_keeps_the_slot() -> None:
    c = config()
    d = claimed(c)
    rollout.cancel(c, [d], META)
    assert (d.phase, d.cancel_requested, c.slot) == (phases.PENDING, True, {"revision": 1, "attempt": 1})


# -- retry -----------------------------------------------------------------------


def test_retry_of_the_latest_failed_revision_reopens_it_with_the_next_attempt() -> None:
    c = config()
    d = claimed(c)
    finish(c, d, 1)
    assert rollout.retry(c, d, META) == [c, d]
    assert (d.revision, d.attempt, d.phase) == (1, 2, phases.NEW)
    assert (c.latest_revision, c.open_revisions) == (1, [1])
    rollout.claim(c, d, "ctl", META)
    assert (c.slot, d.step.name) == ({"revision": 1, "attempt": 2}, "app-1-deploy-2")  # type: ignore[union-attr]


def test_retry_of_a_complete_revision_is_refused() -> None:
    c = config()
    d = claimed(c)
    finish(c, d, 0)
    assert_refused(lambda: rollout.retry(c, d, META), c, d, match="only a Failed deployment")


def test_retry_of_an_older_failed_revision_is_refused() -> None:
    c = config()
    old = claimed(c)
    finish(c, old, 1)
    trigger(c)
    assert_refused(lambda: rollout.retry(c, old, META), c, old, match=r"only the latest revision \(2\)")


def test_reopen_of_an_older_revision_is_refused_by_the_config_itself() -> None:
    c = config()
    c.trigger("manual", None, False, META)
    c.trigger("manual", None, True, META)
    assert_refused(lambda: c.reopen(1, 2, META), c, match="only the latest revision")


# -- spec changes ------------------------------------------------------------------


def test_change_to_the_same_spec_appends_nothing() -> None:
    c = config()
    assert c.change_spec(dict(c.spec), META) is False
    assert types(c) == []


def test_change_of_spec_on_a_paused_config_is_recorded() -> None:
    c = config()
    c.pause(META)
    new = Spec(command=["deploy", "--fast"]).to_data()
    assert c.change_spec(new, META) is True
    assert (c.spec, c.paused) == (new, True)
