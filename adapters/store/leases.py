"""Lease tables beside the log, in the store's dialect: their statements and what runs them.

Claimants' leases (what one means, and when a claimant's is taken: service/leases.py) and sinks' leases
(one deliverer per sink: adapters/notify/lease.py). Times come from the database's clock, so hosts with
skewed clocks agree on a lease's age. Each statement runs in a transaction of its own on the log's
connections, as the renewals and the reads of a pass always did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .port import TablesBeside, first

CLAIMANTS = "rollouts_leases"
SINKS = "rollouts_sink_leases"
COLUMNS = {"seconds": "DOUBLE PRECISION", "holder": "TEXT"}  # added to a table made with only the first two


def _run(beside: TablesBeside, sql: str, params: tuple[object, ...], fetch: bool) -> list[Any]:  # why: rows
    with beside.transaction(commit=True) as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if fetch else []


def freshest_age(beside: TablesBeside) -> float | None:
    """Seconds since any claimant last renewed its lease (by the database's clock); None when none
    ever did. Reads only: no table is created, so a reader needs no more than SELECT."""
    if not beside.table_exists(CLAIMANTS):
        return None
    with beside.transaction(commit=False) as cursor:
        cursor.execute(f"SELECT {beside.lease.now} - max(renewed_at) AS age FROM {beside.table(CLAIMANTS)}")
        age = first(cursor.fetchone())
    return None if age is None else float(age)


def claimant_live(beside: TablesBeside, claimant: str, seconds: Callable[[], float]) -> bool:
    """Whether `claimant`'s lease has not expired by the database's clock (its own length, or `seconds()`,
    read only once there is a table, for a row made before leases kept theirs). Reads only."""
    if not beside.table_exists(CLAIMANTS):
        return False
    m = beside.lease.mark
    with beside.transaction(commit=False) as cursor:
        cursor.execute(
            f"SELECT {beside.lease.now} - renewed_at <= coalesce(seconds, {m}) FROM {beside.table(CLAIMANTS)}"
            f" WHERE claimant = {m}",
            (seconds(), claimant),
        )
        live = first(cursor.fetchone())
    return bool(live)


class ClaimantTable:
    """One row per claimant: when it last proved it was alive, for how long, and from where (its holder).
    Made when missing, and given the columns a table made before them lacks."""

    def __init__(self, beside: TablesBeside) -> None:
        self.beside = beside
        self.table = beside.table(CLAIMANTS)
        self.now, self.mark, self.longer = beside.lease
        beside.create_table(
            f"CREATE TABLE IF NOT EXISTS {self.table} (claimant TEXT PRIMARY KEY, renewed_at DOUBLE PRECISION, "
            + ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
            + ")",
        )
        have = beside.columns(CLAIMANTS)
        for name, kind in COLUMNS.items():  # to a table made before them (its rows' lengths and holders: NULL)
            if name not in have:
                beside.add_column(CLAIMANTS, name, kind)

    def _execute(self, sql: str, params: tuple[object, ...] = (), *, fetch: bool = False) -> list[Any]:  # why: rows
        return _run(self.beside, sql, params, fetch)

    def renew(self, claimant: str, seconds: float, where: str | None) -> bool:
        """Stamp `claimant`'s lease now, `seconds` long, held from `where`; False (nothing written) when
        another holder's lease on it has not expired by its own length."""
        m, held = self.mark, CLAIMANTS  # the row there (PostgreSQL names it without its schema)
        taken = self._execute(
            f"INSERT INTO {self.table} (claimant, renewed_at, seconds, holder) VALUES ({m}, {self.now}, {m}, {m}) "
            "ON CONFLICT (claimant) DO UPDATE SET renewed_at = excluded.renewed_at, seconds = excluded.seconds,"
            f" holder = excluded.holder WHERE {held}.holder IS NULL OR excluded.holder IS NULL"
            f" OR {held}.holder = excluded.holder OR {self.now} - {held}.renewed_at > coalesce({held}.seconds, {m})"
            " RETURNING claimant",
            (claimant, seconds, where, seconds),
            fetch=True,
        )
        return bool(taken)

    def holder(self, claimant: str) -> str | None:
        """Where `claimant`'s lease is held from, as text (None: it has no row)."""
        rows = self._execute(f"SELECT holder FROM {self.table} WHERE claimant = {self.mark}", (claimant,), fetch=True)
        return str(first(rows[0])) if rows else None

    def expired(self, seconds: float) -> set[str]:
        """Claimants silent for longer than their own lease and `seconds`, whichever is longer (a row made
        before leases kept theirs: `seconds`)."""
        rows = self._execute(
            f"SELECT claimant FROM {self.table}"
            f" WHERE {self.now} - renewed_at > {self.longer}(coalesce(seconds, {self.mark}), {self.mark})",
            (seconds, seconds),
            fetch=True,
        )
        return {first(row) for row in rows}


class SinkTable:
    """One row per sink: which controller process delivers to it, until when (by the database's clock)."""

    def __init__(self, beside: TablesBeside) -> None:
        self.beside = beside
        self.table = beside.table(SINKS)
        self.now, self.mark, _ = beside.lease
        beside.create_table(
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            "(sink TEXT PRIMARY KEY, holder TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL)",
        )

    def _execute(self, sql: str, params: tuple[object, ...] = (), fetch: bool = False) -> list[Any]:  # why: rows
        return _run(self.beside, sql, params, fetch)

    def take(self, sink: str, holder: str, seconds: float) -> None:
        """Take or renew `sink`'s lease for `seconds` from now, unless another holder's has not expired."""
        m = self.mark
        self._execute(
            f"INSERT INTO {self.table} AS lease (sink, holder, expires) VALUES ({m}, {m}, {self.now} + {m}) "
            f"ON CONFLICT (sink) DO UPDATE SET holder = excluded.holder, expires = excluded.expires "
            f"WHERE lease.holder = excluded.holder OR lease.expires < {self.now}",
            (sink, holder, seconds),
        )

    def holder(self, sink: str) -> object:
        """Who holds `sink`'s lease (None: nobody)."""
        rows = self._execute(f"SELECT holder FROM {self.table} WHERE sink = {self.mark}", (sink,), fetch=True)
        return first(rows[0]) if rows else None

    def release(self, sink: str, holder: str) -> None:
        """End `sink`'s lease if `holder` holds it."""
        m = self.mark
        self._execute(f"DELETE FROM {self.table} WHERE sink = {m} AND holder = {m}", (sink, holder))
