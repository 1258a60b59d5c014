"""The documents read commands print with `-o json` and `rollouts serve` answers: one function each."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import sqlite_utils

from projections import audit_queries, history_queries

Row = dict[str, Any]
_INTERNAL = ("stream", "config", "step")  # history columns that only join views


def json_text(document: Any) -> str:
    """The one JSON rendering: what `-o json` prints (without its newline) and the API's body."""
    return json.dumps(document, indent=2, default=str)


def config_list(db: sqlite_utils.Database, now: datetime) -> list[Row]:
    """`config list`: every config with its latest version and phase, the freezes in force at `now`,
    and its command as a shell types it."""
    from adapters.cli.output import shell_words

    rows = history_queries.configs(db, None, now)
    for row in rows:
        row["command"] = shell_words(row["spec"]["command"])
    return rows


def history(db: sqlite_utils.Database, name: str, revision: int | None = None) -> list[Row]:
    """`rollout history NAME [--revision N]`: the deployments (NotFound: no such config or revision)."""
    rows = history_queries.deployments(db, name, revision)
    return [{k: v for k, v in row.items() if k not in _INTERNAL} for row in rows]


def events(db: sqlite_utils.Database, only: audit_queries.EventFilter) -> list[Row]:
    """`events`: the events `only` lets through, in log order (NotFound: no such config). A sink's URL
    is shown with its password as *** (the log keeps it whole: the notifier needs it)."""
    from adapters.notify.sinks import shown

    rows = audit_queries.events(db, only)
    for row in rows:
        url = row["data"].get("url")
        if isinstance(url, str):
            row["data"]["url"] = shown(url)
    return rows


def type_problem(db: sqlite_utils.Database, type_: str) -> str | None:
    """Why `type_` names no event type (the domain records none such, nor does the log hold one), if so."""
    from domain.event_types import event_types

    known = event_types()
    if type_ in known or audit_queries.has_type(db, type_):
        return None
    return f"{type_!r} is not an event type (known: {', '.join(sorted(known))})"
