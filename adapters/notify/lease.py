"""Sink leases beside the log: which controller delivers to a sink now (one at a time per sink).

Times come from the database's clock, as for claimant leases (service/leases.py). A lease lasts
more than twice the HTTP timeout, and is renewed before a send when less than a timeout is left, so a
holder's send ends before anyone else may take the sink over.
"""

from __future__ import annotations

import time
from typing import Any

from .. import settings
from ..store.port import LogRecorder, first

TABLE = "rollouts_sink_leases"


def lease_seconds(timeout: float) -> float:

    return max(settings.notify_lease_seconds(), 2 * timeout + 3)  # a send (timeout + 1) always fits after a renewal


class SinkLeases:
    def __init__(self, recorder: LogRecorder, holder: str, seconds: float) -> None:
        self.beside = recorder.beside
        self.holder = holder
        self.seconds = seconds
        self.table = self.beside.table(TABLE)
        self.now, self.mark, _ = self.beside.lease
        self.held: dict[str, float] = {}  # sink -> monotonic time our lease surely lasts until
        self.beside.create_table(
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            "(sink TEXT PRIMARY KEY, holder TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL)",
        )

    def _execute(self, sql: str, params: tuple[Any, ...] = (), fetch: bool = False) -> list[Any]:
        with self.beside.transaction(commit=True) as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if fetch else []

    def hold(self, sink: str, needed: float) -> bool:
        """Whether we hold `sink`'s lease for at least `needed` more seconds (taking or renewing it)."""
        if self.held.get(sink, 0.0) - time.monotonic() >= needed:
            return True
        started = time.monotonic()
        m = self.mark
        self._execute(
            f"INSERT INTO {self.table} AS lease (sink, holder, expires) VALUES ({m}, {m}, {self.now} + {m}) "
            f"ON CONFLICT (sink) DO UPDATE SET holder = excluded.holder, expires = excluded.expires "
            f"WHERE lease.holder = excluded.holder OR lease.expires < {self.now}",
            (sink, self.holder, self.seconds),
        )
        rows = self._execute(f"SELECT holder FROM {self.table} WHERE sink = {m}", (sink,), fetch=True)
        holder = first(rows[0]) if rows else None
        if holder != self.holder:
            self.held.pop(sink, None)
            return False
        self.held[sink] = started + self.seconds - 1.0  # a second of margin for clocks and commit time
        return self.held[sink] - time.monotonic() >= needed

    def release(self, sink: str) -> None:
        self.held.pop(sink, None)
        m = self.mark
        self._execute(f"DELETE FROM {self.table} WHERE sink = {m} AND holder = {m}", (sink, self.holder))
