"""Parsing `--store`: the embedded SQLite file by default, or a PostgreSQL URL."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from domain.errors import UsageError


class BadStoreURL(UsageError):
    """`--store` is not a URL we can use."""


@dataclass(frozen=True)
class PostgresURL:
    user: str
    password: str
    host: str
    port: int
    dbname: str
    schema: str

    def redacted(self) -> str:
        auth = f"{self.user}:***" if self.password else self.user
        schema = f"?schema={self.schema}" if self.schema else ""
        return f"postgresql://{auth}@{self.host}:{self.port}/{self.dbname}{schema}"


def parse_store(url: str) -> PostgresURL:
    try:
        parts = urlsplit(url)
        port = parts.port or 5432
    except ValueError:
        raise BadStoreURL("--store: not a valid URL") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise BadStoreURL(
            "--store: expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DB[?schema=NAME]"
            " (leave it unset for the SQLite file in the home)"
        )
    dbname = parts.path.lstrip("/")
    if not parts.username or not parts.hostname or not dbname:
        raise BadStoreURL("--store: a PostgreSQL URL needs a user, a host and a database")
    schema = parse_qs(parts.query).get("schema", [""])[0]
    if schema and not schema.replace("_", "a").isalnum():
        raise BadStoreURL("--store: schema must be letters, digits and '_'")
    return PostgresURL(
        user=unquote(parts.username),
        password=unquote(parts.password or ""),
        host=parts.hostname,
        port=port,
        dbname=unquote(dbname),
        schema=schema.lower(),
    )
