"""The PostgreSQL recorder, chained as adapters/store/log_recorder.py describes (loaded only for a PostgreSQL
store): its schema, its writes and imports; its reads are in reads.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, ProgrammingError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import register_topic, retry
from psycopg import Connection, Cursor
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Composable, Identifier

from ....domain.ids import seal_id
from .. import chain
from ..log_recorder import (
    Guards,
    HeadMoved,
    LogSealed,
    StoreNotEmpty,
    chained,
    chained_part,
    check_guards,
    first_value,
)
from ..opening import LOG_COLUMNS, ChainedLog, identity, new_format
from ..port import CHAIN_TABLE, LOG_TABLE, Imported, StoreUnavailable, Tail
from . import factory
from .reads import PostgresReads

WRITER_CHECK = "rollouts_writer_check"  # the trigger, and its function, that hold writers to their own role

# Every role but the events table's owner (and superusers) appends only, and as itself: an event's
# meta.db_user must be the session user. The owner is not held to it: it may drop the trigger anyway, and
# it imports logs that others wrote. search_path is fixed: a caller's own functions must not stand in.
_WRITER_FUNCTION = """CREATE OR REPLACE FUNCTION {0}() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $body$
BEGIN
  IF pg_has_role(session_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  IF TG_OP <> 'INSERT' THEN
    RAISE EXCEPTION 'the event log is append-only: % refused for role %', TG_OP, session_user
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF (convert_from(NEW.state, 'UTF8')::jsonb #>> '{{meta,db_user}}') IS DISTINCT FROM session_user::text THEN
    RAISE EXCEPTION 'an event''s db_user must be the session user, %', session_user
      USING ERRCODE = 'insufficient_privilege';  -- not an integrity error: no conflict to decide again
  END IF;
  RETURN NEW;
END $body$"""
_WRITER_TRIGGER = "CREATE TRIGGER {0} BEFORE INSERT OR UPDATE OR DELETE ON {1} FOR EACH ROW EXECUTE FUNCTION {2}()"


def _text(sql: str, *parts: Composable) -> str:
    """A statement as text: psycopg renders a composed statement at every execute, text it caches."""
    return SQL(sql).format(*parts).as_string(None)


def _as_text(statement: object) -> str:
    """One of the library's statements as text (it composes them; one given as text is kept as it is)."""
    if isinstance(statement, Composable):
        return statement.as_string(None)
    if isinstance(statement, str):
        return statement
    raise TypeError(f"the library's statement is {type(statement).__name__}, not a composed one")


class OutcomeUnknown(StoreUnavailable):
    """A save whose transaction reached the server, and whose answer never came: the connection was lost,
    and every retry's look for its events failed too. It may be saved or not; the caller must look, never
    take it for failed (exit 5: stop, as for any store out of reach)."""

    def __init__(self, error: BaseException) -> None:
        said = " ".join(str(error).split()) or type(error).__name__
        super().__init__(
            "the write's outcome is unknown: the connection to the log was lost while it was being committed, and"
            f" it stayed lost; it may or may not be saved: look ('rollouts events') before repeating it ({said})"
        )


class ChainedPostgresRecorder(PostgresApplicationRecorder, PostgresReads, ChainedLog):
    """PostgreSQL: the same two tables in the store's schema."""

    _log_id: str | None = None  # the store's log id, read at its first save (fixed once made)
    _format: int = chain.LEGACY  # its chain format, read with its id
    _session_user: str | None = None

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema = Identifier(self.datastore.schema)
        self._chain_table = SQL("{0}.{1}").format(schema, Identifier(CHAIN_TABLE))
        self._log_table = SQL("{0}.{1}").format(schema, Identifier(LOG_TABLE))
        self._events = SQL("{0}.{1}").format(schema, Identifier(self.events_table_name))
        # A save's statements as text, rendered once: a composed one costs its rendering at every execute.
        self._sql_lock = [_as_text(statement) for statement in self.lock_table_statements]
        # The library names the channel after the table alone, and a channel is the database's: stores in
        # other schemas of one database woke each other's controllers. Ours names the schema too.
        self.channel_name = f"{self.datastore.schema}_{self.channel_name}"
        self._sql_notify = _text("NOTIFY {0}", Identifier(self.channel_name))
        self._sql_insert = self.insert_events_statement.as_string(None)
        self._sql_last = _text("SELECT position, hash FROM {0} ORDER BY position DESC LIMIT 1", self._chain_table)
        self._sql_hashes = _text("INSERT INTO {0} (position, hash) VALUES (%s, %s)", self._chain_table)
        self._sql_guard = _text(
            "SELECT originator_id AS id, max(originator_version) AS v FROM {0}"
            " WHERE originator_id = ANY(%s) GROUP BY originator_id",
            self._events,
        )
        self._sql_claims = _text(
            "SELECT DISTINCT ON (e.originator_id) e.originator_id, e.notification_id, h.hash"
            " FROM {0} e LEFT JOIN {1} h ON h.position = e.notification_id"
            " WHERE e.originator_id = ANY(%s) AND e.topic LIKE %s ORDER BY e.originator_id, e.originator_version DESC",
            self._events,
            self._chain_table,
        )
        self._sql_committed = _text(
            "SELECT originator_id, originator_version, topic, state, notification_id FROM {0}"
            " WHERE (originator_id, originator_version) IN (SELECT * FROM unnest(%s::uuid[], %s::bigint[]))",
            self._events,
        )
        self._sql_sealed = _text("SELECT notification_id FROM {0} WHERE originator_id = %s LIMIT 1", self._events)
        self._sql_identity = _text("SELECT * FROM {0} LIMIT 1", self._log_table)
        self._sql_gap = _text(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {0}"
            " WHERE notification_id > %s AND notification_id < %s ORDER BY notification_id",
            self._events,
        )
        self._sql_head = _text("SELECT coalesce(max(notification_id), 0) AS head FROM {0}", self._events)
        self._sql_after = {}
        self._sql_read = _text(
            "SELECT notification_id, originator_id::text, originator_version, topic, state FROM {0}"
            " WHERE notification_id > %s ORDER BY notification_id LIMIT %s",
            self._events,
        )
        self.sql_create_statements.append(
            SQL("CREATE TABLE IF NOT EXISTS {0} (position bigint PRIMARY KEY, hash text NOT NULL)").format(
                self._chain_table
            )
        )
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {0} (log_id text NOT NULL, created_at timestamptz NOT NULL, chain integer)"
            ).format(self._log_table)
        )

    def create_table(self) -> None:
        super().create_table()
        if self.log_id() is None:
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(SQL("SELECT 1 FROM {0} LIMIT 1").format(self._events))
                insert = SQL(f"INSERT INTO {{0}} ({LOG_COLUMNS}) VALUES (%s, now(), %s)").format(self._log_table)
                curs.execute(insert, (uuid.uuid4().hex, new_format(curs.fetchone() is None)))
        self._check_writers()

    def _check_writers(self) -> None:
        """Make the trigger that holds each writer to its own role, once (a log made before it gets it at
        its owner's next write; backend_postgres opens the log as another role without any DDL)."""
        schema = Identifier(self.datastore.schema)
        function = SQL("{0}.{1}").format(schema, Identifier(WRITER_CHECK))
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "SELECT 1 FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname = %s",
                (self._events.as_string(curs.connection), WRITER_CHECK),
            )
            if curs.fetchone() is None:
                curs.execute(SQL(_WRITER_FUNCTION).format(function))
                curs.execute(SQL(_WRITER_TRIGGER).format(Identifier(WRITER_CHECK), self._events, function))

    def session_user(self) -> str:
        """The role the server knows this recorder's connections as: each event records it (db_user)."""
        if self._session_user is None:
            self._session_user = first_value(self._query("SELECT session_user", ()))
        return self._session_user or ""

    def insert_events(  # (kwargs: the library's signature; ours are guards and head, application.save's)
        self,
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,  # why: the library's signature
    ) -> Sequence[int] | None:
        """The library's save (lock, notify, insert), chained, in two round trips, not five: all up to
        the insert in one, the hashes and the commit in the other (the library nests a transaction in
        its pipeline, and each level syncs).

        Retried on a lost connection as the library's is; but a connection lost after the COMMIT went
        out may have lost only its answer: each retry first looks for the events, and takes them for
        saved when they are there as sent (retried blindly, the insert met its own rows: the command
        was refused, or decided again, though its first decision was committed)."""
        if not stored_events:
            return None
        if self._log_id is None:  # read outside the save's transaction (with the chain format)
            self._log_id, self._format = identity(next(iter(self._query(self._sql_identity, ())), None))
        tries: list[bool] = []  # per try: whether it sent its transaction to the server
        try:
            return self._insert_retried(stored_events, kwargs.get("guards") or (), tries, kwargs.get("head"))
        except (InterfaceError, OperationalError) as error:
            if any(tries):  # a COMMIT may have reached the server, and no look since could tell
                raise OutcomeUnknown(error) from error
            raise

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)  # as the library's insert_events
    def _insert_retried(
        self, stored_events: Sequence[StoredEvent], guards: Guards, tries: list[bool], head: int | None = None
    ) -> list[int]:
        if tries:
            found = self._committed(stored_events)
            if found is not None:
                return found
        retried = bool(tries)
        tries.append(False)
        with self.datastore.get_connection() as conn:
            tries[-1] = True
            try:
                return self._send(conn, stored_events, guards, head)
            except BaseException as error:
                if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                    conn.execute("ROLLBACK")  # nothing of it is committed; the connection goes back clean
                # A retry's insert may meet the rows of the first attempt, whose COMMIT was still under way
                # when we looked: it waited for that attempt's lock.
                if retried and isinstance(error, IntegrityError | psycopg.IntegrityError):
                    found = self._committed(stored_events)
                    if found is not None:
                        return found
                raise

    def _send(
        self, conn: Connection[DictRow], stored_events: Sequence[StoredEvent], guards: Guards, head: int | None
    ) -> list[int]:
        with conn.pipeline() as pipeline:
            conn.execute("BEGIN")
            ids = self._append(conn, stored_events, guards, pipeline.sync, head)
            conn.execute("COMMIT")
        return ids

    def _committed(self, stored_events: Sequence[StoredEvent]) -> list[int] | None:
        """The positions of `stored_events` when the log holds them as sent (None: it holds none of them);
        IntegrityError when it holds others at their versions (another writer's)."""
        keys = [(s.originator_id, s.originator_version) for s in stored_events]
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._sql_committed, ([k[0] for k in keys], [k[1] for k in keys]))
            rows = {(r["originator_id"], r["originator_version"]): r for r in curs.fetchall()}
        if not rows:
            return None
        found = []
        for s, key in zip(stored_events, keys, strict=True):
            row = rows.get(key)
            if row is None or row["topic"] != s.topic or bytes(row["state"]) != bytes(s.state):
                raise IntegrityError(f"stream {key[0]} holds another event at version {key[1]}")
            found.append(row["notification_id"])
        return found

    def _append(
        self,
        conn: Connection[DictRow],
        stored_events: Sequence[StoredEvent],
        guards: Guards,
        sync: Callable[[], None],
        head: int | None = None,
    ) -> list[int]:
        """Insert and chain `stored_events` in the transaction open on `conn`. Under the library's table
        lock, before the insert: the guards and the fence (the log's seal, and the head a seal's decision
        read), checked before anything is committed, and the chain's last row (the insert writes none),
        all sent with the insert and answered at `sync`."""
        statements = conn.cursor()  # not closed before the sync: a cursor closed in a pipeline waits for it
        for lock in self._sql_lock:  # the library's _lock_table
            statements.execute(lock, prepare=True)
        found = self._guard(conn, guards) if guards else None
        sealed = None
        if self._log_id is not None:
            sealed = conn.cursor()
            sealed.execute(self._sql_sealed, (seal_id(self._log_id),), prepare=True)
        ended = None
        if head is not None:
            ended = conn.cursor()
            ended.execute(self._sql_head)
        last = conn.cursor()
        last.execute(self._sql_last, prepare=True)
        statements.execute(self._sql_notify)  # the library's _notify_channel
        inserted = conn.cursor()
        rows = [
            self.construct_pg_stored_event(s.originator_id, s.originator_version, s.topic, s.state)
            for s in stored_events
        ]
        inserted.execute(self._sql_insert, (rows,))  # the library's _insert_stored_events
        sync()
        if sealed is not None and (seal := sealed.fetchone()) is not None:
            raise LogSealed(self._log_id or "", seal["notification_id"])
        if ended is not None and (ends := (ended.fetchone() or {}).get("head")) != head:
            raise HeadMoved(f"the log went on from position {head} to {ends} meanwhile")
        if found is not None:
            now = {row["id"]: row["v"] for row in found.fetchall()}
            check_guards([(stream, now.get(stream)) for stream, _ in guards], guards)
        ids = [row["notification_id"] for row in inserted.fetchall()]
        if len(ids) != len(stored_events):
            raise ProgrammingError(f"inserted {len(stored_events)} events, got {len(ids)} notification ids")
        self._chain(conn, ids, stored_events, last.fetchone())
        return ids

    def _guard(self, conn: Connection[DictRow], guards: Guards) -> Cursor[DictRow]:
        """The versions of the guarded streams now (under the lock, before the insert), in one query:
        a cursor to read once the pipeline has answered."""
        found = conn.cursor()
        found.execute(self._sql_guard, (list({stream for stream, _ in guards}),))  # each stream asked once
        return found

    def _chain(
        self, conn: Connection[DictRow], ids: Sequence[int], events: Sequence[StoredEvent], last: DictRow | None
    ) -> None:
        """Hash the events at `ids` after `last`, the chain's last row before them (None: empty), as chained() does."""
        curs = conn.cursor(row_factory=tuple_row)
        found = (last["position"], last["hash"]) if last else None
        rows = chained(
            found, ids, events, self._format, lambda lo, hi: curs.execute(self._sql_gap, (lo, hi)).fetchall()
        )
        curs.executemany(self._sql_hashes, rows)

    def import_events(self, batches: Iterable[Sequence[Imported]], tail: Tail, fmt: int) -> int:
        """As on SQLite: one transaction, under the library's table lock from the first batch on; the
        sequence of positions then goes on after the last event written."""
        count = 0
        insert = SQL(
            "INSERT INTO {0} (notification_id, originator_id, originator_version, topic, state)"
            " VALUES (%s, %s, %s, %s, %s)"
        ).format(self._events)
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self._lock_table(curs)
            curs.execute(SQL("SELECT max(notification_id) AS head FROM {0}").format(self._events))
            if head := (curs.fetchone() or {}).get("head"):
                raise StoreNotEmpty(head)
            curs.execute(SQL("UPDATE {0} SET chain = %s").format(self._log_table), (fmt,))
            self._format = fmt  # (no save before: the next one reads the id, and this, again)
            last = 0
            for batch in batches:
                rows = [(p, e.originator_id, e.originator_version, e.topic, e.state) for p, e, _ in batch]
                curs.executemany(insert, rows)
                ids, events = chained_part(batch)
                if ids:
                    curs.execute(self._sql_last)
                    self._chain(conn, ids, events, curs.fetchone())
                count += len(batch)
                last = batch[-1].position if batch else last

            def read(streams: Sequence[UUID]) -> list[StoredEvent]:
                curs.execute(
                    SQL(
                        "SELECT originator_id, originator_version, topic, state FROM {0}"
                        " WHERE originator_id = ANY(%s) ORDER BY notification_id"
                    ).format(self._events),
                    (list(streams),),
                )
                return [
                    StoredEvent(r["originator_id"], r["originator_version"], r["topic"], bytes(r["state"]))
                    for r in curs.fetchall()
                ]

            added = tail(read) if count else []
            if added:
                ids = list(range(last + 1, last + 1 + len(added)))
                rows = [
                    (p, e.originator_id, e.originator_version, e.topic, e.state)
                    for p, e in zip(ids, added, strict=True)
                ]
                curs.executemany(insert, rows)
                curs.execute(self._sql_last)
                self._chain(conn, ids, added, curs.fetchone())
                last = ids[-1]
            if last:
                table = self._events.as_string(conn)  # quoted as the schema's name may need
                curs.execute("SELECT setval(pg_get_serial_sequence(%s, 'notification_id'), %s)", (table, last))
        return count

    def sealed(self) -> int | None:
        """The position of this log's seal (None: not sealed)."""
        log_id = self._log_id or self.log_id()
        if log_id is None:
            return None
        return first_value(self._query(self._sql_sealed, (seal_id(log_id),)))

    def log_id(self) -> str | None:
        return first_value(self._query(SQL("SELECT log_id FROM {0} LIMIT 1").format(self._log_table), ()))

    def take_log_id(self, log_id: str) -> None:
        """Name the log anew (a rebind onto an older copy: its next positions are not the old log's)."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("UPDATE {0} SET log_id = %s").format(self._log_table), (log_id,))
        self._log_id = None


# The library names these classes by module path in its settings (APPLICATION_RECORDER_TOPIC, PERSISTENCE_MODULE):
# settings written before they moved here keep naming them where they were.
register_topic("rollouts.adapters.recorder_postgres:ChainedPostgresRecorder", ChainedPostgresRecorder)
register_topic("rollouts.adapters.backend_postgres_factory:LibpqFactory", factory.LibpqFactory)
register_topic("rollouts.adapters.backend_postgres_factory:libpq_password", factory.libpq_password)
