"""Every rule `audit` checks over the log's events, fed in one pass: I1-I3 (audit), G1 and G2 (gate_audit),
I9 and I10 (step_audit), I11 (stage_audit). Each event is read and decoded once, and handed to each check
that reads it."""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Any

from . import phases
from .audit import Auditor, Violation
from .gate_audit import TYPES as GATE_TYPES
from .gate_audit import GateAuditor
from .stage_audit import StageAuditor
from .step_audit import CONFIG_TYPES, StepAuditor

# The event types besides a deployment's own that some check reads (what a reader must select).
TYPES = tuple(dict.fromkeys((*GATE_TYPES, *CONFIG_TYPES)))


# position, type, config (None: a freeze of all configs), revision (None: not a deployment's event), time,
# data, and whether it is an event of a deployment's stream. A plain tuple: a reader makes one per event.
RuleEvent = tuple[int, str, str | None, int | None, str, dict[str, Any], bool]


def audit_rules(events: Iterable[RuleEvent], upstreams: Container[str] | None = None) -> list[Violation]:
    """The violations of every rule, by check (I1-I3, then G1-G2, then I9-I10, then I11), each in log order.

    `upstreams`: the configs a stage policy anywhere in the log names, if the caller knows them (see
    StageAuditor). A deployment Complete or Failed keeps in each check only what a retry reads (every other
    event after either phase is an I3 violation): the checks' memory grows with the configs and the names
    of deployers (I1), not with every deployment's steps."""
    deployments, gates, steps, stages = Auditor(), GateAuditor(), StepAuditor(), StageAuditor(upstreams)
    gated, configs, terminal = frozenset(GATE_TYPES), frozenset(CONFIG_TYPES), phases.TERMINAL
    deployment, step, gate, stage = deployments.feed, steps.feed, gates.feed, stages.feed  # looked up once
    for position, type_, config, revision, at, data, of_deployment in events:
        if of_deployment:
            after = deployment(position, type_, config, revision, data)  # type: ignore[arg-type]
            step(position, type_, config, revision, data, after)  # type: ignore[arg-type]
            stage(position, type_, config, revision, at, data)  # type: ignore[arg-type]
            if type_ in gated:
                gate(position, type_, config, revision, at, data)
            if after in terminal:
                gates.finished((config, revision))  # type: ignore[arg-type]
            continue
        if type_ in configs:
            step(position, type_, config, None, data)  # type: ignore[arg-type]
            stage(position, type_, config, None, at, data)  # type: ignore[arg-type]
        if type_ in gated:
            gate(position, type_, config, revision, at, data)
    return [*deployments.violations, *gates.violations, *steps.finish().violations, *stages.violations]


__all__ = ["TYPES", "RuleEvent", "Violation", "audit_rules"]
