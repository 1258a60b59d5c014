"""`rollouts serve`: the read-only web page, JSON API and Prometheus metrics (adapters/web)."""

from __future__ import annotations

import sys

import click

from adapters.cli.state import State, healing, pass_reader
from adapters.cli.types import Whole


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Loopback by default; 0.0.0.0 shows every config's spec to the network.",
)
@click.option(
    "--port",
    type=Whole(0, 65535),
    default=8008,
    show_default=True,
    help="Port to listen on; 0 picks a free one (the URL is printed on stdout).",
)
@pass_reader
def serve(state: State, host: str, port: int) -> None:
    """Serve a read-only page of the configs, their timelines, history and events, a JSON API and
    Prometheus metrics, until Ctrl-C or SIGTERM (exit 0).

    \b
    Pages and endpoints (GET only; unknown paths are 404):
      /                           configs with their latest phase
      /configs/NAME               timeline (a bar per attempt), history, events
                                  (?type= &version= &actor= &since= &after= &limit=)
      /api/configs                as `config list -o json`
      /api/configs/NAME/history   as `rollout history NAME -o json` (?revision=N)
      /api/events                 as `events -o json` (?config= &version= &type= &actor=
                                  &since= &after= &until= &limit=)
      /metrics                    Prometheus text format

    Each request catches the views up first, as read commands do; the log is
    never written. The URL is printed on stdout once the port is open.

    \b
    Example:
      rollouts serve                      # http://127.0.0.1:8008/
      rollouts serve --port 0             # a free port; the URL is on stdout
      rollouts serve --host 0.0.0.0 --port 9100
    """
    from adapters.cli.errors import internal_error
    from adapters.web import routes, server

    state.read("history", "audit")  # a log this home must not read, or a broken store, fails here, before listening
    reader = server.Reader(state, lambda s, m, t: healing(s, routes.answer, m, t), internal_error)
    try:
        http = server.listen(host, port, reader)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    except UnicodeError:
        raise click.BadParameter(f"{host!r} is not a host name or address", param_hint="--host") from None
    if not server.is_loopback(host):
        state.warn(f"listening on {host}: anyone who can reach it can read every config's spec and events")
    click.echo(server.url(http))
    sys.stdout.flush()
    click.echo(f"serving {server.url(http)} read-only; Ctrl-C to stop", err=True)
    server.serve_until_stopped(http, reader)
    click.echo("stopped", err=True)
