"""`rollouts deployers ...` and `rollouts logs`: the deployer processes of the local runtime."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from ...domain import phases
from ...domain.errors import NotFound
from ...projections.history_queries import deployments
from ..runtime.local import LocalRuntime, NoSuchDeployer
from ..runtime.port import Observed, Runtime
from ..service import commands
from ..service.leases import freshest_age, lease_seconds
from . import completion
from .output import emit_json, output_option, show
from .params import name_argument
from .state import State, pass_reader, pass_state
from .stillness import Stillness
from .types import REVISION

COLUMNS = ["name", "config", "version", "attempt", "state", "exit_code", "reason", "created_at", "ended_at"]


def runtime(state: State) -> LocalRuntime:

    state.home.ensure()
    return LocalRuntime(state.home)


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

    With --all, a PRUNED column says which rows are tombstones the history
    limit pruned (their logs are gone; their names are never used again).

    \b
    Example:
      rollouts deployers list
      rollouts deployers list --all -o json
    """
    if state.backend.shared:  # the runtime's rows are the store's log's: a store that is down answers nothing (exit 5)
        state.recorder.max_notification_id()
    rt = runtime(state)
    try:
        rt.observe()
        rows = [asdict(r) for r in rt.list(include_pruned=include_pruned)]
    finally:
        rt.close()
    for row in rows:
        row["version"] = row.pop("revision")
    show(rows, [*COLUMNS, "pruned"] if include_pruned else COLUMNS, output, "No deployers.")


@deployers.command()
@click.argument("deployer", shell_complete=completion.deployers)
@pass_state
def delete(state: State, deployer: str) -> None:
    """Stop DEPLOYER's processes and keep its tombstone; the controller records it Lost.

    A deleted deployer is never created again: the deployment fails and only
    `rollout retry` starts a new attempt, with a new name.

    \b
    Example:
      rollouts deployers delete web-3-deploy-1
    """

    state.require_bound()  # a write: refused (exit 5) when the store is down or holds another log
    rt = runtime(state)
    try:
        row = rt.get(deployer)
        if row is not None and row.state in ("created", "running"):  # the stop is written before it is made (7.11)
            commands.request_stop(
                state.app, row.config, row.revision, row.attempt, deployer, "deleted by user", state.meta()
            )
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
@output_option
@pass_reader
def logs(state: State, name: str, revision: int | None, follow: bool, output: str) -> None:
    """Print the output of NAME's deployers and hooks for one version, in order.

    With -f, a `warning:` on stderr when for a lease (ROLLOUTS_LEASE_SECONDS,
    default 30) no event of the deployment came and no controller renewed
    its lease: nothing is moving it. -o json prints one document: the
    version, its phase and each deployer with its state and output (bytes
    that are not UTF-8 become U+FFFD).

    \b
    Example:
      rollouts logs web
      rollouts logs web --revision 2 -f
      rollouts logs web -o json | jq -r '.deployers[].output'
    """

    if follow and output == "json":
        raise click.UsageError("-f prints output as it comes and -o json one document at the end: choose one")

    def history(revision: int | None) -> list[dict[str, Any]]:
        return deployments(state.read("history").db("history"), name, revision)

    rows = history(revision)
    if not rows:
        raise NotFound(f"config {name!r} has no deployment yet")
    revision = rows[-1]["revision"]
    rt = runtime(state)
    try:
        if output == "json":
            _logs_document(rt, name, history(revision)[0])
        else:
            _print_logs(state, rt, name, revision, lambda: history(revision)[0] if follow else None)
    finally:
        rt.close()


def _deployers_of(rt: Runtime, name: str, revision: int) -> list[Observed]:
    return [r for r in rt.list(include_pruned=True) if r.config == name and r.revision == revision]


def _logs_document(rt: Runtime, name: str, row: dict[str, Any]) -> None:
    deployers = [
        {
            "name": r.name,
            "attempt": r.attempt,
            "state": r.state,
            "exit_code": r.exit_code,
            "pruned": r.pruned,
            "output": _read(rt.log_path(r.name)).decode(errors="replace"),
        }
        for r in _deployers_of(rt, name, row["revision"])
    ]
    emit_json({"config": name, "version": row["revision"], "phase": row["phase"], "deployers": deployers})


def _print_logs(
    state: State, rt: Runtime, name: str, revision: int, follow: Callable[[], dict[str, Any] | None]
) -> None:
    """Print each deployer's output; with `follow` (the deployment's row, re-read), until it ends."""

    still = Stillness(lease_seconds(), lambda: freshest_age(state.recorder))
    pruned = [r.name for r in _deployers_of(rt, name, revision) if r.pruned]
    if pruned:  # else the answer would be nothing at all, as for a revision whose deployers printed nothing
        click.echo(
            f"warning: {name} version {revision}: the history limit pruned the output of {', '.join(pruned)}", err=True
        )
    offsets: dict[str, int] = {}
    while True:
        row = follow()  # before printing: once it says the deployment ended, its output is whole
        for deployer in [r.name for r in _deployers_of(rt, name, revision)]:
            offsets[deployer] = _print_from(rt.log_path(deployer), offsets.get(deployer, 0))
        if row is None or row["phase"] in phases.TERMINAL:
            return
        said = still.check(row)
        if said:
            click.echo(f"warning: {name} version {revision}: {said}", err=True)
        time.sleep(0.2)


def _read(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _print_from(path: Path, offset: int) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return offset
    sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
    return offset + len(chunk)
