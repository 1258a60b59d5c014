"""`rollouts controller run`: the reconciler that creates and watches deployers."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import click

from ..controller.loop import PassCutShort
from ..controller.start import controller_for
from ..runtime.shim import undumpable
from ..service.leases import lease_seconds
from .state import State, pass_state
from .types import Seconds


@click.group()
def controller() -> None:
    """Run the reconciler that claims, starts, watches and stops deployers.

    \b
    Example:
      rollouts controller run --until-idle --timeout 120
    """


@controller.command()
@click.option("--once", is_flag=True, help="Make one reconcile pass and exit.")
@click.option("--until-idle", is_flag=True, help="Exit 0 once no deployment is waiting or active.")
@click.option(
    "--interval",
    type=Seconds(0.01),
    default=0.2,
    show_default=True,
    help="Seconds between passes when nothing changed.",
)
@click.option("--timeout", type=Seconds(), help="Stop after SECONDS (exit 1 with --until-idle).")
@click.option("--quiet", "-q", is_flag=True, help="Do not narrate actions on stderr.")
@pass_state
def run(state: State, once: bool, until_idle: bool, interval: float, timeout: float | None, quiet: bool) -> None:
    """Reconcile deployers with the log until stopped (SIGTERM/Ctrl-C finish the pass, exit 0; with
    --until-idle, exit 1 if not idle by then).

    Each pass catches the projections up, claims the slot for waiting
    deployments, creates deployers for committed claims, turns what the
    runtime reports into events and stops deployers that must not run.
    Running deployers outlive the controller; the next one picks them up.
    On a PostgreSQL store only for half a lease (ROLLOUTS_LEASE_SECONDS,
    30 s): then their shims stop them, so that other hosts may end the
    claims; there --interval must be below a quarter of the lease. Without
    --once it also sends notifications to the sinks of `rollouts notify add`,
    in threads of its own; --until-idle waits for them too, unless a sink is
    failing.

    \b
    Example:
      rollouts controller run                       # until Ctrl-C
      rollouts controller run --until-idle --timeout 300
      rollouts controller run --once
    """
    if once and until_idle:
        raise click.UsageError("--once and --until-idle exclude each other")

    shared = state.backend.shared  # several hosts on one log: leases, heartbeats, a home per claimant
    if shared and not once and interval >= lease_seconds() / 4:  # a heartbeat each pass, read at L/2
        raise click.BadParameter(
            f"{interval:g} s is not below a quarter of the lease ({lease_seconds():g} s, ROLLOUTS_LEASE_SECONDS):"
            " shims would stop running deployers between passes",
            param_hint="'--interval'",
        )

    undumpable()  # its environment (a store URL, what configs pass) is not its deployers' to read

    def log(text: str) -> None:
        if not quiet:
            click.echo(f"{datetime.now(UTC):%H:%M:%S} {text}", err=True)

    ctl = controller_for(state, log, notify=not once)
    try:
        code = ctl.run(once=once, until_idle=until_idle, interval=interval, timeout=timeout)
    except PassCutShort as cut:
        click.echo(f"warning: the pass committed its events, then stopped: {cut}", err=True)
        code = 0
    finally:
        ctl.runtime.close()
    if code:
        why = "stopped (SIGTERM or Ctrl-C)" if ctl.stopping.is_set() else "timed out"
        click.echo(f"error: {why} before the controller was idle", err=True)
    sys.stdout.flush()
    raise click.exceptions.Exit(code)
