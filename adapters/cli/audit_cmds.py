"""`rollouts events` and `rollouts audit`: the full history, read from the audit view."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from adapters.cli.config_cmds import valid_name
from adapters.cli.output import emit_json, output_option, show
from adapters.cli.state import State, pass_reader
from adapters.cli.types import REVISION
from domain.errors import NotFound
from projections.records import document


def iso_utc(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`--since`: an ISO time; without an offset it is UTC."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat()
    except (ValueError, OverflowError):
        raise click.BadParameter(f"{value!r} is not an ISO time like 2026-01-31T12:00:00") from None


def _require_config(db: Any, name: str) -> None:
    if not db.execute("SELECT 1 FROM streams WHERE kind = 'config' AND config = ?", (name,)).fetchone():
        raise NotFound(f"config {name!r} not found")


@click.command()
@click.argument("name", required=False, callback=valid_name)
@click.option("--revision", type=REVISION, help="Only events about this version (needs NAME).")
@click.option("--type", "type_", help="Only events of this type, e.g. DeployerClaimed.")
@click.option("--since", callback=iso_utc, help="Only events at or after this ISO time (UTC if no offset).")
@click.option("--actor", help="Only events caused by this actor.")
@click.option("--after", type=click.IntRange(min=0), help="Only events after this position (paging).")
@click.option("--until", type=click.IntRange(min=0), help="Only events up to this position.")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many events (the first ones).")
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
    db = store.db("audit")
    clauses, args = [], []
    if name is not None:
        _require_config(db, name)
        clauses.append("config = ?")
        args.append(name)
    for column, value in (("version", revision), ("type", type_), ("actor", actor)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    for clause, value in (("timestamp >= ?", since), ("position > ?", after), ("position <= ?", until)):
        if value is not None:
            clauses.append(clause)
            args.append(value)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    page = f" LIMIT {int(limit)}" if limit is not None else ""
    rows = list(db.query(f"SELECT * FROM events {where} ORDER BY position{page}", args))
    for row in rows:
        row["data"] = document(row["data"])[1]
        row["os_user"] = (row["data"].get("meta") or {}).get("os_user")  # null for events written before it
    columns = ["position", "timestamp", "config", "version", "attempt", "type", "actor"]
    show(rows, columns, output, "No events.")


@click.command()
@click.argument("name", required=False, callback=valid_name)
@output_option
@pass_reader
def audit(state: State, name: str | None, output: str) -> None:
    """Check what the log shows of the invariants I1-I3 and I8; exit 1 on a violation.

    I1: each deployer (deployment, attempt, hook try) claimed and created at
    most once. I2: at most one active deployment per config at every point
    of the log. I3: phases only move forward, except by an explicit retry.
    I8: the hash chain holds (as `rollouts log verify` checks it).

    \b
    Example:
      rollouts audit
      rollouts audit web -o json
    """
    from domain.audit import audit as check

    db = state.read("audit").db("audit")
    if name is not None:
        _require_config(db, name)
    sql = (
        "SELECT position, type, config, version, data FROM events WHERE stream IN "
        "(SELECT stream FROM streams WHERE kind = 'deployment')"
    )
    sql += " AND config = ?" if name else ""
    rows = db.execute(sql + " ORDER BY position", [name] if name else [])
    result = check((p, t, c, v, document(d)[1]) for p, t, c, v, d in rows)
    total = db.execute(
        "SELECT count(*) FROM events" + (" WHERE config = ?" if name else ""), [name] if name else []
    ).fetchone()[0]
    violations = [v.as_dict() for v in result.violations] + _chain_breaks(state)
    violations.sort(key=lambda v: v["position"])
    if output == "json":
        emit_json({"ok": not violations, "events": total, "violations": violations})
    elif violations:
        for v in violations:
            about = f" ({v['config']} v{v['version']})" if v["config"] is not None else ""
            click.echo(f"VIOLATION {v['rule']} at position {v['position']}{about}: {v['message']}")
    else:
        click.echo(f"ok: {total} events checked, no violation of I1-I3 or I8")
    if violations:
        raise click.exceptions.Exit(1)


def _chain_breaks(state: State) -> list[dict[str, Any]]:
    """Where the log's hash chain breaks (I8), as audit violations."""
    from adapters.verify import verify_log

    breaks = verify_log(state.recorder).breaks
    return [
        {"position": b.position, "config": None, "version": None, "rule": "I8", "message": b.problem} for b in breaks
    ]
