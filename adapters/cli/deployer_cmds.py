"""`rollouts deployers ...` and `rollouts logs`: the deployer processes of the local runtime."""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from typing import Any

import click

from adapters.cli.output import output_option, show
from adapters.cli.params import name_argument
from adapters.cli.state import State, pass_reader, pass_state
from adapters.cli.types import REVISION
from domain import phases
from domain.errors import NotFound

COLUMNS = ["name", "config", "version", "attempt", "state", "exit_code", "reason", "created_at", "ended_at"]


def runtime(state: State):  # type: ignore[no-untyped-def]
    from adapters.runtime.local import LocalRuntime

    state.home.ensure()
    return LocalRuntime(state.home.path)


@click.group()
def deployers() -> None:
    """List and delete deployer processes (as `oc get pods` and `oc delete pod` would).

    \b
    Example:
      rollouts deployers list
      rollouts deployers delete web-3-deploy-1
    """


@deployers.command("list")
@click.option("--all", "include_pruned", is_flag=True, help="Include tombstones pruned by the history limit.")
@output_option
@pass_reader
def list_(state: State, include_pruned: bool, output: str) -> None:
    """List deployers: state created, running, exited, stopped, deleted or lost.

    \b
    Example:
      rollouts deployers list
      rollouts deployers list --all -o json
    """
    rt = runtime(state)
    try:
        rt.observe()
        rows = [asdict(r) for r in rt.list(include_pruned=include_pruned)]
    finally:
        rt.close()
    for row in rows:
        row["version"] = row.pop("revision")
    show(rows, COLUMNS, output, "No deployers.")


@deployers.command()
@click.argument("deployer")
@pass_state
def delete(state: State, deployer: str) -> None:
    """Stop DEPLOYER's processes and keep its tombstone; the controller records it Lost.

    A deleted deployer is never created again: the deployment fails and only
    `rollout retry` starts a new attempt, with a new name.

    \b
    Example:
      rollouts deployers delete web-3-deploy-1
    """
    from adapters.runtime.local import NoSuchDeployer

    rt = runtime(state)
    try:
        rt.delete(deployer)
    except NoSuchDeployer:
        raise NotFound(f"no deployer named {deployer!r}") from None
    finally:
        rt.close()
    click.echo(f"deployer {deployer} deleted")


@click.command()
@name_argument
@click.option("--revision", type=REVISION, help="Default: the latest version.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing output until the deployment ends.")
@pass_reader
def logs(state: State, name: str, revision: int | None, follow: bool) -> None:
    """Print the output of NAME's deployers and hooks for one version, in order.

    \b
    Example:
      rollouts logs web
      rollouts logs web --revision 2 -f
    """
    from projections.history_queries import deployments

    def history(revision: int | None) -> list[dict[str, Any]]:
        return deployments(state.read("history").db("history"), name, revision)

    rows = history(revision)
    if not rows:
        raise NotFound(f"config {name!r} has no deployment yet")
    version = rows[-1]["version"]
    rt = runtime(state)
    try:
        names = [r.name for r in rt.list(include_pruned=True) if r.config == name and r.revision == version]
        offsets = dict.fromkeys(names, 0)
        while True:
            for deployer in names:
                offsets[deployer] = _print_from(rt.log_path(deployer), offsets[deployer])
            if not follow or history(version)[0]["phase"] in phases.TERMINAL:
                break
            time.sleep(0.2)
            names = [r.name for r in rt.list(include_pruned=True) if r.config == name and r.revision == version]
            offsets = {n: offsets.get(n, 0) for n in names}
    finally:
        rt.close()


def _print_from(path, offset: int) -> int:  # type: ignore[no-untyped-def]
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return offset
    sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
    return offset + len(chunk)
