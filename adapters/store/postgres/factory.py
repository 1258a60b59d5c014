"""The library's PostgreSQL factory, as the PostgreSQL backend configures it (apart: it imports psycopg)."""

from __future__ import annotations

from typing import Any

from eventsourcing.postgres import PostgresFactory

from .backend import LIBPQ_KEY


def libpq_password() -> None:
    """No password from us: libpq finds one its own ways (PGPASSWORD, PGPASSFILE, ~/.pgpass)."""
    return None


class LibpqFactory(PostgresFactory):
    """The library's factory, whose pool also passes the URL's libpq parameters (sslmode...) to libpq."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        from psycopg.conninfo import conninfo_to_dict

        given = self.env.get(LIBPQ_KEY) or ""
        self.datastore.pool.kwargs.update(conninfo_to_dict(given) if given else {})  # the pool opens later
