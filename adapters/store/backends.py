"""Which backend a store URL names: the one place outside a backend's own module that knows there are two."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from ..home import Home
from .port import Backend
from .sqlite.backend import SQLiteBackend
from .url import PostgresURL, StoreURL

if TYPE_CHECKING:
    from .postgres.recorder import ChainedPostgresRecorder
    from .sqlite.recorder import ChainedSQLiteRecorder

    ChainedRecorder: TypeAlias = ChainedSQLiteRecorder | ChainedPostgresRecorder  # the recorder a backend opens


def backend_for(home: Home, store: StoreURL) -> Backend:
    """The backend of `store` (the SQLite one keeps its log in `home`)."""
    if isinstance(store, PostgresURL):
        from .postgres.backend import PostgresBackend  # start-up cost: only on a PostgreSQL store

        return PostgresBackend(store)
    return SQLiteBackend(home)
