"""The spec options shared by `config create` and `config set`, and how they change a spec."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ...domain.spec import RESERVED_PREFIX, Spec, looks_secret
from .stage_cmds import STAGE_OPTIONS, apply_stage_options, stage_options
from .types import HISTORY_LIMIT, TIMEOUT, Whole

F = TypeVar("F", bound=Callable[..., Any])
POLICY = click.Choice(["abort", "retry", "ignore"])
DAY = 86400
# The spec's fields of DESIGN 7.6 and the options that set them (an invalid value is named by its option).
STEP_OPTIONS = {
    "steps": "--steps",
    "step_pause": "--step-pause",
    "verify": "--verify",
    "verify_count": "--verify-count",
    "verify_interval": "--verify-interval",
    "verify_timeout": "--verify-timeout",
    "failure_limit": "--failure-limit",
    "inconclusive_limit": "--inconclusive-limit",
    "auto_rollback": "--auto-rollback",
    "analysis": "--analysis",
    "analysis_args": "--analysis-arg",
}


class Weights(click.ParamType):
    """`--steps W1,W2,...`: whole numbers (the spec checks their order and range); '' removes the steps."""

    name = "W1,W2,..."

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> list[int]:
        if isinstance(value, list):
            return value
        text = str(value).strip()
        if not text:
            return []
        parts = [p.strip() for p in text.split(",")]
        if not all(p.isascii() and p.isdigit() and len(p) <= 3 for p in parts):
            self.fail(f"{text[:80]!r}: expected weights like 10,50,100 (whole numbers 1..100)", param, ctx)
        return [int(p) for p in parts]


class Pause(click.ParamType):
    """`--step-pause SECONDS|manual`."""

    name = "SECONDS|manual"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        text = str(value).strip()
        if text == "manual":
            return text
        if not (text.isascii() and text.isdigit()) or int(text) > DAY:
            self.fail(f"{text[:80]!r}: expected whole seconds 0..{DAY}, or manual", param, ctx)
        return int(text)


def step_options() -> list[Callable[[F], F]]:
    """The options of DESIGN 7.6: steps, verification, automatic rollback."""
    return [
        click.option("--steps", type=Weights(), help="Roll out in steps of these weights (the last 100; '' removes)."),
        click.option(
            "--step-pause",
            type=Pause(),
            metavar=Pause.name,  # click would print the type's name upper-cased: MANUAL, which is refused
            help="Between steps: wait SECONDS, or manual (`rollout promote`).",
        ),
        click.option("--verify", metavar="'CMD ARGS'", help="Measure each step with CMD (exit 0 passed, 1 failed)."),
        click.option("--verify-count", type=Whole(1, 1000), help="Measurements per step (default 3)."),
        click.option("--verify-interval", type=Whole(0, DAY), metavar="SECONDS", help="Between measurements (10)."),
        click.option("--verify-timeout", type=Whole(1, DAY), metavar="SECONDS", help="A measurement's limit (30)."),
        click.option("--failure-limit", type=Whole(0, 1000), help="Failed measurements a step tolerates (0)."),
        click.option("--inconclusive-limit", type=Whole(0, 1000), help="Inconclusive ones before a pause (0)."),
        click.option(
            "--auto-rollback/--no-auto-rollback",
            "auto_rollback",
            default=None,
            help="Roll back to the last Complete version when a deployment fails.",
        ),
        click.option(
            "--analysis",
            multiple=True,
            metavar="TEMPLATE",
            help="Also measure each step with this analysis template (repeatable; '' removes all).",
        ),
        click.option(
            "--analysis-arg",
            "analysis_args",
            multiple=True,
            metavar="NAME=VALUE",
            help="A value for the templates' argument NAME (repeatable; NAME- removes it).",
        ),
    ]


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
        click.option(
            "--require-approval/--no-require-approval",
            "require_approval",
            default=None,
            help="Each new deployment and retry waits for `rollout approve` by another actor.",
        ),
        click.option(
            "--approval-identity",
            type=click.Choice(["label", "os", "db"]),
            help="Who counts as another approver: label (--as differs; default), os (OS user too),"
            " db (PostgreSQL role).",
        ),
        *step_options(),
        *stage_options(),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def merged_env(env: dict[str, str], changes: tuple[str, ...]) -> dict[str, str]:
    result = dict(env)
    for change in changes:
        if "=" in change:
            key, value = change.split("=", 1)
            if key.startswith(RESERVED_PREFIX):  # launch sets these last: a value here would be ignored
                raise click.BadParameter(
                    f"{key}: rollouts sets the {RESERVED_PREFIX}* variables itself", param_hint="--env"
                )
            result[key] = value
        elif change.endswith("-") and len(change) > 1:
            result.pop(change[:-1], None)
        else:
            raise click.BadParameter(f"{change!r}: expected K=V to set or K- to remove", param_hint="--env")
    return result


def merged_args(args: dict[str, str], changes: tuple[str, ...]) -> dict[str, str]:
    """`--analysis-arg NAME=VALUE` sets NAME's value, `--analysis-arg NAME-` removes it."""
    result = dict(args)
    for change in changes:
        if "=" in change:
            key, value = change.split("=", 1)
            result[key] = value
        elif change.endswith("-") and len(change) > 1:
            result.pop(change[:-1], None)
        else:
            raise click.BadParameter(
                f"{change!r}: expected NAME=VALUE, or NAME- to remove", param_hint="--analysis-arg"
            )
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


def refuse_roles_unknown(options: dict[str, Any], roles: bool) -> None:
    """`--approval-identity db` on a store with no database roles (SQLite) could never be met."""
    if options["approval_identity"] == "db" and not roles:
        raise click.BadParameter(
            "db needs a PostgreSQL store (a SQLite file has no database roles); use label or os",
            param_hint="--approval-identity",
        )


def changed_spec(data: dict[str, Any], command: tuple[str, ...], options: dict[str, Any]) -> Spec:
    """The spec `data` with the given options applied; a one-line error when invalid."""
    from pydantic import ValidationError

    new = dict(data)
    if command:
        new["command"] = list(command)
    new["env"] = merged_env(data.get("env", {}), options["env"])
    new["pass_env"] = merged_pass_env(data.get("pass_env", []), options["pass_env"])
    for key in ("timeout", "history_limit", "trigger", "require_approval", "approval_identity"):
        if options[key] is not None:
            new[key] = options[key]
    _step_changes(new, options)
    apply_stage_options(new, data, options)
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
        field = where.split(".")[0]
        if field in STEP_OPTIONS:
            raise click.BadParameter(message, param_hint=STEP_OPTIONS[field]) from None
        if field in STAGE_OPTIONS or (where == "spec" and ("stage" in message or "--from" in message)):
            raise click.BadParameter(message, param_hint=STAGE_OPTIONS.get(field, "--from")) from None
        if where == "spec" and "failure limit" in message:
            raise click.BadParameter(message, param_hint="--failure-limit") from None
        raise click.BadParameter(f"{where}: {message}") from None


def _step_changes(new: dict[str, Any], options: dict[str, Any]) -> None:
    """Apply the options of 7.6 that were given: `--steps ''` and `--verify ''` remove."""
    for key in STEP_OPTIONS:
        value = options.get(key)
        if value is None or (key in ("analysis", "analysis_args") and not value):
            continue
        if key == "analysis":
            value = None if "" in value else list(value)
        elif key == "analysis_args":
            value = merged_args(new.get("analysis_args") or {}, value) or None
        elif key == "verify":
            try:
                argv = shlex.split(value)
            except ValueError as error:
                raise click.BadParameter(f"{value!r}: {error}", param_hint="--verify") from None
            value = argv or None
        elif key == "steps":
            value = value or None
        new[key] = value
    if not new.get("analysis"):  # no template left: nothing takes arguments
        new["analysis_args"] = None
