"""`rollouts measure TEMPLATE`: one measurement of an analysis template now, by hand; nothing is appended."""

from __future__ import annotations

import os

import click

from ..analysis.process import EXIT_CODES, json_line, line
from ..service.measure import measure as measure_once
from .output import output_option
from .state import State, pass_reader


def _pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """`--arg NAME=VALUE`, repeatable: the last value given for a NAME wins."""
    pairs: dict[str, str] = {}
    for pair in values:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r}: expected NAME=VALUE", param_hint="--arg")
        pairs[name] = value
    return pairs


@click.command()
@click.argument("template")
@click.option("--arg", "args", multiple=True, metavar="NAME=VALUE", callback=_pairs, help="An argument's value.")
@click.option("--config", metavar="NAME", help="Take arguments and {{rollout.*}} values from this config.")
@output_option
@pass_reader
def measure(state: State, template: str, args: dict[str, str], config: str | None, output: str) -> None:
    """Run one measurement of analysis template TEMPLATE now and print its
    outcome: `passed|failed|inconclusive: value V` (and why, when it is
    inconclusive); with -o json, {"outcome", "value", "error"}. Exit 0
    passed, 1 failed, 2 inconclusive. Nothing is appended to the log.

    An argument's value comes from --arg, else (with --config) the config's
    --analysis-arg, else the template's default. {{rollout.*}} placeholders
    take the config's latest deployment (its first step). Variables the
    template names (--address-env, --url-env, --header-env) are read from
    this environment and never printed.

    \b
    Example:
      rollouts measure error-rate --arg service=web
      rollouts measure error-rate --config web -o json
    """
    measurement = measure_once(state, template, args, config, os.environ)
    click.echo(json_line(measurement) if output == "json" else line(measurement))
    code = EXIT_CODES[measurement.outcome]
    if code:
        raise click.exceptions.Exit(code)
