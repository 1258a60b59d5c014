"""`rollouts config ...`: register a config, change its spec, show it, list them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from ...domain.errors import NotFound
from ...projections import audit_queries, history_queries
from ..service import documents, guards
from .as_of import as_of_option, history_at
from .output import emit_json, output_option, show
from .params import existing_name_argument, name_argument
from .rollout_views import freeze_text
from .spec_options import (
    changed_spec,
    refuse_removals,
    refuse_roles_unknown,
    spec_options,
    warn_secret_env,
)
from .state import State, pass_reader, pass_state


@click.group()
def config() -> None:
    """Create, change and show deployment configs.

    \b
    Example:
      rollouts config create web --env PORT=8080 -- ./deploy.sh
      rollouts config set web --env PORT=9090
      rollouts config show web -o json
    """


@config.command("create")
@name_argument
@spec_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_state
def create(state: State, name: str, command: tuple[str, ...], **options: Any) -> None:  # why: spec_options' values
    """Register config NAME whose deployer runs COMMAND (after `--`, no shell).

    \b
    Example:
      rollouts config create web --timeout 300 --pre-hook './migrate.sh --check' -- ./deploy.sh web
      rollouts config create api --trigger config-change -- python deploy.py
      rollouts config create db --pass-env DB_TOKEN -- ./migrate.sh   # value read at launch
    """
    refuse_removals(options)
    refuse_roles_unknown(options, state.backend.roles)
    spec = changed_spec({}, command, options)
    revision = state.app.create_config(name, spec, state.meta())
    warn_secret_env(options["env"])  # once recorded: a refused command prints its error line only
    click.echo(f"config {name} created")
    if revision:
        click.echo(f"version {revision} triggered (config change)")


@config.command("set")
@existing_name_argument
@spec_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_state
def set_(state: State, name: str, command: tuple[str, ...], **options: Any) -> None:  # why: spec_options' values
    """Change only what is given of NAME's spec; `-- CMD...` replaces the command.

    With --trigger config-change a change of what deployments run rolls out a
    new version (superseding an open one); a paused config only records it.

    \b
    Example:
      rollouts config set web --env LOG=debug --env OLD-
      rollouts config set web --pass-env API_TOKEN --pass-env OLD_TOKEN-
      rollouts config set web --pre-hook ''            # remove the pre hook
      rollouts config set web -- ./deploy.sh --v2
    """
    refuse_roles_unknown(options, state.backend.roles)
    changed, revision = state.app.set_config(
        name, lambda spec: changed_spec(spec.to_data(), command, options), state.meta()
    )
    warn_secret_env(options["env"])
    click.echo(f"config {name} {'updated' if changed else 'unchanged'}")
    if changed and state.app.config(name).pending_guard is not None:
        click.echo(f"lowering the approval guard of {name} is pending: it takes effect at `config approve {name}`")
        click.echo("by another identity; until then deployments wait for an approval as before")
    if revision:
        click.echo(f"version {revision} triggered (config change)")


@config.command("approve")
@name_argument
@pass_state
def approve(state: State, name: str) -> None:
    """Let a pending lowering of NAME's approval guard take effect.

    A `config set` that removes --require-approval or weakens
    --approval-identity waits for this, run by an identity other than the
    one who asked, as the config's current --approval-identity tells them
    apart (same identity, or nothing pending: exit 1).

    \b
    Example:
      rollouts --as alice config set web --no-require-approval
      rollouts --as bob config approve web
    """
    guard = guards.approve(state.app, name, state.meta())
    now = _approval({"require_approval": guard["require_approval"], "approval_identity": guard["approval_identity"]})
    click.echo(f"config {name}: approval {now}")


def config_rows(state: State, name: str | None = None, as_of: int | str | None = None) -> list[dict[str, Any]]:

    db = state.read("history").db("history") if as_of is None or name is None else history_at(state, name, as_of)
    moment = datetime.fromisoformat(as_of) if isinstance(as_of, str) else datetime.now(UTC)
    return history_queries.configs(db, name, moment)


@config.command("show")
@name_argument
@as_of_option
@output_option
@pass_reader
def show_(state: State, name: str, as_of: int | str | None, output: str) -> None:
    """Show NAME's spec, whether it is paused, and its latest version.

    \b
    Example:
      rollouts config show web
      rollouts config show web -o json | jq .spec.env
      rollouts config show web --as-of 340
    """
    rows = config_rows(state, name, as_of)
    if not rows:
        raise NotFound(f"config {name!r} not found")
    row = rows[0]
    audit = state.read("audit").db("audit")
    until = as_of if isinstance(as_of, int) or as_of is None else audit_queries.last_position_at(audit, as_of)
    row["pending_guard"] = guards.pending(audit, name, until)
    if output == "json":
        emit_json(documents.shown(row))
        return
    spec = row["spec"]
    lines = [
        ("Name", name),
        ("Command", json.dumps(spec["command"])),
        ("Env", json.dumps(spec["env"])),
        ("Pass env", " ".join(spec.get("pass_env", [])) or "<none>"),
        ("Timeout", f"{spec['timeout']}s"),
        ("History limit", spec["history_limit"]),
        ("Trigger", spec["trigger"]),
        ("Pre hook", _hook(spec["pre_hook"])),
        ("Post hook", _hook(spec["post_hook"])),
        ("Approval", _approval(spec)),
        *_pending_lines(row["pending_guard"]),
        *_step_lines(spec),
        ("Paused", "yes" if row["paused"] else "no"),
        ("Frozen", "; ".join(freeze_text(f) for f in row["freezes"]) or "no"),
        ("Latest version", f"{row['latest_revision']} ({row['latest_phase'] or 'none'})"),
    ]
    click.echo("\n".join(f"{k + ':':<16}{v}" for k, v in lines))


def _step_lines(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """Steps, verification and automatic rollback (7.6), shown only for a config that has some."""
    lines = []
    if spec.get("steps"):
        pause = spec.get("step_pause", 0)
        between = "manual (rollout promote)" if pause == "manual" else f"{pause}s"
        lines.append(("Steps", f"{','.join(map(str, spec['steps']))} (pause between: {between})"))
    if spec.get("verify"):
        lines.append(
            (
                "Verify",
                f"{json.dumps(spec['verify'])} x{spec['verify_count']} every {spec['verify_interval']}s"
                f" (timeout {spec['verify_timeout']}s; limits: {spec['failure_limit']} failed,"
                f" {spec['inconclusive_limit']} inconclusive)",
            )
        )
    if spec.get("analysis"):
        given = " ".join(f"{k}={v}" for k, v in sorted((spec.get("analysis_args") or {}).items()))
        lines.append(("Analysis", ", ".join(spec["analysis"]) + (f" (args: {given})" if given else "")))
    if spec.get("auto_rollback"):
        lines.append(("Auto rollback", "on"))
    return lines


def _pending_lines(pending: dict[str, Any] | None) -> list[tuple[str, str]]:
    if pending is None:
        return []
    asked = _approval(pending)
    return [
        (
            "Pending",
            f"approval {asked}, asked by {pending['actor']} (position {pending['position']}): waits for config approve",
        )
    ]


def _approval(spec: dict[str, Any]) -> str:
    if not spec["require_approval"]:
        return "not required"
    by = {"os": " by another OS user", "db": " by another database role"}.get(spec["approval_identity"], "")
    return f"required (rollout approve{by})"


def _hook(hook: dict[str, Any] | None) -> str:
    return f"{json.dumps(hook['command'])} (policy {hook['policy']})" if hook else "<none>"


@config.command("list")
@output_option
@pass_reader
def list_(state: State, output: str) -> None:
    """List every config with its latest version and phase.

    \b
    Example:
      rollouts config list
      rollouts config list -o json
    """

    rows = documents.config_list(state.read("history").db("history"), datetime.now(UTC))
    show(rows, ["name", "latest_version", "latest_phase", "paused", "frozen", "command"], output, "No configs.")
