"""Whether a deployer's claim still holds (DESIGN 7.7, fencing), from its deployment's own events.

A claim is a DeployerClaimed event, named by its position. It holds while it is its deployment's latest
claim, the deployment is still active (Pending or Running, as domain/phases folds it) with no cancel or
abort asked and no stop of its current step decided (StopRequested: a timeout, a deletion; 7.11), and
its claimant (the claim's, or the one a ClaimTaken handed it to) has a live lease: a fact only the
database's clock can give, so the caller passes it in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from . import phases

StreamEvent = tuple[int, str, dict[str, Any]]  # position, type, data
# Events that end a step and name the next (domain/phases): a stop decided for the step ends with it.
STEP_ENDS = frozenset(
    {"DeployerSucceeded", "HookSucceeded", "HookFailed", "MeasurementRecorded", "PauseEnded", "Promoted"}
)


class Verdict(NamedTuple):
    holds: bool
    why: str


def claim_verdict(position: int, stream: Iterable[StreamEvent], lease_live: Callable[[str], bool]) -> Verdict:
    """The claim at `position`, judged by every event of its deployment (`stream`, in order)."""
    config, revision, attempt, claimant = "?", "?", "?", ""
    phase: str | None = None
    stopping = claimed = False
    stopped: str | None = None  # the reason of a stop decided for the current step
    for at, type_, data in stream:
        if type_ == "Created":
            config, revision = data.get("config", "?"), data.get("revision", "?")
        if type_ == "DeployerClaimed" and at > position:
            return Verdict(False, f"a later claim (position {at}) replaced it")
        if at == position:
            claimed, claimant, attempt = True, data.get("claimant") or "", data.get("attempt", "?")
        elif type_ == "ClaimTaken" and claimed:
            claimant = data.get("claimant") or ""
        if type_ in ("CancelRequested", "AbortRequested") and phase != phases.NEW:
            stopping = True
        elif type_ == "RetryRequested":
            stopping, stopped = False, None
        if type_ == "StopRequested" and claimed:
            stopped = str(data.get("reason") or "stopped")
        elif type_ in STEP_ENDS:
            stopped = None
        phase = phases.phase_after(phase, type_, data)
    name = f"{config} version {revision} (attempt {attempt})"
    if phase not in phases.ACTIVE:
        return Verdict(False, f"{name} is {phase}: the claim has ended")
    if stopping:
        return Verdict(False, f"{name} is being stopped (cancel or abort asked)")
    if stopped is not None:
        return Verdict(False, f"{name} is being stopped ({stopped})")
    if not lease_live(claimant):
        return Verdict(False, f"claimant {claimant}'s lease has expired (by the database's clock)")
    return Verdict(True, f"{name} is {phase}, claimed at position {position} by a live claimant")
