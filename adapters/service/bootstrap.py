"""The composition root: a home and a store become the backend and the application on it.

Every entry point (the CLI, the controller and its notifier, serve, the benchmarks, the tests)
asks `bootstrap(home, store)` for what it needs; nothing else wires the application.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..home import Home
from ..store.backends import backend_for
from ..store.port import Backend, LogRecorder
from ..store.url import StoreURL, parse_store

if TYPE_CHECKING:
    from .application import RolloutsApp


class Services:
    """The home, its store's backend, and the log opened on it (each open is the caller's to close)."""

    def __init__(self, home: Home, backend: Backend) -> None:
        self.home = home
        self.backend = backend

    def open_app(self, **env: str) -> RolloutsApp:
        """The application on the store, creating what is missing (`env`: the library's settings to change)."""

        self.home.ensure()
        from .application import RolloutsApp  # start-up cost: read commands never load the app

        def construct(base: dict[str, str]) -> RolloutsApp:
            return RolloutsApp(env={**base, **env})

        return self.backend.open_app(construct)

    def open_recorder(self) -> LogRecorder:
        """Only the log's recorder, for reads: no aggregates, no application to import. On a PostgreSQL
        store it attempts no DDL, so a role that may only SELECT can read; a store with no log is refused."""
        self.home.ensure()
        return self.backend.open_recorder()


def bootstrap(home: Home | str | Path, store: StoreURL | str | None = None) -> Services:
    """What an entry point needs for `home` and `store` (a URL is parsed here: BadStoreURL, exit 2)."""
    home = home if isinstance(home, Home) else Home(home)
    store = parse_store(store) if store is None or isinstance(store, str) else store
    return Services(home, backend_for(home, store))


def open_app(home: Home | str | Path, store: StoreURL | str | None = None) -> RolloutsApp:
    """`bootstrap(home, store).open_app()`, for a caller that needs only the application."""
    return bootstrap(home, store).open_app()
