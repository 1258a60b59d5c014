"""Steps, measurements, pauses, promote, abort and the automatic rollback in the domain (DESIGN 7.6), and
the audit of I9 and I10, one test per guard: no database, no process."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest
from pydantic import ValidationError

from rollouts.domain import phases, rollout, step_audit
from rollouts.domain.audit import audit
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError
from rollouts.domain.spec import Spec
from rollouts.domain.step_audit import audit_steps

ME = {"actor": "alice"}
BOB = {"actor": "bob"}
Event = tuple[int, str, str, int | None, dict[str, Any]]


class Log:
    """The events of aggregates as the audit reads them, in the order they were collected."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def take(self, *aggregates: Any) -> None:
        for aggregate in aggregates:
            for e in aggregate.collect_events():
                data = {k: v for k, v in e.__dict__.items() if k not in ("originator_id", "originator_version")}
                revision = getattr(aggregate, "revision", None) if isinstance(aggregate, Deployment) else None
                self.events.append((len(self.events) + 1, type(e).__name__, "web", revision, data))

    def violations(self) -> list[tuple[str, str]]:
        return [(v.rule, v.message) for v in audit_steps(self.events).violations]


def new_config(**spec: Any) -> DeploymentConfig:
    return DeploymentConfig(name="web", spec=Spec(command=["deploy"], **spec).to_data(), meta=ME)


def triggered(c: DeploymentConfig) -> Deployment:
    return rollout.trigger(c, [], cause="manual", message=None, supersede=False, meta=ME)[-1]


def claimed(c: DeploymentConfig) -> Deployment:
    d = triggered(c)
    rollout.claim(c, d, "ctl", ME)
    return d


def run(d: Deployment, exit_code: int = 0) -> str:
    """The current step's process runs and exits with `exit_code`; returns its name."""
    name = d.step.name if d.step else ""
    d.report_created(name, "local", ME)
    d.report_started(name, ME)
    d.report_exited(name, exit_code, None, ME)
    return name


def settle(c: DeploymentConfig, d: Deployment) -> None:
    rollout.settle(c, d, ME)


# -- the spec -----------------------------------------------------------------


def test_a_spec_without_steps_or_verification_is_stored_exactly_as_before() -> None:
    assert Spec(command=["deploy"]).to_data() == {
        "command": ["deploy"],
        "env": {},
        "timeout": 600,
        "history_limit": 10,
        "trigger": "manual",
        "pre_hook": None,
        "post_hook": None,
    }
    stored = Spec(command=["d"], steps=[10, 100], verify=["v"], auto_rollback=True).to_data()
    assert (stored["steps"], stored["verify"], stored["auto_rollback"]) == ([10, 100], ["v"], True)
    assert "verify_count" not in stored and "step_pause" not in stored


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"steps": [50, 10, 100]}, "strictly increasing"),
        ({"steps": [10, 50]}, "must be 100"),
        ({"steps": [0, 100]}, "1..100"),
        ({"steps": []}, "1..100"),
        ({"verify_count": 0}, "greater than or equal to 1"),
        ({"verify_timeout": 0}, "greater than or equal to 1"),
        ({"verify_interval": -1}, "greater than or equal to 0"),
        ({"failure_limit": 3}, "could never fail"),
        ({"step_pause": -1}, "0..86400"),
        ({"step_pause": "later"}, "step_pause"),
        ({"verify": [" "]}, "must not be empty"),
    ],
)
def test_each_bad_value_of_steps_and_verification_is_refused(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Spec(command=["deploy"], **fields)


def test_automatic_rollback_is_a_policy_not_what_a_deployment_runs() -> None:
    on, off = Spec(command=["d"], auto_rollback=True), Spec(command=["d"])
    assert on.rollout_part() == off.rollout_part()


# -- steps, measurements, pauses --------------------------------------------------


def test_steps_run_in_order_each_named_with_its_step_and_verified_before_the_next() -> None:
    c = new_config(steps=[25, 100], verify=["check"], verify_count=2, verify_interval=5)
    d = claimed(c)
    names = [run(d) for _ in range(6)]
    assert names == [
        "web-1-deploy-1-step-1",
        "web-1-verify-1-1",
        "web-1-verify-1-2",
        "web-1-deploy-1-step-2",
        "web-1-verify-1-3",
        "web-1-verify-1-4",
    ]
    assert d.phase == phases.COMPLETE
    assert d.tally() == {"passed": 4, "failed": 0, "inconclusive": 0}


def test_the_next_measurement_waits_its_interval_and_the_first_does_not() -> None:
    d = claimed(new_config(verify=["check"], verify_interval=7))
    run(d)
    assert (d.step.kind, d.step.delay) == ("verify", 0)
    run(d)
    assert (d.step.kind, d.step.delay) == ("verify", 7)


def test_a_failure_past_the_limit_fails_the_deployment_at_once_naming_the_measurement() -> None:
    d = claimed(new_config(verify=["check"], verify_count=3, failure_limit=1))
    run(d)
    run(d)
    run(d, 1)
    assert d.phase == phases.RUNNING  # one failure is within the limit
    run(d, 1)
    assert d.phase == phases.FAILED
    assert d.reason == "verification failed: measurement web-1-verify-1-3 failed (exit code 1)"
    assert d.tally() == {"passed": 1, "failed": 2, "inconclusive": 0}


@pytest.mark.parametrize("exit_code", [2, 137, None])
def test_an_inconclusive_measurement_past_the_limit_pauses_for_a_human(exit_code: int | None) -> None:
    d = claimed(new_config(verify=["check"]))
    run(d)
    name = d.step.name
    d.report_created(name, "local", ME)
    if exit_code is None:
        d.report_lost(name, "gone", ME)
    else:
        d.report_exited(name, exit_code, None, ME)
    assert d.phase == phases.RUNNING
    assert (d.paused.why, d.paused.delay) == ("inconclusive", None)
    assert [type(e).__name__ for e in d.collect_events()][-2:] == ["MeasurementRecorded", "StepPaused"]


def test_promote_ends_an_inconclusive_pause_as_passed_and_full_skips_to_the_last_step() -> None:
    c = new_config(steps=[10, 50, 100], verify=["check"], verify_count=1, step_pause="manual")
    d = claimed(c)
    run(d)
    run(d, 3)
    d.promote(False, BOB)  # the inconclusive verification of step 1 counts as passed: the step's pause follows
    assert (d.paused.why, d.paused.index) == ("step", 1)
    d.promote(True, BOB)
    assert d.step.name == "web-1-deploy-1-step-3"
    run(d)
    assert d.phase == phases.COMPLETE  # no verification after --full


def test_promote_with_nothing_paused_is_refused() -> None:
    d = claimed(new_config(steps=[10, 100]))
    with pytest.raises(DomainError, match="not paused"):
        d.promote(False, ME)


def test_a_timed_pause_ends_by_the_controller_and_a_manual_one_only_by_promote() -> None:
    d = claimed(new_config(steps=[10, 100], step_pause=30))
    run(d)
    assert d.paused.delay == 30
    d.end_pause(ME)
    assert d.step.name == "web-1-deploy-1-step-2"
    m = claimed(new_config(steps=[10, 100], step_pause="manual"))
    run(m)
    with pytest.raises(DomainError, match="timed pause"):
        m.end_pause(ME)


def test_abort_stops_what_runs_then_fails_with_reason_aborted_and_a_new_one_at_once() -> None:
    c = new_config()
    d = claimed(c)
    d.request_abort("bad metrics", ME)
    assert d.phase == phases.PENDING and d.cancel_requested
    d.confirm_cancelled(ME)
    assert (d.phase, d.reason) == (phases.FAILED, "aborted: bad metrics")
    fresh = triggered(new_config())
    fresh.request_abort(None, ME)
    assert (fresh.phase, fresh.reason) == (phases.FAILED, "aborted")


def test_the_phase_fold_of_the_events_equals_the_aggregate() -> None:
    d = claimed(new_config(steps=[10, 100], verify=["check"], verify_count=1, step_pause="manual"))
    run(d)
    run(d)
    d.promote(False, BOB)
    run(d)
    run(d, 1)
    phase = None
    for e in d.collect_events():
        phase = phases.phase_after(phase, type(e).__name__, e.__dict__)
    assert phase == d.phase == phases.FAILED


# -- the automatic rollback ---------------------------------------------------------


def completed_then_failing(**spec: Any) -> tuple[DeploymentConfig, Deployment, Log]:
    """Revision 1 Complete, revision 2 claimed (the config's `first` attribute keeps revision 1)."""
    log = Log()
    c = new_config(**spec)
    first = claimed(c)
    while first.is_open:
        run(first)
    settle(c, first)
    second = claimed(c)
    log.take(c, first, second)
    FIRST[id(c)] = first
    return c, second, log


FIRST: dict[int, Deployment] = {}


def roll_back(c: DeploymentConfig, d: Deployment) -> list[Any]:
    return rollout.auto_rollback(c, d, FIRST[id(c)], dict(c.spec), ME)


def test_a_failure_calls_for_one_rollback_to_the_last_complete_revision() -> None:
    c, d, _ = completed_then_failing(auto_rollback=True)
    run(d, 1)
    settle(c, d)
    assert rollout.rollback_due(c, d) == 1
    roll_back(c, d)
    assert rollout.rollback_due(c, d) is None  # the failed revision is no longer the latest, and was rolled back
    with pytest.raises(DomainError, match="already rolled back"):
        c.record_rollback(2, 1, "again", ME)


def test_the_rollback_runs_as_one_step_needs_no_approval_and_is_not_held_by_a_paused_config() -> None:
    c, d, _ = completed_then_failing(auto_rollback=True, steps=[50, 100])
    c.change_spec({**c.spec, "require_approval": True}, ME)
    c.pause(ME)
    run(d, 1)
    settle(c, d)
    new = roll_back(c, d)[-1]
    assert (new.revision, new.cause, new.awaits_approval) == (3, "automatic rollback to 1", False)
    assert new.spec.get("steps") is None and c.spec["steps"] == [50, 100]
    assert new.message == "version 2 failed: deployer web-2-deploy-1-step-1 failed: exit code 1"


def test_a_rollback_names_the_revision_whose_spec_it_restored_and_no_other_deployment_does() -> None:
    c, d, _ = completed_then_failing(auto_rollback=True, steps=[50, 100])
    run(d, 1)
    settle(c, d)
    new = roll_back(c, d)[-1]
    assert rollout.restored_revision(new) == 1  # its own spec has no steps: restoring it restores v1's
    assert rollout.restored_revision(d) is None
    undone = Deployment(config_id=c.id, config="web", revision=4, spec={}, cause="rollback to 1", message=None, meta=ME)
    assert rollout.restored_revision(undone) is None  # `undo` stores the whole spec it restores


def test_a_config_from_an_older_snapshot_rolls_back_to_the_complete_revision_the_caller_found() -> None:
    c, d, _ = completed_then_failing(auto_rollback=True)
    run(d, 1)
    settle(c, d)
    c.last_complete = None  # as a snapshot taken before configs kept it restores the config
    assert rollout.rollback_due(c, d) is None
    assert rollout.rollback_due(c, d, last_complete=1) == 1


def test_no_rollback_for_a_cancel_without_the_policy_or_for_a_rollback() -> None:
    c, d, _ = completed_then_failing(auto_rollback=True)
    d.request_cancel(ME)
    d.confirm_cancelled(ME)
    assert rollout.rollback_due(c, d) is None
    c2, d2, _ = completed_then_failing()
    run(d2, 1)
    assert rollout.rollback_due(c2, d2) is None
    d2.retry(ME)
    d2.request_abort("by hand", ME)
    assert rollout.rollback_due(c2, d2) == 1  # an abort rolls back whatever the policy


# -- the audit: I9 and I10, a test per guard --------------------------------------


def test_the_audit_passes_a_verified_rollout_and_its_rollback() -> None:
    c, d, log = completed_then_failing(auto_rollback=True, verify=["check"], verify_count=1)
    run(d)
    run(d, 1)
    settle(c, d)
    aggregates = roll_back(c, d)
    log.take(d, *aggregates)
    assert log.violations() == []


def test_i9_a_step_that_starts_before_the_step_before_passed() -> None:
    c = new_config(steps=[10, 100], verify=["check"], verify_count=1)
    d = claimed(c)
    run(d)
    log = Log()
    log.take(c, d)
    name = "web-1-deploy-1-step-2"
    step = {"kind": "deployer", "try": 1, "name": name, "index": 2}
    log.events.append((99, "HookSucceeded", "web", 1, {"name": "x", "next": step, "attempt": 1}))
    log.events.append((100, "DeployerCreated", "web", 1, {"name": name, "attempt": 1}))
    assert ("I9", "step 2 started before step 1 passed") in log.violations()


def test_i9_a_deployment_complete_without_its_verification() -> None:
    c = new_config(verify=["check"], verify_count=2)
    d = claimed(c)
    run(d)
    run(d)
    log = Log()
    log.take(c, d)
    log.events.append((99, "PauseEnded", "web", 1, {"name": "p", "next": None, "step": 1}))  # Complete, one short
    assert log.violations() == [("I9", "Complete, but step 1 of 1 never passed: its verification did not pass")]


def test_i9_a_deployment_complete_though_a_step_deployer_never_exited_0() -> None:
    c = new_config(steps=[50, 100])
    d = claimed(c)
    log = Log()
    log.take(c, d)
    log.events.append((99, "HookSucceeded", "web", 1, {"name": "x", "next": None}))
    assert [v[0] for v in log.violations()] == ["I9"]


def test_i9_a_human_promotion_counts_as_passed() -> None:
    c = new_config(verify=["check"], verify_count=1)
    d = claimed(c)
    run(d)
    run(d, 5)
    d.promote(False, BOB)
    log = Log()
    log.take(c, d)
    assert d.phase == phases.COMPLETE and log.violations() == []


def test_i10_a_failure_whose_rollback_never_followed() -> None:
    c, d, log = completed_then_failing(auto_rollback=True)
    run(d, 1)
    settle(c, d)
    log.take(c, d)
    assert log.violations() == [("I10", "failed, and its rollback to revision 1 never followed")]


def test_i10_a_rollback_twice_and_one_not_called_for() -> None:
    c, d, log = completed_then_failing(auto_rollback=True)
    run(d, 1)
    settle(c, d)
    log.take(d, *roll_back(c, d))
    log.events.append((900, "RollbackTriggered", "web", None, {"failed": 2, "to": 1, "revision": 4}))
    log.events.append((901, "RollbackTriggered", "web", None, {"failed": 3, "to": 1, "revision": 5}))
    assert log.violations() == [
        ("I10", "rolled back a second time"),
        ("I10", "rolled back, but its failure called for no rollback"),
    ]


def test_i10_a_rollback_to_the_wrong_revision() -> None:
    c, d, log = completed_then_failing(auto_rollback=True)
    run(d, 1)
    settle(c, d)
    log.take(c, d)
    log.events.append((900, "RollbackTriggered", "web", None, {"failed": 2, "to": 7, "revision": 3}))
    assert log.violations() == [("I10", "rolled back to 7, not to 1")]


def test_i10_no_rollback_is_due_after_a_cancel_or_without_the_policy() -> None:
    c, d, log = completed_then_failing()
    run(d, 1)
    settle(c, d)
    log.take(c, d)
    assert log.violations() == []


def test_i10_the_audit_expects_no_rollback_unless_a_deployer_step_was_claimed() -> None:
    """An abort before any claim (frozen, waiting) ran nothing: its spec is set back, no rollback runs (7.11)."""
    c = new_config(auto_rollback=True)
    first = claimed(c)
    run(first)
    settle(c, first)
    never = triggered(c)
    never.request_abort("before its claim", ME)
    settle(c, never)
    assert rollout.rollback_due(c, never) == 1 and not never.deployer_claimed
    assert rollout.set_back(c, dict(FIRST_SPEC), ME) == [c]  # the spec set back, no deployment
    log = Log()
    log.take(c, first, never)
    assert log.violations() == []
    assert completed_then_failing()[1].deployer_claimed  # (its failure's missing rollback: the test above)


FIRST_SPEC = Spec(command=["deploy", "--old"]).to_data()


def test_a_claim_is_taken_over_only_while_nothing_runs() -> None:
    d = claimed(new_config(steps=[10, 100], step_pause="manual"))
    with pytest.raises(DomainError, match="runs a process"):
        d.take_over("other", ME)
    run(d)
    d.take_over("other", ME)
    assert d.claimant == "other" and d.paused is not None
    with pytest.raises(DomainError, match="already"):
        d.take_over("other", ME)


def test_an_inconclusive_pause_promoted_into_the_steps_own_pause_names_two_pauses() -> None:
    """Found by the model (5,000 examples): both pauses of step 1 took the name web-1-pause-1-1, and the
    audit saw a step introduced twice (I1)."""
    c = new_config(steps=[50, 100], step_pause=30, verify=["check"], verify_count=1)
    d = claimed(c)
    run(d)
    run(d, 3)
    first = d.paused.name
    d.promote(False, BOB)
    assert (first, d.paused.name) == ("web-1-pause-1-1-inconclusive", "web-1-pause-1-1")
    log = Log()
    log.take(c, d)
    assert audit([(p, t, cfg, v, data) for p, t, cfg, v, data in log.events if v is not None]).violations == []


def _of_spec(node: ast.expr) -> bool:
    """Whether `node` is `spec` or `<something>.spec`."""
    return isinstance(node, ast.Attribute) and node.attr == "spec" or isinstance(node, ast.Name) and node.id == "spec"


def test_the_step_audit_keeps_every_key_of_a_spec_it_reads() -> None:
    """An attempt keeps only the spec keys listed in _SPEC_READ: a read of another key would see it missing,
    and I9 would be checked against defaults. Every key read from a spec in step_audit must be listed."""
    read = set()
    for node in ast.walk(ast.parse(inspect.getsource(step_audit))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if _of_spec(node.func.value) and isinstance(node.args[0], ast.Constant):
                read.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and _of_spec(node.value) and isinstance(node.slice, ast.Constant):
            read.add(node.slice.value)
    assert read, "found no read of a spec: this test no longer sees how step_audit reads one"
    assert read <= set(step_audit._SPEC_READ), f"read but not kept: {sorted(read - set(step_audit._SPEC_READ))}"
