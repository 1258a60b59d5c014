"""domain.phases.phase_after, folded over a deployment's events, agrees with the aggregate after any commands."""

from __future__ import annotations

from functools import reduce
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rollouts.domain import audit, ids, phases
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError
from rollouts.domain.spec import Spec

META = {"actor": "a", "correlation_id": "c"}
CURRENT = "<current step>"
NAMES = [ids.deployer_name("app", 1, a) for a in (1, 2, 3)] + [
    ids.hook_name("app", 1, kind, a, t) for kind in ("pre", "post") for a in (1, 2, 3) for t in (1, 2, 3)
]

policies = st.sampled_from([None, "abort", "retry", "ignore"])
# Weighted so that random scripts get past the claim and through hooks, retries and attempts.
kinds = st.sampled_from(
    ["claim", "retry"] * 3 + ["created", "started"] * 3 + ["exited"] * 6 + ["lost", "cancel", "confirm", "time_out"]
)
targets = st.sampled_from([CURRENT] * len(NAMES) * 3 + NAMES)
exit_codes = st.sampled_from([0, 0, 1, 2, 127, 137])
commands = st.tuples(kinds, targets, exit_codes)


def deployment(pre: str | None, post: str | None) -> Deployment:
    spec = Spec(
        command=["deploy"],
        pre_hook={"command": ["pre"], "policy": pre} if pre else None,
        post_hook={"command": ["post"], "policy": post} if post else None,
    ).to_data()
    return Deployment(
        config_id=ids.config_id("app"), config="app", revision=1, spec=spec, cause="manual", message=None, meta=META
    )


def apply(d: Deployment, command: tuple[Any, ...]) -> None:
    kind, target, exit_code = command
    name = (d.step.name if d.step else NAMES[0]) if target == CURRENT else target
    calls = {
        "claim": lambda: d.claim("ctl", META),
        "cancel": lambda: d.request_cancel(META),
        "confirm": lambda: d.confirm_cancelled(META),
        "retry": lambda: d.retry(META),
        "time_out": lambda: d.time_out(600, META),
        "created": lambda: d.report_created(name, "ref", META),
        "started": lambda: d.report_started(name, META),
        "lost": lambda: d.report_lost(name, "gone", META),
        "exited": lambda: d.report_exited(name, exit_code, None, META),
    }
    calls[kind]()


def fold(events: list[Any]) -> str | None:
    return reduce(lambda phase, e: phases.phase_after(phase, type(e).__name__, e.__dict__), events, None)


def play(pre: str | None, post: str | None, script: list[tuple[Any, ...]]) -> tuple[Deployment, list[Any]]:
    """Run `script`, skipping refused commands, checking the fold after each step."""
    d = deployment(pre, post)
    events = d.collect_events()
    for command in script:
        try:
            apply(d, command)
        except DomainError:
            assert d.collect_events() == [], f"{command} was refused yet appended events"
            continue
        events += d.collect_events()
        assert fold(events) == d.phase, f"after {command}: fold {fold(events)} != aggregate {d.phase}"
    return d, events


@settings(max_examples=400, deadline=None)
@given(pre=policies, post=policies, script=st.lists(commands, min_size=5, max_size=60))
def test_folding_the_events_always_gives_the_aggregates_phase(
    pre: str | None, post: str | None, script: list[tuple[Any, ...]]
) -> None:
    d, _ = play(pre, post, script)
    assert (d.reason is not None) == (d.phase == phases.FAILED)


@settings(max_examples=200, deadline=None)
@given(pre=policies, post=policies, script=st.lists(commands, min_size=5, max_size=60))
def test_audit_finds_nothing_wrong_in_any_deployments_history(
    pre: str | None, post: str | None, script: list[tuple[Any, ...]]
) -> None:
    _, events = play(pre, post, script)
    rows = [(i, type(e).__name__, "app", 1, e.__dict__) for i, e in enumerate(events, start=1)]
    assert audit.audit(rows).violations == []
