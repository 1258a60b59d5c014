"""`rollouts rollout latest`: a new version of a config's spec, or of its upstream's artifact for a stage.

A module of its own, loaded only for `latest` (the `rollout` group's lazy table): stage promotion
imports every aggregate's module, which `rollout history` and the other reads do without."""

from __future__ import annotations

import click

from ..service import promotion
from .params import existing_name_argument
from .state import State, pass_state
from .types import REVISION, TEXT


@click.command()
@existing_name_argument
@click.option("--reason", "message", type=TEXT, help="Why: kept as the deployment's message.")
@click.option("--supersede", is_flag=True, help="Cancel open deployments; the new one waits for them.")
@click.option("--queue", is_flag=True, help="Wait behind open deployments, cancelling none (one waits at most).")
@click.option("--revision", type=REVISION, help="A stage: promote this upstream revision (default: newest eligible).")
@pass_state
def latest(state: State, name: str, message: str | None, supersede: bool, queue: bool, revision: int | None) -> None:
    """Roll out NAME's current spec as a new version and print that version.

    Refused while the config is paused or its latest deployment is still
    open, unless --supersede (cancel the open ones) or --queue (wait behind
    them; a newer --queue supersedes the one waiting). A stage (config
    --from) rolls out its upstream's newest eligible revision's artifact,
    or --revision N's; none eligible: exit 1, saying why.

    \b
    Example:
      rollouts rollout latest web --reason "hotfix"
      rollouts rollout latest web --supersede
      rollouts rollout latest web --queue
      rollouts rollout latest web-prod --revision 4
    """
    meta = state.meta()
    click.echo(promotion.latest(state.app, name, message, meta, supersede=supersede, queue=queue, revision=revision))
