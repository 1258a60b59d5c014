"""Claimant leases beside the log: renewed by each controller, read to end dead claimants' claims.

Times come from the database's clock, so hosts with skewed clocks agree on a lease's age. A lease
keeps its holder's length (ROLLOUTS_LEASE_SECONDS is each host's own: a host with a shorter one
ended the claims of a live controller with a longer one, whose deployer ran on beside the next
attempt's), and where its holder runs: a home copied with its runtime/claimant shares the id, and
both would run every deployer the id claims.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..adapters import settings
from ..adapters.runtime.shim import boot_clock
from ..adapters.store.port import LogRecorder, first
from ..domain.errors import StoreProblem

if TYPE_CHECKING:
    from .application import RolloutsApp

TABLE = "rollouts_leases"


def lease_seconds() -> float:

    return settings.lease_seconds()


def freshest_age(recorder: LogRecorder) -> float | None:
    """Seconds since any claimant last renewed its lease (by the database's clock); None when none
    ever did. Reads only: no table is created, so a reader needs no more than SELECT."""
    beside = recorder.beside
    if not beside.table_exists(TABLE):
        return None
    with beside.transaction(commit=False) as cursor:
        cursor.execute(f"SELECT {beside.lease.now} - max(renewed_at) AS age FROM {beside.table(TABLE)}")
        age = first(cursor.fetchone())
    return None if age is None else float(age)


def lease_live(recorder: LogRecorder, claimant: str) -> bool:
    """Whether `claimant`'s lease has not expired by the database's clock (its own length, or this host's
    for a row made before leases kept theirs). Reads only."""
    beside = recorder.beside
    if not beside.table_exists(TABLE):
        return False
    m = beside.lease.mark
    with beside.transaction(commit=False) as cursor:
        cursor.execute(
            f"SELECT {beside.lease.now} - renewed_at <= coalesce(seconds, {m}) FROM {beside.table(TABLE)}"
            f" WHERE claimant = {m}",
            (lease_seconds(), claimant),
        )
        live = first(cursor.fetchone())
    return bool(live)


class ClaimantShared(StoreProblem):
    """Another home holds this home's claimant id, alive (the CLI exits 5)."""


COLUMNS = {"seconds": "DOUBLE PRECISION", "holder": "TEXT"}  # added to a table made with only the first two


class Leases:
    """One row per claimant: when it last proved it was alive, for how long, and from where.

    `where` names the home the controller runs from (None: not checked); a lease another home
    holds, unexpired, is not taken (ClaimantShared)."""

    def __init__(self, app: RolloutsApp, seconds: float | None = None, where: str | None = None) -> None:
        self.beside = app.recorder.beside
        self.seconds = seconds or lease_seconds()
        self.where = where
        self.table = self.beside.table(TABLE)
        self.now, self.mark, self.longer = self.beside.lease
        self.renewed = 0.0  # time.monotonic() when the last renewal was sent
        self.renewed_boot = 0.0  # the same moment by the boot clock (what the shims compare their limit with)
        self.beside.create_table(
            f"CREATE TABLE IF NOT EXISTS {self.table} (claimant TEXT PRIMARY KEY, renewed_at DOUBLE PRECISION, "
            + ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
            + ")",
        )
        have = self.beside.columns(TABLE)
        for name, kind in COLUMNS.items():  # to a table made before them (its rows' lengths and holders: NULL)
            if name not in have:
                self.beside.add_column(TABLE, name, kind)

    def _execute(self, sql: str, params: tuple[object, ...] = (), *, fetch: bool = False) -> list[Any]:  # why: rows
        with self.beside.transaction(commit=True) as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if fetch else []

    def renew(self, claimant: str) -> bool:
        """Renew at most ten times per lease; True when a renewal was written now."""
        if time.monotonic() - self.renewed < self.seconds / 10:
            return False
        m, held = self.mark, TABLE  # the row there (PostgreSQL names it without its schema)
        # Fresh from when the renewal was sent, not from when its answer came: the database stamps it on
        # arrival, and other hosts count the lease from that stamp. An answer delayed by d (a slow link)
        # counted from its arrival kept this host's shims alive d past the lease others saw end.
        sent, sent_boot = time.monotonic(), boot_clock()
        taken = self._execute(
            f"INSERT INTO {self.table} (claimant, renewed_at, seconds, holder) VALUES ({m}, {self.now}, {m}, {m}) "
            "ON CONFLICT (claimant) DO UPDATE SET renewed_at = excluded.renewed_at, seconds = excluded.seconds,"
            f" holder = excluded.holder WHERE {held}.holder IS NULL OR excluded.holder IS NULL"
            f" OR {held}.holder = excluded.holder OR {self.now} - {held}.renewed_at > coalesce({held}.seconds, {m})"
            " RETURNING claimant",
            (claimant, self.seconds, self.where, self.seconds),
            fetch=True,
        )
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
        rows = self._execute(f"SELECT holder FROM {self.table} WHERE claimant = {self.mark}", (claimant,), fetch=True)
        return str(first(rows[0])) if rows else "?"

    def expired(self) -> set[str]:
        """Claimants silent for a full lease, theirs or ours whichever is longer: their claims may be ended
        as Lost (their shims stopped their deployers at half their own lease)."""
        rows = self._execute(
            f"SELECT claimant FROM {self.table}"
            f" WHERE {self.now} - renewed_at > {self.longer}(coalesce(seconds, {self.mark}), {self.mark})",
            (self.seconds, self.seconds),
            fetch=True,
        )
        return {first(row) for row in rows}
