"""`rollouts home rebind`: accepting, on the record, the log as it now is after it went back or changed."""

from __future__ import annotations

import shutil
from typing import Any

import click

from adapters.cli.state import State, pass_state


@click.group()
def home() -> None:
    """The home's binding to its event log.

    \b
    Example:
      rollouts home rebind
    """


@home.command()
@pass_state
def rebind(state: State) -> None:
    """Bind this home to the store's log as it is now, and rebuild its views.

    A home's views and deployers were made from one log. When the store holds
    another log (another --store or schema, a replaced events.db), the log
    went back (a backup put back, a truncated tail), or its history to the
    position the home saw changed (a copy that went another way), commands
    that write or reconcile refuse with exit 5. After checking the log (`rollouts log
    verify`), this records who rebound the home from which log and position
    to which (an event in the log), drops the views and rebuilds them.
    Deployers the runtime holds that no claim of this log made are never
    taken for this log's: the running ones are stopped, and a deployment
    whose deployer name one of them holds fails, saying so; `rollout retry`
    opens a new attempt.

    \b
    Example:
      rollouts log verify && rollouts home rebind
    """
    from adapters import binding
    from adapters.controller.loop import claimant_id
    from adapters.runtime.local import LocalRuntime

    state.accept_any_log = True
    app = state.app
    old = binding.load(state.home.runtime)
    head = app.recorder.max_notification_id() or 0
    app.rebind_home(claimant_id(state.home), (old.log_id, old.seen) if old else (None, None), head, state.meta())
    runtime = LocalRuntime(state.home.path)
    try:
        stopped = _stop_foreign(runtime, app.recorder)
        disowned = runtime.disown_unclaimed()
    finally:
        runtime.close()
    shutil.rmtree(state.home.projections, ignore_errors=True)
    state.home.ensure()
    head = app.recorder.max_notification_id() or 0
    hash_ = app.recorder.hash_at(head) if head else None
    bound = binding.record(state.home.runtime, app.recorder.log_id(), head, hash_, replace=True)
    state.read("desired", "history", "audit")
    was = f"log {old.log_id} seen up to position {old.seen}" if old else "no log"
    click.echo(
        f"home {state.home.path} bound to log {bound.log_id} at position {bound.seen} (was {was}); views rebuilt"
    )
    for name in stopped:
        click.echo(f"stopped {name}: it runs for no claim of this log")
    if disowned:
        click.echo(f"{disowned} deployer(s) made before claims were recorded will not be adopted")


def _stop_foreign(runtime: Any, recorder: Any) -> list[str]:
    """Stop the running deployers that no claim of this log made: they belong to a history that is gone."""
    from adapters.runtime.port import claim_parts

    log_id, stopped = recorder.log_id(), []
    for row in runtime.active():
        claim = claim_parts(row.claim)
        if claim is not None and claim[0] == log_id and recorder.hash_at(claim[1]) == claim[2]:
            continue
        runtime.stop(row.name, reason="stopped by home rebind: no claim of this log made it")
        stopped.append(row.name)
    return stopped
