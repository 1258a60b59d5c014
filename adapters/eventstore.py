"""Opening the event log: eventsourcing's SQLite module in the home, or PostgreSQL."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from adapters.home import Home, private_file
from adapters.store_url import PostgresURL, parse_store
from domain.errors import StoreProblem

if TYPE_CHECKING:
    from adapters.application import RolloutsApp

APP_NAME = "rollouts"  # RolloutsApp.name: PostgreSQL tables are named after it


class StoreUnavailable(StoreProblem):
    """The store cannot be reached or used (the CLI exits 5)."""


# A long-lived process (the controller) keeps aggregates and only reads their new events;
# every get() still fast-forwards from the store and hands out a copy, so nothing is stale.
CACHE = {"AGGREGATE_CACHE_MAXSIZE": "500", "AGGREGATE_CACHE_FASTFORWARD": "y"}


def libpq_password() -> None:
    """No password from us: libpq finds one its own ways (PGPASSWORD, PGPASSFILE, ~/.pgpass)."""
    return None


def store_env(home: Home, store: str | None) -> dict[str, str]:
    """The eventsourcing environment for the SQLite file in `home`, or for `store`."""
    if not store:
        return {
            **CACHE,
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "APPLICATION_RECORDER_TOPIC": "adapters.recorders:ChainedSQLiteRecorder",
            "SQLITE_DBNAME": str(home.events_db),
            "SQLITE_LOCK_TIMEOUT": "10",
        }
    url = parse_store(store)
    # An empty POSTGRES_PASSWORD would reach libpq as password='', which hides PGPASSWORD from it.
    password = (
        {"POSTGRES_PASSWORD": url.password}
        if url.password
        else {"POSTGRES_GET_PASSWORD_TOPIC": "adapters.eventstore:libpq_password"}
    )
    return {
        **CACHE,
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "APPLICATION_RECORDER_TOPIC": "adapters.recorder_postgres:ChainedPostgresRecorder",
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
    }


def open_app(home: Home, store: str | None) -> RolloutsApp:
    """Construct the application on its store, creating what is missing, once."""

    def construct(env: dict[str, str]) -> RolloutsApp:
        from adapters.application import RolloutsApp

        return RolloutsApp(env=env)

    return _open(home, store, construct)


def open_recorder(home: Home, store: str | None) -> Any:
    """Only the log's recorder, for reads: no aggregates, no application to import. On a PostgreSQL
    store it attempts no DDL, so a role that may only SELECT can read; a store with no log is refused."""

    def construct(env: dict[str, str]) -> Any:
        from eventsourcing.persistence import InfrastructureFactory
        from eventsourcing.utils import Environment

        return InfrastructureFactory.construct(Environment(APP_NAME, {**os.environ, **env})).application_recorder()

    return _open(home, store, construct, reading=True)


def _open(home: Home, store: str | None, construct: Callable[[dict[str, str]], Any], reading: bool = False) -> Any:
    env = store_env(home, store)
    try:
        if not store:
            with home.init_lock():
                private_file(home.events_db)
                return construct(env)
        url = parse_store(store)
        if reading:  # no DDL: a misspelt schema must not become a new, empty log that reads as "No configs."
            if not _postgres_log_exists(url):
                raise StoreUnavailable(
                    f"{url.redacted()} holds no log (no table {url.schema or 'public'}.{APP_NAME}_events): a read"
                    " creates none; a write (config create, log import) makes it"
                )
            return construct({**env, "CREATE_TABLE": "no"})
        return _open_postgres(url, lambda: construct(env))
    except StoreUnavailable:
        raise
    except Exception as error:  # noqa: BLE001 - any driver error means "cannot use the store"
        raise StoreUnavailable(describe(error, store)) from None


def _conninfo(url: PostgresURL) -> dict[str, Any]:
    """Without a password in the URL, none is given: libpq then looks for one its own ways."""
    return {
        "dbname": url.dbname,
        "host": url.host,
        "port": url.port,
        "user": url.user,
        "password": url.password or None,
        "connect_timeout": 5,
    }


def store_has_no_log(store: str) -> bool:
    """Whether the PostgreSQL store `store` is reachable and holds no log (no table to read): False when
    it holds one, or when it cannot tell (opening the store then says why)."""
    try:
        return not _postgres_log_exists(parse_store(store))
    except Exception:  # noqa: BLE001 - unreachable, refused, a bad URL: the open that follows reports it
        return False


def _postgres_log_exists(url: PostgresURL) -> bool:
    """Whether the log's table is there (then a read needs no DDL, and no lock)."""
    import psycopg

    table = f'"{url.schema or "public"}".{APP_NAME}_events'
    with psycopg.connect(**_conninfo(url), autocommit=True) as conn:
        return conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None  # type: ignore[index]


def _open_postgres(url: PostgresURL, construct: Callable[[], Any]) -> Any:
    """Create the schema and tables under an advisory lock (concurrent opens collide)."""
    import psycopg

    with psycopg.connect(**_conninfo(url), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(7262011)")
        try:
            # Only when missing: CREATE SCHEMA IF NOT EXISTS needs the database's CREATE privilege even then.
            found = conn.execute("SELECT to_regnamespace(%s)", (f'"{url.schema}"',)).fetchone() if url.schema else None
            if url.schema and found is not None and found[0] is None:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{url.schema}"')
            return construct()
        finally:
            conn.execute("SELECT pg_advisory_unlock(7262011)")


def describe(error: BaseException, store: str | None) -> str:
    """One line about a storage error, with any password removed."""
    text = " ".join(str(error).split()) or type(error).__name__
    if store:
        url = parse_store(store)
        if url.password:
            text = text.replace(url.password, "***")
        where = url.redacted()
    else:
        where = "the SQLite event store"
    return f"cannot use {where}: {text}"


def backoff(attempt: int, base: float = 0.01, cap: float = 0.5) -> None:
    """Sleep a jittered, growing delay before deciding again."""
    import random

    time.sleep(min(cap, base * 2**attempt) * (0.5 + random.random()))
