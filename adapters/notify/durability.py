"""How hard the deliverer's own appends are pushed to disk.

A NotificationDelivered must be committed before the next notification is sent (that is what
bounds a controller's death to one repeat). On SQLite each commit with `synchronous=FULL` waits
for an fsync, which took longer than the POST itself here (about 1.6 ms against 0.5 ms). In WAL
mode `synchronous=NORMAL` keeps every commit once the process dies (the OS holds it) and keeps the
file consistent; only a power loss may forget the last commits. For this bookkeeping that means a
notification sent again with the same Idempotency-Key, so the deliverer's own connections use it.
Every other writer keeps the library's default.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.sqlite import SQLiteApplicationRecorder


def relax(app: Any) -> None:
    """Make the SQLite connections of `app` (its own, not the controller's) commit with synchronous=NORMAL."""
    if not isinstance(app.recorder, SQLiteApplicationRecorder):
        return
    pool = app.recorder.datastore.pool
    create = pool._create_connection  # the library offers no hook for per-connection pragmas

    def relaxed() -> Any:
        conn = create()
        conn._sqlite_conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    pool._create_connection = relaxed
    for conn in list(pool._pool):  # made before: the one that created the tables
        conn._sqlite_conn.execute("PRAGMA synchronous=NORMAL")
