"""`rollouts freeze` and `rollouts unfreeze`: stop the controller claiming a config's deployments, and let it again."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from ...projections.history_queries import config_names
from .params import iso_utc, valid_name
from .state import State, pass_state
from .types import TEXT


def _targets(names: tuple[str, ...], every: bool) -> list[str] | None:
    """The configs named, or None for --all; exactly one of the two."""
    if every and names:
        raise click.UsageError("give config NAMEs or --all, not both")
    if not every and not names:
        raise click.UsageError("give one or more config NAMEs, or --all")
    return None if every else list(names)


def _names(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(str(valid_name(ctx, param, v)) for v in values)


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...", callback=_names)
@click.option("--all", "every", is_flag=True, help="Freeze every config, those created later included.")
@click.option("--until", callback=iso_utc, metavar="ISO", help="When it ends (UTC if no offset); default: at unfreeze.")
@click.option("--reason", required=True, type=TEXT, help="Why (recorded with who froze, and shown by status).")
@pass_state
def freeze(state: State, names: tuple[str, ...], every: bool, until: str | None, reason: str) -> None:
    """Stop the controller from claiming deployments of NAMEs (or of all configs).

    A frozen config's new deployments wait in New; what already runs goes on.
    The freeze ends at --until, or when `rollouts unfreeze` lifts it. A new
    freeze of a config replaces the one in force. `rollout status` and
    `config show` say who froze it, why and until when; `audit` reports a
    claim made inside a freeze.

    \b
    Example:
      rollouts freeze web api --until 2026-12-24T18:00:00 --reason "release freeze"
      rollouts freeze --all --reason "incident 4711"
    """
    targets = _targets(names, every)
    if not reason.strip():
        raise click.BadParameter("must not be empty", param_hint="--reason")
    end = datetime.fromisoformat(until) if until else None
    state.app.freeze(targets, end, reason, datetime.now(UTC), state.meta())
    what = "every config" if targets is None else ", ".join(dict.fromkeys(targets))
    click.echo(f"frozen: {what} until {until or 'unfreeze'}")


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...", callback=_names)
@click.option("--all", "every", is_flag=True, help="Lift every freeze in force: of all configs, and of each one.")
@pass_state
def unfreeze(state: State, names: tuple[str, ...], every: bool) -> None:
    """Lift the freeze of NAMEs (or the freeze of all): their deployments may be claimed again.

    Refused (exit 1) when a config named is not frozen, or with --all when
    nothing is. `--all` lifts every freeze in force: what `freeze --all` made
    and each config's own.

    \b
    Example:
      rollouts unfreeze web api
      rollouts unfreeze --all
    """
    targets = _targets(names, every)
    app = state.app  # refused here on a log the home is not bound to, before any view is read
    if targets is None:
        app.unfreeze_every(config_names(state.read("history").db("history")), datetime.now(UTC), state.meta())
    else:
        app.unfreeze(targets, datetime.now(UTC), state.meta())
    click.echo(f"unfrozen: {'every config' if targets is None else ', '.join(dict.fromkeys(targets))}")
