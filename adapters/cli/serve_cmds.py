"""`rollouts serve`: the read-only web page, JSON API and Prometheus metrics (adapters/web)."""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

import click

from .errors import internal_error
from .state import State, healing, pass_reader
from .types import Whole

if TYPE_CHECKING:  # the web stack loads only when `serve` runs
    from ..web.exposition import Exposition
    from ..web.routes import Response


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
@click.option(
    "--token-env",
    metavar="NAME",
    help="Require `Authorization: Bearer VALUE` on every request, VALUE read from environment variable NAME.",
)
@click.option("--insecure", is_flag=True, help="Serve off loopback without a token (anyone who reaches it reads all).")
@pass_reader
def serve(state: State, host: str, port: int, token_env: str | None, insecure: bool) -> None:
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
                                  &since= &after= &until= &limit=); 1,000 at most
                                  without limit, a Link header names the next page
      /metrics                    Prometheus text format

    Each request catches the views up first, as read commands do, and checks
    that the home is still bound to the store's log (503 if not); the log is
    never written. The URL is printed on stdout once the port is open. The
    pages follow the log: while a rollout runs they update themselves.

    A client idle, or slow to send its request, for 30 s is disconnected; at
    most 100 connections are open at once (past that the one idle the
    longest is closed for the newcomer).

    Off loopback (an address other than 127.0.0.0/8, ::1 or localhost) serve
    refuses to start unless given --token-env NAME (every request, /metrics
    included, then needs the bearer token; 401 without it) or --insecure.

    \b
    Example:
      rollouts serve                      # http://127.0.0.1:8008/
      rollouts serve --port 0             # a free port; the URL is on stdout
      ROLLOUTS_SERVE_TOKEN=$(openssl rand -hex 32) rollouts serve --host 0.0.0.0 --token-env ROLLOUTS_SERVE_TOKEN
    """
    from ..web import exposition, routes, server  # start-up cost: waitress, Jinja2, prometheus_client off --help

    token = _token(token_env, insecure, host, server.is_loopback(host))
    state.autocheckpoint = False  # the server checkpoints the views' WAL off its requests' path (web/checkpoints.py)
    state.read("history", "audit")  # a log this home must not read, or a broken store, fails here, before listening
    for view in exposition.ALL:  # /metrics reads where each view stands: opened and checked now, not at a scrape
        state.projections.db(view.name)
    bound = state.log_problem(state.recorder) is None
    reader = server.Reader(state, lambda s, m, t: _answer(routes, s, m, t, bound), internal_error)
    try:
        http = server.listen(host, port, reader, token)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    except (UnicodeError, ValueError):
        raise click.BadParameter(f"{host!r} is not a host name or address", param_hint="--host") from None
    if not server.is_loopback(host) and token is None:
        state.warn(f"listening on {host}: anyone who can reach it can read every config's spec and events")
    click.echo(server.url(http))
    sys.stdout.flush()
    click.echo(f"serving {server.url(http)} read-only; Ctrl-C to stop", err=True)
    server.serve_until_stopped(http, reader)
    click.echo("stopped", err=True)


def _token(token_env: str | None, insecure: bool, host: str, loopback: bool) -> bytes | None:
    """The bearer token every request must carry (read from `token_env`), or None where none is needed."""
    if token_env is not None:
        value = os.environ.get(token_env, "")
        if not value.strip():
            raise click.BadParameter(f"environment variable {token_env} is unset or empty", param_hint="--token-env")
        return value.strip().encode()
    if not insecure and not loopback:
        raise click.UsageError(
            f"serving on {host} (not loopback) needs --token-env NAME (a bearer token every request must carry)"
            " or --insecure (anyone who can reach it reads every config's spec and events)"
        )
    return None


def _answer(routes: ModuleType, state: State, metrics: Exposition, target: str, bound: bool) -> Response:
    """A request's answer; a home bound to the log at start is checked again first (a log replaced,
    rebound or gone back while serving is not shown as this home's: 503, saying why)."""
    if bound:
        problem = state.log_problem_now()
        if problem is not None:
            return routes.error(503, problem, target.startswith("/api/"))
    return healing(state, routes.answer, metrics, target)
