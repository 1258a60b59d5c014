"""What `rollouts serve` answers for each path: pages, the JSON API (the `-o json` documents) and metrics.

Every path is matched exactly; anything else is 404. A config NAME is validated as the CLI does,
so no path can name a file. Nothing here writes to the log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST

from ...domain.errors import NotFound
from ...domain.names import validate_name
from ...domain.times import utc_text
from ...projections import attempt_queries, history_queries, template_queries
from ...projections.audit_queries import EventFilter
from ...projections.rows import ViewRow
from ..service import documents, event_documents, stage_view
from . import charts, pages, timeline

if TYPE_CHECKING:
    from ...projections.store import ProjectionStore
    from ..service.session import Session
    from .exposition import Exposition

HTML, JSON = "text/html; charset=utf-8", "application/json"
PAGE_EVENTS = 100  # events on a config's page unless ?limit= says otherwise
API_EVENTS = 1000  # events of /api/events unless ?limit= says otherwise; a Link header names the next page
TIMELINE_ATTEMPTS = 60  # the latest attempts drawn on a config's page
EVENT_PARAMS = ("config", "version", "type", "actor", "since", "after", "until", "limit")


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()  # more than the content's type and length (a Link, ...)


class BadRequest(Exception):
    """A query parameter the API cannot take (answered 400)."""


def answer(state: Session, metrics: Exposition, target: str) -> Response:
    """The response to GET `target` (path and query), read from `state`'s views."""
    url = urlsplit(target)
    api = url.path.startswith("/api/")
    try:
        route, args = _match(url.path)
        if route is None:
            raise NotFound(f"no page at {url.path}")
        return route(state, metrics, _params(url.query), *args)
    except NotFound as missing:
        return error(404, str(missing), api)
    except BadRequest as bad:
        return error(400, str(bad), api)


def _match(path: str) -> tuple[Callable[..., Response] | None, tuple[str, ...]]:
    parts = path.split("/")[1:]
    fixed = {"": _index, "metrics": _metrics, "api/configs": _api_configs, "api/events": _api_events}
    if "/".join(parts) in fixed:
        return fixed["/".join(parts)], ()
    if len(parts) == 2 and parts[0] == "configs":
        return _config, (_name(parts[1]),)
    if len(parts) == 4 and parts[:2] == ["api", "configs"] and parts[3] == "history":
        return _api_history, (_name(parts[2]),)
    return None, ()


def _name(text: str) -> str:
    try:
        return validate_name(text)
    except ValueError:
        raise NotFound("no such config (a config name is a DNS-1123 label)") from None


# -- pages -----------------------------------------------------------------------------------------


def _index(state: Session, metrics: Exposition, params: dict[str, str]) -> Response:
    _only(params, ())
    store, head = _read(state, "history")
    now = datetime.now(UTC)
    pipelines = stage_view.pipelines(store.db("history"), now)
    return _html(pages.index(documents.config_list(store.db("history"), now), head, pipelines))


def _config(state: Session, metrics: Exposition, params: dict[str, str], name: str) -> Response:
    _only(params, ("type", "version", "actor", "since", "after", "until", "limit"))
    store, head = _read(state, "history", "audit")
    history_db, audit_db = store.db("history"), store.db("audit")
    rows = [documents.shown(row) for row in history_queries.configs(history_db, name)]
    if not rows:
        raise NotFound(f"config {name!r} not found")
    attempts = attempt_queries.attempts(audit_db, name)[-TIMELINE_ATTEMPTS:]
    only = _event_filter(store, params | {"config": name}, default_limit=PAGE_EVENTS)
    events = event_documents.events(audit_db, only)
    next_after = events[-1]["position"] if only.limit is not None and len(events) == only.limit else None
    svg = timeline.svg(attempts, datetime.now(UTC))
    history = documents.history(history_db, name)
    analysed = _analysed(history, only.revision)
    measured = analysed["verification"]["measurements"] if analysed else []
    analysis = charts.svg(measured, template_queries.templates(audit_db))
    shown = pages.Analysis(analysis, analysed, only.revision)
    return _html(pages.config(rows[0], svg, shown, history, events, params, next_after, head))


def _read(state: Session, *names: str) -> tuple[ProjectionStore, int]:
    """Views `names` caught up, and the head a page drawn from them asks for news after (its poll). Read
    before the catch-up, so the views show at least that far: read after it, it could name events another
    process appended meanwhile, which the page does not show and its poll would never bring (the page then
    kept showing the state before them until some later event)."""
    head = state.projections.source.head()
    return state.read(*names), head


def _analysed(history: list[ViewRow], revision: int | None) -> ViewRow | None:
    """The deployment whose latest attempt the charts draw: `revision`'s (?version=N), else the latest."""
    if revision is None:
        return history[-1] if history else None
    return next((d for d in history if d["version"] == revision), None)


# -- the API: the same documents as `-o json` ------------------------------------------------------------


def _api_configs(state: Session, metrics: Exposition, params: dict[str, str]) -> Response:
    _only(params, ())
    return _json(documents.config_list(state.read("history").db("history"), datetime.now(UTC)))


def _api_history(state: Session, metrics: Exposition, params: dict[str, str], name: str) -> Response:
    _only(params, ("revision",))
    revision = _int(params, "revision", 1)
    return _json(documents.history(state.read("history").db("history"), name, revision))


def _api_events(state: Session, metrics: Exposition, params: dict[str, str]) -> Response:
    _only(params, EVENT_PARAMS)
    store = state.read("audit")
    only = _event_filter(store, params, default_limit=API_EVENTS)
    events = event_documents.events(store.db("audit"), only)
    answer = _json(events)
    if only.limit is None or len(events) < only.limit:
        return answer
    following = urlencode({**params, "after": events[-1]["position"]})
    return replace(answer, headers=(("Link", f'</api/events?{following}>; rel="next"'),))


def _metrics(state: Session, metrics: Exposition, params: dict[str, str]) -> Response:
    _only(params, ())
    return Response(200, CONTENT_TYPE_LATEST, metrics.text())


# -- parameters -----------------------------------------------------------------------------------------


class Params(dict[str, str]):
    """A query's parameters with a value; `names`: every one given, empty or not."""

    names: frozenset[str] = frozenset()


def _params(query: str) -> Params:
    """The query's parameters; an empty one counts as not given (as a form sends it), but is named."""
    try:
        parsed = parse_qs(query, keep_blank_values=True, max_num_fields=20)
    except ValueError:
        raise BadRequest("too many query parameters") from None
    for key, values in parsed.items():
        if len(values) > 1:
            raise BadRequest(f"parameter {key!r} given more than once")
    params = Params({key: values[0] for key, values in parsed.items() if values[0] != ""})
    params.names = frozenset(parsed)
    return params


def _only(params: dict[str, str], known: tuple[str, ...]) -> None:
    unknown = sorted((params.names if isinstance(params, Params) else set(params)) - set(known))
    if unknown:
        raise BadRequest(f"unknown parameter {unknown[0]!r} (known: {', '.join(known) or 'none'})")


def _event_filter(store: ProjectionStore, params: dict[str, str], default_limit: int | None = None) -> EventFilter:
    """The filter `events` builds from its options, with the same checks."""

    config = params.get("config")
    if config is not None:
        try:
            validate_name(config)
        except ValueError:  # a parameter, not a path: bad, not missing
            raise BadRequest(f"config: {config[:70]!r} is not a config name (a DNS-1123 label)") from None
    revision, after, until = _int(params, "version", 1), _int(params, "after", 0), _int(params, "until", 0)
    limit = _int(params, "limit", 1)
    if revision is not None and config is None:
        raise BadRequest("version needs a config")
    if after is not None and until is not None and until < after:
        raise BadRequest("until is before after")
    type_ = params.get("type")
    problem = None if type_ is None else event_documents.type_problem(store.db("audit"), type_)
    if problem is not None:
        raise BadRequest(f"type: {problem}")
    head = store.source.head()
    for key, position in (("after", after), ("until", until)):
        if position is not None and position > head:
            raise BadRequest(f"{key}: position {position} is beyond the head of the log ({head})")
    since = params.get("since")
    try:
        since = None if since is None else utc_text(since)
    except ValueError:
        raise BadRequest(f"since: Invalid value: {since!r} is not an ISO time like 2026-01-31T12:00:00") from None
    return EventFilter(
        config=config,
        revision=revision,
        type=type_,
        actor=params.get("actor"),
        since=since,
        after=after,
        until=until,
        limit=default_limit if limit is None else limit,
    )


def _int(params: dict[str, str], key: str, least: int) -> int | None:
    text = params.get(key)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 18 or int(text) < least:
        raise BadRequest(f"{key}: {text[:40]!r} is not a whole number of at least {least}")
    return int(text)


# -- responses ------------------------------------------------------------------------------------------


def _html(text: str, status: int = 200) -> Response:
    return Response(status, HTML, text.encode())


def _json(document: object, status: int = 200) -> Response:
    return Response(status, JSON, (documents.json_text(document) + "\n").encode())


def error(status: int, message: str, api: bool) -> Response:
    """An error answer: JSON `{\"error\": ...}` under /api/, else a page."""
    return _json({"error": message}, status) if api else _html(pages.error(status, message), status)
