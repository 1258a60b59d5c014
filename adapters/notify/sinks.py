"""Adding, removing and reading sinks: each command loads, decides with the domain, saves once."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eventsourcing.application import AggregateNotFoundError

from domain.errors import NotFound, UsageError
from domain.sink import Sink, sink_id
from domain.sink_index import INDEX_ID, SinkIndex

if TYPE_CHECKING:
    from adapters.application import Decision, RolloutsApp


class BadURL(UsageError):
    """A sink URL that is not http(s)://HOST... (the CLI exits 2)."""


def check_url(url: str) -> str:
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
