"""`rollouts home rebind`: accepting, on the record, the log as it now is after it went back or changed."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from typing import Any

import click

from ...domain.errors import DomainError
from ...service.moves import log_ids_by_position, rename_rewound
from ..controller.loop import claimant_id
from ..runtime.local import LocalRuntime
from ..runtime.port import claim_parts
from ..store import binding
from .state import State, pass_state


@click.group()
def home() -> None:
    """The home's binding to its event log.

    \b
    Example:
      rollouts home rebind
    """


@home.command()
@click.option("--dry-run", is_flag=True, help="Print what a rebind would stop and rebuild; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Stop the deployers it must stop without asking.")
@pass_state
def rebind(state: State, dry_run: bool, yes: bool) -> None:
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
    opens a new attempt. Before stopping any, it asks (--yes: it does not;
    without a terminal it refuses, exit 1); --dry-run says what it would do.

    \b
    Example:
      rollouts log verify && rollouts home rebind --dry-run
      rollouts home rebind
    """

    state.accept_any_log = True
    try:
        old = binding.load(state.home.runtime)
    except binding.UnreadableBinding:  # the error that sends the user here must not stop them here too
        old, was = None, "an unreadable binding"
    else:
        was = f"log {old.log_id} seen up to position {old.seen}" if old else "no log"
    foreign = _foreign(state)
    if dry_run:
        _tell_plan(state, foreign, was)
        return
    if foreign and not yes:
        _consent(foreign)
    app = state.app
    if old is not None and old.log_id == app.recorder.log_id() and _rewound(state, old):
        renamed = rename_rewound(app, state.meta())  # its next positions must not repeat the old log's keys
        click.echo(f"log {old.log_id} went back: it continues as log {renamed} from position {old.seen}")
    head = app.recorder.max_notification_id() or 0
    app.rebind_home(claimant_id(state.home), (old.log_id, old.seen) if old else (None, None), head, state.meta())
    runtime = LocalRuntime(state.home)
    try:
        stopped = _stop_foreign(runtime, app)
        disowned = runtime.disown_unclaimed()
    finally:
        runtime.close()
    shutil.rmtree(state.home.projections, ignore_errors=True)
    state.home.ensure()
    head = app.recorder.max_notification_id() or 0
    hash_ = app.recorder.hash_at(head) if head else None
    bound = binding.record(state.home.runtime, app.recorder.log_id(), head, hash_, replace=True)
    state.read("desired", "history", "audit")
    click.echo(
        f"home {state.home.path} bound to log {bound.log_id} at position {bound.seen} (was {was}); views rebuilt"
    )
    for name in stopped:
        click.echo(f"stopped {name}: it runs for no claim of this log")
    if disowned:
        click.echo(f"{disowned} deployer(s) made before claims were recorded will not be adopted")


def _rewound(state: State, old: Any) -> bool:
    """Whether the log went back or changed under the home's binding `old` (the same log id)."""
    recorder = state.app.recorder
    head = recorder.max_notification_id() or 0
    return head < old.seen or (old.hash is not None and old.seen > 0 and recorder.hash_at(old.seen) != old.hash)


class NotConfirmed(DomainError):
    """A rebind that would stop deployers, not confirmed (the CLI exits 1, nothing done)."""


def _foreign(state: State) -> list[str]:
    """The running deployers a rebind would stop, found without changing anything (no log is made)."""

    if not (state.home.runtime / "runtime.db").exists():
        return []

    app = state.app if state.store_has_log() else None
    writers = log_ids_by_position(app) if app is not None else None
    runtime = LocalRuntime(state.home.path)
    try:
        return [row.name for row in runtime.active() if not _made_for(row, app, writers)]
    finally:
        runtime.close()


def _tell_plan(state: State, foreign: list[str], was: str) -> None:
    if state.store_has_log():
        head = state.recorder.max_notification_id() or 0
        to = f"log {state.recorder.log_id()} at position {head}"
    else:
        to = f"a new, empty log in {state.store_shown()}"
    click.echo(f"would bind home {state.home.path} to {to} (was {was})")
    for name in foreign:
        click.echo(f"would stop {name}: it runs for no claim of this log")
    click.echo("would rebuild the views desired, history and audit from the log")
    click.echo("nothing changed (--dry-run)")


def _consent(foreign: list[str]) -> None:
    """Ask before stopping deployers; refuse without a terminal to ask on."""
    names = ", ".join(foreign)
    if not sys.stdin.isatty():
        raise NotConfirmed(
            f"home rebind would stop {len(foreign)} running deployer(s) ({names}): see 'rollouts home rebind"
            " --dry-run', then run it with --yes"
        )
    if not click.confirm(f"Stop {len(foreign)} running deployer(s) ({names}) and rebind?", default=False, err=True):
        raise NotConfirmed("home rebind not confirmed: nothing changed")


def _made_for(row: Any, app: Any, writers: Callable[[int], str] | None) -> bool:
    """Whether runtime row `row` was made for a claim of the log `app` holds (None: no log yet), by the log
    that wrote the claim's position (`writers`: this log, or the one it went on from)."""

    claim = claim_parts(row.claim)
    if app is None or writers is None or claim is None:
        return False
    return claim[0] == writers(claim[1]) and app.recorder.hash_at(claim[1]) == claim[2]


def _stop_foreign(runtime: Any, app: Any) -> list[str]:
    """Stop the running deployers that no claim of this log made: they belong to a history that is gone."""

    writers = log_ids_by_position(app)
    stopped = []
    for row in runtime.active():
        if _made_for(row, app, writers):
            continue
        runtime.stop(row.name, reason="stopped by home rebind: no claim of this log made it")
        stopped.append(row.name)
    return stopped
