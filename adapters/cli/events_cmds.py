"""`rollouts events`: the history, filtered, from the audit view."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ...projections import audit_queries
from ..service import event_documents
from ..service.event_documents import type_problem
from . import completion
from .output import output_option, show
from .params import iso_utc, valid_name
from .state import State, pass_reader
from .types import POSITION, REVISION, Whole

if TYPE_CHECKING:
    import sqlite_utils

EVENT_COLUMNS = ["position", "timestamp", "config", "version", "attempt", "type", "actor"]


@click.command()
@click.argument("name", required=False, callback=valid_name, shell_complete=completion.configs)
@click.option("--revision", type=REVISION, help="Only events about this version (needs NAME).")
@click.option("--type", "type_", help="Only events of this type, e.g. DeployerClaimed.")
@click.option(
    "--since", metavar="ISO", callback=iso_utc, help="Only events at or after this ISO time (UTC if no offset)."
)
@click.option("--actor", help="Only events caused by this actor.")
@click.option("--after", type=POSITION, help="Only events after this position (paging).")
@click.option("--until", type=POSITION, help="Only events up to this position.")
@click.option("--limit", type=Whole(1), help="At most this many events (the first ones).")
@output_option
@pass_reader
def events(
    state: State,
    name: str | None,
    revision: int | None,
    type_: str | None,
    since: str | None,
    actor: str | None,
    after: int | None,
    until: int | None,
    limit: int | None,
    output: str,
) -> None:
    """List the events of the log in order, with who caused each.

    Page through a long log with --after and --limit: the next page starts
    after the last position printed, with no gap and no repeat.

    \b
    Example:
      rollouts events web --revision 2
      rollouts events --type DeployerLost --since 2026-11-01
      rollouts events --actor alice@laptop -o json
      rollouts events --after 1000 --limit 100 -o json
    """

    if revision is not None and name is None:
        raise click.UsageError("--revision needs a config NAME")
    if after is not None and until is not None and until < after:
        raise click.BadParameter("--until is before --after", param_hint="--until")
    store = state.read("audit")
    head = store.source.head()
    for flag, position in (("--after", after), ("--until", until)):
        if position is not None and position > head:
            raise click.BadParameter(f"position {position} is beyond the head of the log ({head})", param_hint=flag)
    only = audit_queries.EventFilter(
        config=name, revision=revision, type=type_, actor=actor, since=since, after=after, until=until, limit=limit
    )
    if type_ is not None:
        _known_type(store.db("audit"), type_)
    rows = event_documents.events(store.db("audit"), only)
    show(rows, EVENT_COLUMNS, output, "No events.")


def _known_type(db: sqlite_utils.Database, type_: str) -> None:
    """`--type` names an event type the domain records, or one the log holds (a usage error otherwise)."""

    problem = type_problem(db, type_)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="--type")
