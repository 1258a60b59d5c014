"""The Deployment phase machine: every row of the DESIGN section 3 table, refusals and stale reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rollouts.domain import ids, phases
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError, IllegalTransition
from rollouts.domain.spec import Spec

META = {"actor": "a", "correlation_id": "c"}


def deployment(pre: str | None = None, post: str | None = None) -> Deployment:
    """A New deployment of app revision 1; `pre`/`post` give a hook with that policy."""
    spec = Spec(
        command=["deploy"],
        pre_hook={"command": ["pre"], "policy": pre} if pre else None,
        post_hook={"command": ["post"], "policy": post} if post else None,
    ).to_data()
    return Deployment(
        config_id=ids.config_id("app"), config="app", revision=1, spec=spec, cause="manual", message=None, meta=META
    )


def step(d: Deployment) -> str:
    return d.step.name  # type: ignore[union-attr]


def run_step(d: Deployment) -> None:
    """Report the current step as created and started."""
    d.report_created(step(d), "ref", META)
    d.report_started(step(d), META)


def exit_step(d: Deployment, code: int = 0) -> None:
    d.report_exited(step(d), code, None, META)


def types(d: Deployment) -> list[str]:
    """The types of the events appended since the last call (drains them)."""
    return [type(e).__name__ for e in d.collect_events()]


def in_phase(phase: str, **hooks: str) -> Deployment:
    """A deployment brought to `phase` through its commands, with no pending events."""
    d = deployment(**hooks)
    if phase != phases.NEW:
        d.claim("ctl", META)
    if phase in (phases.RUNNING, phases.COMPLETE):
        run_step(d)
    if phase == phases.COMPLETE:
        exit_step(d, 0)
    if phase == phases.FAILED:
        exit_step(d, 1)
    d.collect_events()
    assert d.phase == phase
    return d


# -- the rows of the table -------------------------------------------------------


def test_created_deployment_is_new_at_attempt_one() -> None:
    d = deployment()
    assert (d.phase, d.attempt, d.reason, d.step) == (phases.NEW, 1, None, None)
    assert types(d) == ["Created"]


def test_claim_moves_new_to_pending_and_names_the_deployer() -> None:
    d = in_phase(phases.NEW)
    d.claim("ctl", META)
    assert (d.phase, d.claimant, step(d)) == (phases.PENDING, "ctl", "app-1-deploy-1")
    assert types(d) == ["DeployerClaimed"]


def test_deployer_created_keeps_pending() -> None:
    d = in_phase(phases.PENDING)
    assert d.report_created("app-1-deploy-1", "ref", META) is True
    assert d.phase == phases.PENDING
    assert types(d) == ["DeployerCreated"]


def test_deployer_started_moves_pending_to_running() -> None:
    d = in_phase(phases.PENDING)
    assert d.report_started("app-1-deploy-1", META) is True
    assert d.phase == phases.RUNNING
    assert types(d) == ["DeployerStarted"]


@pytest.mark.parametrize("phase", [phases.PENDING, phases.RUNNING])
def test_deployer_success_completes_an_active_deployment(phase: str) -> None:
    d = in_phase(phase)
    assert d.report_exited("app-1-deploy-1", 0, None, META) is True
    assert (d.phase, d.reason) == (phases.COMPLETE, None)
    assert types(d) == ["DeployerSucceeded"]


@pytest.mark.parametrize("phase", [phases.PENDING, phases.RUNNING])
def test_deployer_nonzero_exit_fails_with_the_deployer_name_in_reason(phase: str) -> None:
    d = in_phase(phase)
    d.report_exited("app-1-deploy-1", 2, None, META)
    assert d.phase == phases.FAILED
    assert "app-1-deploy-1" in d.reason and "exit code 2" in d.reason  # type: ignore[operator]
    assert types(d) == ["DeployerFailed"]


@pytest.mark.parametrize("phase", [phases.PENDING, phases.RUNNING])
def test_lost_deployer_fails_with_a_reason_that_says_lost(phase: str) -> None:
    d = in_phase(phase)
    assert d.report_lost("app-1-deploy-1", "pod deleted", META) is True
    assert d.phase == phases.FAILED
    assert "lost" in d.reason and "app-1-deploy-1" in d.reason  # type: ignore[operator]
    assert types(d) == ["DeployerLost"]


def test_cancel_of_a_new_deployment_fails_it_at_once_as_cancelled() -> None:
    d = in_phase(phases.NEW)
    assert d.request_cancel(META) is True
    assert (d.phase, d.reason) == (phases.FAILED, "cancelled")
    assert types(d) == ["CancelRequested"]


@pytest.mark.parametrize("phase", [phases.PENDING, phases.RUNNING])
def test_cancel_of_an_active_deployment_is_requested_then_confirmed(phase: str) -> None:
    d = in_phase(phase)
    assert d.request_cancel(META) is True
    assert (d.phase, d.cancel_requested) == (phase, True)
    assert types(d) == ["CancelRequested"]
    d.confirm_cancelled(META)
    assert (d.phase, d.reason) == (phases.FAILED, "cancelled")
    assert types(d) == ["Cancelled"]


def test_a_second_cancel_request_returns_false_and_appends_nothing() -> None:
    d = in_phase(phases.RUNNING)
    d.request_cancel(META)
    d.collect_events()
    assert d.request_cancel(META) is False
    assert types(d) == []


def test_retry_reopens_a_failed_deployment_as_new_with_the_next_attempt() -> None:
    d = in_phase(phases.FAILED)
    d.retry(META)
    assert (d.phase, d.attempt, d.reason, d.step, d.claimant) == (phases.NEW, 2, None, None, None)
    assert types(d) == ["RetryRequested"]
    d.claim("ctl", META)
    assert step(d) == "app-1-deploy-2"


def test_retry_after_cancel_clears_the_cancel_request() -> None:
    d = in_phase(phases.RUNNING)
    d.request_cancel(META)
    d.confirm_cancelled(META)
    d.retry(META)
    assert d.cancel_requested is False


@pytest.mark.parametrize("phase", [phases.PENDING, phases.RUNNING])
def test_time_out_fails_an_active_deployment_with_timeout_in_reason(phase: str) -> None:
    d = in_phase(phase)
    d.time_out(600, META)
    assert d.phase == phases.FAILED
    assert "timeout" in d.reason  # type: ignore[operator]
    assert types(d) == ["DeployerFailed"]


def test_every_event_carries_the_meta_of_its_command() -> None:
    d = deployment()
    d.claim("ctl", {"actor": "bob", "correlation_id": "k1"})
    assert [e.meta for e in d.collect_events()] == [META, {"actor": "bob", "correlation_id": "k1"}]


# -- hooks -----------------------------------------------------------------------


def test_pre_hook_runs_before_the_deployer_while_pending() -> None:
    d = in_phase(phases.NEW, pre="abort")
    d.claim("ctl", META)
    assert step(d) == "app-1-hook-pre-1"
    run_step(d)
    exit_step(d, 0)
    assert (d.phase, step(d)) == (phases.PENDING, "app-1-deploy-1")
    assert types(d) == ["DeployerClaimed", "HookCreated", "HookStarted", "HookSucceeded"]
    run_step(d)
    assert d.phase == phases.RUNNING


def test_post_hook_keeps_the_deployment_running_then_completes_it() -> None:
    d = in_phase(phases.RUNNING, post="abort")
    exit_step(d, 0)
    assert (d.phase, step(d)) == (phases.RUNNING, "app-1-hook-post-1")
    run_step(d)
    assert d.phase == phases.RUNNING
    exit_step(d, 0)
    assert (d.phase, d.reason) == (phases.COMPLETE, None)
    assert types(d) == ["DeployerSucceeded", "HookCreated", "HookStarted", "HookSucceeded"]


def test_hook_policy_defaults_to_abort() -> None:
    assert Spec(command=["deploy"], pre_hook={"command": ["pre"]}).pre_hook.policy == "abort"  # type: ignore[union-attr]


@pytest.mark.parametrize(("hook", "name"), [("pre", "app-1-hook-pre-1"), ("post", "app-1-hook-post-1")])
def test_failing_abort_hook_fails_the_deployment_with_a_reason_naming_the_hook(hook: str, name: str) -> None:
    d = in_phase(phases.PENDING, **{hook: "abort"})
    if hook == "post":
        exit_step(d, 0)
    d.collect_events()
    d.report_exited(name, 3, None, META)
    assert d.phase == phases.FAILED
    assert name in d.reason  # type: ignore[operator]
    assert types(d) == ["HookFailed"]


def test_retry_hook_runs_at_most_three_times_with_numbered_names() -> None:
    d = in_phase(phases.PENDING, pre="retry")
    names = []
    for _ in range(3):
        names.append(step(d))
        assert d.phase == phases.PENDING
        exit_step(d, 1)
    assert names == ["app-1-hook-pre-1", "app-1-hook-pre-1-2", "app-1-hook-pre-1-3"]
    assert d.phase == phases.FAILED
    assert "app-1-hook-pre-1-3" in d.reason  # type: ignore[operator]


def test_retry_hook_that_succeeds_on_its_second_try_goes_on_to_the_deployer() -> None:
    d = in_phase(phases.PENDING, pre="retry")
    exit_step(d, 1)
    exit_step(d, 0)
    assert (d.phase, step(d)) == (phases.PENDING, "app-1-deploy-1")


def test_ignored_failing_pre_hook_goes_on_to_the_deployer() -> None:
    d = in_phase(phases.PENDING, pre="ignore")
    exit_step(d, 1)
    assert (d.phase, step(d)) == (phases.PENDING, "app-1-deploy-1")


def test_ignored_failing_post_hook_completes_the_deployment() -> None:
    d = in_phase(phases.RUNNING, post="ignore")
    exit_step(d, 0)
    exit_step(d, 1)
    assert (d.phase, d.reason) == (phases.COMPLETE, None)


def test_retried_attempt_names_its_hooks_with_the_new_attempt() -> None:
    d = in_phase(phases.FAILED, pre="abort")
    d.retry(META)
    d.claim("ctl", META)
    assert step(d) == "app-1-hook-pre-2"


# -- illegal transitions -----------------------------------------------------------

COMMANDS: dict[str, Callable[[Deployment], Any]] = {
    "claim": lambda d: d.claim("ctl", META),
    "time_out": lambda d: d.time_out(600, META),
    "request_cancel": lambda d: d.request_cancel(META),
    "confirm_cancelled": lambda d: d.confirm_cancelled(META),
    "retry": lambda d: d.retry(META),
}
ILLEGAL = [
    ("claim", phases.PENDING),
    ("claim", phases.RUNNING),
    ("claim", phases.COMPLETE),
    ("claim", phases.FAILED),
    ("time_out", phases.NEW),
    ("time_out", phases.COMPLETE),
    ("time_out", phases.FAILED),
    ("request_cancel", phases.COMPLETE),
    ("request_cancel", phases.FAILED),
    ("confirm_cancelled", phases.NEW),
    ("confirm_cancelled", phases.PENDING),  # no cancel was requested
    ("confirm_cancelled", phases.RUNNING),
    ("confirm_cancelled", phases.COMPLETE),
    ("confirm_cancelled", phases.FAILED),
    ("retry", phases.NEW),
    ("retry", phases.PENDING),
    ("retry", phases.RUNNING),
    ("retry", phases.COMPLETE),
]


@pytest.mark.parametrize(("command", "phase"), ILLEGAL)
def test_illegal_command_raises_and_appends_nothing(command: str, phase: str) -> None:
    d = in_phase(phase)
    before = (d.version, d.phase, d.reason, d.attempt)
    assert len(d.collect_events()) == 0
    with pytest.raises(DomainError):
        COMMANDS[command](d)
    assert len(d.collect_events()) == 0
    assert (d.version, d.phase, d.reason, d.attempt) == before


@pytest.mark.parametrize("phase", [phases.PENDING, phases.RUNNING, phases.COMPLETE, phases.FAILED])
def test_claim_outside_new_is_an_illegal_transition(phase: str) -> None:
    with pytest.raises(IllegalTransition, match=f"phase {phase}"):
        in_phase(phase).claim("ctl", META)


# -- stale reports -------------------------------------------------------------------

REPORTS: dict[str, Callable[[Deployment, str], bool]] = {
    "created": lambda d, name: d.report_created(name, "ref", META),
    "started": lambda d, name: d.report_started(name, META),
    "exited": lambda d, name: d.report_exited(name, 0, None, META),
    "exited-failing": lambda d, name: d.report_exited(name, 1, None, META),
    "lost": lambda d, name: d.report_lost(name, "gone", META),
}


def snapshot(d: Deployment) -> tuple[Any, ...]:
    return (d.version, d.phase, d.reason, d.attempt, d.step, d.cancel_requested)


def assert_ignored(d: Deployment, report: str, name: str) -> None:
    d.collect_events()
    before = snapshot(d)
    assert REPORTS[report](d, name) is False
    assert snapshot(d) == before
    assert len(d.collect_events()) == 0


@pytest.mark.parametrize("report", REPORTS)
def test_report_about_an_older_attempts_deployer_is_ignored(report: str) -> None:
    d = in_phase(phases.FAILED)
    d.retry(META)
    d.claim("ctl", META)
    run_step(d)
    assert_ignored(d, report, "app-1-deploy-1")


@pytest.mark.parametrize("report", REPORTS)
@pytest.mark.parametrize("phase", [phases.COMPLETE, phases.FAILED])
def test_report_about_a_terminal_deployment_is_ignored(report: str, phase: str) -> None:
    assert_ignored(in_phase(phase), report, "app-1-deploy-1")


@pytest.mark.parametrize("report", REPORTS)
def test_report_about_a_new_deployment_is_ignored(report: str) -> None:
    assert_ignored(in_phase(phases.NEW), report, "app-1-deploy-1")


@pytest.mark.parametrize("report", REPORTS)
def test_report_about_an_earlier_hook_try_is_ignored(report: str) -> None:
    d = in_phase(phases.PENDING, pre="retry")
    exit_step(d, 1)
    assert_ignored(d, report, "app-1-hook-pre-1")


@pytest.mark.parametrize("report", REPORTS)
def test_report_about_the_deployer_while_the_pre_hook_runs_is_ignored(report: str) -> None:
    assert_ignored(in_phase(phases.PENDING, pre="abort"), report, "app-1-deploy-1")


@pytest.mark.parametrize("report", ["created", "started"])
def test_repeated_created_or_started_report_is_ignored(report: str) -> None:
    assert_ignored(in_phase(phases.RUNNING), report, "app-1-deploy-1")
