"""`rollouts measure TEMPLATE` (DESIGN 7.9, by hand): one measurement of a template now, its arguments from
--arg, the config's `analysis_args` or the template's defaults, its rollout placeholders from the config's
latest deployment; the log is read, never appended to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from eventsourcing.application import AggregateNotFoundError

from ...domain import ids
from ...domain.analysis import TemplateSpec, resolved_document
from ...domain.analysis_template import AnalysisTemplate
from ...domain.errors import NotFound, UsageError
from ...domain.placeholders import missing_args, placeholders_of, resolved, unknown_args, values_of
from ..analysis import command, process
from ..analysis.process import Measurement

if TYPE_CHECKING:
    from .application import RolloutsApp
    from .session import Session


def measure(
    session: Session, name: str, given: Mapping[str, str], config: str | None, environ: Mapping[str, str]
) -> Measurement:
    """Measure template `name` once in this process; the variables it names are read from `environ`."""
    app = session.app
    template = template_named(app, name)
    spec = TemplateSpec.model_validate(template.spec)
    args = arguments(app, name, spec, given, config)
    rollout = rollout_values(app, name, spec, config)
    document = resolved_document(spec, f"{name}@{template.revision}", args, rollout)
    if spec.command is not None:  # the command provider: the command itself, by the exit rule of 7.6
        outcome, error = command.run([resolved(part, args, rollout) for part in spec.command], spec.timeout, environ)
        return Measurement(outcome, None, error)
    return process.measure(document, environ)


def template_named(app: RolloutsApp, name: str) -> AnalysisTemplate:
    """The template as the log has it now; NotFound when there is none, or it was deleted."""
    try:
        template = app.repository.get(ids.template_id(name))
    except AggregateNotFoundError:
        template = None
    if not isinstance(template, AnalysisTemplate) or template.deleted:
        raise NotFound(f"analysis template {name} not found")
    return template


def arguments(
    app: RolloutsApp, name: str, spec: TemplateSpec, given: Mapping[str, str], config: str | None
) -> dict[str, str]:
    """Each declared argument's value: from --arg, else the config's `analysis_args`, else its default; an
    argument the template does not declare, or one left without a value, is a usage error."""
    unknown = unknown_args(spec, given)
    if unknown:
        raise UsageError(f"analysis template {name} declares no argument {unknown[0]!r}")
    configured: dict[str, str] = {}
    if config is not None:
        found = app.config(config).spec.get("analysis_args") or {}
        configured = {key: str(value) for key, value in found.items() if key in spec.args}
    values = {**configured, **given}
    missing = missing_args(spec, values)
    if missing:
        raise UsageError(f"argument {missing[0]!r} of analysis template {name} has no value: give --arg {missing[0]}=V")
    return values_of(spec, values)


def rollout_values(app: RolloutsApp, name: str, spec: TemplateSpec, config: str | None) -> dict[str, str]:
    """The rollout placeholders' values, from the config's latest deployment at its first step; a template that
    uses them needs --config (and a config with a deployment)."""
    if not any(p.partition(".")[0] == "rollout" for p in placeholders_of(spec)):
        return {}
    if config is None:
        raise UsageError(f"analysis template {name} uses {{{{rollout.*}}}} placeholders: give --config NAME")
    found = app.config(config)
    if not found.latest_revision:
        raise NotFound(f"config {config!r} has no deployment yet: its rollout placeholders have no values")
    deployment = app.deployment(found, found.latest_revision)
    weights = deployment.spec.get("steps") or [100]
    return {
        "config": config,
        "version": str(deployment.revision),
        "attempt": str(deployment.attempt),
        "step": "1",
        "weight": str(weights[0]),
    }
