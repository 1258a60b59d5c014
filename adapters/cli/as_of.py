"""`--as-of POSITION|ISO`: read commands answered as the log stood then, from a private view."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .params import utc_text
from .state import State

if TYPE_CHECKING:
    import sqlite_utils

F = TypeVar("F", bound=Callable[..., Any])
_POSITION = re.compile(r"[0-9]{1,18}")  # ASCII: \d takes a full-width 5 for 5


def as_of_value(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    """A position (digits), or an ISO time as UTC text; anything else is a usage error."""
    if value is None:
        return None
    if _POSITION.fullmatch(value):
        return int(value)
    try:
        return utc_text(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither a position nor an ISO time like 2026-01-31T12:00:00") from None


def as_of_option(f: F) -> F:
    return click.option(
        "--as-of",
        callback=as_of_value,
        metavar="POSITION|ISO",
        help="Answer as the log stood at this position, or at this time (UTC if no offset).",
    )(f)


def position_at(state: State, value: int | str) -> int:
    """The position `value` names: itself (0..head), or the highest whose event is at or before that time."""
    head = state.recorder.max_notification_id() or 0
    if isinstance(value, int):
        if value > head:
            raise click.BadParameter(f"position {value} is beyond the head of the log ({head})", param_hint="--as-of")
        return value

    _, audit_queries = _past()
    return audit_queries.last_position_at(state.read("audit").db("audit"), value)


def history_at(state: State, name: str, value: int | str) -> sqlite_utils.Database:
    """The history view of config `name` as the log stood at `value` (never the live view)."""

    as_of, _ = _past()
    return as_of.config_history_at(state.recorder.events_of, name, position_at(state, value))


def _past() -> tuple[ModuleType, ModuleType]:
    """projections.as_of and projections.audit_queries, loaded when --as-of is given."""
    from ...projections import as_of, audit_queries  # start-up cost: the audit's rules, off plain reads

    return as_of, audit_queries
