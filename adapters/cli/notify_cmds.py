"""`rollouts notify`: sinks that the controller POSTs deployment changes to, and how far each got."""

from __future__ import annotations

from typing import Any

import click

from adapters.cli.output import emit_json, output_option, show, table
from adapters.cli.state import State, pass_reader, pass_state


@click.group()
def notify() -> None:
    """Send deployment changes to HTTP endpoints (sinks), once each, in log order.

    The controller POSTs one JSON document per matching change with the
    header `Idempotency-Key: LOG_ID:POSITION:SINK`; a failing sink is retried
    (first within 1 s, then at most 10 s apart), never skipped.

    \b
    Example:
      rollouts notify add chat --url https://hooks.example.com/rollouts --on failed
      rollouts notify status
    """


def _kinds(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    from domain.notification import DEFAULT_ON, UnknownKind, parse_kinds

    if value is None:
        return DEFAULT_ON
    try:
        return parse_kinds(value)
    except UnknownKind as error:
        raise click.BadParameter(str(error).removeprefix("--on: ")) from None


def _sink_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from domain.names import validate_name

    try:
        return validate_name(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def _url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from adapters.notify.sinks import BadURL, check_url

    try:
        return check_url(value)
    except BadURL as error:
        raise click.BadParameter(str(error).removeprefix("--url: ")) from None


def _config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from adapters.cli.params import valid_name

    return valid_name(ctx, param, value)


@notify.command()
@click.argument("sink", callback=_sink_name)
@click.option("--url", required=True, callback=_url, help="Where to POST: an http:// or https:// URL.")
@click.option(
    "--on",
    "kinds",
    callback=_kinds,
    metavar="KINDS",
    help="Comma-separated kinds of change: triggered, running, complete, failed. [default: complete,failed]",
)
@click.option("--config", callback=_config, metavar="NAME", help="Only changes of this config (default: all).")
@pass_state
def add(state: State, sink: str, url: str, kinds: tuple[str, ...], config: str | None) -> None:
    """Add a sink. It hears of changes made after now (the log's head), not before.

    Each document has position, kind, config, version, attempt, phase,
    reason, actor and timestamp. A SINK name is a DNS-1123 label.

    \b
    Example:
      rollouts notify add ops --url http://127.0.0.1:9000/hook
      rollouts notify add web-fail --url https://example.com/x --on failed --config web
    """
    from adapters.notify import sinks

    head = sinks.add(state.app, sink, url, kinds, config, state.meta())
    click.echo(f"sink {sink} added: {','.join(kinds)} of {config or 'every config'} after position {head}")


@notify.command()
@click.argument("sink", callback=_sink_name)
@pass_state
def remove(state: State, sink: str) -> None:
    """Remove a sink: nothing more is sent to it (a send in flight may still arrive).

    \b
    Example:
      rollouts notify remove ops
    """
    from adapters.notify import sinks

    sinks.remove(state.app, sink, state.meta())
    click.echo(f"sink {sink} removed")


@notify.command(name="list")
@output_option
@pass_reader
def list_(state: State, output: str) -> None:
    """List the sinks: name, URL (a password in it shown as ***), kinds of change, config.

    \b
    Example:
      rollouts notify list -o json
    """
    from adapters.notify.sinks import shown

    rows = [{"sink": s.name, "url": shown(s.url), "on": ",".join(s.on), "config": s.config} for s in _sinks(state)]
    if output == "json":
        emit_json([{**r, "on": r["on"].split(",")} for r in rows])
        return
    show(rows, ["sink", "url", "on", "config"], output, "no sinks")


@notify.command()
@output_option
@pass_reader
def status(state: State, output: str) -> None:
    """Show each sink's delivered position, its lag (matching changes not yet
    delivered) and the last error of a delivery that waits for a retry.

    \b
    Example:
      rollouts notify status -o json
    """
    from adapters.notify.changes import ChangeReader

    found = _sinks(state)
    reader = ChangeReader(state.recorder)
    head = reader.head()
    rows: list[dict[str, Any]] = []
    for s in found:
        lag = sum(1 for c in reader.changes(s.delivered, head) if s.wants(c.kind, c.config))
        rows.append({"sink": s.name, "position": s.delivered, "lag": lag, "last_error": s.last_error})
    if output == "json":
        emit_json(rows)
    elif rows:
        table(rows, ["sink", "position", "lag", "last_error"])
    else:
        click.echo("no sinks", err=True)


def _sinks(state: State) -> list[Any]:
    """The sinks as the log has them (read from the log itself: no view to be stale)."""
    from adapters.eventstore import open_app
    from adapters.notify import sinks

    app = state.__dict__.get("app") or open_app(state.home, state.store)
    try:
        return sinks.all_sinks(app)
    finally:
        if "app" not in state.__dict__:
            app.close()
