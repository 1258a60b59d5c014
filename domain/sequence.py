"""What an attempt runs, in order (DESIGN 7.6): pre hook, then for each step its deployer, its
measurements and (not after the last step) its pause, then the post hook. Pure: decided from the
deployment's frozen spec and what its attempt has done, as the events record it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import ids
from .step import DEPLOYER, INCONCLUSIVE, PAUSE, POST, PRE, STEP_PAUSE, VERIFY, Step

PASSED, FAILED, INCONCLUSIVE_OUTCOME = "passed", "failed", "inconclusive"
OUTCOMES = (PASSED, FAILED, INCONCLUSIVE_OUTCOME)


def outcome_of(exit_code: int | None) -> str:
    """A measurement's outcome from its exit: 0 passed, 1 failed, anything else (another code, a
    signal, a timeout, a process gone) inconclusive."""
    return {0: PASSED, 1: FAILED}.get(exit_code if exit_code is not None else -1, INCONCLUSIVE_OUTCOME)


@dataclass(frozen=True)
class Sequence:
    """The steps of one attempt of a deployment, from its spec."""

    config: str
    revision: int
    attempt: int
    spec: Mapping[str, Any]

    @property
    def weights(self) -> list[int]:
        return list(self.spec.get("steps") or [100])

    @property
    def count(self) -> int:
        return len(self.weights)

    def hook(self, kind: str, try_: int = 1) -> Step | None:
        if not self.spec.get(f"{kind}_hook"):
            return None
        return Step(kind, try_, ids.hook_name(self.config, self.revision, kind, self.attempt, try_))

    def deployer(self, index: int = 1) -> Step:
        if self.spec.get("steps"):
            name = ids.step_deployer_name(self.config, self.revision, self.attempt, index)
        else:
            name = ids.deployer_name(self.config, self.revision, self.attempt)
        return Step(DEPLOYER, 1, name, index=index)

    def measurement(self, index: int, number: int, delay: int = 0) -> Step:
        name = ids.measurement_name(self.config, self.revision, self.attempt, number)
        return Step(VERIFY, number, name, index=index, delay=delay)

    def pause(self, index: int, why: str) -> Step:
        pause = self.spec.get("step_pause", 0)
        delay = None if why == INCONCLUSIVE or pause == "manual" else int(pause)
        return Step(
            PAUSE,
            1,
            ids.pause_name(self.config, self.revision, self.attempt, index, why == INCONCLUSIVE),
            index=index,
            delay=delay,
            why=why,
        )

    def first(self) -> Step:
        return self.hook(PRE) or self.deployer(1)

    def after_hook(self, kind: str) -> Step | None:
        """After a pre hook the first deployer; after a post hook nothing."""
        return self.deployer(1) if kind == PRE else None

    def after_deployer(self, index: int, measured: int, full: bool) -> Step | None:
        """After step `index`'s deployer exited 0: its first measurement, at once (none after --full)."""
        if self.spec.get("verify") and not full:
            return self.measurement(index, measured + 1)
        return self.after_verified(index, full)

    def after_verified(self, index: int, full: bool = False) -> Step | None:
        """After step `index` passed its verification: its pause, the next step, or the post hook."""
        if index < self.count and not full:
            return self.pause(index, STEP_PAUSE) if self.spec.get("step_pause", 0) != 0 else self.deployer(index + 1)
        if index < self.count:
            return self.deployer(self.count)
        return self.hook(POST)

    def after_pause(self, index: int, why: str) -> Step | None:
        """After a pause ended by its timer or `rollout promote`: an inconclusive one counts as passed."""
        return self.after_verified(index) if why == INCONCLUSIVE else self.deployer(index + 1)

    def after_measurement(self, index: int, number: int, tally: Mapping[str, int]) -> tuple[Step | None, bool]:
        """After measurement `number` of step `index`, whose verification so far is `tally`: the next
        step, and whether the verification has failed (then the deployment fails: no next step)."""
        if tally.get(FAILED, 0) > int(self.spec.get("failure_limit", 0)):
            return None, True
        if tally.get(INCONCLUSIVE_OUTCOME, 0) > int(self.spec.get("inconclusive_limit", 0)):
            return self.pause(index, INCONCLUSIVE), False
        if sum(tally.get(o, 0) for o in OUTCOMES) < int(self.spec.get("verify_count", 3)):
            return self.measurement(index, number + 1, int(self.spec.get("verify_interval", 10))), False
        return self.after_verified(index), False

    def weight(self, index: int) -> int:
        return self.weights[min(max(index, 1), self.count) - 1]
