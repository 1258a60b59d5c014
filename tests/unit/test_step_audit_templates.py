"""I9 as `audit` reads it with analysis templates (DESIGN 7.9): each source of a step's verification, the
config's --verify and every template, is held to its own count and limits (a template's as its attempt's
claim fixed them), as the deployment decides; found by the chaos run (bench/chaos/run.py --templates), where
a template's inconclusive measurement within its own limit was reported as a step that never passed."""

from __future__ import annotations

from typing import Any

from rollouts.domain.step_audit import audit_steps

SPEC = {"command": ["deploy"], "verify": ["check"], "verify_count": 1, "inconclusive_limit": 0}
PROM = {"template": "prom", "version": 2, "count": 1, "interval": 0, "failure_limit": 0, "inconclusive_limit": 1}


def log(spec: dict[str, Any], fixed: list[dict[str, Any]], outcomes: list[tuple[str | None, str]]) -> list[Any]:
    """A one-step deployment whose deployer exited 0, then `outcomes` (template NAME@V or None, outcome),
    the last of them ending it Complete."""
    deploy = {"kind": "deployer", "try": 1, "name": "web-1-deploy-1"}
    events: list[tuple[str, int | None, dict[str, Any]]] = [
        ("Registered", None, {"spec": spec}),
        ("RolloutTriggered", None, {"revision": 1}),
        ("Created", 1, {"spec": spec, "cause": "manual"}),
        ("DeployerClaimed", 1, {"attempt": 1, "name": deploy["name"], "step": deploy, "analysis": fixed}),
        ("DeployerStarted", 1, {"attempt": 1, "name": deploy["name"]}),
    ]
    measure = {"kind": "verify", "try": 1, "name": "web-1-verify-1-1"} if outcomes else None
    events.append(("DeployerSucceeded", 1, {"attempt": 1, "name": deploy["name"], "next": measure}))
    for k, (template, outcome) in enumerate(outcomes, start=1):
        after = {"kind": "verify", "try": k + 1, "name": f"web-1-verify-1-{k + 1}"} if k < len(outcomes) else None
        data = {"attempt": 1, "name": f"web-1-verify-1-{k}", "number": k, "step": 1, "outcome": outcome}
        events.append(("MeasurementRecorded", 1, {**data, "template": template, "next": after, "reason": None}))
    return [(i, type_, "web", revision, data) for i, (type_, revision, data) in enumerate(events, start=1)]


def i9(events: list[Any]) -> list[str]:
    return [v.message for v in audit_steps(events).violations if v.rule == "I9"]


def test_a_templates_inconclusive_measurement_within_its_own_limit_passes_the_step() -> None:
    """--verify allows no inconclusive one, the template one: the step passed (the deployment went on)."""
    assert i9(log(SPEC, [PROM], [(None, "passed"), ("prom@2", "inconclusive")])) == []


def test_an_inconclusive_verify_past_the_configs_own_limit_is_still_a_step_that_never_passed() -> None:
    assert i9(log(SPEC, [PROM], [(None, "inconclusive"), ("prom@2", "passed")])) != []


def test_a_template_only_step_is_held_to_its_templates_limits() -> None:
    """No --verify: a Complete step whose template measurement failed (limit 0), or that took fewer than the
    template's count, is an I9 break; one within its limits is not."""
    spec = {"command": ["deploy"]}
    assert i9(log(spec, [PROM], [("prom@2", "passed")])) == []
    assert len(i9(log(spec, [PROM], [("prom@2", "failed")]))) == 1
    assert len(i9(log(spec, [{**PROM, "count": 2}], [("prom@2", "passed")]))) == 1


def test_a_step_with_no_verification_at_all_needs_none() -> None:
    assert i9(log({"command": ["deploy"]}, [], [])) == []
