"""`rollouts rollout ...`: the verbs of `oc rollout`, each one command appended to the log."""

from __future__ import annotations

import click

from .lazy import LazyGroup
from .params import existing_name_argument
from .state import State, pass_state
from .types import REVISION, TEXT

LATEST_HELP = "Roll out NAME's current spec as a new version and print that version."
HISTORY_HELP = "List NAME's deployments: version, phase, reason, cause, timings."
STATUS_HELP = "Print the phase of NAME's latest deployment."
# Verbs loaded from a module of their own: those that read the history view (as_of, documents, the views'
# queries), and `latest` (stage promotion: every aggregate's module).
LAZY = {
    "latest": ("rollouts.adapters.cli.rollout_latest", "latest", LATEST_HELP),
    "history": ("rollouts.adapters.cli.rollout_views", "history", HISTORY_HELP),
    "status": ("rollouts.adapters.cli.rollout_views", "status", STATUS_HELP),
}


@click.group(cls=LazyGroup, lazy=LAZY)
def rollout() -> None:
    """Trigger, cancel, retry, undo, pause and watch rollouts of a config.

    \b
    Example:
      rollouts rollout latest web --reason "ship 1.4"
      rollouts rollout status web --watch --timeout 120
      rollouts rollout undo web --to-revision 3
    """


@rollout.command()
@existing_name_argument
@pass_state
def cancel(state: State, name: str) -> None:
    """Cancel every open (New, Pending, Running) deployment of NAME.

    \b
    Example:
      rollouts rollout cancel web
    """
    revisions = state.app.cancel(name, state.meta())
    click.echo(f"cancel requested for {name} version {', '.join(map(str, revisions))}")


@rollout.command()
@existing_name_argument
@pass_state
def retry(state: State, name: str) -> None:
    """Retry NAME's Failed latest deployment: same version, next attempt.

    \b
    Example:
      rollouts rollout retry web
    """
    revision, attempt = state.app.retry(name, state.meta())
    click.echo(f"{name} version {revision} retrying as attempt {attempt}")


@rollout.command()
@existing_name_argument
@click.option("--to-revision", type=REVISION, help="Default: the last Complete before the latest.")
@pass_state
def undo(state: State, name: str, to_revision: int | None) -> None:
    """Roll NAME back: a new version with an earlier revision's spec.

    When NAME's spec already is that revision's, nothing is appended: it
    prints `skipped rollback` and exits 0, as kubectl does.

    \b
    Example:
      rollouts rollout undo web
      rollouts rollout undo web --to-revision 2
    """
    revision, source = state.app.undo(name, to_revision, state.meta())
    if revision is None:  # the spec is revision N's already: nothing appended (kubectl says the same)
        click.echo(f"{name} skipped rollback (the spec already matches revision {source})")
        return
    click.echo(f"{name} rolled back to revision {source} as version {revision}")


@rollout.command()
@existing_name_argument
@pass_state
def pause(state: State, name: str) -> None:
    """Block new rollouts of NAME (latest, undo, config change).

    \b
    Example:
      rollouts rollout pause web
    """
    state.app.pause(name, state.meta())
    click.echo(f"{name} paused")


@rollout.command()
@existing_name_argument
@pass_state
def resume(state: State, name: str) -> None:
    """Allow rollouts of NAME again (does not roll out by itself).

    \b
    Example:
      rollouts rollout resume web
    """
    state.app.resume(name, state.meta())
    click.echo(f"{name} resumed")


@rollout.command()
@existing_name_argument
@click.option("--full", is_flag=True, help="Straight to the last step (weight 100), no more verification or pause.")
@pass_state
def promote(state: State, name: str, full: bool) -> None:
    """End the pause of NAME's rollout and go on to its next step.

    A pause for a human (--step-pause manual, or measurements that were
    inconclusive too often) or a timed one; the paused step's verification
    counts as passed, and the log records who promoted it. With --full the
    rollout goes straight to its last step (weight 100) with no further
    verification or pause. Nothing paused: exit 1.

    \b
    Example:
      rollouts rollout promote web
      rollouts rollout promote web --full
    """
    revision, nxt = state.app.promote(name, full, state.meta())
    click.echo(f"{name} version {revision} promoted{' (full)' if full else ''}: {nxt}")


@rollout.command()
@existing_name_argument
@click.option("--reason", "reason", type=TEXT, help="Why: kept in the deployment's reason.")
@pass_state
def abort(state: State, name: str, reason: str | None) -> None:
    """Fail NAME's open deployment (reason `aborted`) and roll back.

    What runs is stopped as by cancel; then the last Complete version is
    rolled out again (an automatic rollback), whether or not the config has
    --auto-rollback, unless the aborted deployment is itself an automatic
    rollback; one no deployer step of which was claimed ran nothing: its
    spec is set back and no rollback runs. Nothing open: exit 1.

    \b
    Example:
      rollouts rollout abort web --reason "error rate up"
    """
    revision = state.app.abort(name, reason, state.meta())
    click.echo(f"abort requested for {name} version {revision}")


@rollout.command()
@existing_name_argument
@click.option("--revision", "revision", type=REVISION, help="The version to approve (default: the latest).")
@click.option("--version", "revision", type=REVISION, hidden=True)  # the old spelling, still accepted
@pass_state
def approve(state: State, name: str, revision: int | None) -> None:
    """Approve NAME's deployment that waits for an approval (config --require-approval).

    The approver must be another actor (--as) than the one who triggered or
    retried that attempt: the same one is refused (exit 1), as is a deployment
    that needs no approval or is not waiting for one. The approver is
    recorded in the log and shown by `rollout history --revision N`.

    \b
    Example:
      rollouts --as bob rollout approve web
      rollouts --as bob rollout approve web --revision 7
    """
    approved, attempt = state.app.approve(name, revision, state.meta())
    click.echo(f"{name} version {approved} attempt {attempt} approved by {state.actor}")
