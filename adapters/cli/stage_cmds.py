"""Stages on the command line (DESIGN 7.10): the options `config create|set` take for one, how they change a
spec, and `rollouts stages NAME`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from ...domain.stage import check_env, policy_of
from ..service import stage_view
from .output import cell, emit_json, output_option, table
from .params import existing_name_argument
from .state import State, pass_reader
from .types import Whole

F = TypeVar("F", bound=Callable[..., Any])
# The spec's stage fields and the options that set them (an invalid value is named by its option).
STAGE_OPTIONS = {"upstream": "--from", "artifact": "--artifact", "soak": "--soak", "promote": "--promote"}
YEAR = 31536000
STAGES_TABLE = ["stage", "upstream", "version", "phase", "artifact", "promoted_from", "waiting"]


def stage_options() -> list[Callable[[F], F]]:
    return [
        click.option(
            "--from", "upstream", metavar="UPSTREAM", help="A stage: take the artifact from UPSTREAM ('' stops)."
        ),
        click.option("--artifact", metavar="KEY[,KEY...]", help="With --from: the env keys that are the artifact."),
        click.option("--soak", type=Whole(0, YEAR), metavar="SECONDS", help="Upstream Complete this long first (0)."),
        click.option(
            "--promote", type=click.Choice(["manual", "auto"]), help="auto: the controller promotes each eligible one."
        ),
    ]


def apply_stage_options(new: dict[str, Any], old: dict[str, Any], options: dict[str, Any]) -> None:
    """Apply the stage options given: `--from ''` makes the config no stage (its artifact keys, soak and
    promote go too). `--env` of an artifact key is refused (exit 2): its value comes from the upstream."""
    if options.get("upstream") == "":
        for key in STAGE_OPTIONS:
            new.pop(key, None)
    elif options.get("upstream") is not None:
        new["upstream"] = options["upstream"]
    if options.get("artifact") is not None:
        new["artifact"] = [k.strip() for k in options["artifact"].split(",") if k.strip()] or None
    for key in ("soak", "promote"):
        if options.get(key) is not None:
            new[key] = options[key]
    touched = [change.split("=", 1)[0] if "=" in change else change[:-1] for change in options.get("env", ())]
    policy = policy_of({**new, "artifact": new.get("artifact") or old.get("artifact")})
    check_env(policy, touched)  # (a UsageError: exit 2)


def waiting_text(wait: dict[str, Any] | None) -> str:
    """What waits upstream for a stage: `3 (soaking, 40s left)`, `3 (eligible)`, or `-`."""
    if wait is None:
        return "-"
    if wait["eligible"]:
        return f"{wait['version']} (eligible)"
    if wait["seconds_left"] is not None:
        return f"{wait['version']} (soaking, {wait['seconds_left']:.0f}s left)"
    return "-"


@click.command()
@existing_name_argument
@output_option
@pass_reader
def stages(state: State, name: str, output: str) -> None:
    """List the pipeline NAME belongs to, in order: each stage's latest version,
    phase and artifact, and the upstream version waiting for it.

    \b
    Example:
      rollouts stages web-prod
      rollouts stages web-dev -o json | jq '.[].artifact'
    """
    rows = stage_view.pipeline(state.read("history").db("history"), name, datetime.now(UTC))
    if output == "json":
        emit_json(rows)
        return
    shown = [
        {
            **row,
            "stage": row["config"],
            "upstream": row["upstream"] or "-",
            "version": row["latest_version"] or "-",
            "phase": row["phase"] or "-",
            "artifact": " ".join(f"{k}={cell(v)}" for k, v in row["artifact"].items()) or "-",
            "promoted_from": _from(row["promoted_from"]),
            "waiting": waiting_text(row["waiting"]),
        }
        for row in rows
    ]
    table(shown, STAGES_TABLE)


def _from(source: dict[str, Any] | None) -> str:
    return f"{source['config']} v{source['revision']}" if source else "-"
