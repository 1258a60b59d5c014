"""The spec options shared by `config create` and `config set`, and how they change a spec."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, TypeVar

import click

from adapters.cli.types import HISTORY_LIMIT, TIMEOUT

F = TypeVar("F", bound=Callable[..., Any])
POLICY = click.Choice(["abort", "retry", "ignore"])


def spec_options(f: F) -> F:
    options = [
        click.option(
            "--env", "env", multiple=True, metavar="K=V", help="Set K (repeatable; recorded in the log); K- removes it."
        ),
        click.option(
            "--pass-env",
            "pass_env",
            multiple=True,
            metavar="NAME",
            help="Pass NAME from the controller's environment at launch, never stored (repeatable); NAME- stops.",
        ),
        click.option("--timeout", type=TIMEOUT, metavar="SECONDS", help="Seconds an attempt may take, hooks included."),
        click.option("--history-limit", type=HISTORY_LIMIT, help="Keep deployers and logs of the last N versions."),
        click.option(
            "--trigger",
            type=click.Choice(["manual", "config-change"]),
            help="config-change: a spec change rolls out by itself.",
        ),
        click.option("--pre-hook", metavar="'CMD ARGS'", help="Run before the deployer ('' removes it)."),
        click.option("--pre-hook-policy", type=POLICY, help="When the pre hook fails (default abort)."),
        click.option("--post-hook", metavar="'CMD ARGS'", help="Run after the deployer succeeds ('' removes it)."),
        click.option("--post-hook-policy", type=POLICY, help="When the post hook fails (default abort)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def merged_env(env: dict[str, str], changes: tuple[str, ...]) -> dict[str, str]:
    result = dict(env)
    for change in changes:
        if "=" in change:
            key, value = change.split("=", 1)
            result[key] = value
        elif change.endswith("-") and len(change) > 1:
            result.pop(change[:-1], None)
        else:
            raise click.BadParameter(f"{change!r}: expected K=V to set or K- to remove", param_hint="--env")
    return result


def merged_pass_env(names: list[str], changes: tuple[str, ...]) -> list[str]:
    """`--pass-env NAME` adds NAME, `--pass-env NAME-` removes it; the spec validates the names."""
    result = set(names)
    for change in changes:
        if change.endswith("-") and len(change) > 1:
            result.discard(change[:-1])
        else:
            result.add(change)
    return sorted(result)


def refuse_removals(options: dict[str, Any]) -> None:
    """`config create` has nothing to remove: `--env K-` or `--pass-env NAME-` there is a mistake."""
    for flag, key, what in (("--env", "env", "K=V"), ("--pass-env", "pass_env", "NAME")):
        for change in options[key]:
            if "=" not in change and change.endswith("-") and len(change) > 1:
                raise click.BadParameter(
                    f"{change!r} removes {change[:-1]}, but a new config has nothing to remove"
                    f" (give {what}, or use `config set`)",
                    param_hint=flag,
                )


def warn_secret_env(changes: tuple[str, ...]) -> None:
    """`--env` values are in the log for ever: say so when a name looks like a secret's."""
    from domain.spec import looks_secret

    for change in changes:
        key = change.split("=", 1)[0]
        if "=" in change and looks_secret(key):
            click.echo(
                f"warning: --env {key}: the value is recorded in the event log for ever;"
                f" for a secret use --pass-env {key} (read from the controller's environment at launch)",
                err=True,
            )


def hook_change(
    current: dict[str, Any] | None, which: str, command: str | None, policy: str | None
) -> dict[str, Any] | None:
    if command is not None:
        try:
            argv = shlex.split(command)
        except ValueError as error:
            raise click.BadParameter(f"{command!r}: {error}", param_hint=f"--{which}-hook") from None
        current = {"command": argv, "policy": (current or {}).get("policy", "abort")} if argv else None
    if policy is not None:
        if current is None:
            raise click.BadParameter(
                f"there is no {which} hook to set a policy for", param_hint=f"--{which}-hook-policy"
            )
        current = {**current, "policy": policy}
    return current


def changed_spec(data: dict[str, Any], command: tuple[str, ...], options: dict[str, Any]) -> Any:
    """The spec `data` with the given options applied; a one-line error when invalid."""
    from pydantic import ValidationError

    from domain.spec import Spec

    new = dict(data)
    if command:
        new["command"] = list(command)
    new["env"] = merged_env(data.get("env", {}), options["env"])
    new["pass_env"] = merged_pass_env(data.get("pass_env", []), options["pass_env"])
    for key in ("timeout", "history_limit", "trigger"):
        if options[key] is not None:
            new[key] = options[key]
    for which in ("pre", "post"):
        new[f"{which}_hook"] = hook_change(
            data.get(f"{which}_hook"), which, options[f"{which}_hook"], options[f"{which}_hook_policy"]
        )
    try:
        return Spec.model_validate(new)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        message = first["msg"].removeprefix("Value error, ")
        if where == "pass_env":
            raise click.BadParameter(message, param_hint="--pass-env") from None
        raise click.BadParameter(f"{where}: {message}") from None
