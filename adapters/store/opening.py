"""How a backend opens the log: the chained recorders' base, and the backend given to the recorder it opened
(light to import: eventsourcing's persistence loads only when a log is opened)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast
from uuid import UUID

from . import chain
from .failures import missing_table
from .port import (
    APP_NAME,
    LOG_TABLE,
    Backend,
    Datastore,
    LogRecorder,
    Opened,
    SnapshotTable,
    StoreUnavailable,
    TablesBeside,
)

if TYPE_CHECKING:
    from eventsourcing.persistence import StoredEvent


FORMAT_COLUMN = "chain"  # the log table's column of the log's chain format (chain.py)
# A log table made before formats has no such column: its log is LEGACY. A new log's events table is empty
# when its id is written: it takes the current format; a log made before ids (events, no id yet) is LEGACY.
LOG_COLUMNS = f"log_id, created_at, {FORMAT_COLUMN}"


def identity(row: object) -> tuple[str | None, int]:
    """The log id and chain format in a row of the log table, a sqlite3.Row or a psycopg dict row (None:
    the log has no id, and is LEGACY)."""
    if row is None:
        return None, chain.LEGACY
    found = dict(zip(row.keys(), row, strict=True)) if isinstance(row, sqlite3.Row) else row
    if not isinstance(found, dict):
        raise TypeError(f"a row of the log table as {type(row).__name__}")
    return found["log_id"], int(found.get(FORMAT_COLUMN) or chain.LEGACY)


def new_format(events_table_empty: bool) -> int:
    """The chain format a log gets with its id: the current one, unless it already holds events."""
    return chain.POSITIONED if events_table_empty else chain.LEGACY


class ChainedLog:
    """The base both chained recorders add to the library's: the backend that opened them, and what the rest
    of the code asks of it through the recorder (LogRecorder) without naming it."""

    backend: Backend  # the store that opened it: set by open_app / open_recorder below, never from outside

    if TYPE_CHECKING:  # the library's, under each recorder

        @property
        def datastore(self) -> Datastore: ...

    @property
    def beside(self) -> TablesBeside:
        """Our tables beside the log (leases), in its dialect, on its connections."""
        return TablesBeside(self.backend, self.datastore)

    def describe(self, error: BaseException) -> str:
        """One line about a storage error, with any password removed."""
        return self.backend.describe(error)

    def close(self) -> None:
        """Close the log's connections (a recorder opened without an application)."""
        self.datastore.close()

    def chain_format(self) -> int:
        """The log's chain format (chain.py), as its log table records it."""
        try:
            with self.datastore.transaction(commit=False) as c:
                c.execute(f"SELECT * FROM {self.backend.table(LOG_TABLE)} LIMIT 1")
                return identity(c.fetchone())[1]
        except Exception as error:  # noqa: BLE001 - a log made before its log table has none
            if missing_table(error):
                return chain.LEGACY
            raise

    def events_after(
        self, wanted: Sequence[tuple[UUID, int | None]], snapshots: SnapshotTable | None
    ) -> tuple[list[StoredEvent], list[StoredEvent]]:
        """The events of each stream after the version given, or, given None, its last snapshot (in the table
        of `snapshots`) and the events after it, in as few statements as the dialect allows."""
        raise NotImplementedError  # each recorder's own


def bind(recorder: object, backend: Backend) -> None:
    """Give a chained recorder the backend that opened it (a plain library recorder, which a benchmark may
    ask for, has no use for one)."""
    if isinstance(recorder, ChainedLog):
        recorder.backend = backend


def load_recorder(topic: str) -> None:
    """Load the recorder class of `topic` as the library will (by its topic: a backend imports no recorder
    module of its own): loading it registers the names settings written before gave its classes, which such
    settings, passed to open, then find."""
    from eventsourcing.utils import resolve_topic  # start-up cost: only when a log opens

    resolve_topic(topic)


def open_app(backend: Backend, construct: Callable[[dict[str, str]], Opened]) -> Opened:
    """An application on `backend`'s store, creating what is missing; its recorder knows its backend."""
    app = backend.open(construct, reading=False)
    bind(app.recorder, backend)
    return app


def open_recorder(backend: Backend) -> LogRecorder:
    """Only the log's recorder, for reads (no DDL; a store with no log is refused)."""
    from eventsourcing.persistence import InfrastructureFactory
    from eventsourcing.utils import Environment

    def construct(env: dict[str, str]) -> object:
        return InfrastructureFactory.construct(Environment(APP_NAME, {**os.environ, **env})).application_recorder()

    recorder = backend.open(construct, reading=True)
    if not isinstance(recorder, ChainedLog):  # the settings named another recorder class
        raise StoreUnavailable(f"cannot use {backend.shown()}: its recorder is not a chained one")
    recorder.backend = backend
    return cast("LogRecorder", recorder)  # a ChainedLog is one of the two chained recorders
