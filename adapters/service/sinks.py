"""Adding, removing and reading sinks: each command loads, decides with the domain, saves once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eventsourcing.application import AggregateNotFoundError

from ...domain.errors import NotFound, UsageError
from ...domain.sink import Sink, sink_id
from ...domain.sink_index import INDEX_ID, SinkIndex
from ..store.url import shown as shown  # where callers have long found it

if TYPE_CHECKING:
    from .application import Decision, RolloutsApp


class BadURL(UsageError):
    """A sink URL that is not http(s)://HOST... (the CLI exits 2)."""


MAX_URL = 2048  # what browsers and most servers take; longer is a mistake (or an attack), not a sink


def check_url(url: str) -> str:
    if len(url) > MAX_URL:
        raise BadURL(f"--url: {len(url):,} characters, more than the {MAX_URL:,} a sink URL may have")
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = None, False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise BadURL(f"--url: {shown(url)[:200]!r} is not an http:// or https:// URL with a host")
    if any(c.isspace() for c in url):
        raise BadURL(f"--url: {shown(url)[:200]!r} contains white space")
    return url


REFERENCE = "env:"  # a sink URL kept by reference: `env:NAME`, read from the controller's environment
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def by_reference(variable: str) -> str:
    """The URL the log keeps for `notify add --url-env VARIABLE`: only the variable's name."""
    if not _VARIABLE.fullmatch(variable):
        raise BadURL(f"--url-env: {variable[:80]!r} is not an environment variable name")
    return f"{REFERENCE}{variable}"


def resolved(url: str, environ: Mapping[str, str]) -> str:
    """The URL to POST to: `url` itself, or what its variable holds now (BadURL, saying why, if unusable)."""
    if not url.startswith(REFERENCE):
        return url
    variable = url.removeprefix(REFERENCE)
    value = environ.get(variable)
    if not value:
        raise BadURL(f"environment variable {variable} (--url-env) is unset or empty in the controller")
    try:
        return check_url(value)
    except BadURL:
        raise BadURL(f"environment variable {variable} (--url-env) is not an http:// or https:// URL") from None


def secrets_in(url: str) -> list[str]:
    """What of `url` is likely a secret that the log would keep for ever: a password, a query string."""
    parts = urlsplit(url)
    return [what for what, found in (("a password", parts.password), ("a query string", parts.query)) if found]


def index_of(app: RolloutsApp) -> SinkIndex | None:
    try:
        return app.repository.get(INDEX_ID)
    except AggregateNotFoundError:
        return None


def sink_of(app: RolloutsApp, name: str) -> Sink | None:
    try:
        return app.repository.get(sink_id(name))
    except AggregateNotFoundError:
        return None


def add(app: RolloutsApp, name: str, url: str, on: tuple[str, ...], config: str | None, meta: dict[str, Any]) -> int:
    """Define a sink that hears of changes after the log's head (returned)."""

    def decision() -> Decision[int]:
        if config is not None:
            app.config(config)  # NotFound (exit 4): a sink for a config that does not exist hears nothing
        head = app.recorder.max_notification_id() or 0
        index = index_of(app) or SinkIndex(meta=meta)
        index.list_sink(name, meta)
        sink = sink_of(app, name)
        if sink is None:
            sink = Sink(name=name, url=url, on=list(on), config=config, start=head, meta=meta)
        else:
            sink.readd(url, list(on), config, head, meta)
        return [index, sink], head

    return app.decide(decision)


def remove(app: RolloutsApp, name: str, meta: dict[str, Any]) -> None:
    def decision() -> Decision[None]:
        index = index_of(app)
        if index is None:
            raise NotFound(f"sink {name!r} not found")
        index.unlist(name, meta)
        sink = sink_of(app, name)
        if sink is None:
            raise NotFound(f"sink {name!r} not found")
        sink.remove(meta)
        return [index, sink], None

    app.decide(decision)


def all_sinks(app: RolloutsApp) -> list[Sink]:
    """The sinks that exist, in the order they were added."""
    index = index_of(app)
    sinks = [sink_of(app, name) for name in (index.names if index else [])]
    return [s for s in sinks if s is not None and not s.removed]
