"""`rollouts events` and `rollouts audit`: the full history, read from the audit view."""

from __future__ import annotations

from typing import Any

import click

from adapters.cli import completion
from adapters.cli.output import emit_json, output_option, show
from adapters.cli.params import iso_utc, valid_name
from adapters.cli.state import State, pass_reader
from adapters.cli.types import POSITION, REVISION, Whole

EVENT_COLUMNS = ["position", "timestamp", "config", "version", "attempt", "type", "actor"]


@click.command()
@click.argument("name", required=False, callback=valid_name, shell_complete=completion.configs)
@click.option("--revision", type=REVISION, help="Only events about this version (needs NAME).")
@click.option("--type", "type_", help="Only events of this type, e.g. DeployerClaimed.")
@click.option("--since", callback=iso_utc, help="Only events at or after this ISO time (UTC if no offset).")
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
    from adapters import documents
    from projections import audit_queries

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
        config=name, version=revision, type=type_, actor=actor, since=since, after=after, until=until, limit=limit
    )
    if type_ is not None:
        _known_type(store.db("audit"), type_)
    rows = documents.events(store.db("audit"), only)
    show(rows, EVENT_COLUMNS, output, "No events.")


def _known_type(db: Any, type_: str) -> None:
    """`--type` names an event type the domain records, or one the log holds (a usage error otherwise)."""
    from adapters.documents import type_problem

    problem = type_problem(db, type_)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="--type")


@click.command()
@click.argument("name", required=False, callback=valid_name, shell_complete=completion.configs)
@output_option
@pass_reader
def audit(state: State, name: str | None, output: str) -> None:
    """Check what the log shows of the invariants I1-I3, I8 and the gates G1-G2; exit 1 on a violation.

    I1: each deployer (deployment, attempt, hook try) claimed and created at
    most once. I2: at most one active deployment per config at every point
    of the log. I3: phases only move forward, except by an explicit retry.
    I8: the hash chain holds (as `rollouts log verify` checks it).
    G1: no claim while its config was frozen (by name or by --all): a freeze
    holds from its event until an unfreeze, while the claim's timestamp is
    before --until. G2: no claim of an attempt that needed an approval and
    had none, and no approval by the actor who asked for the attempt.

    \b
    Example:
      rollouts audit
      rollouts audit web -o json
    """
    from domain.audit import audit as check
    from domain.gate_audit import audit_gates
    from projections import audit_queries

    db = state.read("audit").db("audit")
    if name is not None:
        audit_queries.require_config(db, name)
    result = check(audit_queries.deployment_events(db, name))
    gates = audit_gates(audit_queries.gate_events(db, name))
    total = audit_queries.event_count(db, name)
    violations = [v.as_dict() for v in [*result.violations, *gates.violations]] + _chain_breaks(state)
    violations.sort(key=lambda v: v["position"])
    if output == "json":
        emit_json({"ok": not violations, "events": total, "violations": violations})
    elif violations:
        for v in violations:
            about = f" ({v['config']} v{v['version']})" if v["config"] is not None else ""
            click.echo(f"VIOLATION {v['rule']} at position {v['position']}{about}: {v['message']}")
    else:
        click.echo(f"ok: {total} events checked, no violation of I1-I3, I8, G1 or G2")
    if violations:
        raise click.exceptions.Exit(1)


def _chain_breaks(state: State) -> list[dict[str, Any]]:
    """Where the log's hash chain breaks (I8), as audit violations."""
    from adapters.verify import verify_log

    breaks = verify_log(state.recorder).breaks
    return [
        {"position": b.position, "config": None, "version": None, "rule": "I8", "message": b.problem} for b in breaks
    ]
