"""`rollouts rollout history` and `rollout status`: what the history view says of a config's rollouts.

Apart from the verbs that append (adapters/cli/rollout_cmds), which load without the views' modules.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from ...domain import phases
from ...domain.errors import NotFound
from ...projections import history_queries
from ...projections.history_queries import DEPLOYMENT_FIELDS
from ..service import documents, stage_view
from ..service.documents import history_document
from .as_of import as_of_option, history_at
from .output import cell, emit_json, output_option, table
from .params import name_argument
from .state import State, pass_reader
from .types import REVISION, Seconds

if TYPE_CHECKING:
    import sqlite_utils

HISTORY_TABLE = ["version", "phase", "reason", "attempt", "cause", "message", "created_at", "finished_at"]
RUNS_TABLE = ["name", "attempt", "kind", "try", "state", "exit_code", "started_at", "finished_at"]


def history_rows(
    state: State, name: str, revision: int | None = None, as_of: int | str | None = None
) -> list[dict[str, Any]]:
    """`name`'s deployments from the history view, caught up first, or as the log stood at `as_of`
    (NotFound: no such config or revision)."""

    return history_queries.deployments(history_db(state, name, as_of), name, revision)


def history_db(state: State, name: str, as_of: int | str | None = None) -> sqlite_utils.Database:
    """The history view, caught up first, or as the log stood at `as_of`."""
    return state.read("history").db("history") if as_of is None else history_at(state, name, as_of)


@click.command()
@name_argument
@click.option("--revision", type=REVISION, help="Show only this revision, with its spec and runs.")
@as_of_option
@output_option
@pass_reader
def history(state: State, name: str, revision: int | None, as_of: int | str | None, output: str) -> None:
    """List NAME's deployments: version, phase, reason, cause, timings.

    \b
    Example:
      rollouts rollout history web
      rollouts rollout history web --revision 3
      rollouts rollout history web -o json
      rollouts rollout history web --as-of 2026-11-30T09:00:00
    """

    db = history_db(state, name, as_of)
    if output == "json":
        emit_json(documents.history(db, name, revision))
        return
    rows = history_queries.deployments(db, name, revision)
    if revision is None:
        table([documents.shown(row) for row in rows], HISTORY_TABLE)
    else:
        _revision_detail(rows[0])


def _revision_detail(row: dict[str, Any]) -> None:

    spec = row["spec"]
    for key in DEPLOYMENT_FIELDS:
        label = documents.SHOWN_AS.get(key, key).replace("_", " ").capitalize()
        click.echo(f"{label + ':':<13}{cell(row[key])}")
    if row["needs_approval"]:
        click.echo(f"{'Approval:':<13}{'by ' + cell(row['approved_by']) if row['approved_by'] else 'waiting'}")
    click.echo(f"{'Command:':<13}{json.dumps(spec['command'])}")
    click.echo(f"{'Env:':<13}{json.dumps(spec['env'])}")
    if spec.get("pass_env"):
        click.echo(f"{'Pass env:':<13}{' '.join(spec['pass_env'])}")
    for which in ("pre_hook", "post_hook"):
        if spec.get(which):
            click.echo(
                f"{which.replace('_', ' ').capitalize() + ':':<13}{json.dumps(spec[which]['command'])} "
                f"(policy {spec[which]['policy']})"
            )
    if spec.get("steps"):
        click.echo(f"{'Steps:':<13}{','.join(map(str, spec['steps']))} (now {cell(row['step_index'])})")
    if spec.get("verify"):
        counts = ", ".join(f"{row[k] or 0} {k}" for k in ("passed", "failed", "inconclusive"))
        click.echo(f"{'Verify:':<13}{json.dumps(spec['verify'])} ({counts})")
    if row.get("rollback_of"):
        click.echo(f"{'Rollback of:':<13}version {row['rollback_of']}")
    if row["steps"]:
        click.echo("Runs:")
        table(row["steps"], RUNS_TABLE)


@click.command()
@name_argument
@click.option("--revision", type=REVISION, help="The phase of this revision (default: the latest).")
@click.option("--watch", "-w", is_flag=True, help="Wait until the deployment is Complete or Failed.")
@click.option("--timeout", type=Seconds(), help="With --watch: give up after SECONDS (exit 1; 0: wait for ever).")
@as_of_option
@output_option
@pass_reader
def status(
    state: State,
    name: str,
    revision: int | None,
    watch: bool,
    timeout: float | None,
    as_of: int | str | None,
    output: str,
) -> None:
    """Print the phase of NAME's latest deployment.

    Exit 0 when Complete (or still open without --watch), 1 when Failed or
    when --timeout passes (0: never), 4 when there is no deployment yet;
    with --revision N, of that revision instead. With -o json
    it prints one document, the latest deployment as `rollout history -o
    json` shows it (without its spec) and its config; with --watch, once,
    at the end.

    \b
    Example:
      rollouts rollout status web
      rollouts rollout status web --watch --timeout 300 && echo deployed
      rollouts rollout status web --revision 3
      rollouts rollout status web -o json | jq -r .phase
      rollouts rollout status web --as-of 1200
    """
    if watch and as_of is not None:
        raise click.UsageError("--watch and --as-of exclude each other")
    deadline = None if not timeout else time.monotonic() + timeout  # 0: no timeout, as kubectl's
    said = None
    watched = None  # with --watch: the revision that was latest when the watch began
    while True:
        rows = history_rows(state, name, as_of=as_of)
        if not rows:
            raise NotFound(f"config {name!r} has no deployment yet")
        if revision is not None and all(r["revision"] != revision for r in rows):
            raise NotFound(f"config {name!r} has no revision {revision}")
        watched = watched or revision or rows[-1]["revision"]
        latest_row = next(r for r in rows if r["revision"] == watched) if watch or revision else rows[-1]
        freezes = _freezes(state, name, as_of)
        line = _status_line(name, latest_row, freezes) + _unexecutable(state, latest_row, as_of)
        line += _stage_text(state, name, rows, latest_row, as_of)
        rollback = next((r for r in rows if r.get("rollback_of") == latest_row["revision"]), None)
        if rollback is not None and latest_row["phase"] == phases.FAILED:
            line += f"; rolled back automatically as version {rollback['revision']}"
        if line != said and output == "table":
            click.echo(line)
        said = line
        ended = latest_row["phase"] in phases.TERMINAL or not watch
        timed_out = not ended and deadline is not None and time.monotonic() >= deadline
        if output == "json" and (ended or timed_out):
            emit_json(_status_document(name, latest_row, freezes))
        if ended:
            raise click.exceptions.Exit(1 if latest_row["phase"] == phases.FAILED else 0)
        if timed_out:
            click.echo(f"error: timed out waiting for {name} version {latest_row['revision']}", err=True)
            raise click.exceptions.Exit(1)
        time.sleep(0.1)


def _status_document(name: str, row: dict[str, Any], freezes: list[dict[str, Any]]) -> dict[str, Any]:

    shown = {k: v for k, v in history_document(row).items() if k != "spec"}
    return {"config": name, **shown, "frozen": bool(freezes), "freezes": freezes}


def _status_line(name: str, row: dict[str, Any], freezes: list[dict[str, Any]]) -> str:
    text = f"{name} version {row['revision']} (attempt {row['attempt']}): {row['phase']}"
    text = f"{text}: {cell(row['reason'])}" if row["reason"] else text
    if row["phase"] == phases.NEW and row["needs_approval"] and not row["approved_by"]:
        text += "; waiting for approval (rollout approve, by another actor)"
    text += _progress_text(name, row)
    return text + "".join(f"; {freeze_text(f)}" for f in freezes)


PAUSED_BECAUSE = {
    "step": "paused after step {k} (--step-pause manual)",
    "inconclusive": "paused: measurements of step {k} were inconclusive",
}


def _progress_text(name: str, row: dict[str, Any]) -> str:
    """`; step 2/3 (weight 50); measurements 2 passed/0 failed/0 inconclusive of 6`, and a pause's why and
    the command that goes on (7.6): only for a config with steps or a verification."""
    spec = row["spec"]
    if not spec.get("steps") and not spec.get("verify") and not spec.get("analysis"):
        return ""
    text = ""
    if row.get("step_index") is not None:
        text += f"; step {row['step_index']}/{row['step_count']} (weight {row['weight']})"
    counts = "/".join(f"{row.get(k) or 0} {k}" for k in ("passed", "failed", "inconclusive"))
    if spec.get("verify") and not spec.get("analysis"):
        planned = int(spec.get("verify_count", 3)) * int(row["step_count"] or 1)
        text += f"; measurements {counts} of {planned}"
    elif spec.get("analysis"):
        text += f"; measurements {counts}" + _last_values(row)
    if row.get("paused"):
        why = PAUSED_BECAUSE.get(row["paused"], "paused").format(k=row["step_index"])
        text += f"; {why}; go on with: rollouts rollout promote {name}"
    return text


def _last_values(row: dict[str, Any]) -> str:
    """`; errors@2: passed, value 0.004` for each template's last measurement on the current step (7.9)."""
    last: dict[str, dict[str, Any]] = {}
    for m in row.get("measurements") or []:
        if m["template"] is not None and m["step"] == row.get("step_index"):
            last[m["template"]] = m
    shown = []
    for template, m in last.items():
        value = "none" if m["value"] is None else json.dumps(m["value"])
        shown.append(
            f"; {template}: {m['outcome']}, value {cell(value)}" + (f" ({cell(m['error'])})" if m["error"] else "")
        )
    return "".join(shown)


def _unexecutable(state: State, row: dict[str, Any], as_of: int | str | None) -> str:
    """`; measurement NAME: cannot execute PROGRAM: REASON` when the attempt's last measurement could not be
    run (7.11: a mistyped --verify only paused as inconclusive). A deployer's says so in its reason already."""
    if (
        as_of is not None
        or not (row["spec"].get("verify") or row["spec"].get("analysis"))
        or row["phase"] == phases.COMPLETE
    ):
        return ""
    from ...projections import audit_queries  # start-up cost: the audit's rules load only for a measurement

    only = audit_queries.EventFilter(config=row["config"], revision=row["revision"], type="MeasurementRecorded")
    measured = [
        e for e in audit_queries.events(state.read("audit").db("audit"), only) if e["attempt"] == row["attempt"]
    ]
    detail = str(measured[-1]["data"].get("detail") or "") if measured else ""
    return f"; measurement {measured[-1]['data']['name']}: {detail}" if detail.startswith("cannot execute ") else ""


def _stage_text(
    state: State, name: str, rows: list[dict[str, Any]], row: dict[str, Any], as_of: int | str | None
) -> str:
    """7.10: `; queued behind version V`, and for a stage what waits upstream (soaking, seconds left)."""
    if as_of is not None or row is not rows[-1]:
        return ""
    text = stage_view.queued_text(rows)
    if row["spec"].get("upstream"):
        text += stage_view.upstream_text(state.read("history").db("history"), name, rows, datetime.now(UTC))
    return text


def freeze_text(freeze: dict[str, Any]) -> str:
    """`frozen (all) by alice: release week, until 2026-12-24T18:00:00+00:00`"""
    until = freeze["until"] or "unfrozen"
    return f"frozen ({freeze['scope']}) by {cell(freeze['by'])}: {cell(freeze['reason'])}, until {until}"


def _freezes(state: State, name: str, as_of: int | str | None) -> list[dict[str, Any]]:
    """The freezes of `name` in force now (or, with an ISO --as-of, at that time)."""

    if as_of is None:
        db = state.read("history").db("history")
        return history_queries.configs(db, name, datetime.now(UTC))[0]["freezes"]
    moment = datetime.fromisoformat(as_of) if isinstance(as_of, str) else datetime.now(UTC)
    return history_queries.configs(history_at(state, name, as_of), name, moment)[0]["freezes"]
