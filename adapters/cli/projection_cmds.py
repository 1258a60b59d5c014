"""`rollouts projections ...`: where each read model stands, and replaying them."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem

from ...projections import files
from ...projections.diff import Bounded, differences
from ...projections.registry import BY_NAME
from ...projections.store import ProjectionStore, UnknownProjection, projections_named
from .output import emit_json, output_option, show, table
from .state import State, pass_reader, pass_state, require_a_log

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar


def view_completion(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The names of the read models this program keeps (here, not in completion: the registry loads
    every projection's module, which no other command's start needs)."""
    return [CompletionItem(name) for name in BY_NAME if name.startswith(incomplete)]


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
@click.argument("names", nargs=-1, shell_complete=view_completion)
@click.option("--shadow", is_flag=True, help="Build into a new file while the live one serves; swap at the end.")
@pass_state
def rebuild(state: State, names: tuple[str, ...], shadow: bool) -> None:
    """Replay projections NAMES (default: all) from position zero.

    \b
    Example:
      rollouts projections rebuild
      rollouts projections rebuild history audit --shadow
    """

    chosen = projections_named(names)
    state.refuse_making_a_log()  # a home bound to a log its store no longer holds (exit 5, as for every write)
    require_a_log(state)  # else a store with no log: a mistyped --home is not a new, empty log to rebuild (exit 4)
    state.require_bound()  # the live views of a log that went back are rebuilt only by `home rebind`
    store = state.projections
    # In place, every projection is fed from one read of the log; shadows are built one by one.
    groups = [[p] for p in chosen] if shadow else [chosen]
    for group in groups:
        head = store.source.head()
        label = ", ".join(p.name for p in group)
        if sys.stderr.isatty():
            with click.progressbar(length=max(head, 1), label=f"rebuilding {label}", file=sys.stderr) as bar:

                def progress(position: int, _: int, bar: ProgressBar[int] = bar) -> None:
                    bar.update(position - bar.pos)

                store.rebuild(group, shadow=shadow, progress=progress)
        else:
            store.rebuild(group, shadow=shadow)
        for p in group:
            click.echo(f"rebuilt {p.name} to position {head}{' (shadow swap)' if shadow else ''}")


def view_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Known view names, checked before anything opens (a usage error otherwise)."""

    try:
        projections_named(value)
    except UnknownProjection as error:
        raise click.BadParameter(str(error)) from None
    return value


@projections.command()
@click.argument("names", nargs=-1, required=True, callback=view_names, shell_complete=view_completion)
@output_option
@pass_reader
def diff(state: State, names: tuple[str, ...], output: str) -> None:
    """Compare live views NAMES with the same views rebuilt from zero; exit 1 when they differ.

    Each live view is first caught up as a read command would. Then it is
    rebuilt into a scratch folder at the very position the live one stands
    at, and the rows are compared by key. The live rows are never changed.
    After a bug in a view: fix the fold (or bump its version), run `diff` to
    see what the bug made it say, then `projections rebuild NAME --shadow`.

    \b
    Example:
      rollouts projections diff history
      rollouts projections diff desired history audit -o json
    """
    import tempfile
    from pathlib import Path

    chosen = projections_named(names)
    live = state.read(*(p.name for p in chosen))
    found = []
    for p in chosen:
        at = files.tracked(live.db(p.name), p.name)
        position = at.position if at is not None else 0  # (caught up just now: it tracks where it stands)
        with tempfile.TemporaryDirectory(prefix="rollouts-diff-") as scratch:
            rebuilt = ProjectionStore(Path(scratch), Bounded(live.source, position), warn=state.warn)
            try:
                rebuilt.rebuild([p])
                found += [d.as_dict() for d in differences(p, live.db(p.name).conn, rebuilt.db(p.name).conn)]
            finally:
                rebuilt.close()
    if output == "json":
        emit_json(found)
    elif found:
        table([_narrowed(d) for d in found], ["projection", "table", "key", "live", "rebuilt"])
    else:
        click.echo(f"no difference: {', '.join(p.name for p in chosen)} equal a rebuild from zero")
    if found:
        raise click.exceptions.Exit(1)


def _narrowed(found: dict[str, Any]) -> dict[str, Any]:
    """For a table: of a row on both sides, only the columns that differ."""
    live, rebuilt = found["live"], found["rebuilt"]
    if live is None or rebuilt is None:
        return {**found, "live": live or "(missing)", "rebuilt": rebuilt or "(missing)"}
    changed = [k for k in live if live[k] != rebuilt.get(k)]
    return {**found, "live": {k: live[k] for k in changed}, "rebuilt": {k: rebuilt.get(k) for k in changed}}
