"""What the log shows of I9 and I10 (DESIGN 7.6): a pure check over deployment and config events, in log order.

I9: a deployment is Complete only if each of its steps' deployers exited 0, in order, and each step's
verification passed (its measurements, counted here from their outcomes per source: --verify within the
limits of the deployment's frozen spec, each analysis template within those its attempt's claim fixed), or a
human promoted past it; no step starts before the step before it passed.
I10: every failure that calls for an automatic rollback (as domain.rollout.rollback_due decides it, folded
here from the log itself) is followed by exactly one rollback to the last Complete revision before it,
and no other rollback is triggered; a deployment no deployer step of which was ever claimed calls for none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import phases
from .audit import Violation
from .phases import phase_after
from .reasons import ABORTED, AUTO_ROLLBACK, CANCELLED, FOREIGN
from .sequence import FAILED, INCONCLUSIVE_OUTCOME, OUTCOMES, PASSED, Sequence, Source, claimed_sources, tally_key
from .step import DEPLOYER

# The config events this audit reads besides every deployment event.
CONFIG_TYPES = ("Registered", "SpecChanged", "RolloutTriggered", "RollbackTriggered")
StepEvent = tuple[int, str, str, int | None, dict[str, Any]]  # position, type, config, revision (None: config), data
_STARTS = ("DeployerCreated", "DeployerStarted")
_OF_A_STEP = frozenset({*_STARTS, "DeployerSucceeded"})  # the events whose step (by name) I9 reads
_NO_STEP: dict[str, Any] = {}  # (read only) an event of no step the log introduced


# Every key of a spec that _Attempt reads: a new read of the spec adds its key here.
_SPEC_READ = ("verify", "verify_count", "failure_limit", "inconclusive_limit", "steps")
_SHARED_PARTS = 1024  # distinct parts of specs an audit keeps one dict for, at most


@dataclass(slots=True)  # (one per attempt: 100k at 1M events)
class _Attempt:
    """What one attempt of a deployment has done so far, and its phase (a retry starts New, whatever before)."""

    spec: dict[str, Any]
    cause: str  # the deployment's (a rollback's own failure calls for no other)
    phase: str | None = None
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # names the log introduced -> step data
    succeeded: frozenset[int] = frozenset()  # step indexes whose deployer exited 0
    tallies: dict[str, dict[str, int]] = field(default_factory=dict)  # by sequence.tally_key(step, template)
    promoted: frozenset[int] = frozenset()  # steps a human promoted past
    full: int | None = None  # the step a `promote --full` left from
    analysis: tuple[Source, ...] = ()  # the templates the attempt's claim fixed (DESIGN 7.9)
    claimed: bool = False  # a deployer step was claimed for the deployment, in this attempt or one before

    def verified(self, index: int) -> bool:
        """Whether step `index` passed its verification (each source its own count and limits, as the
        deployment decided it), or needed none, or a human promoted past it."""
        if index in self.promoted or (self.full is not None and index > self.full):
            return True
        for source in Sequence("", 0, 0, self.spec, self.analysis).sources:
            tally = self.tallies.get(tally_key(index, source.template), {})
            if (
                sum(tally.get(o, 0) for o in OUTCOMES) < source.measurements
                or tally.get(FAILED, 0) > source.failure_limit
                or tally.get(INCONCLUSIVE_OUTCOME, 0) > source.inconclusive_limit
            ):
                return False
        return True

    def passed(self, index: int) -> bool:
        skipped = self.full is not None and self.full < index < self.count
        return (index in self.succeeded or skipped) and self.verified(index)

    @property
    def count(self) -> int:
        return len(self.spec.get("steps") or [100])


@dataclass(slots=True, frozen=True)
class _Finished:
    """What a Failed deployment keeps: what a retry starts from, the only event after Failed that is not
    itself an I3 violation (domain.phases.ALLOWED_FROM). Its steps, tallies and promotions are dropped, and
    a Complete one is dropped whole (after Complete every event is one): kept, they made the audit's memory
    grow with the log's length."""

    spec: dict[str, Any]
    cause: str
    claimed: bool


@dataclass
class _Config:
    auto_rollback: bool = False
    latest: int = 0
    last_complete: int | None = None
    due: dict[int, int] = field(default_factory=dict)  # failed revision -> the revision its rollback restores
    rolled_back: set[int] = field(default_factory=set)


class StepAuditor:
    """Feed events in log order; `violations` lists every break of I9 or I10 seen. `finish()` when done."""

    def __init__(self) -> None:
        # (the one table per deployment: one probe an event)
        self.attempts: dict[tuple[str, int], _Attempt | _Finished] = {}
        self.configs: dict[str, _Config] = {}
        self.parts: dict[tuple[tuple[str, type, Any], ...], dict[str, Any]] = {}  # see _read
        self.violations: list[Violation] = []
        self.last_position = 0

    def feed(
        self,
        position: int,
        type_: str,
        config: str,
        revision: int | None,
        data: dict[str, Any],
        after: str | None = None,
    ) -> None:
        """One event; `after`: the deployment's phase after it, when the caller folded it already (audit_rules,
        from the Auditor: the same table, folded once)."""
        self.last_position = position
        if revision is None:
            self._config(position, type_, config, data)
            return
        key = (config, revision)
        if type_ == "Created":
            self.attempts[key] = attempt = _Attempt(self._read(data.get("spec") or {}), data.get("cause") or "")
        else:
            found = self.attempts.get(key)
            if found is None:
                return
            if type_ == "RetryRequested":
                self.attempts[key] = attempt = _Attempt(found.spec, found.cause, claimed=found.claimed)
            elif isinstance(found, _Finished):  # an event after Failed (I3 reports it): checked from nothing
                self.attempts[key] = attempt = _Attempt(found.spec, found.cause, phases.FAILED, claimed=found.claimed)
            else:
                attempt = found
        self._steps(position, key, attempt, type_, data)
        before = attempt.phase
        attempt.phase = after = phase_after(before, type_, data) if after is None else after
        if after != before and after == phases.COMPLETE:
            self._completed(position, key, attempt)
        elif after != before and after == phases.FAILED:
            reason = data.get("reason") if type_ not in ("Cancelled", "CancelRequested") else CANCELLED
            self._failed(position, key, attempt, reason or "")
        if after == phases.FAILED:
            self.attempts[key] = _Finished(attempt.spec, attempt.cause, attempt.claimed)
        elif after == phases.COMPLETE:  # no event after it reads it: each is an I3 violation, a retry too
            del self.attempts[key]

    def finish(self) -> StepAuditor:
        """A failure whose rollback never followed (the same save triggers it: none may be left due)."""
        for name, c in self.configs.items():
            for failed, to in sorted(c.due.items()):
                self._flag(
                    self.last_position,
                    (name, failed),
                    "I10",
                    f"failed, and its rollback to revision {to} never followed",
                )
        return self

    # -- I9 -----------------------------------------------------------------

    def _steps(self, position: int, key: tuple[str, int], a: _Attempt, type_: str, data: dict[str, Any]) -> None:
        introduced = data.get("step") if type_ == "DeployerClaimed" else data.get("next")
        if introduced:
            a.steps[introduced["name"]] = introduced
        # (a claim that names no step, from before steps, was the deployer's)
        if (introduced or type_ == "DeployerClaimed") and (introduced or {}).get("kind", DEPLOYER) == DEPLOYER:
            a.claimed = True
        if type_ == "DeployerClaimed":
            a.analysis = claimed_sources(data.get("analysis"))
        if type_ in _OF_A_STEP:
            step = a.steps.get(data.get("name") or "", _NO_STEP)
            index = int(step.get("index", 1))
            if type_ == "DeployerSucceeded":
                a.succeeded |= {index}
            elif step.get("kind") == DEPLOYER and index > 1 and not a.passed(index - 1):
                self._flag(position, key, "I9", f"step {index} started before step {index - 1} passed")
        elif type_ == "MeasurementRecorded":
            template = data.get("template")  # NAME@VERSION, None for --verify
            source = tally_key(int(data.get("step", 1)), template.rsplit("@", 1)[0] if template else None)
            tally = a.tallies.setdefault(source, {})
            outcome = data.get("outcome", INCONCLUSIVE_OUTCOME)
            tally[outcome] = tally.get(outcome, 0) + 1
        elif type_ == "Promoted":
            a.promoted |= {int(data.get("step", 1))}
            if data.get("full"):
                a.full = int(data.get("step", 1))

    def _completed(self, position: int, key: tuple[str, int], a: _Attempt) -> None:
        k = next((k for k in range(1, a.count + 1) if not a.passed(k)), None)
        if k is not None:
            what = "its deployer did not exit 0" if k not in a.succeeded else "its verification did not pass"
            self._flag(position, key, "I9", f"Complete, but step {k} of {a.count} never passed: {what}")
            return
        c = self._of(key[0])
        c.last_complete = key[1]

    # -- I10 ----------------------------------------------------------------

    def _config(self, position: int, type_: str, name: str, data: dict[str, Any]) -> None:
        c = self._of(name)
        if type_ in ("Registered", "SpecChanged"):
            c.auto_rollback = bool((data.get("spec") or {}).get("auto_rollback"))
        elif type_ == "RolloutTriggered":
            c.latest = int(data.get("revision", c.latest))
        elif type_ == "RollbackTriggered":
            failed, to = int(data["failed"]), int(data["to"])
            if failed in c.rolled_back:
                self._flag(position, (name, failed), "I10", "rolled back a second time")
            elif failed not in c.due:
                self._flag(position, (name, failed), "I10", "rolled back, but its failure called for no rollback")
            elif c.due[failed] != to:
                self._flag(position, (name, failed), "I10", f"rolled back to {to}, not to {c.due[failed]}")
            c.due.pop(failed, None)
            c.rolled_back.add(failed)

    def _failed(self, position: int, key: tuple[str, int], a: _Attempt, reason: str) -> None:
        c = self._of(key[0])
        if key[1] != c.latest or reason == CANCELLED or FOREIGN in reason:
            return
        if a.cause.startswith(AUTO_ROLLBACK) or key[1] in c.rolled_back:
            return
        if not (c.auto_rollback or reason.startswith(ABORTED)):
            return
        if not a.claimed:  # nothing of it ran: its spec is set back, no rollback runs (7.11)
            return
        if c.last_complete is not None and c.last_complete < key[1]:
            c.due[key[1]] = c.last_complete

    def _read(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The part of a deployment's spec its attempts read (kept whole, its command and hooks held ~1 KB
        each): one dict for all the deployments whose part is equal and of plain values (a config's share it)."""
        part = {k: spec[k] for k in _SPEC_READ if k in spec}
        key = tuple((k, type(v), v) for k, v in part.items())  # (the type: 1, 1.0 and True are equal keys)
        try:
            return self.parts.setdefault(key, part) if len(self.parts) < _SHARED_PARTS else self.parts.get(key, part)
        except TypeError:  # a list or dict among the values (steps): kept as it is
            return part

    def _of(self, name: str) -> _Config:
        found = self.configs.get(name)  # (not setdefault: a _Config made for every event, 230k at 1M, cost ~1 s)
        if found is None:
            self.configs[name] = found = _Config()
        return found

    def _flag(self, position: int, key: tuple[str, int], rule: str, message: str) -> None:
        self.violations.append(Violation(position, key[0], key[1], rule, message))


def audit_steps(events: Iterable[StepEvent]) -> StepAuditor:
    auditor = StepAuditor()
    for event in events:
        auditor.feed(*event)
    return auditor.finish()


__all__ = ["PASSED", "StepAuditor", "audit_steps"]
