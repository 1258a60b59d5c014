"""Claimant leases beside the log: renewed by each controller, read to end dead claimants' claims.

Times come from the database's clock, so hosts with skewed clocks agree on a lease's age. A lease
keeps its holder's length (ROLLOUTS_LEASE_SECONDS is each host's own: a host with a shorter one
ended the claims of a live controller with a longer one, whose deployer ran on beside the next
attempt's), and where its holder runs: a home copied with its runtime/claimant shares the id, and
both would run every deployer the id claims.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from domain.errors import StoreProblem

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


class ClaimantShared(StoreProblem):
    """Another home holds this home's claimant id, alive (the CLI exits 5)."""


COLUMNS = {"seconds": "DOUBLE PRECISION", "holder": "TEXT"}  # added to a table made with only the first two


class Leases:
    """One row per claimant: when it last proved it was alive, for how long, and from where.

    `where` names the home the controller runs from (None: not checked); a lease another home
    holds, unexpired, is not taken (ClaimantShared)."""

    def __init__(self, app: RolloutsApp, seconds: float | None = None, where: str | None = None) -> None:
        self.datastore = app.recorder.datastore
        self.seconds = seconds or lease_seconds()
        self.where = where
        schema = getattr(self.datastore, "schema", None)
        self.postgres = schema is not None
        self.table = f'"{schema}".rollouts_leases' if self.postgres else "rollouts_leases"
        self.now = POSTGRES_NOW if self.postgres else SQLITE_NOW
        self.mark = "%s" if self.postgres else "?"
        self.longer = "greatest" if self.postgres else "max"
        self.renewed = 0.0
        create_table(
            self.datastore,
            self.postgres,
            f"CREATE TABLE IF NOT EXISTS {self.table} (claimant TEXT PRIMARY KEY, renewed_at DOUBLE PRECISION, "
            + ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
            + ")",
        )
        self._add_columns()

    def _add_columns(self) -> None:
        """COLUMNS, to a table made before them (its rows' lengths and holders unknown: NULL)."""
        with self.datastore.transaction(commit=False) as cursor:  # (an ALTER asks for the table's owner)
            if self.postgres:
                cursor.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                    (self.datastore.schema, "rollouts_leases"),
                )
                have = {_first(row) for row in cursor.fetchall()}
            else:
                cursor.execute(f"PRAGMA table_info({self.table})")
                have = {row[1] for row in cursor.fetchall()}
        for name, kind in COLUMNS.items():
            if name in have:
                continue
            if self.postgres:  # (under create_table's lock, as a controller starting beside us may add it too)
                create_table(self.datastore, True, f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS {name} {kind}")
                continue
            try:
                create_table(self.datastore, False, f"ALTER TABLE {self.table} ADD COLUMN {name} {kind}")
            except Exception as error:  # noqa: BLE001 - the library wraps sqlite3's error
                if "duplicate column name" not in str(error):  # a controller starting beside us added it
                    raise

    def _execute(self, sql: str, params: tuple[Any, ...] = (), *, fetch: bool = False) -> list[Any]:
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if fetch else []

    def renew(self, claimant: str) -> bool:
        """Renew at most ten times per lease; True when a renewal was written now."""
        if time.monotonic() - self.renewed < self.seconds / 10:
            return False
        m, held = self.mark, "rollouts_leases"  # the row there (PostgreSQL names it without its schema)
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
        self.renewed = time.monotonic()
        return True

    def _holder(self, claimant: str) -> str:
        rows = self._execute(f"SELECT holder FROM {self.table} WHERE claimant = {self.mark}", (claimant,), fetch=True)
        return str(_first(rows[0])) if rows else "?"

    def expired(self) -> set[str]:
        """Claimants silent for a full lease, theirs or ours whichever is longer: their claims may be ended
        as Lost (their shims stopped their deployers at half their own lease)."""
        rows = self._execute(
            f"SELECT claimant FROM {self.table}"
            f" WHERE {self.now} - renewed_at > {self.longer}(coalesce(seconds, {self.mark}), {self.mark})",
            (self.seconds, self.seconds),
            fetch=True,
        )
        return {row[0] if not isinstance(row, dict) else row["claimant"] for row in rows}
