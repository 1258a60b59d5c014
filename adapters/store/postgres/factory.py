"""The library's PostgreSQL factory, as the PostgreSQL backend configures it (apart: it imports psycopg)."""

from __future__ import annotations

from eventsourcing.postgres import PostgresFactory
from eventsourcing.utils import Environment

from .backend import LIBPQ_KEY


def libpq_password() -> None:
    """No password from us: libpq finds one its own ways (PGPASSWORD, PGPASSFILE, ~/.pgpass)."""
    return None


class LibpqFactory(PostgresFactory):
    """The library's factory, whose pool also passes the URL's libpq parameters (sslmode...) to libpq."""

    def __init__(self, env: Environment) -> None:
        super().__init__(env)
        from psycopg.conninfo import conninfo_to_dict

        given = self.env.get(LIBPQ_KEY) or ""
        kwargs = self.datastore.pool.kwargs  # the pool opens later
        if not isinstance(kwargs, dict):  # the library's pool keeps them as a dict: one made otherwise is not ours
            raise TypeError(f"the library's pool keeps its connection settings as {type(kwargs).__name__}")
        kwargs.update(conninfo_to_dict(given) if given else {})
