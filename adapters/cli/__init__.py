"""The `rollouts` command line: a root group whose subcommands load only when used."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

import click
from click.core import ParameterSource

from .. import settings
from ..home import DEFAULT_HOME
from .errors import crash_home, run
from .lazy import LazyGroup

# command -> (module, attribute, one-line help); modules import lazily so --help stays fast.
COMMANDS = {
    "config": ("rollouts.adapters.cli.config_cmds", "config", "Create, change and show deployment configs."),
    "analysis": ("rollouts.adapters.cli.analysis_cmds", "analysis_group", "Analysis templates that steps measure."),
    "rollout": ("rollouts.adapters.cli.rollout_cmds", "rollout", "Trigger, cancel, retry, undo and watch rollouts."),
    "freeze": ("rollouts.adapters.cli.freeze_cmds", "freeze", "Stop claims of configs' deployments for a while."),
    "unfreeze": ("rollouts.adapters.cli.freeze_cmds", "unfreeze", "Lift a freeze: deployments may be claimed again."),
    "events": ("rollouts.adapters.cli.events_cmds", "events", "List the events of the log, filtered."),
    "audit": ("rollouts.adapters.cli.audit_cmds", "audit", "Check the whole history for broken invariants."),
    "home": ("rollouts.adapters.cli.home_cmds", "home", "Bind the home to the log as it is now (after a restore)."),
    "log": ("rollouts.adapters.cli.log_cmds", "log", "Verify, checkpoint, export and import the event log."),
    "projections": ("rollouts.adapters.cli.projection_cmds", "projections", "Show and rebuild the read models."),
    "controller": ("rollouts.adapters.cli.controller_cmds", "controller", "Run the reconciler that starts deployers."),
    "deployers": ("rollouts.adapters.cli.deployer_cmds", "deployers", "List and delete deployer processes."),
    "claim": ("rollouts.adapters.cli.claim_cmds", "claim", "Ask whether a deployer's claim still holds (fencing)."),
    "measure": ("rollouts.adapters.cli.measure_cmds", "measure", "Run one measurement of an analysis template now."),
    "logs": ("rollouts.adapters.cli.deployer_cmds", "logs", "Print a deployment's deployer output."),
    "notify": ("rollouts.adapters.cli.notify_cmds", "notify", "Send deployment changes to HTTP sinks, once each."),
    "serve": ("rollouts.adapters.cli.serve_cmds", "serve", "Serve a read-only page, JSON API and metrics."),
    "stages": ("rollouts.adapters.cli.stage_cmds", "stages", "Show the pipeline of stages a config belongs to."),
    "demo": ("rollouts.adapters.cli.demo", "demo", "Run a narrated end-to-end rollout session."),
}


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        user = str(os.getuid())
    return f"{user}@{os.uname().nodename}"  # (socket.gethostname(), without importing socket)


ACTOR_MAX = 256
JOINERS = frozenset("\u200c\u200d")  # zero-width (non-)joiners: in Persian and Indic names, and in emoji


def actor_problem(actor: str) -> str | None:
    """Why `actor` cannot label an event, if it cannot: it is shown in tables and lines of output, where a
    newline, an escape sequence or a direction override would let it pass for other rows."""
    if not actor.strip():  # (7.11) a blank label names nobody, and tells no two people apart
        return "is empty or only white space: give a name (or leave it out for user@host)"
    if len(actor) > ACTOR_MAX:
        return f"is {len(actor)} characters long: at most {ACTOR_MAX}"
    odd = next((c for c in actor if not c.isprintable() and c not in JOINERS), None)
    return None if odd is None else f"holds the unprintable character U+{ord(odd):04X}"


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    envvar="ROLLOUTS_HOME",
    show_envvar=True,
    default=DEFAULT_HOME,
    show_default=True,
    help="Directory holding the event store, projections and runtime.",
)
@click.option(
    "--store",
    envvar="ROLLOUTS_STORE",
    show_envvar=True,
    default=None,
    help="Event store URL: postgresql://USER[:PASSWORD]@HOST[:PORT]/DB[?schema=NAME], with libpq's sslmode,"
    " sslrootcert, sslcert, sslkey, connect_timeout, application_name, target_session_attrs or options"
    " as further parameters. Default: events.db in the home.",
)
@click.option(
    "--as",
    "actor",
    envvar="ROLLOUTS_ACTOR",
    show_envvar=True,
    default=None,
    help="Who is asking (default user@host; printable, at most 256 characters).",
)
@click.version_option("0.1.0", prog_name="rollouts")
@click.pass_context
def cli(ctx: click.Context, home: str, store: str | None, actor: str | None) -> None:
    """Rollouts: an event-sourced rollout controller that never runs a deployer twice.

    Every change is an event in an append-only log; read models are derived
    from it and a controller starts one deployer process per deployment.

    \b
    Example:
      rollouts config create web -- ./deploy.sh --fast
      rollouts rollout latest web
      rollouts controller run --until-idle
      rollouts rollout history web
    """
    from .state import (
        State,  # start-up cost: the app, stores and views load only when a command runs
    )

    settings.check()  # a bad ROLLOUTS_* value is a usage error before anything opens
    from_env = {name for name in ("home", "store") if ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT}
    if not home.strip():  # Path("") is the current directory: a log would be made wherever one stands
        if "home" in from_env:
            raise settings.BadSetting(f"ROLLOUTS_HOME={home!r}: is empty: give a directory (or leave it unset)")
        raise click.BadParameter("is empty: give a directory (or leave it unset for .rollouts)", param_hint="'--home'")
    given, actor = (
        actor,
        default_actor() if actor is None else actor,
    )  # (the default is checked too: getpass reads USER or LOGNAME first)
    problem = actor_problem(actor)
    if problem is not None:
        shown = repr(actor[:40]) + ("..." if len(actor) > 40 else "")  # (repr: escapes what it holds)
        if given is None:
            raise settings.BadSetting(f"the default actor {shown} (USER or LOGNAME @ host): {problem}: give --as")
        if ctx.get_parameter_source("actor") is ParameterSource.ENVIRONMENT:
            raise settings.BadSetting(f"ROLLOUTS_ACTOR={shown}: {problem}")
        raise click.BadParameter(problem, param_hint="'--as'")
    crash_home.set(Path(home).absolute())  # where the traceback of a bug goes, if there is one
    # a bad URL names the variable it came from, as any setting's does
    store_named = "ROLLOUTS_STORE" if "store" in from_env else "--store"
    ctx.obj = State(home=home, store=store, actor=actor, store_named=store_named)
    ctx.call_on_close(ctx.obj.close)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure becomes one `error:` line and an exit code."""
    sys.exit(run(cli, argv))
