"""The Deployment aggregate: one revision of a config and its phase machine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from domain import ids, phases
from domain.errors import DomainError
from domain.names import HOOK_TRIES

if TYPE_CHECKING:
    from domain.spec import Spec

Meta = dict[str, Any]
CANCELLED = "cancelled"


class Deployment(Aggregate):
    """A numbered revision of a config, rolled out by one deployer per attempt.

    The attribute is called `revision`: `version` belongs to the library's
    optimistic concurrency.
    """

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
        self.step: dict[str, Any] | None = None
        self.cancel_requested = False

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

    def step_for(self, kind: str, try_: int = 1) -> dict[str, Any] | None:
        """The step of this attempt that runs `kind` (pre, deployer, post)."""
        if kind == "deployer":
            name = ids.deployer_name(self.config, self.revision, self.attempt)
        elif self.spec.get(f"{kind}_hook"):
            name = ids.hook_name(self.config, self.revision, kind, self.attempt, try_)
        else:
            return None
        return {"kind": kind, "try": try_, "name": name}

    def first_step(self) -> dict[str, Any]:
        return self.step_for("pre") or self.step_for("deployer")  # type: ignore[return-value]

    def is_current(self, name: str) -> bool:
        """Whether a report about `name` concerns what runs now (else it is stale)."""
        return self.is_open and self.step is not None and self.step["name"] == name

    # -- commands ------------------------------------------------------------

    def claim(self, claimant: str, meta: Meta) -> None:
        phases.check(self.phase, "DeployerClaimed")
        step = self.first_step()
        self._claimed(attempt=self.attempt, name=step["name"], step=step, claimant=claimant, meta=meta)

    def report_created(self, name: str, ref: str, meta: Meta) -> bool:
        if not self.is_current(name) or self.step["created"]:  # type: ignore[index]
            return False
        if self.step["kind"] == "deployer":  # type: ignore[index]
            self._deployer_created(attempt=self.attempt, name=name, ref=ref, meta=meta)
        else:
            self._hook_created(**self._hook_args(), ref=ref, meta=meta)
        return True

    def report_started(self, name: str, meta: Meta) -> bool:
        if not self.is_current(name) or self.step["started"]:  # type: ignore[index]
            return False
        if self.step["kind"] == "deployer":  # type: ignore[index]
            self._deployer_started(attempt=self.attempt, name=name, meta=meta)
        else:
            self._hook_started(**self._hook_args(), meta=meta)
        return True

    def report_exited(self, name: str, exit_code: int, reason: str | None, meta: Meta) -> bool:
        if not self.is_current(name):
            return False
        kind = self.step["kind"]  # type: ignore[index]
        if kind == "deployer" and exit_code == 0:
            self._deployer_succeeded(attempt=self.attempt, name=name, next=self._following("deployer"), meta=meta)
        elif kind == "deployer":
            why = reason or f"exit code {exit_code}"
            self._deployer_failed(
                attempt=self.attempt,
                name=name,
                exit_code=exit_code,
                reason=f"deployer {name} failed: {why}",
                meta=meta,
            )
        elif exit_code == 0:
            self._hook_succeeded(**self._hook_args(), next=self._following(kind), meta=meta)
        else:
            outcome = self._hook_outcome()
            nxt = {"retry": self.step_for(kind, self.step["try"] + 1), "ignore": self._following(kind)}  # type: ignore[index]
            self._hook_failed(
                **self._hook_args(),
                exit_code=exit_code,
                outcome=outcome,
                next=nxt.get(outcome),
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
        name = self.step["name"] if self.step else None
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

    def retry(self, meta: Meta) -> None:
        if self.phase != phases.FAILED:
            raise DomainError(f"revision {self.revision} is {self.phase}: only a Failed deployment can be retried")
        self._retry_requested(attempt=self.attempt + 1, meta=meta)

    # -- helpers -------------------------------------------------------------

    def _hook_args(self) -> dict[str, Any]:
        step = self.step or {}
        return {"attempt": self.attempt, "hook": step["kind"], "hook_try": step["try"], "name": step["name"]}

    def _hook_outcome(self) -> str:
        step = self.step or {}
        policy = self.spec[f"{step['kind']}_hook"].get("policy", "abort")
        if policy == "retry" and step["try"] < HOOK_TRIES:
            return "retry"
        return "ignore" if policy == "ignore" else "abort"

    def _following(self, kind: str) -> dict[str, Any] | None:
        """The step after a finished `kind` step; None when the attempt is done."""
        later = {"pre": ("deployer", "post"), "deployer": ("post",), "post": ()}[kind]
        return next((s for s in (self.step_for(k) for k in later) if s), None)

    def _enter(self, step: dict[str, Any] | None) -> None:
        self.step = None if step is None else {**step, "created": False, "started": False}

    def _advance(self, nxt: dict[str, Any] | None) -> None:
        """Move past a finished step: to `nxt`, or to Complete."""
        self.phase = phases.phase_after_step(self.phase, nxt)
        self._enter(nxt)
        if nxt is None:
            self.reason = None

    def _end(self, phase: str, reason: str | None) -> None:
        self.phase = phase
        self.reason = reason
        self.step = None

    # -- events --------------------------------------------------------------

    @event("DeployerClaimed")
    def _claimed(self, attempt: int, name: str, step: dict[str, Any], claimant: str, meta: Meta) -> None:
        self.phase = phases.PENDING
        self.claimant = claimant
        self._enter(step)

    @event("DeployerCreated")
    def _deployer_created(self, attempt: int, name: str, ref: str, meta: Meta) -> None:
        self.step["created"] = True  # type: ignore[index]

    @event("DeployerStarted")
    def _deployer_started(self, attempt: int, name: str, meta: Meta) -> None:
        self.step["created"] = self.step["started"] = True  # type: ignore[index]
        self.phase = phases.RUNNING

    @event("DeployerSucceeded")
    def _deployer_succeeded(self, attempt: int, name: str, next: dict[str, Any] | None, meta: Meta) -> None:
        self._advance(next)

    @event("DeployerFailed")
    def _deployer_failed(self, attempt: int, name: str | None, exit_code: int | None, reason: str, meta: Meta) -> None:
        self._end(phases.FAILED, reason)

    @event("DeployerLost")
    def _lost(self, attempt: int, name: str, reason: str, meta: Meta) -> None:
        self._end(phases.FAILED, reason)

    @event("HookCreated")
    def _hook_created(self, attempt: int, hook: str, hook_try: int, name: str, ref: str, meta: Meta) -> None:
        self.step["created"] = True  # type: ignore[index]

    @event("HookStarted")
    def _hook_started(self, attempt: int, hook: str, hook_try: int, name: str, meta: Meta) -> None:
        self.step["created"] = self.step["started"] = True  # type: ignore[index]

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
            self._end(phases.FAILED, reason)
        else:
            self._advance(next)

    @event("CancelRequested")
    def _cancel_requested(self, attempt: int, meta: Meta) -> None:
        if self.phase == phases.NEW:
            self._end(phases.FAILED, CANCELLED)
        else:
            self.cancel_requested = True

    @event("Cancelled")
    def _cancelled(self, attempt: int, meta: Meta) -> None:
        self._end(phases.FAILED, CANCELLED)

    @event("RetryRequested")
    def _retry_requested(self, attempt: int, meta: Meta) -> None:
        self.phase = phases.NEW
        self.attempt = attempt
        self.reason = None
        self.claimant = None
        self.step = None
        self.cancel_requested = False
