"""Claimant leases beside the log: renewed by each controller, read to end dead claimants' claims.

Times come from the database's clock, so hosts with skewed clocks agree on a lease's age. A lease
keeps its holder's length (ROLLOUTS_LEASE_SECONDS is each host's own: a host with a shorter one
ended the claims of a live controller with a longer one, whose deployer ran on beside the next
attempt's), and where its holder runs: a home copied with its runtime/claimant shares the id, and
both would run every deployer the id claims.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...domain.errors import StoreProblem
from .. import settings
from ..runtime.shim import boot_clock
from ..store import leases as stored
from ..store.port import LogRecorder

if TYPE_CHECKING:
    from .application import RolloutsApp


def lease_seconds() -> float:

    return settings.lease_seconds()


def freshest_age(recorder: LogRecorder) -> float | None:
    """Seconds since any claimant last renewed its lease (by the database's clock); None when none
    ever did. Reads only: no table is created, so a reader needs no more than SELECT."""
    return stored.freshest_age(recorder.beside)


def lease_live(recorder: LogRecorder, claimant: str) -> bool:
    """Whether `claimant`'s lease has not expired by the database's clock (its own length, or this host's
    for a row made before leases kept theirs). Reads only."""
    return stored.claimant_live(recorder.beside, claimant, lease_seconds)


class ClaimantShared(StoreProblem):
    """Another home holds this home's claimant id, alive (the CLI exits 5)."""


class Leases:
    """One row per claimant: when it last proved it was alive, for how long, and from where.

    `where` names the home the controller runs from (None: not checked); a lease another home
    holds, unexpired, is not taken (ClaimantShared)."""

    def __init__(self, app: RolloutsApp, seconds: float | None = None, where: str | None = None) -> None:
        self.seconds = seconds or lease_seconds()
        self.where = where
        self.renewed = 0.0  # time.monotonic() when the last renewal was sent
        self.renewed_boot = 0.0  # the same moment by the boot clock (what the shims compare their limit with)
        self.table = stored.ClaimantTable(app.recorder.beside)

    def renew(self, claimant: str) -> bool:
        """Renew at most ten times per lease; True when a renewal was written now."""
        if time.monotonic() - self.renewed < self.seconds / 10:
            return False
        # Fresh from when the renewal was sent, not from when its answer came: the database stamps it on
        # arrival, and other hosts count the lease from that stamp. An answer delayed by d (a slow link)
        # counted from its arrival kept this host's shims alive d past the lease others saw end.
        sent, sent_boot = time.monotonic(), boot_clock()
        taken = self.table.renew(claimant, self.seconds, self.where)
        if not taken:
            raise ClaimantShared(
                f"claimant id {claimant} (runtime/claimant) is held, alive, by another home ({self._holder(claimant)};"
                f" this one is {self.where}). If this home is a copy of that one, remove runtime/claimant here once"
                " no deployer of it runs (deployers list): the next controller makes an id of its own. If it is that"
                f" home (its host renamed, its disk mounted anew), start again once that lease ends (at most"
                f" {self.seconds:g} s, or the holder's own)"
            )
        self.renewed, self.renewed_boot = sent, sent_boot
        return True

    def _holder(self, claimant: str) -> str:
        held = self.table.holder(claimant)
        return "?" if held is None else held

    def expired(self) -> set[str]:
        """Claimants silent for a full lease, theirs or ours whichever is longer: their claims may be ended
        as Lost (their shims stopped their deployers at half their own lease)."""
        return self.table.expired(self.seconds)
