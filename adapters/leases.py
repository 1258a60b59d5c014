"""Claimant leases beside the log: renewed by each controller, read to end dead claimants' claims.

Times come from the database's clock, so hosts with skewed clocks agree on a lease's age.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.application import RolloutsApp

DEFAULT_LEASE_S = 30.0
SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
POSTGRES_NOW = "extract(epoch from clock_timestamp())"


def lease_seconds() -> float:
    return float(os.environ.get("ROLLOUTS_LEASE_SECONDS", DEFAULT_LEASE_S))


def freshest_age(datastore: Any) -> float | None:
    """Seconds since any claimant last renewed its lease (by the database's clock); None when none
    ever did. Reads only: no table is created, so a reader needs no more than SELECT."""
    schema = getattr(datastore, "schema", None)
    with datastore.transaction(commit=False) as cursor:
        if schema is not None:
            cursor.execute("SELECT to_regclass(%s) AS found", (f'"{schema}".rollouts_leases',))
            exists = _first(cursor.fetchone()) is not None
            table, now = f'"{schema}".rollouts_leases', POSTGRES_NOW
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'rollouts_leases'")
            exists = cursor.fetchone() is not None
            table, now = "rollouts_leases", SQLITE_NOW
        if not exists:
            return None
        cursor.execute(f"SELECT {now} - max(renewed_at) AS age FROM {table}")
        age = _first(cursor.fetchone())
    return None if age is None else float(age)


def _first(row: Any) -> Any:
    """The first column of a row, whether the driver gives tuples or dicts."""
    if row is None:
        return None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


TABLES_LOCK = 7262012  # PostgreSQL advisory lock: the lease tables are created under it


def create_table(datastore: Any, postgres: bool, ddl: str) -> None:
    """Run a CREATE TABLE IF NOT EXISTS. In PostgreSQL two of them at once collide (a unique violation
    on pg_type: controllers starting together on a new store), so there it runs under an advisory lock."""
    with datastore.transaction(commit=True) as cursor:
        if postgres:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (TABLES_LOCK,))
        cursor.execute(ddl)


class Leases:
    """One row per claimant: when it last proved it was alive."""

    def __init__(self, app: RolloutsApp, seconds: float | None = None) -> None:
        self.datastore = app.recorder.datastore
        self.seconds = seconds or lease_seconds()
        schema = getattr(self.datastore, "schema", None)
        self.postgres = schema is not None
        self.table = f'"{schema}".rollouts_leases' if self.postgres else "rollouts_leases"
        self.now = POSTGRES_NOW if self.postgres else SQLITE_NOW
        self.mark = "%s" if self.postgres else "?"
        self.renewed = 0.0
        create_table(
            self.datastore,
            self.postgres,
            f"CREATE TABLE IF NOT EXISTS {self.table} (claimant TEXT PRIMARY KEY, renewed_at DOUBLE PRECISION)",
        )

    def _execute(self, sql: str, params: tuple[Any, ...] = (), *, fetch: bool = False) -> list[Any]:
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if fetch else []

    def renew(self, claimant: str) -> bool:
        """Renew at most ten times per lease; True when a renewal was written now."""
        if time.monotonic() - self.renewed < self.seconds / 10:
            return False
        self._execute(
            f"INSERT INTO {self.table} (claimant, renewed_at) VALUES ({self.mark}, {self.now}) "
            f"ON CONFLICT (claimant) DO UPDATE SET renewed_at = excluded.renewed_at",
            (claimant,),
        )
        self.renewed = time.monotonic()
        return True

    def expired(self) -> set[str]:
        """Claimants silent for a full lease: their claims may be ended as Lost."""
        rows = self._execute(
            f"SELECT claimant FROM {self.table} WHERE {self.now} - renewed_at > {self.mark}",
            (self.seconds,),
            fetch=True,
        )
        return {row[0] if not isinstance(row, dict) else row["claimant"] for row in rows}
