"""`rollouts projections ...`: where each read model stands, and replaying them."""

from __future__ import annotations

import sys

import click

from adapters.cli.output import output_option, show
from adapters.cli.state import State, pass_reader, pass_state


@click.group()
def projections() -> None:
    """Show and rebuild the read models derived from the event log.

    \b
    Example:
      rollouts projections status
      rollouts projections rebuild history --shadow
    """


@projections.command()
@output_option
@pass_reader
def status(state: State, output: str) -> None:
    """Per projection: code and stored version, position, head of the log, lag, rows.

    \b
    Example:
      rollouts projections status -o json
    """
    rows = state.projections.status()
    show(
        rows,
        ["name", "code_version", "stored_version", "position", "head", "lag", "rows", "stale"],
        output,
        "No projections.",
    )


@projections.command()
@click.argument("names", nargs=-1)
@click.option("--shadow", is_flag=True, help="Build into a new file while the live one serves; swap at the end.")
@pass_state
def rebuild(state: State, names: tuple[str, ...], shadow: bool) -> None:
    """Replay projections NAMES (default: all) from position zero.

    \b
    Example:
      rollouts projections rebuild
      rollouts projections rebuild history audit --shadow
    """
    from projections.store import projections_named

    chosen = projections_named(names)
    state.require_bound()  # the live views of a log that went back are rebuilt only by `home rebind`
    store = state.projections
    # In place, every projection is fed from one read of the log; shadows are built one by one.
    groups = [[p] for p in chosen] if shadow else [chosen]
    for group in groups:
        head = store.source.head()
        label = ", ".join(p.name for p in group)
        if sys.stderr.isatty():
            with click.progressbar(length=max(head, 1), label=f"rebuilding {label}", file=sys.stderr) as bar:
                store.rebuild(
                    group, shadow=shadow, progress=lambda position, _, bar=bar: bar.update(position - bar.pos)
                )
        else:
            store.rebuild(group, shadow=shadow)
        for p in group:
            click.echo(f"rebuilt {p.name} to position {head}{' (shadow swap)' if shadow else ''}")
