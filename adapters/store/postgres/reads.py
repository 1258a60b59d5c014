"""The PostgreSQL recorder's reads: the chain walked, events by stream, claims, and the log read and listened
to with connections of its own (ChainedPostgresRecorder's base: kept apart so each file stays readable)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresDatastore
from psycopg.conninfo import make_conninfo
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier

from ....projections.source import DirectLog, PostgresLog
from ..failures import missing_table
from ..log_recorder import BATCH, CLAIM_TOPIC, first_value, merge
from ..port import Backend, EventRow, HashedRow, Part, Row, SnapshotTable
from .backend import PostgresBackend


class PostgresReads:
    """Reads of a chained PostgreSQL log (the recorder sets what they use in its __init__)."""

    backend: Backend
    datastore: PostgresDatastore
    events_table_name: str
    channel_name: str
    _events: Composed  # the events table, schema-qualified
    _chain_table: Composed
    _sql_claims: str
    _sql_after: dict[str | None, str]  # events_after's statement, by snapshots table
    _sql_read: str  # read_rows' statement

    def chained_rows(self, lo: int = 0, hi: int | None = None) -> Iterator[HashedRow]:
        """As on SQLite: events and hashes in position order, one snapshot, streamed by a server-side cursor."""
        top = 2**63 - 1 if hi is None else hi
        events = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {0}"
            " WHERE notification_id BETWEEN %s AND %s ORDER BY notification_id"
        ).format(self._events)
        hashes = SQL("SELECT position, hash FROM {0} WHERE position BETWEEN %s AND %s ORDER BY position").format(
            self._chain_table
        )
        with self.datastore.get_connection() as conn, conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            with (
                conn.cursor(name="rollouts_verify_events", row_factory=tuple_row) as e_cur,
                conn.cursor(name="rollouts_verify_hashes", row_factory=tuple_row) as h_cur,
            ):
                e_cur.itersize = h_cur.itersize = BATCH
                e_cur.execute(events, (lo, top))
                h_cur.execute(hashes, (lo, top))
                yield from merge(e_cur, h_cur)

    def hashed_events(self, lo: int = 0, hi: int | None = None) -> Iterator[HashedRow]:
        """As on SQLite, streamed by a server-side cursor."""
        top = 2**63 - 1 if hi is None else hi
        sql = SQL(
            "SELECT e.notification_id, e.originator_id, e.originator_version, e.topic, e.state, h.hash"
            " FROM {0} e LEFT JOIN {1} h ON h.position = e.notification_id"
            " WHERE e.notification_id BETWEEN %s AND %s ORDER BY e.notification_id"
        ).format(self._events, self._chain_table)
        with (
            self.datastore.get_connection() as conn,
            conn.transaction(force_rollback=True),
            conn.cursor(name="rollouts_export", row_factory=tuple_row) as cur,
        ):
            cur.itersize = BATCH
            cur.execute(sql, (lo, top))
            yield from cur

    def parts(self, count: int, smallest: int = 0) -> list[Part] | None:
        """Walked in one piece: the server streams it (see ChainedSQLiteRecorder.parts)."""
        return None

    def events_of(self, streams: Sequence[UUID], until: int) -> list[EventRow]:
        sql = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {0}"
            " WHERE originator_id = ANY(%s) AND notification_id <= %s"
        ).format(self._events)
        return [EventRow(*r.values()) for r in self._query(sql, (list(streams), until))]

    def events_after(
        self, wanted: Sequence[tuple[UUID, int | None]], snapshots: SnapshotTable | None
    ) -> tuple[list[StoredEvent], list[StoredEvent]]:
        """In ONE query (one snapshot of the log): the events of each stream after the version given,
        or, given None, the stream's last snapshot (in the table of recorder `snapshots`) and the
        events after it. Returns (events, snapshots)."""
        if not wanted:
            return [], []
        table = None if snapshots is None else snapshots.events_table_name
        sql = self._sql_after.get(table) or self._sql_after.setdefault(table, self._events_after_sql(table))
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(sql, ([i for i, _ in wanted], [v for _, v in wanted]), prepare=True)
            rows = curs.fetchall()
        found: tuple[list[StoredEvent], list[StoredEvent]] = ([], [])
        for snapshot, stream, version, topic, state in rows:
            found[snapshot].append(StoredEvent(stream, version, topic, bytes(state)))
        return found[0], found[1]

    def _events_after_sql(self, snapshots: str | None) -> str:
        if snapshots is None:
            latest: SQL | Composed = SQL("SELECT NULL::uuid, 0, NULL::text, NULL::bytea WHERE false")
        else:
            latest = SQL(
                "SELECT DISTINCT ON (s.originator_id) s.originator_id, s.originator_version, s.topic, s.state"
                " FROM {0} s JOIN w ON s.originator_id = w.id AND w.gt IS NULL"
                " ORDER BY s.originator_id, s.originator_version DESC"
            ).format(SQL("{0}.{1}").format(Identifier(self.datastore.schema), Identifier(snapshots)))
        return (
            SQL(
                "WITH w (id, gt) AS (SELECT * FROM unnest(%s::uuid[], %s::int[])),"
                " s (originator_id, originator_version, topic, state) AS ({0})"
                " SELECT true AS snapshot, * FROM s UNION ALL"
                " SELECT false, e.originator_id, e.originator_version, e.topic, e.state FROM w JOIN {1} e"
                " ON e.originator_id = w.id AND e.originator_version >"
                " coalesce(w.gt, (SELECT s.originator_version FROM s WHERE s.originator_id = w.id), 0)"
            )
            .format(latest, self._events)
            .as_string(None)
        )

    def hash_at(self, position: int) -> str | None:
        sql = SQL("SELECT hash FROM {0} WHERE position = %s").format(self._chain_table)
        return first_value(self._query(sql, (position,)))

    def snapshot_rows(self) -> list[tuple[Any, ...]]:
        """As on SQLite: every stored snapshot with the position of its stream's event at that version."""
        snapshots = self.events_table_name.removesuffix("events") + "snapshots"  # as the library names it
        sql = SQL(
            "SELECT s.originator_id, s.originator_version, s.topic, s.state, e.notification_id FROM {0}.{1} s"
            " LEFT JOIN {2} e ON e.originator_id = s.originator_id AND e.originator_version = s.originator_version"
            " ORDER BY s.originator_id, s.originator_version"
        ).format(Identifier(self.datastore.schema), Identifier(snapshots), self._events)
        return [tuple(row.values()) for row in self._query(sql, ())]

    def claim_of(self, stream: UUID) -> tuple[int, str | None] | None:
        sql = SQL(
            "SELECT e.notification_id, h.hash FROM {0} e LEFT JOIN {1} h ON h.position = e.notification_id"
            " WHERE e.originator_id = %s AND e.topic LIKE %s ORDER BY e.originator_version DESC LIMIT 1"
        ).format(self._events, self._chain_table)
        rows = self._query(sql, (stream, CLAIM_TOPIC))
        return (rows[0]["notification_id"], rows[0]["hash"]) if rows else None

    def claims_of(self, streams: Sequence[UUID]) -> dict[UUID, tuple[int, str | None]]:
        """claim_of for each of `streams` in one query (those with no claim left out)."""
        if not streams:
            return {}
        rows = self._query(self._sql_claims, (list(dict.fromkeys(streams)), CLAIM_TOPIC))
        return {r["originator_id"]: (r["notification_id"], r["hash"]) for r in rows}

    def file_and_table(self) -> tuple[str, str] | None:
        return None  # no file: export reads the server in one stream

    def listener(self) -> ChannelListener | None:
        """LISTEN on the channel every insert of events NOTIFYs; None when it cannot be had."""
        try:
            conn = self._server().connect()
        except psycopg.Error:
            return None
        try:
            conn.execute(SQL("LISTEN {0}").format(Identifier(self.channel_name)))
        except psycopg.Error:
            conn.close()
            return None
        return ChannelListener(conn)

    def watched_files(self) -> list[Path]:
        return []  # a server's log has no file of ours to watch

    def read_rows(self, after: int, limit: int, ids: dict[str, str]) -> Sequence[Row]:
        """The same rows select_notifications gives, as tuples, the ids as text (no UUID objects)."""
        # Binary: the stored bytes as they are (as text, each would come as hex digits to decode)
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row, binary=True) as curs:
            curs.execute(self._sql_read, (after, limit), prepare=True)
            rows = curs.fetchall()
        new = tuple.__new__
        return [new(Row, (n, o, v, t, s if isinstance(s, bytes) else bytes(s))) for n, o, v, t, s in rows]

    def rebuild_log(self) -> DirectLog:
        """Where the log is, for a rebuild to read it with connections of its own."""
        server = self._server()
        settings = {k: v for k, v in server.url.conninfo().items() if v is not None}
        return PostgresLog(make_conninfo("", **settings), server.schema, self.events_table_name)

    def _server(self) -> PostgresBackend:
        """The backend that opened this recorder: a PostgreSQL one, whose URL reaches the server."""
        if not isinstance(self.backend, PostgresBackend):
            raise TypeError(f"a PostgreSQL log opened by {type(self.backend).__name__}")
        return self.backend

    def relax_durability(self) -> None:
        return None  # the server's commits are its own business

    def _query(self, sql: str | Composed, params: tuple[object, ...]) -> list[Any]:  # why: dict rows, any value
        """One statement on an autocommit connection: one round trip, not three (BEGIN and ROLLBACK)."""
        try:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(sql, params)
                return list(curs.fetchall())
        except Exception as error:  # noqa: BLE001 - the library wraps the driver's errors
            if missing_table(error):
                return []
            raise


class ChannelListener:
    """NOTIFYs on a PostgreSQL log's channel."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:  # why: its rows are never read
        self._conn = conn
        self.fd: int = conn.fileno()

    def changed(self) -> bool:
        """Whether a notification came since the last call."""
        pgconn = self._conn.pgconn
        pgconn.consume_input()
        hit = False
        while pgconn.notifies() is not None:
            hit = True
        return hit

    def close(self) -> None:
        with contextlib.suppress(Exception):  # noqa: BLE001 - closing a dead connection may fail any way
            self._conn.close()
