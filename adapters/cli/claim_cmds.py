"""`rollouts claim check`: a deployer asks, before a side effect, whether its claim still holds."""

from __future__ import annotations

import os

import click

from ..service.claims import check as check_claim
from ..service.claims import report
from .output import output_option
from .state import State


@click.group()
def claim() -> None:
    """Ask whether a deployer's claim still holds (fencing, for deployer scripts).

    \b
    Example:
      rollouts claim check || exit 1     # in a deployer, before each side effect
    """


@claim.command()
@click.argument("claim_id", metavar="[CLAIM]", required=False)
@output_option
@click.pass_context
def check(ctx: click.Context, claim_id: str | None, output: str) -> None:
    """Exit 0 only while CLAIM is its deployment's current, unended claim and its
    claimant's lease is live by the database's clock; 1 when it is not (stop:
    another attempt may run now, or soon); 5 when the log cannot be reached
    (stop as well).

    CLAIM is LOG_ID:POSITION, by default $ROLLOUT_CLAIM, which every deployer,
    hook and measurement gets, with $ROLLOUT_HOME and $ROLLOUT_STORE (the
    store without its password: libpq's own ways supply one): the check asks
    that home and store unless --home or --store say otherwise.

    A paused host (a VM stopped, a long pause) can wake after its lease ended
    and another attempt started: its deployer acts before its watchdog stops it.
    Checking before each side effect narrows that window to the time between
    the check and the effect.

    \b
    Example:
      rollouts claim check
      rollouts claim check 6f1c0a9e2b3d4c5e6f708192a3b4c5d6:42 -o json
    """

    claim_id = claim_id or os.environ.get("ROLLOUT_CLAIM")
    if not claim_id:
        raise click.UsageError("give CLAIM (LOG_ID:POSITION) or run where ROLLOUT_CLAIM is set (in a deployer)")
    state = _state_of_the_deployer(ctx)
    code = report(claim_id, check_claim(state.backend, claim_id), output)
    if code:
        raise click.exceptions.Exit(code)


def _state_of_the_deployer(ctx: click.Context) -> State:
    """The command's State, on $ROLLOUT_HOME and $ROLLOUT_STORE unless --home or --store were given."""
    root = ctx.find_root()
    state: State = root.obj
    # A deployer's own ROLLOUT_HOME and ROLLOUT_STORE win over ROLLOUTS_HOME and ROLLOUTS_STORE (as in
    # adapters/claim_check.answer); only --home and --store on the command line win over them.
    given = click.core.ParameterSource.COMMANDLINE
    home, store = os.environ.get("ROLLOUT_HOME"), os.environ.get("ROLLOUT_STORE") or None
    use_home = home if home and root.get_parameter_source("home") != given else None
    use_store = store if store and root.get_parameter_source("store") != given else None
    if use_home is None and use_store is None:
        return state
    state.close()
    replaced = State(
        home=use_home or str(state.home.path), store=use_store or root.params.get("store"), actor=state.actor
    )
    root.obj = replaced
    root.call_on_close(replaced.close)
    return replaced
