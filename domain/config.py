"""The DeploymentConfig aggregate: an app's spec, its revisions and its deployer slot."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from . import approval, ids, stage
from . import freeze as freezes
from .errors import DomainError
from .meta import Meta
from .topics import keep_stored_topics


class DeploymentConfig(Aggregate):
    """One app. The slot says which (revision, attempt) may run a deployer (I2)."""

    freeze: freezes.Freeze | None = None  # (a class default: snapshots taken before freezes existed lack it)
    last_complete: int | None = None  # the revision that last ended Complete (7.6: what a rollback restores)
    rolled_back: tuple[int, ...] = ()  # the failed revisions an automatic rollback was triggered for (I10)
    # A lowering of the approval guard that waits for `config approve` (7.11): the guard keys it asks for,
    # and who asked (`requester`: actor, os_user, db_user), or None.
    pending_guard: dict[str, Any] | None = None
    # 7.10: for a stage, the newest revision of each upstream it was ever promoted from (I11: once each).
    promoted: dict[str, int] | None = None

    @staticmethod
    def create_id(name: str) -> UUID:
        return ids.config_id(name)

    @event("Registered")
    def __init__(self, name: str, spec: dict[str, Any], meta: Meta) -> None:
        self.name = name
        self.spec = spec
        self.paused = False
        self.latest_revision = 0
        self.open_revisions: list[int] = []
        self.slot: dict[str, int] | None = None

    # -- rules ---------------------------------------------------------------

    def check_can_roll_out(self, supersede: bool = False, supersedable: bool = True) -> None:
        """Refuse a new revision while paused, or while one is open (unless superseding); the refusal
        offers --supersede only to a command that has it (`supersedable`: latest has, undo has not)."""
        if self.paused:
            raise DomainError(f"config {self.name} is paused: resume it first")
        if self.open_revisions and not supersede:
            ways = "cancel it, wait for it, or use --supersede" if supersedable else "cancel it or wait for it"
            raise DomainError(f"config {self.name} has revision {self.open_revisions[-1]} in progress: {ways}")

    def check_can_claim(self, revision: int) -> None:
        if self.slot is not None:
            held = self.slot
            raise DomainError(
                f"the slot of {self.name} is held by revision {held['revision']} attempt {held['attempt']}"
            )
        # The oldest open revision only: a newer one (queued, 7.10, or superseding) waits until it is terminal.
        if revision not in self.open_revisions or revision != min(self.open_revisions):
            raise DomainError(f"revision {revision} of {self.name} must wait for older revisions")

    # -- commands ------------------------------------------------------------

    def change_spec(self, spec: dict[str, Any], meta: Meta) -> bool:
        """Change the spec; a lowering of its approval guard (approval.lowers) is not applied but asked
        for, to take effect at `approve_guard` by another identity (7.11), and the rest applies now."""
        if approval.lowers(self.spec, spec):
            asked = {k: spec.get(k) for k in approval.GUARD}
            self._guard_lowering_requested(**asked, meta=meta)
            spec = approval.with_guard(spec, self.spec)
            if spec != self.spec:
                self._spec_changed(spec=spec, meta=meta)
            return True
        if spec == self.spec:
            return False
        self._spec_changed(spec=spec, meta=meta)
        return True

    def approve_guard(self, meta: Meta) -> dict[str, Any]:
        """Apply the pending lowering of the guard: approved by someone the config's current mode tells
        apart from who asked for it. Returns the guard as asked."""
        pending = self.pending_guard
        if pending is None:
            raise DomainError(f"config {self.name} has no lowering of its approval guard waiting for approval")
        mode = approval.mode_of(self.spec.get("approval_identity"))
        requester = approval.Who.of(pending["requester"])
        what = f"the lowering of {self.name}'s approval guard"
        refused = approval.refusal(mode, requester, approval.Who.of(meta), what)
        if refused is not None:
            raise DomainError(refused)
        self._guard_lowering_approved(meta=meta)
        self._spec_changed(spec=approval.with_guard(self.spec, pending), meta=meta)
        return {k: pending.get(k) for k in approval.GUARD}

    def pause(self, meta: Meta) -> None:
        if self.paused:
            raise DomainError(f"config {self.name} is already paused")
        self._paused(meta=meta)

    def resume(self, meta: Meta) -> None:
        if not self.paused:
            raise DomainError(f"config {self.name} is not paused")
        self._resumed(meta=meta)

    def freeze_config(self, until: datetime | None, reason: str, now: datetime, meta: Meta) -> None:
        """Stop claims of this config until `until` (None: until unfrozen); a new freeze replaces one in force."""
        freezes.check_request(until, reason, now)
        self._frozen(until=until.isoformat() if until else None, reason=reason, meta=meta)

    def unfreeze(self, now: datetime, meta: Meta) -> None:
        if not freezes.in_force(self.freeze, now):
            raise DomainError(f"config {self.name} is not frozen")
        self._unfrozen(meta=meta)

    def trigger(self, cause: str, message: str | None, supersede: bool, meta: Meta, automatic: bool = False) -> int:
        """Open the next revision; an `automatic` rollback is not held by a paused config."""
        if not automatic:
            self.check_can_roll_out(supersede)
        revision = self.latest_revision + 1
        self._triggered(revision=revision, cause=cause, message=message, meta=meta)
        return revision

    def claim_slot(self, revision: int, attempt: int, claimant: str, meta: Meta) -> None:
        self.check_can_claim(revision)
        self._slot_claimed(revision=revision, attempt=attempt, claimant=claimant, meta=meta)

    def end(self, revision: int, attempt: int, phase: str, meta: Meta) -> None:
        """Record that a revision became terminal, releasing the slot it held."""
        if revision in self.open_revisions:
            self._ended(revision=revision, attempt=attempt, phase=phase, meta=meta)

    def record_rollback(self, failed: int, to: int, reason: str, meta: Meta) -> None:
        """The one automatic rollback of failed revision `failed` (I10): never a second."""
        if failed in self.rolled_back:
            raise DomainError(f"revision {failed} of {self.name} was already rolled back")
        self._rollback_triggered(failed=failed, to=to, revision=self.latest_revision + 1, reason=reason, meta=meta)

    def reopen(self, revision: int, attempt: int, meta: Meta) -> None:
        if revision != self.latest_revision:
            raise DomainError(f"only the latest revision ({self.latest_revision}) can be retried")
        self._reopened(revision=revision, attempt=attempt, meta=meta)

    # -- events --------------------------------------------------------------

    @event("SpecChanged")
    def _spec_changed(self, spec: dict[str, Any], meta: Meta) -> None:
        self.spec = spec

    @event("GuardLoweringRequested")
    def _guard_lowering_requested(
        self, require_approval: bool | None, approval_identity: str | None, meta: Meta
    ) -> None:
        requester = {k: meta.get(k) for k in ("actor", "os_user", "db_user")}
        self.pending_guard = {"require_approval": require_approval, "approval_identity": approval_identity}
        self.pending_guard["requester"] = requester

    @event("GuardLoweringApproved")
    def _guard_lowering_approved(self, meta: Meta) -> None:
        self.pending_guard = None

    @event("Paused")
    def _paused(self, meta: Meta) -> None:
        self.paused = True

    @event("Resumed")
    def _resumed(self, meta: Meta) -> None:
        self.paused = False

    @event("Frozen")
    def _frozen(self, until: str | None, reason: str, meta: Meta) -> None:
        self.freeze = {"by": meta.get("actor"), "reason": reason, "until": until, "at": self.modified_on.isoformat()}

    @event("Unfrozen")
    def _unfrozen(self, meta: Meta) -> None:
        self.freeze = None

    @event("RolloutTriggered")
    def _triggered(self, revision: int, cause: str, message: str | None, meta: Meta) -> None:
        self.latest_revision = revision
        self.open_revisions = [*self.open_revisions, revision]
        source = stage.promoted_from(cause)
        if source is not None:
            self.promoted = {
                **(self.promoted or {}),
                source[0]: max(source[1], (self.promoted or {}).get(source[0], 0)),
            }

    @event("SlotClaimed")
    def _slot_claimed(self, revision: int, attempt: int, claimant: str, meta: Meta) -> None:
        self.slot = {"revision": revision, "attempt": attempt}

    @event("RolloutEnded")
    def _ended(self, revision: int, attempt: int, phase: str, meta: Meta) -> None:
        self.open_revisions = [r for r in self.open_revisions if r != revision]
        if self.slot and self.slot["revision"] == revision:
            self.slot = None
        if phase == "Complete":
            self.last_complete = revision

    @event("RollbackTriggered")
    def _rollback_triggered(self, failed: int, to: int, revision: int, reason: str, meta: Meta) -> None:
        self.rolled_back = (*self.rolled_back, failed)

    @event("RolloutReopened")
    def _reopened(self, revision: int, attempt: int, meta: Meta) -> None:
        self.open_revisions = [*self.open_revisions, revision]


keep_stored_topics(globals())
