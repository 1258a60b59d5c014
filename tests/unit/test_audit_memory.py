"""What `audit` keeps of a finished deployment (domain/audit_rules.py): its memory grows with the deployer names
the log holds (I1), not with every deployment's steps, specs and approvals; and what a retry reads is kept."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from typing import Any

from rollouts.domain.audit_rules import RuleEvent, audit_rules

SPEC = {"command": ["./deploy.sh", "--build=7"], "env": {"IMAGE": "app:1"}, "verify": None, "verify_count": 3}


def deployments(count: int, configs: int = 10) -> Iterator[RuleEvent]:
    """`count` deployments over `configs` configs, each created, claimed, run and Complete (a tenth fail)."""
    position = 0

    def event(type_: str, config: str, revision: int | None, **data: Any) -> RuleEvent:
        nonlocal position
        position += 1
        meta = {"actor": "alice@ops", "os_user": "alice@host", "correlation_id": f"{position:016x}"}
        return (position, type_, config, revision, "2026-01-01T00:00:00+00:00", {**data, "meta": meta}, True)

    for n in range(count):
        config, revision = f"svc-{n % configs}", n // configs + 1
        name = f"{config}-{revision}-deploy-1"
        yield event("Created", config, revision, spec=dict(SPEC), cause="rollout latest")
        yield event("DeployerClaimed", config, revision, step={"kind": "deployer", "name": name, "index": 1})
        yield event("DeployerCreated", config, revision, name=name, ref=f"pid:{n}")
        yield event("DeployerStarted", config, revision, name=name)
        if n % 10:
            yield event("DeployerSucceeded", config, revision, name=name, next=None)
        else:
            yield event("DeployerFailed", config, revision, name=name, reason="exit 1")


def peak(count: int) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        assert audit_rules(deployments(count), frozenset()) == []
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_finished_deployment_costs_the_audit_little_memory() -> None:
    # Before: ~3 KB a deployment (its attempt's steps, its spec, its approval's people, its stage fold).
    per_deployment = (peak(6000) - peak(3000)) / 3000
    assert per_deployment < 900, f"{per_deployment:.0f} bytes a finished deployment"


def test_a_retry_after_the_end_is_still_checked_from_what_was_kept() -> None:
    events = list(deployments(1, configs=1))  # svc-0 revision 1: failed (the first of every ten fails)
    assert events[-1][1] == "DeployerFailed"
    events[0][5]["spec"]["verify"] = ["./check.sh"]  # each step verified by one measurement
    events[0][5]["spec"]["verify_count"] = 1
    at = len(events)

    def more(type_: str, **data: Any) -> RuleEvent:
        return (at + len(extra) + 1, type_, "svc-0", 1, "2026-01-01T00:00:00+00:00", data, True)

    extra: list[RuleEvent] = []
    extra.append(more("RetryRequested"))
    extra.append(more("DeployerClaimed", step={"kind": "deployer", "name": "svc-0-1-deploy-2", "index": 1}))
    extra.append(more("DeployerSucceeded", name="svc-0-1-deploy-2", next=None))
    found = [(v.rule, v.message) for v in audit_rules([*events, *extra], frozenset())]
    # The retried attempt is held to its spec's verification (kept from the Created, long Failed): Complete
    # with no measurement is an I9; nothing else (the retry itself is allowed from Failed).
    assert found == [("I9", "Complete, but step 1 of 1 never passed: its verification did not pass")]


def test_an_event_after_the_end_is_still_reported() -> None:
    events = list(deployments(2, configs=1))  # svc-0 revision 2: Complete
    at = "2026-01-01T00:00:00+00:00"
    late = (len(events) + 1, "DeployerCreated", "svc-0", 2, at, {"name": "svc-0-2-deploy-1"}, True)
    found = [(v.rule, v.message) for v in audit_rules([*events, late], frozenset())]
    assert ("I1", "deployer svc-0-2-deploy-1 created twice (first at position 8)") in found
    assert ("I3", "DeployerCreated happened in phase Complete") in found
