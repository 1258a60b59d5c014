"""`rollouts analysis ...`: analysis templates (DESIGN 7.9): create, change, list, show, delete."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ...domain.errors import NotFound
from ...projections import template_queries
from ..service import analysis
from .output import emit_json, output_option, show
from .params import name_argument
from .state import State, pass_reader, pass_state
from .types import Whole

if TYPE_CHECKING:
    from ...domain.analysis import TemplateSpec

F = TypeVar("F", bound=Callable[..., Any])

DAY = 86400
# The options of a template and the spec field each sets (a value the spec refuses is named by its option).
FIELDS = {
    "provider": "--provider",
    "address": "--address",
    "address_env": "--address-env",
    "query": "--query",
    "url": "--url",
    "url_env": "--url-env",
    "method": "--method",
    "headers": "--header",
    "header_env": "--header-env",
    "body": "--body",
    "json_path": "--json-path",
    "command": "--command",
    "success": "--success",
    "failure": "--failure",
    "on_empty": "--on-empty",
    "count": "--count",
    "interval": "--interval",
    "timeout": "--timeout",
    "failure_limit": "--failure-limit",
    "inconclusive_limit": "--inconclusive-limit",
    "args": "--arg",
}


def template_options(f: F) -> F:
    options = [
        click.option("--provider", type=click.Choice(["prometheus", "http", "command"]), help="What to ask."),
        click.option("--address", metavar="URL", help="prometheus: the server (e.g. http://127.0.0.1:9090)."),
        click.option("--address-env", metavar="VAR", help="prometheus: the server's URL, read from $VAR."),
        click.option("--query", metavar="PROMQL", help="prometheus: an instant query; result is its value."),
        click.option("--url", metavar="URL", help="http: the URL to ask."),
        click.option("--url-env", metavar="VAR", help="http: the URL, read from $VAR at measurement time."),
        click.option("--method", type=click.Choice(["GET", "POST"]), help="http: the method (GET)."),
        click.option("--header", "headers", multiple=True, metavar="'K: V'", help="http: a header (repeatable)."),
        click.option("--header-env", multiple=True, metavar="K=VAR", help="http: header K's value from $VAR."),
        click.option("--body", metavar="TEXT", help="http: the request's body."),
        click.option("--json-path", metavar="'$.a.b[0]'", help="http: result is the reply's value at this path."),
        click.option("--command", metavar="'CMD ARGS'", help="command: exit 0 passed, 1 failed, else inconclusive."),
        click.option("--success", metavar="EXPR", help="Passed when EXPR holds over result (e.g. 'result < 0.01')."),
        click.option("--failure", metavar="EXPR", help="Failed when EXPR holds (else inconclusive)."),
        click.option("--on-empty", type=click.Choice(["inconclusive", "failed", "passed"]), help="No value."),
        click.option("--count", type=Whole(1, 1000), help="Measurements per step (3)."),
        click.option("--interval", type=Whole(0, DAY), metavar="SECONDS", help="Between measurements (10)."),
        click.option("--timeout", type=Whole(1, DAY), metavar="SECONDS", help="A measurement's limit (30)."),
        click.option("--failure-limit", type=Whole(0, 1000), help="Failed measurements a step tolerates (0)."),
        click.option("--inconclusive-limit", type=Whole(0, 1000), help="Inconclusive ones before a pause (0)."),
        click.option("--arg", "args", multiple=True, metavar="NAME[=DEFAULT]", help="Declare {{args.NAME}}."),
        click.option("--reason", metavar="TEXT", help="Why (recorded with the change)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.group("analysis")
def analysis_group() -> None:
    """Analysis templates: a Prometheus query, an HTTP check or a command, described once and measured by every
    step of the configs that name them (`config set NAME --analysis TEMPLATE`).

    \b
    Example:
      rollouts analysis create errors --provider prometheus --address http://127.0.0.1:9090 \\
          --query 'sum(rate(errors_total{app="{{args.app}}"}[1m]))' --arg app --success 'result < 0.5'
      rollouts config set web --analysis errors --analysis-arg app=web
      rollouts analysis show errors -o json
    """


@analysis_group.command("create")
@name_argument
@template_options
@pass_state
def create(state: State, name: str, reason: str | None, **given: object) -> None:
    """Record template NAME (revision 1).

    \b
    Example:
      rollouts analysis create health --provider http --url 'http://127.0.0.1:8080/health' \\
          --json-path '$.status' --success 'result == "ok"'
    """
    if given["provider"] is None:
        raise click.BadParameter("a template needs --provider prometheus|http|command", param_hint="--provider")
    spec = _spec({}, given)
    revision = analysis.create(state.app, name, spec, _reason(reason), state.meta())
    click.echo(f"analysis template {name} created (revision {revision})")


@analysis_group.command("set")
@name_argument
@template_options
@pass_state
def set_(state: State, name: str, reason: str | None, **given: object) -> None:
    """Change only what is given of template NAME: attempts claimed from now on measure the new revision;
    those running keep the revision their claim fixed.

    \b
    Example:
      rollouts analysis set errors --success 'result < 0.2' --reason 'tighter after v3'
    """
    changed, revision = analysis.change(
        state.app, name, lambda spec: _spec(spec.model_dump(mode="json"), given), _reason(reason), state.meta()
    )
    click.echo(f"analysis template {name} {'updated' if changed else 'unchanged'} (revision {revision})")


@analysis_group.command("delete")
@name_argument
@pass_state
def delete(state: State, name: str) -> None:
    """Delete template NAME; refused (exit 1) while a config names it.

    \b
    Example:
      rollouts config set web --analysis ''
      rollouts analysis delete errors
    """
    analysis.delete(state.app, name, state.meta())
    click.echo(f"analysis template {name} deleted")


@analysis_group.command("list")
@output_option
@pass_reader
def list_(state: State, output: str) -> None:
    """List the templates: provider, revision, and the configs that name each.

    \b
    Example:
      rollouts analysis list -o json
    """
    rows = [_row(t) for t in sorted(_templates(state).values(), key=lambda t: t["name"]) if not t["deleted"]]
    if output == "json":
        emit_json(rows)
        return
    shown = [{**r, "used_by": ", ".join(r["used_by"]) or "-"} for r in rows]
    show(shown, ["name", "provider", "revision", "used_by"], output, "No analysis templates.")


@analysis_group.command("show")
@name_argument
@output_option
@pass_reader
def show_(state: State, name: str, output: str) -> None:
    """Show template NAME: what it asks, its conditions, cadence and arguments.

    \b
    Example:
      rollouts analysis show errors
    """
    found = _templates(state).get(name)
    if found is None or found["deleted"]:
        raise NotFound(f"analysis template {name!r} not found")
    row = _row(found)
    if output == "json":
        emit_json(row)
        return
    lines = [("Name", name), ("Revision", row["revision"]), ("Used by", ", ".join(row["used_by"]) or "-")]
    shown = {k: v for k, v in row["spec"].items() if v is not None and v != {} and (k != "method" or v != "GET")}
    lines += [(key.replace("_", " ").capitalize(), json.dumps(value)) for key, value in shown.items()]
    click.echo("\n".join(f"{k + ':':<20}{v}" for k, v in lines))


def _templates(state: State) -> dict[str, dict[str, Any]]:
    return template_queries.templates(state.read("audit").db("audit"))


def _row(template: dict[str, Any]) -> dict[str, Any]:
    spec = analysis.model().model_validate(template["spec"]).model_dump(mode="json")
    return {
        "name": template["name"],
        "provider": spec["provider"],
        "revision": template["revision"],
        "spec": spec,
        "used_by": template["users"],
    }


def _reason(reason: str | None) -> str | None:
    if reason is not None and len(reason) > 2048:
        raise click.BadParameter("at most 2,048 characters", param_hint="--reason")
    return reason


def _spec(current: dict[str, Any], given: dict[str, object]) -> TemplateSpec:
    """`current` with what was given; one `error:` line (exit 2) naming the option of a value refused."""
    from pydantic import ValidationError

    data = dict(current)
    for key, value in given.items():
        if value is None or value == ():
            continue
        data[key] = _converted(key, value)
    try:
        return analysis.model().model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        message = first["msg"].removeprefix("Value error, ")
        hint = FIELDS.get(field) or ("--arg" if "placeholder" in message else None)
        raise click.BadParameter(message, param_hint=hint) from None


def _converted(key: str, value: object) -> object:
    if key == "command" and isinstance(value, str):
        try:
            return shlex.split(value) or None
        except ValueError as error:
            raise click.BadParameter(f"{value!r}: {error}", param_hint="--command") from None
    if key in ("headers", "header_env", "args") and isinstance(value, tuple):
        texts = [str(v) for v in value]
        if key == "headers":
            return dict(_pair(h, ":", "--header", "'K: V'") for h in texts)
        if key == "header_env":
            return dict(_pair(h, "=", "--header-env", "K=VAR") for h in texts)
        return {n.split("=", 1)[0]: (n.split("=", 1)[1] if "=" in n else None) for n in texts}
    return value


def _pair(text: str, separator: str, option: str, form: str) -> tuple[str, str]:
    key, found, value = text.partition(separator)
    if not found or not key.strip():
        raise click.BadParameter(f"{text[:80]!r}: expected {form}", param_hint=option)
    return key.strip(), value.strip()
