"""The documents of the event log that `events -o json` prints and serve's /api/events answers (the same
functions make both). Apart from service/documents.py: the audit view's queries and the domain's event
types they need load only for the commands that list events, not for every command that prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...domain.event_types import event_types
from ...projections import audit_queries
from ...projections.rows import ViewRow
from ..store.url import shown
from . import documents

if TYPE_CHECKING:
    import sqlite_utils


def events(db: sqlite_utils.Database, only: audit_queries.EventFilter) -> list[ViewRow]:
    """`events`: the events `only` lets through, in log order (NotFound: no such config). A sink's URL
    is shown with its password as *** (the log keeps it whole: the notifier needs it); the revision as
    `version`, as DESIGN 7 names it."""

    rows = audit_queries.events(db, only)
    for row in rows:
        url = row["data"].get("url")
        if isinstance(url, str):
            row["data"]["url"] = shown(url)
    return [documents.shown(row) for row in rows]


def type_problem(db: sqlite_utils.Database, type_: str) -> str | None:
    """Why `type_` names no event type (the domain records none such, nor does the log hold one), if so."""

    known = event_types()
    if type_ in known or audit_queries.has_type(db, type_):
        return None
    return f"{type_!r} is not an event type (known: {', '.join(sorted(known))})"
