"""The Deployment aggregate: one revision of a config and its phase machine."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from domain import ids, phases
from domain.errors import DomainError
from domain.names import HOOK_TRIES
from domain.step import DEPLOYER, LATER, PRE, Step, data_of

if TYPE_CHECKING:
    from domain.spec import Spec

Meta = dict[str, Any]
CANCELLED = "cancelled"


class Deployment(Aggregate):
    """A numbered revision of a config, rolled out by one deployer per attempt.

    The attribute is called `revision`: `version` belongs to the library's
    optimistic concurrency.

    Its phase follows the one table of domain/phases.py: each event's handler changes the rest of the
    state, seeing the phase as it was; Event.apply then moves the phase as phases.phase_after says,
    exactly as the projections and the audit fold the log.
    """

    needs_approval = False  # class defaults: deployments recorded before approvals existed need none
    requested_by: str | None = None
    approved_by: str | None = None

    class Event(Aggregate.Event):
        def apply(self, aggregate: Any) -> None:
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
        self.reason: str | None = None
        self.claimant: str | None = None
        self.step: Step | None = None
        self.cancel_requested = False
        self.needs_approval = bool(spec.get("require_approval"))
        self.requested_by = meta.get("actor")  # who asked for this attempt: never its approver
        self.approved_by: str | None = None

    # -- reading -------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.phase in phases.OPEN

    @property
    def is_terminal(self) -> bool:
        return self.phase in phases.TERMINAL

    def typed_spec(self) -> Spec:
        from domain.spec import Spec  # pydantic only where a typed spec is needed

        return Spec.model_validate(self.spec)

    def step_for(self, kind: str, try_: int = 1) -> Step | None:
        """The step of this attempt that runs `kind` (pre, deployer, post); None for a hook the spec lacks."""
        if kind == DEPLOYER:
            return self.deployer_step(try_)
        if self.spec.get(f"{kind}_hook"):
            return Step(kind, try_, ids.hook_name(self.config, self.revision, kind, self.attempt, try_))
        return None

    def deployer_step(self, try_: int = 1) -> Step:
        return Step(DEPLOYER, try_, ids.deployer_name(self.config, self.revision, self.attempt))

    def first_step(self) -> Step:
        return self.step_for(PRE) or self.deployer_step()

    def is_current(self, name: str) -> bool:
        """Whether a report about `name` concerns what runs now (else it is stale)."""
        return self._current(name) is not None

    def _current(self, name: str) -> Step | None:
        """The step that runs now, if it is `name`'s."""
        return self.step if self.is_open and self.step is not None and self.step.name == name else None

    # -- commands ------------------------------------------------------------

    @property
    def awaits_approval(self) -> bool:
        return self.needs_approval and self.approved_by is None

    def claim(self, claimant: str, meta: Meta) -> None:
        phases.check(self.phase, "DeployerClaimed")
        if self.awaits_approval:
            raise DomainError(f"revision {self.revision} of {self.config} waits for an approval")
        step = self.first_step()
        self._claimed(attempt=self.attempt, name=step.name, step=step.as_data(), claimant=claimant, meta=meta)

    def report_created(self, name: str, ref: str, meta: Meta) -> bool:
        step = self._current(name)
        if step is None or step.created:
            return False
        if step.kind == DEPLOYER:
            self._deployer_created(attempt=self.attempt, name=name, ref=ref, meta=meta)
        else:
            self._hook_created(**self._hook_args(step), ref=ref, meta=meta)
        return True

    def report_started(self, name: str, meta: Meta) -> bool:
        step = self._current(name)
        if step is None or step.started:
            return False
        if step.kind == DEPLOYER:
            self._deployer_started(attempt=self.attempt, name=name, meta=meta)
        else:
            self._hook_started(**self._hook_args(step), meta=meta)
        return True

    def report_exited(self, name: str, exit_code: int, reason: str | None, meta: Meta) -> bool:
        step = self._current(name)
        if step is None:
            return False
        kind = step.kind
        if kind == DEPLOYER and exit_code == 0:
            self._deployer_succeeded(attempt=self.attempt, name=name, next=data_of(self._following(kind)), meta=meta)
        elif kind == DEPLOYER:
            why = reason or f"exit code {exit_code}"
            self._deployer_failed(
                attempt=self.attempt,
                name=name,
                exit_code=exit_code,
                reason=f"deployer {name} failed: {why}",
                meta=meta,
            )
        elif exit_code == 0:
            self._hook_succeeded(**self._hook_args(step), next=data_of(self._following(kind)), meta=meta)
        else:
            outcome = self._hook_outcome(step)
            nxt = {"retry": self.step_for(kind, step.try_ + 1), "ignore": self._following(kind)}
            self._hook_failed(
                **self._hook_args(step),
                exit_code=exit_code,
                outcome=outcome,
                next=data_of(nxt.get(outcome)),
                reason=f"{kind} hook {name} failed: {reason or f'exit code {exit_code}'}",
                meta=meta,
            )
        return True

    def report_lost(self, name: str, reason: str, meta: Meta) -> bool:
        if not self.is_current(name):
            return False
        self._lost(attempt=self.attempt, name=name, reason=f"lost: {name}: {reason}", meta=meta)
        return True

    def time_out(self, seconds: int, meta: Meta) -> None:
        phases.check(self.phase, "DeployerFailed")
        name = self.step.name if self.step else None
        self._deployer_failed(
            attempt=self.attempt,
            name=name,
            exit_code=None,
            reason=f"timeout: attempt exceeded {seconds}s",
            meta=meta,
        )

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
        self._cancelled(attempt=self.attempt, meta=meta)

    def retry(self, meta: Meta, needs_approval: bool = False) -> None:
        if self.phase != phases.FAILED:
            raise DomainError(f"revision {self.revision} is {self.phase}: only a Failed deployment can be retried")
        self._retry_requested(attempt=self.attempt + 1, needs_approval=needs_approval, meta=meta)

    def approve(self, meta: Meta) -> None:
        """Four eyes: the attempt may be claimed once someone other than who asked for it approves."""
        if not self.needs_approval:
            raise DomainError(f"revision {self.revision} of {self.config} needs no approval")
        if self.phase != phases.NEW or self.approved_by is not None:
            raise DomainError(f"revision {self.revision} of {self.config} is not waiting for an approval")
        if meta.get("actor") == self.requested_by:
            raise DomainError(
                f"{self.requested_by} asked for revision {self.revision} attempt {self.attempt}:"
                " another actor must approve it"
            )
        self._approved(attempt=self.attempt, meta=meta)

    # -- helpers -------------------------------------------------------------

    def _hook_args(self, step: Step) -> dict[str, Any]:
        return {"attempt": self.attempt, "hook": step.kind, "hook_try": step.try_, "name": step.name}

    def _hook_outcome(self, step: Step) -> str:
        policy = self.spec[f"{step.kind}_hook"].get("policy", "abort")
        if policy == "retry" and step.try_ < HOOK_TRIES:
            return "retry"
        return "ignore" if policy == "ignore" else "abort"

    def _following(self, kind: str) -> Step | None:
        """The step after a finished `kind` step; None when the attempt is done."""
        return next((s for s in (self.step_for(k) for k in LATER[kind]) if s), None)

    def _advance(self, nxt: dict[str, Any] | None) -> None:
        """Move past a finished step: to `nxt` (as an event carries it), or to the attempt's end."""
        self.step = None if nxt is None else Step.from_data(nxt)
        if nxt is None:
            self.reason = None

    def _end(self, reason: str | None) -> None:
        self.reason = reason
        self.step = None

    def _mark(self, *, started: bool) -> None:
        """The current step is created (and started): a report of it was recorded."""
        if self.step is None:
            raise DomainError(f"revision {self.revision} has no step to report about")
        self.step = replace(self.step, created=True, started=started or self.step.started)

    # -- events (the phase each leads to: Event.apply, from phases.phase_after) -----------

    @event("DeployerClaimed")
    def _claimed(self, attempt: int, name: str, step: dict[str, Any], claimant: str, meta: Meta) -> None:
        self.claimant = claimant
        self.step = Step.from_data(step)

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

    @event("CancelRequested")
    def _cancel_requested(self, attempt: int, meta: Meta) -> None:
        if self.phase == phases.NEW:  # the phase before the event: a New deployment fails at once
            self._end(CANCELLED)
        else:
            self.cancel_requested = True

    @event("Cancelled")
    def _cancelled(self, attempt: int, meta: Meta) -> None:
        self._end(CANCELLED)

    @event("Approved")
    def _approved(self, attempt: int, meta: Meta) -> None:
        self.approved_by = meta.get("actor")

    @event("RetryRequested")
    def _retry_requested(self, attempt: int, meta: Meta, needs_approval: bool = False) -> None:
        self.needs_approval = needs_approval
        self.requested_by = meta.get("actor")
        self.approved_by = None
        self.attempt = attempt
        self.reason = None
        self.claimant = None
        self.step = None
        self.cancel_requested = False
