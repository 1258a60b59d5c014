"""What the log shows of the gates on claims: no claim inside a freeze (G1), none without its approval (G2).

G2 also covers the guard itself (7.11): a config's spec that lowered its approval guard (approval.lowers)
with no GuardLoweringApproved just before it, by someone the mode of that time tells apart from who
asked, leaves the guard lowered without a second person; a deployment opened (or retried) under it and
then claimed is reported, until a later spec is no lower than the guard was.

A pure check over the events that open, approve and claim attempts, and that freeze and unfreeze,
in log order. A freeze holds from its position until an Unfrozen after it, and only while the claim's
own timestamp is before its `until`: the log alone decides, never the clock of whoever audits.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from . import approval
from .audit import Violation
from .freeze_rules import in_force

# The event types this audit reads (audit_rules.TYPES lists them for the readers of the log, audit_queries.rule_events).
TYPES = (
    "Created",
    "RetryRequested",
    "Approved",
    "DeployerClaimed",
    "Frozen",
    "Unfrozen",
    *("Registered", "SpecChanged", "GuardLoweringRequested", "GuardLoweringApproved"),
)
_GUARD_TYPES = frozenset(TYPES[-4:])
GateEvent = tuple[int, str, str | None, int | None, str, dict[str, Any]]  # position, type, config, revision, time, data


class GateAuditor:
    """Feed gate events in log order; `violations` lists every claim a freeze or an approval should have held."""

    def __init__(self) -> None:
        self.freezes: dict[str | None, dict[str, Any] | None] = {}  # config name (None: all) -> freeze
        self.needs: dict[tuple[str, int], bool] = {}
        self.asked_by: dict[tuple[str, int], approval.Who] = {}
        self.modes: dict[tuple[str, int], approval.ApprovalIdentity] = {}
        self.approved: dict[tuple[str, int], str | None] = {}
        self.violations: list[Violation] = []
        self.guards = GuardTrail()
        self.lowered: dict[tuple[str, int], int] = {}  # opened under a guard lowered alone: where it was

    def feed(
        self, position: int, type_: str, config: str | None, revision: int | None, at: str, data: dict[str, Any]
    ) -> None:
        if type_ == "Frozen":
            self.freezes[config] = {"until": data.get("until"), "reason": data.get("reason")}
            return
        if type_ == "Unfrozen":
            self.freezes[config] = None
            return
        if type_ in _GUARD_TYPES:
            if config is not None:
                self.guards.feed(position, type_, config, data)
            return
        if config is None or revision is None:
            return
        key = (config, revision)
        if type_ == "DeployerClaimed":
            self._claimed(position, key, at)
        elif type_ in ("Created", "RetryRequested"):
            spec = data.get("spec") or {}
            created = type_ == "Created"
            self.needs[key] = bool(spec.get("require_approval") if created else data.get("needs_approval"))
            source = spec if created else data
            self.modes[key] = approval.mode_of(source.get("approval_identity"))
            self.asked_by[key] = approval.Who.of(data.get("meta") or {})
            self.approved[key] = None
            lowered = self.guards.lowered_alone.get(config)
            if lowered is not None:
                self.lowered[key] = lowered
            else:
                self.lowered.pop(key, None)
        elif type_ == "Approved":
            self._approved(position, key, data.get("meta") or {}, data.get("attempt"))

    def finished(self, key: tuple[str, int]) -> None:
        """Deployment `key` is Complete or Failed: what its attempt asked for is no longer read. An approval
        or a claim after the end is an I3 violation the audit reports; a retry asks anew."""
        for table in (self.needs, self.asked_by, self.modes, self.approved, self.lowered):
            table.pop(key, None)

    def _approved(self, position: int, key: tuple[str, int], meta: dict[str, Any], attempt: int | None) -> None:
        """The approval is held to the rule of its attempt's mode, from what the log records of both."""
        approver, asked = approval.Who.of(meta), self.asked_by.get(key, approval.Who())
        self.approved[key] = approver.actor
        mode = self.modes.get(key, approval.DEFAULT)
        refused = approval.refusal(mode, asked, approver, f"revision {key[1]} attempt {attempt}")
        if approver.actor == asked.actor:
            self._flag(position, key, "G2", f"approved by {approver.actor}, who asked for it")
        elif refused is not None:
            self._flag(position, key, "G2", f"approved by {approver.actor}, who may not: {refused}")

    def _claimed(self, position: int, key: tuple[str, int], at: str) -> None:
        if key in self.lowered:
            at_ = self.lowered[key]
            self._flag(
                position,
                key,
                "G2",
                f"claimed under an approval guard lowered at position {at_} with no second approval",
            )
        if self.needs.get(key) and self.approved.get(key) is None:
            asked = self.asked_by[key].actor
            self._flag(position, key, "G2", f"claimed without an approval (attempt asked for by {asked})")
        for scope, name in (("config", key[0]), ("all", None)):
            freeze = self.freezes.get(name)
            # (the time parsed under a freeze only: most claims have none, and 100k parses took 0.3 s)
            if freeze is not None and in_force(freeze, datetime.fromisoformat(at)):
                until = freeze["until"] or "unfreeze"
                self._flag(position, key, "G1", f"claimed at {at} inside a freeze ({scope}) until {until}")

    def _flag(self, position: int, key: tuple[str, int], rule: str, message: str) -> None:
        self.violations.append(Violation(position, key[0], key[1], rule, message))


class GuardTrail:
    """Each config's approval guard through its specs, and where it was lowered with no second person."""

    def __init__(self) -> None:
        self.specs: dict[str, dict[str, Any]] = {}
        self.asked: dict[str, approval.Who] = {}  # the pending request's requester
        self.approved: set[str] = set()  # configs whose next SpecChanged is an approved lowering
        self.lowered_alone: dict[str, int] = {}  # config -> position of the lowering made alone
        self.floor: dict[str, dict[str, Any]] = {}  # config -> the guard before that lowering

    def feed(self, position: int, type_: str, config: str, data: dict[str, Any]) -> None:
        meta = data.get("meta") or {}
        if type_ == "GuardLoweringRequested":
            self.asked[config] = approval.Who.of(meta)
        elif type_ == "GuardLoweringApproved":
            mode = approval.mode_of(self.specs.get(config, {}).get("approval_identity"))
            asked = self.asked.pop(config, approval.Who())
            if approval.refusal(mode, asked, approval.Who.of(meta), "the lowering") is None:
                self.approved.add(config)
        elif type_ == "Registered":
            self.specs[config] = dict(data.get("spec") or {})
            self.lowered_alone.pop(config, None)
        elif type_ == "SpecChanged":
            old, new = self.specs.get(config, {}), dict(data.get("spec") or {})
            if approval.lowers(old, new) and config not in self.approved and config not in self.lowered_alone:
                self.lowered_alone[config], self.floor[config] = position, old
            elif config in self.lowered_alone and not approval.lowers(self.floor[config], new):
                del self.lowered_alone[config]  # raised back to where it was
            self.approved.discard(config)
            self.specs[config] = new


def audit_gates(events: Iterable[GateEvent]) -> GateAuditor:
    auditor = GateAuditor()
    for event in events:
        auditor.feed(*event)
    return auditor
