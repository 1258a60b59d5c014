"""The PostgreSQL backend: the log in a schema of a server that several hosts share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .. import opening
from ..port import (
    APP_NAME,
    CACHE,
    Datastore,
    LeaseSQL,
    LogRecorder,
    Opened,
    Query,
    Snapshot,
    StoreUnavailable,
    first,
)
from ..url import PostgresURL

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
# The library's setting APPLICATION_RECORDER_TOPIC: our recorder class, by its topic
RECORDER = "rollouts.adapters.store.postgres.recorder:ChainedPostgresRecorder"
SCHEMA_LOCK = 7262011  # advisory lock: opens that create the schema and the log's tables
TABLES_LOCK = 7262012  # advisory lock: our tables beside the log are created under it
LIBPQ_KEY = "POSTGRES_LIBPQ"  # the environment key that carries the URL's libpq parameters to the pool


class PostgresBackend:
    """The log in `url`'s schema, through eventsourcing's postgres module."""

    shared = True  # several hosts' controllers claim through it
    roles = True  # each event records the session user, checked by the server (recorder_postgres)
    lease = LeaseSQL(now="extract(epoch from clock_timestamp())", mark="%s", greatest="greatest")

    def __init__(self, url: PostgresURL) -> None:
        self.store = self.url = url
        self.schema = url.schema or "public"
        self._selects: dict[str, str] = {}

    def shown(self) -> str:
        return self.url.redacted()

    def describe(self, error: BaseException) -> str:
        text = " ".join(str(error).split()) or type(error).__name__
        if self.url.password:
            text = text.replace(self.url.password, "***")
        return f"cannot use {self.url.redacted()}: {text}"

    def env(self) -> dict[str, str]:
        from psycopg.conninfo import make_conninfo

        url = self.url
        # An empty POSTGRES_PASSWORD would reach libpq as password='', which hides PGPASSWORD from it.
        password = (
            {"POSTGRES_PASSWORD": url.password}
            if url.password
            else {"POSTGRES_GET_PASSWORD_TOPIC": "rollouts.adapters.store.postgres.factory:libpq_password"}
        )
        return {
            **CACHE,
            "PERSISTENCE_MODULE": "rollouts.adapters.store.postgres.factory:LibpqFactory",
            "APPLICATION_RECORDER_TOPIC": RECORDER,
            "POSTGRES_DBNAME": url.dbname,
            "POSTGRES_HOST": url.host,
            "POSTGRES_PORT": str(url.port),
            "POSTGRES_USER": url.user,
            **password,
            "POSTGRES_SCHEMA": url.schema,
            "POSTGRES_CONNECT_TIMEOUT": "5",
            # No pre-ping: it cost a round trip per pooled checkout (a quarter of a controller pass's).
            # A connection the server dropped fails its statement instead; the library's reads and
            # writes retry OperationalError on a new one, the pool discards the broken one, and the
            # controller retries a pass that failed.
            "POSTGRES_LOCK_TIMEOUT": "10",
            LIBPQ_KEY: make_conninfo("", **dict(url.libpq)),
        }

    def connect(self) -> psycopg.Connection[Any]:  # why: tuple rows of any column
        """A connection of our own, with the URL's libpq parameters, in autocommit."""
        import psycopg

        return psycopg.connect(**self.url.conninfo(), autocommit=True)

    def open_app(self, construct: Callable[[dict[str, str]], Opened]) -> Opened:
        return opening.open_app(self, construct)

    def open_recorder(self) -> LogRecorder:
        return opening.open_recorder(self)

    def open(self, construct: Callable[[dict[str, str]], T], reading: bool) -> T:
        opening.load_recorder(RECORDER)  # psycopg loads only when a log opens
        try:
            if reading:  # no DDL: a misspelt schema must not become a new, empty log that reads as "No configs."
                if not self._log_exists():
                    raise StoreUnavailable(
                        f"{self.url.redacted()} holds no log (no table {self.schema}.{APP_NAME}_events): a read"
                        " creates none; a write (config create, log import) makes it"
                    )
                return construct({**self.env(), "CREATE_TABLE": "no"})
            return self._create_and(
                lambda: construct(self.env()), lambda: construct({**self.env(), "CREATE_TABLE": "no"})
            )
        except StoreUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 - any driver error means "cannot use the store"
            raise StoreUnavailable(self.describe(error)) from None

    def _create_and(self, construct: Callable[[], T], construct_as_is: Callable[[], T]) -> T:
        """Create the schema and tables under an advisory lock (concurrent opens collide); a log there
        already whose tables another role owns is opened as it is (`construct_as_is`)."""
        with self.connect() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
            try:
                # Only when missing: CREATE SCHEMA IF NOT EXISTS needs the database's CREATE privilege even then.
                if self.url.schema:
                    found = conn.execute("SELECT to_regnamespace(%s)", (f'"{self.url.schema}"',)).fetchone()
                    if found is not None and found[0] is None:
                        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.url.schema}"')
                if self._owned_by_another(conn):  # a person's role: it writes to the log, never its DDL
                    return construct_as_is()
                return construct()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))

    def _owned_by_another(self, conn: psycopg.Connection[Any]) -> bool:  # why: any row type
        """Whether the log is there and its owner is a role this session is not (nor a member of)."""
        found = conn.execute(
            "SELECT pg_has_role(session_user, relowner, 'MEMBER') FROM pg_class WHERE oid = to_regclass(%s)",
            (f'"{self.schema}".{APP_NAME}_events',),
        ).fetchone()
        return found is not None and not found[0]

    def has_log(self) -> bool:
        try:
            return self._log_exists()
        except Exception:  # noqa: BLE001 - unreachable, refused: the open that follows reports it
            return True

    def _log_exists(self) -> bool:
        """Whether the log's table is there (then a read needs no DDL, and no lock)."""
        with self.connect() as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f'"{self.schema}".{APP_NAME}_events',)).fetchone()
        return found is not None and found[0] is not None

    # Tables beside the log (leases)

    def table(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    def create_table(self, datastore: Datastore, ddl: str) -> None:
        """Two CREATE TABLE IF NOT EXISTS at once collide (a unique violation on pg_type: controllers
        starting together on a new store), so they run under an advisory lock."""
        with datastore.transaction(commit=True) as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (TABLES_LOCK,))
            cursor.execute(ddl)

    def table_exists(self, datastore: Datastore, name: str) -> bool:
        with datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT to_regclass(%s) AS found", (self.table(name),))
            return first(cursor.fetchone()) is not None

    def columns(self, datastore: Datastore, name: str) -> set[str]:
        with datastore.transaction(commit=False) as cursor:  # (an ALTER asks for the table's owner)
            cursor.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                (self.schema, name),
            )
            return {first(row) for row in cursor.fetchall()}

    def add_column(self, datastore: Datastore, name: str, column: str, kind: str) -> None:
        # (under create_table's lock, as a controller starting beside us may add it too)
        self.create_table(datastore, f"ALTER TABLE {self.table(name)} ADD COLUMN IF NOT EXISTS {column} {kind}")

    def glance(self, after: int, topic: str, wait: float) -> list[bytes]:
        return []  # a Tab makes no connection to a server

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        import psycopg

        try:
            conn = psycopg.connect(**self.url.conninfo(), autocommit=True)
        except psycopg.Error as error:
            raise StoreUnavailable(self.describe(error)) from None
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")  # one snapshot for every statement
            query: Query = lambda sql, params: conn.execute(sql, params).fetchall()  # noqa: E731
            events = self.table(f"{APP_NAME}_events")
            if query("SELECT to_regclass(%s)", (events,))[0][0] is None:
                raise StoreUnavailable(f"cannot use {self.url.redacted()}: no log in schema {self.schema}")

            def has_table(name: str) -> bool:
                return query("SELECT to_regclass(%s)", (self.table(name),))[0][0] is not None

            yield Snapshot(query, events, "notification_id", self.lease.mark, self.lease.now, has_table, self.table)
        except psycopg.Error as error:
            raise StoreUnavailable(self.describe(error)) from None
        finally:
            conn.close()

    def undo_of_opening(self) -> Callable[[], None]:
        schema = self.url.schema or "public"
        with self.connect() as conn:
            found = conn.execute("SELECT to_regnamespace(%s)", (f'"{schema}"',)).fetchone()
            exists = found is not None and found[0] is not None
            before = {kind: {r[0] for r in conn.execute(sql, (schema,))} for kind, sql in _OBJECTS} if exists else {}

        def undo() -> None:
            with contextlib.suppress(Exception), self.connect() as conn:  # noqa: BLE001 - the import's error counts
                if not exists:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                    return
                for kind, sql in _OBJECTS:
                    for name in {r[0] for r in conn.execute(sql, (schema,))} - before.get(kind, set()):
                        with contextlib.suppress(Exception):  # noqa: BLE001 - dropped already, by a CASCADE
                            conn.execute(f"DROP {kind} IF EXISTS {name} CASCADE")

        return undo


_OBJECTS = (  # what a schema holds of ours, to drop what an import made: (kind, query of its names)
    ("FUNCTION", "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = to_regnamespace(%s)"),
    ("TABLE", "SELECT format('%%I.%%I', schemaname, tablename) FROM pg_tables WHERE schemaname = %s"),
    (
        "TYPE",
        "SELECT t.oid::regtype::text FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid"
        " WHERE c.relkind = 'c' AND t.typnamespace = to_regnamespace(%s)",
    ),
)
