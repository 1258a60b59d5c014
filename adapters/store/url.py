"""`--store`, parsed once: the SQLite file in the home (no URL), or a PostgreSQL URL."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from ...domain.errors import UsageError

# libpq's own connection parameters a URL may carry (https://www.postgresql.org/docs/current/libpq-connect.html)
LIBPQ = (
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "connect_timeout",
    "application_name",
    "target_session_attrs",
    "options",
)
# The values libpq accepts, for the parameters that take a word or a number (else libpq's error came as exit 5)
CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
}
CONNECT_TIMEOUT_S = 5  # libpq's connect_timeout when the URL names none


class BadStoreURL(UsageError):
    """`--store` is not a URL we can use."""


@dataclass(frozen=True)
class SQLiteInHome:
    """No `--store`: the log is the SQLite file events.db in the home."""

    def for_deployers(self) -> str:
        """ROLLOUT_STORE for a deployer: none (the log is the home's)."""
        return ""


@dataclass(frozen=True)
class PostgresURL:
    user: str
    password: str
    host: str
    port: int
    dbname: str
    schema: str
    libpq: tuple[tuple[str, str], ...] = ()  # libpq's own parameters the URL gave, as given

    def redacted(self) -> str:
        auth = f"{self.user}:***" if self.password else self.user
        schema = f"?schema={self.schema}" if self.schema else ""
        return f"postgresql://{auth}@{self.host}:{self.port}/{self.dbname}{schema}"

    def for_deployers(self) -> str:
        """ROLLOUT_STORE for a deployer (`claim check`): this URL without its password, libpq's parameters
        kept (a deployer's environment is stored with its runtime row; libpq's own ways supply a password)."""
        query = urlencode([*((("schema", self.schema),) if self.schema else ()), *self.libpq])
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgresql://{quote(self.user, safe='')}@{host}:{self.port}/{quote(self.dbname, safe='')}" + (
            f"?{query}" if query else ""
        )

    def conninfo(self) -> dict[str, Any]:
        """psycopg.connect's keywords. Without a password in the URL none is given: libpq then looks
        for one its own ways (PGPASSWORD, PGPASSFILE, ~/.pgpass)."""
        return {
            "dbname": self.dbname,
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password or None,
            "connect_timeout": CONNECT_TIMEOUT_S,
            **dict(self.libpq),
        }


StoreURL = SQLiteInHome | PostgresURL


def parse_store(url: str | None, given_as: str = "--store") -> StoreURL:
    """The store `--store URL` names (None or empty: the SQLite file in the home); BadStoreURL otherwise,
    its message naming the URL as `given_as` (the option, or the variable it was read from)."""
    if not url:
        return SQLiteInHome()
    try:
        parts = urlsplit(url)
        port = parts.port or 5432
    except ValueError:
        raise BadStoreURL(f"{given_as}: not a valid URL") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise BadStoreURL(
            f"{given_as}: expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DB[?schema=NAME]"
            " (leave it unset for the SQLite file in the home)"
        )
    dbname = parts.path.lstrip("/")
    if not parts.username or not parts.hostname or not dbname:
        raise BadStoreURL(f"{given_as}: a PostgreSQL URL needs a user, a host and a database")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in query if name == "schema"]
    if len(schemas) > 1:  # which one was meant? the first, silently, wrote into a schema nobody named alone
        raise BadStoreURL(f"{given_as}: parameter 'schema' is given twice")
    schema = schemas[0] if schemas else ""
    if schema and not schema.replace("_", "a").isalnum():
        raise BadStoreURL(f"{given_as}: schema must be letters, digits and '_'")
    return PostgresURL(
        user=unquote(parts.username),
        password=unquote(parts.password or ""),
        host=parts.hostname,
        port=port,
        dbname=unquote(dbname),
        schema=schema.lower(),
        libpq=_libpq(query, given_as),
    )


def _libpq(query: list[tuple[str, str]], given_as: str) -> tuple[tuple[str, str], ...]:
    """The URL's parameters but `schema`: libpq's own (LIBPQ), each once; BadStoreURL names any other."""
    found: dict[str, str] = {}
    for name, value in query:
        if name == "schema":
            continue
        if name not in LIBPQ:
            raise BadStoreURL(f"{given_as}: unknown parameter {name!r} (schema, or libpq's own: {', '.join(LIBPQ)})")
        if name in found:
            raise BadStoreURL(f"{given_as}: parameter {name!r} is given twice")
        if name in CHOICES and value not in CHOICES[name]:
            raise BadStoreURL(f"{given_as}: {name}={value!r}: expected one of {', '.join(CHOICES[name])}")
        if name == "connect_timeout" and not (value.isascii() and value.isdigit()):
            raise BadStoreURL(f"{given_as}: connect_timeout={value!r}: expected a number of seconds (ASCII digits)")
        found[name] = value
    return tuple(found.items())


def shown(url: str) -> str:
    """`url` as printed: a password in it is replaced by *** (the log itself keeps what was given).
    A URL that does not parse (only a hand-made log holds one) loses all it has before an @."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return re.sub(r"^([^/]*//)?[^/]*@", r"\1***@", url)
    if not password:
        return url
    netloc = parts.netloc.replace(f":{password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
