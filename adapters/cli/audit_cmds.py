"""`rollouts audit`: the invariants checked on the log's own fold, the views and the runtime held to it."""

from __future__ import annotations

from typing import Any

import click

from ...domain.audit_rules import audit_rules
from ...projections import audit_queries
from ...projections.rebuild import paused_gc
from ...projections.refold import Refold
from ...service.runtime_check import runtime_breaks
from ..store.reader import RecorderSource
from ..store.snapshot_check import snapshot_breaks
from ..store.verify import seen_by_home, verify_log
from . import completion
from .output import emit_json, output_option
from .params import valid_name
from .state import State, pass_reader


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
    seen included), and each run this home's runtime started for a claim is
    what the log's spec calls for (an event changed, run and put back). G1:
    no claim while its config was frozen (by name or by --all): a freeze
    holds from its event until an unfreeze, while the
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
        ran = runtime_breaks(state.home.runtime, recorder.log_id(), refold.db("history"))
    finally:
        refold.close()
    violations += [v for v in ran if name is None or v["config"] == name]
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
