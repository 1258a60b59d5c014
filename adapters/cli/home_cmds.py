"""`rollouts home rebind`: accepting, on the record, the log as it now is after it went back or changed."""

from __future__ import annotations

import sys

import click

from ...domain.errors import DomainError
from ..controller.loop import claimant_id
from ..service import rebind as rebinding
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

    found = rebinding.survey(state)
    if found.unreadable:
        was = "an unreadable binding"
    else:
        was = f"log {found.old.log_id} seen up to position {found.old.seen}" if found.old else "no log"
    if dry_run:
        _tell_plan(state, found.foreign, was)
        return
    if found.foreign and not yes:
        _consent(found.foreign)
    done = rebinding.rebind(state, found, claimant_id(state.home))
    if done.renamed is not None and found.old is not None:
        click.echo(
            f"log {found.old.log_id} went back: it continues as log {done.renamed} from position {found.old.seen}"
        )
    bound = done.bound
    click.echo(
        f"home {state.home.path} bound to log {bound.log_id} at position {bound.seen} (was {was}); views rebuilt"
    )
    for name in done.stopped:
        click.echo(f"stopped {name}: it runs for no claim of this log")
    if done.disowned:
        click.echo(f"{done.disowned} deployer(s) made before claims were recorded will not be adopted")


class NotConfirmed(DomainError):
    """A rebind that would stop deployers, not confirmed (the CLI exits 1, nothing done)."""


def _tell_plan(state: State, foreign: list[str], was: str) -> None:
    target = rebinding.target(state)
    to = f"a new, empty log in {state.store_shown()}" if target is None else f"log {target[0]} at position {target[1]}"
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
