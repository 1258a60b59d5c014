"""`rollouts events` and `rollouts audit`: the history from the audit view, the invariants from the log."""

from __future__ import annotations

from typing import Any

import click

from rollouts.adapters import event_documents
from rollouts.adapters.cli import completion
from rollouts.adapters.cli.output import emit_json, output_option, show
from rollouts.adapters.cli.params import iso_utc, valid_name
from rollouts.adapters.cli.state import State, pass_reader
from rollouts.adapters.cli.types import POSITION, REVISION, Whole
from rollouts.adapters.event_documents import type_problem
from rollouts.adapters.log_source import RecorderSource
from rollouts.adapters.snapshot_check import snapshot_breaks
from rollouts.adapters.verify import seen_by_home, verify_log
from rollouts.domain.audit_rules import audit_rules
from rollouts.projections import audit_queries
from rollouts.projections.rebuild import paused_gc
from rollouts.projections.refold import Refold

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


def _known_type(db: Any, type_: str) -> None:
    """`--type` names an event type the domain records, or one the log holds (a usage error otherwise)."""

    problem = type_problem(db, type_)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="--type")


@click.command()
@click.argument("name", required=False, callback=valid_name, shell_complete=completion.configs)
@output_option
@pass_reader
def audit(state: State, name: str | None, output: str) -> None:
    """Check the invariants I1-I3, I5, I8-I10 and the gates G1-G2 on the log; exit 1 on a violation.

    The log is folded again, from zero, into a private place: the rules are
    checked on the log's own account, never on the home's view files. I1:
    each deployer (deployment, attempt, hook try) claimed and created at
    most once. I2: at most one active deployment per config at every point
    of the log. I3: phases only move forward, except by an explicit retry.
    I5: each of the home's views (desired, history, audit) holds the rows
    the log folds to; one that differs (edited, or left by other code) is
    named: rebuild it with `rollouts projections rebuild`. I8: the hash
    chain holds (as `rollouts log verify` checks it, the head this home has
    seen included). G1: no claim while its config was frozen (by name or by
    --all): a freeze holds from its event until an unfreeze, while the
    claim's timestamp is before --until. G2: no claim of an attempt that
    needed an approval and had none, and no approval by the actor who asked
    for the attempt.
    I9: a deployment is Complete only if each step's deployer exited 0, in
    order, and each step's verification passed (or was promoted past).
    I10: each failure that calls for an automatic rollback is followed by
    exactly one, to the last Complete revision; no other is triggered.

    \b
    Example:
      rollouts audit
      rollouts audit web -o json
    """

    recorder = state.recorder
    live = _live_views(state)
    # The chain is walked first, by processes forked while no other thread runs (a fork copies the
    # locks other threads hold); the fold's worker process and SQLite's threads start after.
    breaks = _chain_breaks(state)
    refold = Refold(RecorderSource(recorder), recorder.max_notification_id() or 0, recorder.log_id() or "")
    try:
        total, violations = _rules(refold.db("audit"), name)
        differing = [] if live is None else refold.differing(live)
    finally:
        refold.close()
    violations += breaks + [_view_violation(d) for d in differing]
    violations.sort(key=lambda v: v["position"])
    views = [d.as_dict() for d in differing]
    if output == "json":
        emit_json({"ok": not violations, "events": total, "violations": violations, "views_differing": views})
    elif violations:
        for v in violations:
            about = f" ({v['config']} v{v['version']})" if v["config"] is not None else ""
            click.echo(f"VIOLATION {v['rule']} at position {v['position']}{about}: {v['message']}")
    else:
        click.echo(f"ok: {total} events checked, no violation of I1-I3, I5, I8-I10, G1 or G2")
    if violations:
        raise click.exceptions.Exit(1)


def _live_views(state: State) -> Any:
    """The home's views caught up to the head, to compare with the log's fold; None where there are none
    of this log's (a missing home, or one bound to another log or to a history the log no longer holds)."""
    if state.scratch is not None or state.log_problem(state.recorder) is not None:
        return None
    return state.read()


def _rules(db: Any, name: str | None) -> tuple[int, list[dict[str, Any]]]:
    """(events checked, violations of I1-I3, I9, I10, G1 and G2) in the audit view `db`."""

    if name is not None:
        audit_queries.require_config(db, name)
    # No cycle collection meanwhile: the rules make no cycles and keep ~8 containers per deployment alive,
    # which each full collection walked again (3 of the 8.6 s of CPU at 1M events).
    with paused_gc():
        found = [v.as_dict() for v in audit_rules(audit_queries.rule_events(db, name))]
    return audit_queries.event_count(db, name), found


def _view_violation(found: Any) -> dict[str, Any]:
    """A live view that differs from the log's fold (I5), as an audit violation naming it."""
    tables = ", ".join(f"{table}: {n} row{'s' * (n != 1)}" for table, n in found.tables.items())
    return {
        "position": found.position,
        "config": None,
        "version": None,
        "rule": "I5",
        "view": found.name,
        "message": f"view {found.name} differs from the log's fold ({tables}): edited, or left by other code;"
        f" run 'rollouts projections rebuild {found.name}'",
    }


def _chain_breaks(state: State) -> list[dict[str, Any]]:
    """Where the log's hash chain breaks, the head this home has seen if the log lost it, and the stored
    snapshots that are not their events' fold (I8), as audit violations."""

    recorder = state.recorder
    breaks = verify_log(recorder).breaks + seen_by_home(state.home.runtime, recorder) + snapshot_breaks(recorder)
    return [
        {"position": b.position, "config": None, "version": None, "rule": "I8", "message": b.problem} for b in breaks
    ]
