"""`rollouts claim check`: whether a deployer's claim still holds (DESIGN 7.7, fencing).

No lease can stop a paused process from acting when it wakes; only the target can refuse it. A
deployer, hook or measurement gets `ROLLOUT_CLAIM=LOG_ID:POSITION` (the position of its attempt's
DeployerClaimed event) and asks before each side effect: the claim holds while it is its
deployment's latest claim, the deployment is still active with no cancel or abort asked, and its
claimant's lease has not expired by the database's clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rollouts.adapters.leases import lease_live
from rollouts.adapters.log_move import log_ids_by_position
from rollouts.domain import phases
from rollouts.domain.errors import UsageError

if TYPE_CHECKING:
    from rollouts.adapters.application import RolloutsApp

_CLAIM = re.compile(r"([0-9a-f]{32}):([0-9]{1,18})")
CLAIMED = ".DeployerClaimed"


@dataclass(frozen=True)
class Verdict:
    holds: bool
    why: str


def parse(text: str) -> tuple[str, int]:
    """LOG_ID:POSITION, as ROLLOUT_CLAIM has it."""
    match = _CLAIM.fullmatch(text.strip())
    if not match:
        raise UsageError(f"claim {text[:80]!r} is not LOG_ID:POSITION (32 hex digits, a colon, a position)")
    return match[1], int(match[2])


def env_value(log_id: str, position: int) -> str:
    """ROLLOUT_CLAIM for the claim at `position` of log `log_id`."""
    return f"{log_id}:{position}"


def check(app: RolloutsApp, claim: str) -> Verdict:
    log_id, position = parse(claim)
    recorder = app.recorder
    found = recorder.select_notifications(start=position, limit=1)
    if not found or found[0].id != position:
        return Verdict(False, f"the log holds no event at position {position}")
    event = found[0]
    if not event.topic.endswith(CLAIMED):
        return Verdict(False, f"position {position} is not a claim ({event.topic.rpartition('.')[2]})")
    writer = log_ids_by_position(app)(position)
    if writer != log_id:
        return Verdict(False, f"the claim is of log {log_id}; position {position} here is of log {writer}")
    latest = recorder.claim_of(event.originator_id)
    if latest is None or latest[0] != position:
        return Verdict(False, f"a later claim (position {latest[0] if latest else '?'}) replaced it")
    deployment = app.repository.get(event.originator_id)
    name = f"{deployment.config} version {deployment.revision} (attempt {deployment.attempt})"
    if deployment.phase not in phases.ACTIVE:
        return Verdict(False, f"{name} is {deployment.phase}: the claim has ended")
    if deployment.cancel_requested:  # an abort asks for a cancel too
        return Verdict(False, f"{name} is being stopped (cancel or abort asked)")
    if not lease_live(recorder, deployment.claimant or ""):
        return Verdict(False, f"claimant {deployment.claimant}'s lease has expired (by the database's clock)")
    return Verdict(True, f"{name} is {deployment.phase}, claimed at position {position} by a live claimant")
