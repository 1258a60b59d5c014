"""`rollouts notify`: sinks that the controller POSTs deployment changes to, and how far each got."""

from __future__ import annotations

from typing import Any

import click

from ...domain.names import validate_name
from ...domain.notification import DEFAULT_ON, UnknownKind, parse_kinds
from ..notify.changes import ChangeReader
from ..service import sinks
from ..service.sinks import BadURL, check_url, shown
from .output import emit_json, output_option, show, table
from .params import valid_name
from .state import State, pass_reader, pass_state
from .types import TEXT


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

    if value is None:
        return DEFAULT_ON
    try:
        return parse_kinds(value)
    except UnknownKind as error:
        raise click.BadParameter(str(error).removeprefix("--on: ")) from None


def _sink_name(ctx: click.Context, param: click.Parameter, value: str) -> str:

    try:
        return validate_name(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def _url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:

    if value is None:
        return None
    try:
        return check_url(value)
    except BadURL as error:
        raise click.BadParameter(str(error).removeprefix("--url: ")) from None


def _config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:

    return valid_name(ctx, param, value)


@notify.command()
@click.argument("sink", callback=_sink_name)
@click.option(
    "--url", type=TEXT, callback=_url, help="Where to POST: an http:// or https:// URL (kept in the log as given)."
)
@click.option(
    "--url-env",
    metavar="NAME",
    help="Read the URL at each delivery from the controller's environment variable NAME (only NAME is logged).",
)
@click.option(
    "--on",
    "kinds",
    callback=_kinds,
    metavar="KINDS",
    help=(
        "Comma-separated kinds of change: triggered, running, complete, failed, paused, rollback."
        " [default: complete,failed]"
    ),
)
@click.option("--config", callback=_config, metavar="NAME", help="Only changes of this config (default: all).")
@pass_state
def add(
    state: State, sink: str, url: str | None, url_env: str | None, kinds: tuple[str, ...], config: str | None
) -> None:
    """Add a sink. It hears of changes made after now (the log's head), not before.

    Each document has position, kind, config, version, attempt, phase,
    reason, actor and timestamp. A SINK name is a DNS-1123 label.

    \b
    Example:
      rollouts notify add ops --url http://127.0.0.1:9000/hook
      rollouts notify add web-fail --url https://example.com/x --on failed --config web
      rollouts notify add chat --url-env CHAT_WEBHOOK_URL --on failed

    A URL's user and password (https://USER:PASSWORD@host/...) are sent as
    basic auth. A secret in the URL stays in the log for ever: with
    --url-env NAME the log keeps only NAME, and the controller reads the URL
    from its own environment at each delivery (unset: the delivery fails,
    is retried, and `notify status` says why).
    """

    if (url is None) == (url_env is None):
        raise click.UsageError("give --url URL or --url-env NAME (one of them)")
    if url_env is not None:
        try:
            url = sinks.by_reference(url_env)
        except sinks.BadURL as error:
            raise click.BadParameter(str(error).removeprefix("--url-env: "), param_hint="--url-env") from None
    else:
        assert url is not None  # one of them, checked above
        secrets = sinks.secrets_in(url)
        if secrets:
            state.warn(
                f"the URL has {' and '.join(secrets)}: the log keeps it for ever, and `log export` carries it;"
                " put the URL in an environment variable of the controller and give --url-env NAME instead"
            )
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

    app = state.opened_app or state.services.open_app()
    try:
        return sinks.all_sinks(app)
    finally:
        if app is not state.opened_app:
            app.close()
