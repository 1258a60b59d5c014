"""The Deployment aggregate: one revision of a config and its phase machine."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from . import approval, ids, phases
from .condition import Value
from .deployment_state import DeploymentState
from .errors import DomainError, IllegalTransition
from .measured import Measured
from .meta import Meta
from .reasons import ABORTED, CANCELLED
from .sequence import claimed_sources
from .step import DEPLOYER, VERIFY, Step, data_of
from .topics import keep_stored_topics


class Deployment(DeploymentState, Aggregate):
    """A numbered revision of a config, rolled out by one deployer per attempt.

    The attribute is called `revision`: `version` belongs to the library's
    optimistic concurrency.

    Its phase follows the one table of domain/phases.py: each event's handler changes the rest of the
    state, seeing the phase as it was; Event.apply then moves the phase as phases.phase_after says,
    exactly as the projections and the audit fold the log.
    """

    class Event(Aggregate.Event):
        def apply(self, aggregate: Any) -> None:  # why: the library's signature, for an aggregate of any class
            aggregate.phase = phases.phase_after(aggregate.phase, type(self).__name__, self.__dict__)

    @staticmethod
    def create_id(config_id: UUID, revision: int) -> UUID:
        return ids.deployment_id(config_id, revision)

    @event("Created")
    def __init__(
        self,
        config_id: UUID,
        config: str,
        revision: int,
        spec: dict[str, Any],
        cause: str,
        message: str | None,
        meta: Meta,
    ) -> None:
        self.config = config
        self.revision = revision
        self.spec = spec
        self.cause = cause
        self.message = message
        self.phase = phases.NEW
        self.attempt = 1
        self._new_request(bool(spec.get("require_approval")), spec.get("approval_identity"), meta)

    # -- commands ------------------------------------------------------------

    def claim(self, claimant: str, meta: Meta, analysis: list[dict[str, Any]] | None = None) -> None:
        """Claim the attempt's first step; `analysis` fixes the version (and so the cadence) of each analysis
        template the spec names, for the whole attempt (DESIGN 7.9)."""
        phases.check(self.phase, "DeployerClaimed")
        if self.awaits_approval:
            raise DomainError(f"revision {self.revision} of {self.config} waits for an approval")
        fixed = {"analysis": analysis} if analysis else {}  # (a claim without templates keeps its payload)
        step = self.first_step(claimed_sources(analysis))  # (the first step may be a template's measurement)
        self._claimed(attempt=self.attempt, name=step.name, step=step.as_data(), claimant=claimant, meta=meta, **fixed)

    def report_created(self, name: str, ref: str, meta: Meta) -> bool:
        step = self._current(name)
        if step is None or step.created:
            return False
        if step.kind == DEPLOYER:
            self._deployer_created(attempt=self.attempt, name=name, ref=ref, meta=meta)
        elif step.kind == VERIFY:
            self._measurement_created(**self._measurement_args(step), ref=ref, meta=meta)
        else:
            self._hook_created(**self._hook_args(step), ref=ref, meta=meta)
        return True

    def report_started(self, name: str, meta: Meta) -> bool:
        step = self._current(name)
        if step is None or step.started:
            return False
        if step.kind == DEPLOYER:
            self._deployer_started(attempt=self.attempt, name=name, meta=meta)
        elif step.kind == VERIFY:
            self._measurement_started(**self._measurement_args(step), meta=meta)
        else:
            self._hook_started(**self._hook_args(step), meta=meta)
        return True

    def report_exited(
        self, name: str, exit_code: int, reason: str | None, meta: Meta, measured: Measured | None = None
    ) -> bool:
        """Record the exit of the current step's process (`measured`: what a template's measurement said)."""
        step = self._current(name)
        if step is None:
            return False
        kind = step.kind
        if kind == VERIFY:
            self._measured(step, exit_code, reason, meta, measured)
        elif kind == DEPLOYER and exit_code == 0:
            nxt = self.sequence.after_deployer(step.index, self.measured, self.full)
            self._deployer_succeeded(attempt=self.attempt, name=name, next=data_of(nxt), meta=meta)
            self._announce_pause(meta)
        elif kind == DEPLOYER:
            why = f"deployer {name} failed: {reason or f'exit code {exit_code}'}"
            self._deployer_failed(attempt=self.attempt, name=name, exit_code=exit_code, reason=why, meta=meta)
        elif exit_code == 0:
            self._hook_succeeded(**self._hook_args(step), next=data_of(self.sequence.after_hook(kind)), meta=meta)
        else:
            self._hook_failed(**self._hook_failure(step, exit_code, reason), meta=meta)
        return True

    def report_lost(self, name: str, reason: str, meta: Meta) -> bool:
        step = self._current(name)
        if step is None:
            return False
        if step.kind == VERIFY and step.created:  # a measurement that disappeared is inconclusive, not a loss
            self._measured(step, None, f"lost: {reason}", meta)
            return True
        self._lost(attempt=self.attempt, name=name, reason=f"lost: {name}: {reason}", meta=meta)
        return True

    def time_out(self, seconds: int, meta: Meta) -> None:
        if self.phase not in phases.ACTIVE:  # a timeout bounds an attempt from its claim
            raise IllegalTransition(f"a timeout is not allowed in phase {self.phase}")
        name, why = self.step.name if self.step else None, f"timeout: attempt exceeded {seconds}s"
        self._deployer_failed(attempt=self.attempt, name=name, exit_code=None, reason=why, meta=meta)

    def request_stop(self, name: str, reason: str, meta: Meta) -> bool:
        """Record that the controller (a timeout) or a user (a deletion) stops step `name`, before the
        signal (7.11): `claim check` answers 1 from here. False when `name` is not the current step of an
        active attempt, or its stop is recorded already."""
        if self.phase not in phases.ACTIVE or self.step is None or self.step.name != name or self.stopping == name:
            return False
        self._stop_requested(attempt=self.attempt, name=name, reason=reason, meta=meta)
        return True

    def abandon(self, reason: str, meta: Meta) -> None:
        """Fail an open deployment that no deployer of this log may run (one open in a forked copy)."""
        phases.check(self.phase, "DeployerFailed")
        name = self.step.name if self.step and self.phase != phases.NEW else None
        self._deployer_failed(attempt=self.attempt, name=name, exit_code=None, reason=reason, meta=meta)

    def request_cancel(self, meta: Meta) -> bool:
        """Ask to cancel; a New deployment is Failed at once. False if already asked."""
        phases.check(self.phase, "CancelRequested")
        if self.cancel_requested:
            return False
        self._cancel_requested(attempt=self.attempt, meta=meta)
        return True

    def confirm_cancelled(self, meta: Meta) -> None:
        phases.check(self.phase, "Cancelled")
        if not self.cancel_requested:
            raise DomainError(f"revision {self.revision} has no cancel request")
        if self.abort_reason:
            self._aborted(attempt=self.attempt, reason=self.abort_reason, meta=meta)
        else:
            self._cancelled(attempt=self.attempt, meta=meta)

    def retry(
        self, meta: Meta, needs_approval: bool = False, identity: approval.ApprovalIdentity = approval.DEFAULT
    ) -> None:
        mode = self._retry_mode(needs_approval, identity)
        self._retry_requested(
            attempt=self.attempt + 1, needs_approval=needs_approval, meta=meta, approval_identity=mode
        )

    def end_pause(self, meta: Meta) -> None:
        """A timed pause has run its time (the controller decides when, from the log's timestamps)."""
        pause = self.paused
        if pause is None or pause.delay is None:
            raise DomainError(f"revision {self.revision} of {self.config} is not in a timed pause")
        nxt = self.sequence.after_pause(pause.index, pause.why or "")
        self._pause_ended(attempt=self.attempt, name=pause.name, step=pause.index, next=data_of(nxt), meta=meta)
        self._announce_pause(meta)

    def promote(self, full: bool, meta: Meta) -> None:
        """A human ends the pause and goes on (that step's verification passed); `full`: to the last step."""
        pause = self.paused
        if pause is None:
            raise DomainError(f"revision {self.revision} of {self.config} is not paused: nothing to promote")
        nxt = self._after_promotion(pause, full)
        self._promoted(attempt=self.attempt, name=pause.name, step=pause.index, full=full, next=data_of(nxt), meta=meta)
        self._announce_pause(meta)

    def take_over(self, claimant: str, meta: Meta) -> None:
        """Another controller goes on with a claim whose claimant's lease ended while nothing ran (7.6)."""
        self._check_take_over(claimant)
        self._claim_taken(attempt=self.attempt, claimant=claimant, previous=self.claimant, meta=meta)

    def request_abort(self, reason: str | None, meta: Meta) -> None:
        """Fail the deployment with reason `aborted`: a New one at once, an active one once what runs stopped."""
        phases.check(self.phase, "AbortRequested")
        if self.cancel_requested:
            raise DomainError(f"revision {self.revision} of {self.config} is already being cancelled")
        why = f"{ABORTED}: {reason}" if reason else ABORTED
        self._abort_requested(attempt=self.attempt, reason=why, meta=meta)

    def supersede(self, by: int, meta: Meta) -> None:
        """A newer queued revision `by` takes this waiting one's place (7.10): Failed at once, never claimed."""
        phases.check(self.phase, "Superseded")
        self._superseded(attempt=self.attempt, by=by, reason=f"superseded by {by}", meta=meta)

    def approve(self, meta: Meta) -> None:
        """Four eyes: the attempt may be claimed once someone other than who asked for it approves."""
        self._check_approval(meta)
        self._approved(attempt=self.attempt, meta=meta)

    # -- helpers -------------------------------------------------------------

    def _measured(
        self, step: Step, exit_code: int | None, detail: str | None, meta: Meta, measured: Measured | None = None
    ) -> None:
        """Record a measurement's outcome, and what follows from it (DESIGN 7.6, 7.9)."""
        self._measurement_recorded(**self._measurement_outcome(step, exit_code, detail, measured), meta=meta)
        self._announce_pause(meta)

    def _announce_pause(self, meta: Meta) -> None:
        """A step that led into a pause is followed by the pause's own event (why, and for how long)."""
        pause = self.paused
        if pause is not None and not pause.created:
            self._step_paused(
                attempt=self.attempt, name=pause.name, step=pause.index, why=pause.why, seconds=pause.delay, meta=meta
            )

    # -- events (the phase each leads to: Event.apply, from phases.phase_after) -----------

    @event("DeployerClaimed")
    def _claimed(
        self,
        attempt: int,
        name: str,
        step: dict[str, Any],
        claimant: str,
        meta: Meta,
        analysis: list[dict[str, Any]] | None = None,
    ) -> None:
        self._take_claim(claimant, Step.from_data(step), analysis)

    @event("DeployerCreated")
    def _deployer_created(self, attempt: int, name: str, ref: str, meta: Meta) -> None:
        self._mark(started=False)

    @event("DeployerStarted")
    def _deployer_started(self, attempt: int, name: str, meta: Meta) -> None:
        self._mark(started=True)

    @event("DeployerSucceeded")
    def _deployer_succeeded(self, attempt: int, name: str, next: dict[str, Any] | None, meta: Meta) -> None:
        self._advance(next)

    @event("DeployerFailed")
    def _deployer_failed(self, attempt: int, name: str | None, exit_code: int | None, reason: str, meta: Meta) -> None:
        self._end(reason)

    @event("DeployerLost")
    def _lost(self, attempt: int, name: str, reason: str, meta: Meta) -> None:
        self._end(reason)

    @event("HookCreated")
    def _hook_created(self, attempt: int, hook: str, hook_try: int, name: str, ref: str, meta: Meta) -> None:
        self._mark(started=False)

    @event("HookStarted")
    def _hook_started(self, attempt: int, hook: str, hook_try: int, name: str, meta: Meta) -> None:
        self._mark(started=True)

    @event("HookSucceeded")
    def _hook_succeeded(
        self, attempt: int, hook: str, hook_try: int, name: str, next: dict[str, Any] | None, meta: Meta
    ) -> None:
        self._advance(next)

    @event("HookFailed")
    def _hook_failed(
        self,
        attempt: int,
        hook: str,
        hook_try: int,
        name: str,
        exit_code: int,
        outcome: str,
        next: dict[str, Any] | None,
        reason: str,
        meta: Meta,
    ) -> None:
        if outcome == "abort":
            self._end(reason)
        else:
            self._advance(next)

    @event("MeasurementCreated")
    def _measurement_created(self, attempt: int, name: str, number: int, step: int, ref: str, meta: Meta) -> None:
        self._mark(started=False)
        self.measured = max(self.measured, number)

    @event("MeasurementStarted")
    def _measurement_started(self, attempt: int, name: str, number: int, step: int, meta: Meta) -> None:
        self._mark(started=True)
        self.measured = max(self.measured, number)

    @event("MeasurementRecorded")
    def _measurement_recorded(
        self,
        attempt: int,
        name: str,
        number: int,
        step: int,
        outcome: str,
        exit_code: int | None,
        detail: str | None,
        next: dict[str, Any] | None,
        reason: str | None,
        meta: Meta,
        template: str | None = None,
        value: Value = None,
        error: str | None = None,
    ) -> None:
        self._tally(number, step, outcome, template)
        if reason is not None:
            self._end(reason)
        else:
            self._advance(next)

    @event("StepPaused")
    def _step_paused(
        self, attempt: int, name: str, step: int, why: str | None, seconds: int | None, meta: Meta
    ) -> None:
        if self.step is not None:
            self.step = replace(self.step, created=True)  # announced: a pause has nothing else to create

    @event("PauseEnded")
    def _pause_ended(self, attempt: int, name: str, step: int, next: dict[str, Any] | None, meta: Meta) -> None:
        self._advance(next)

    @event("Promoted")
    def _promoted(
        self, attempt: int, name: str, step: int, full: bool, next: dict[str, Any] | None, meta: Meta
    ) -> None:
        self.full = self.full or full
        self._advance(next)

    @event("ClaimTaken")
    def _claim_taken(self, attempt: int, claimant: str, previous: str | None, meta: Meta) -> None:
        self.claimant = claimant

    @event("AbortRequested")
    def _abort_requested(self, attempt: int, reason: str, meta: Meta) -> None:
        if self.phase == phases.NEW:  # the phase before the event: a New deployment fails at once
            self._end(reason)
        else:
            self.cancel_requested = True
            self.abort_reason = reason

    @event("StopRequested")
    def _stop_requested(self, attempt: int, name: str, reason: str, meta: Meta) -> None:
        self.stopping = name

    @event("Aborted")
    def _aborted(self, attempt: int, reason: str, meta: Meta) -> None:
        self._end(reason)

    @event("CancelRequested")
    def _cancel_requested(self, attempt: int, meta: Meta) -> None:
        if self.phase == phases.NEW:  # the phase before the event: a New deployment fails at once
            self._end(CANCELLED)
        else:
            self.cancel_requested = True

    @event("Superseded")
    def _superseded(self, attempt: int, by: int, reason: str, meta: Meta) -> None:
        self._end(reason)

    @event("Cancelled")
    def _cancelled(self, attempt: int, meta: Meta) -> None:
        self._end(CANCELLED)

    @event("Approved")
    def _approved(self, attempt: int, meta: Meta) -> None:
        self.approved_by = meta.get("actor")

    @event("RetryRequested")
    def _retry_requested(
        self, attempt: int, meta: Meta, needs_approval: bool = False, approval_identity: str | None = None
    ) -> None:
        self.attempt = attempt
        self.stopping = None
        self._new_request(needs_approval, approval_identity, meta)


keep_stored_topics(globals())
