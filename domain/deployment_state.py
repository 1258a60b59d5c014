"""What a deployment holds between its events, and what can be read of it: the Deployment aggregate's
state (domain/deployment.py has its commands and events)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import approval, phases
from .errors import DomainError
from .measured import Measured
from .meta import Meta
from .names import HOOK_TRIES
from .reasons import AUTO_ROLLBACK
from .sequence import OUTCOMES, Sequence, Source, claimed_sources, outcome_of, tally_key
from .step import DEPLOYER, PAUSE, VERIFY, Step, data_of

if TYPE_CHECKING:
    from .spec import Spec

VERIFICATION_FAILED = "verification failed"


class DeploymentState:
    """The state the Deployment aggregate's events build, and its reading; a base of the aggregate,
    which sets every attribute below in its Created event (the defaults are for older logs)."""

    config: str
    revision: int
    spec: dict[str, Any]
    cause: str
    message: str | None
    phase: str
    attempt: int
    reason: str | None
    claimant: str | None
    step: Step | None
    cancel_requested: bool
    tallies: dict[int, dict[str, int]]  # rollout step -> its verification's outcomes
    needs_approval = False  # class defaults: deployments recorded before approvals existed need none
    requested_by: str | None = None
    requester = approval.Who()  # who asked for this attempt, all the log says of them
    approval_identity = approval.DEFAULT
    approved_by: str | None = None
    measured = 0  # the attempt's measurements so far (their names count from 1 across its steps)
    full = False  # promoted with --full: straight to the last step, no more verification or pause
    abort_reason: str | None = None
    # Whether a step that runs the deployer was ever claimed, in any attempt: from its claim on, the deployer
    # may exist (created on a host that could not report it yet), so a rollback must run (7.11).
    deployer_claimed = False
    stopping: str | None = None  # the step whose stop was decided (StopRequested), until it ends
    analysis: tuple[Source, ...] = ()  # the templates this attempt's claim fixed, with their versions' cadence
    template_versions: dict[str, int] = {}  # noqa: RUF012 - replaced, never changed in place: template -> version

    def _new_request(self, needs_approval: bool, approval_identity: str | None, meta: Meta) -> None:
        """An attempt asked for by `meta`'s actor (Created, RetryRequested): nothing of an attempt before it."""
        self.reason = None
        self.claimant = None
        self.step = None
        self.cancel_requested = False
        self.needs_approval = needs_approval
        self.approval_identity = approval.mode_of(approval_identity)
        self.requested_by = meta.get("actor")  # who asked for this attempt: never its approver
        self.requester = approval.Who.of(meta)
        self.approved_by = None
        self._new_attempt()

    def _new_attempt(self) -> None:
        self.measured = 0
        self.tallies = {}
        self.source_tallies: dict[str, dict[str, int]] = {}  # tally_key(step, template) -> outcomes
        self.analysis = ()
        self.template_versions = {}
        self.full = False
        self.abort_reason = None

    # -- reading -------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.phase in phases.OPEN

    @property
    def is_terminal(self) -> bool:
        return self.phase in phases.TERMINAL

    def typed_spec(self) -> Spec:
        from .spec import Spec  # pydantic only where a typed spec is needed

        return Spec.model_validate(self.spec)

    @property
    def sequence(self) -> Sequence:
        """What this attempt runs, in order (domain/sequence.py)."""
        return Sequence(self.config, self.revision, self.attempt, self.spec, self.analysis)

    @property
    def is_auto_rollback(self) -> bool:
        return self.cause.startswith(AUTO_ROLLBACK)

    @property
    def paused(self) -> Step | None:
        """The pause the attempt waits in, if it does."""
        return self.step if self.is_open and self.step is not None and self.step.kind == PAUSE else None

    def tally(self) -> dict[str, int]:
        """The attempt's measurements by outcome."""
        return {o: sum(t.get(o, 0) for t in self.tallies.values()) for o in OUTCOMES}

    def step_for(self, kind: str, try_: int = 1) -> Step | None:
        """The step of this attempt that runs `kind` (pre, deployer, post); None for a hook the spec lacks."""
        if kind == DEPLOYER:
            return self.sequence.deployer(1)
        return self.sequence.hook(kind, try_)

    def deployer_step(self, try_: int = 1) -> Step:
        return self.sequence.deployer(1)

    def first_step(self, analysis: tuple[Source, ...] | None = None) -> Step:
        """The attempt's first step (`analysis`: the templates a claim is fixing, not yet recorded)."""
        if analysis is None:
            return self.sequence.first()
        return Sequence(self.config, self.revision, self.attempt, self.spec, analysis).first()

    def _retry_mode(self, needs_approval: bool, identity: approval.ApprovalIdentity) -> str | None:
        """The approval mode a retry records (refused unless Failed): null for the default, as a retry written
        before modes existed reads."""
        if self.phase != phases.FAILED:
            raise DomainError(f"revision {self.revision} is {self.phase}: only a Failed deployment can be retried")
        return str(identity) if needs_approval and identity != approval.DEFAULT else None

    def _take_claim(self, claimant: str, step: Step, analysis: list[dict[str, Any]] | None) -> None:
        """A claim of the attempt: its claimant, its first step, and the templates' revisions it fixed."""
        self.claimant = claimant
        self.analysis = claimed_sources(analysis)
        self.template_versions = {a["template"]: int(a["version"]) for a in analysis or ()}
        self.step = step
        self.deployer_claimed = self.deployer_claimed or step.kind == DEPLOYER

    def _tally(self, number: int, step: int, outcome: str, template: str | None) -> None:
        """A measurement's outcome, counted for its rollout step and for its source (7.9: `template` NAME@V)."""
        self.measured = max(self.measured, number)
        tally = self.tallies.setdefault(step, {})
        tally[outcome] = tally.get(outcome, 0) + 1
        mine = self.source_tallies.setdefault(tally_key(step, template.rsplit("@", 1)[0] if template else None), {})
        mine[outcome] = mine.get(outcome, 0) + 1

    def is_current(self, name: str) -> bool:
        """Whether a report about `name` concerns what runs now (else it is stale)."""
        return self._current(name) is not None

    def _current(self, name: str) -> Step | None:
        """The step that runs now, if it is `name`'s."""
        return self.step if self.is_open and self.step is not None and self.step.name == name else None

    @property
    def awaits_approval(self) -> bool:
        return self.needs_approval and self.approved_by is None

    @property
    def nothing_runs(self) -> bool:
        """Whether the attempt has no process now: in a pause, or between measurements."""
        step = self.step if self.phase in phases.ACTIVE and not self.cancel_requested else None
        return step is not None and (step.kind == PAUSE or (step.kind == VERIFY and not step.created))

    # -- helpers of the commands and events ---------------------------------------

    def _hook_args(self, step: Step) -> dict[str, Any]:
        return {"attempt": self.attempt, "hook": step.kind, "hook_try": step.try_, "name": step.name}

    def _hook_outcome(self, step: Step) -> str:
        policy = self.spec[f"{step.kind}_hook"].get("policy", "abort")
        if policy == "retry" and step.try_ < HOOK_TRIES:
            return "retry"
        return "ignore" if policy == "ignore" else "abort"

    def _measurement_args(self, step: Step) -> dict[str, Any]:
        return {"attempt": self.attempt, "name": step.name, "number": step.try_, "step": step.index}

    def _advance(self, nxt: dict[str, Any] | None) -> None:
        """Move past a finished step: to `nxt` (as an event carries it), or to the attempt's end."""
        self.step = None if nxt is None else Step.from_data(nxt)
        self.stopping = None
        if nxt is None:
            self.reason = None
        self.deployer_claimed = self.deployer_claimed or (self.step is not None and self.step.kind == DEPLOYER)

    def _end(self, reason: str | None) -> None:
        self.reason = reason
        self.step = None
        self.stopping = None

    def _mark(self, *, started: bool) -> None:
        """The current step is created (and started): a report of it was recorded."""
        if self.step is None:
            raise DomainError(f"revision {self.revision} has no step to report about")
        self.step = replace(self.step, created=True, started=started or self.step.started)

    def _measurement_outcome(
        self, step: Step, exit_code: int | None, detail: str | None, measured: Measured | None = None
    ) -> dict[str, Any]:
        """A measurement's outcome event (but its meta): the outcome, what follows, and why it failed the step.
        A template's measurement decides its own outcome (`measured`: its exit says it too), with its value
        and why it was inconclusive."""
        outcome = outcome_of(exit_code)
        tallies = {k: dict(v) for k, v in self.source_tallies.items()}
        mine = tallies.setdefault(tally_key(step.index, step.template), {})
        mine[outcome] = mine.get(outcome, 0) + 1
        nxt, failed = self.sequence.after_measurement(step.index, step.try_, tallies, step.template)
        reason = None
        if failed:
            why = f"exit code {exit_code}" if detail is None else detail
            if step.template is not None and measured is not None and measured.value is not None:
                why = f"value {measured.value}"
            reason = f"{VERIFICATION_FAILED}: measurement {step.name} failed ({why})"
        event = {
            **self._measurement_args(step),
            "outcome": outcome,
            "exit_code": exit_code,
            "detail": detail,
            "next": data_of(nxt),
            "reason": reason,
        }
        if step.template is not None:  # (fields a --verify measurement's event never had: its payload stays)
            version = self.template_versions.get(step.template)
            event["template"] = f"{step.template}@{version}"
            event["value"] = None if measured is None else measured.value
            event["error"] = None if measured is None else measured.error
        return event

    def _hook_failure(self, step: Step, exit_code: int, reason: str | None) -> dict[str, Any]:
        """A hook's failure event (but its meta): by its policy, tried again, ignored, or the attempt's end."""
        outcome = self._hook_outcome(step)
        nxt = {"retry": self.step_for(step.kind, step.try_ + 1), "ignore": self.sequence.after_hook(step.kind)}
        why = reason or f"exit code {exit_code}"
        return {
            **self._hook_args(step),
            "exit_code": exit_code,
            "outcome": outcome,
            "next": data_of(nxt.get(outcome)),
            "reason": f"{step.kind} hook {step.name} failed: {why}",
        }

    def _after_promotion(self, pause: Step, full: bool) -> Step | None:
        """The step a promotion past `pause` goes on to; `full`: the last step, with no verification or pause."""
        if not full:
            return self.sequence.after_pause(pause.index, pause.why or "")
        last = self.sequence.count
        return self.sequence.deployer(last) if pause.index < last else self.sequence.after_verified(last, True)

    def _check_take_over(self, claimant: str) -> None:
        if not self.nothing_runs:
            raise DomainError(f"revision {self.revision} of {self.config} runs a process: its claim is not taken over")
        if claimant == self.claimant:
            raise DomainError(f"revision {self.revision} of {self.config} is claimed by {claimant} already")

    def _check_approval(self, meta: dict[str, Any]) -> None:
        """Four eyes: refused unless the attempt waits for an approval and `meta`'s actor may give it."""
        if not self.needs_approval:
            raise DomainError(f"revision {self.revision} of {self.config} needs no approval")
        if self.phase != phases.NEW or self.approved_by is not None:
            raise DomainError(f"revision {self.revision} of {self.config} is not waiting for an approval")
        what = f"revision {self.revision} attempt {self.attempt}"
        refused = approval.refusal(self.approval_identity, self.requester, approval.Who.of(meta), what)
        if refused is not None:
            raise DomainError(refused)
