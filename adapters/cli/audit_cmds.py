"""`rollouts audit`: the service's audit report, printed as text or JSON."""

from __future__ import annotations

import click

from ..service.audit import audit as audit_log
from . import completion
from .output import emit_json, output_option
from .params import valid_name
from .state import State, pass_reader


@click.command()
@click.argument("name", required=False, callback=valid_name, shell_complete=completion.configs)
@output_option
@pass_reader
def audit(state: State, name: str | None, output: str) -> None:
    """Check the invariants I1-I3, I5, I8-I11 and the gates G1-G2 on the log; exit 1 on a violation.

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

    report = audit_log(state, name)
    if output == "json":
        emit_json(report.as_dict())
    elif report.violations:
        for v in report.violations:
            about = f" ({v.config} v{v.revision})" if v.config is not None else ""
            click.echo(f"VIOLATION {v.rule} at position {v.position}{about}: {v.message}")
    else:
        click.echo(f"ok: {report.events} events checked, no violation of I1-I3, I5, I8-I11, G1 or G2")
    if report.violations:
        raise click.exceptions.Exit(1)
