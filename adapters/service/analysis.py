"""Analysis templates as use cases (DESIGN 7.9): create, change, delete (refused while a config names one),
read; a config's templates and arguments checked where they are given; their versions fixed at a claim."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from eventsourcing.application import AggregateNotFoundError

from ...domain import ids
from ...domain.analysis_template import AnalysisTemplate
from ...domain.errors import NotFound, UsageError
from ...domain.meta import Meta
from ...domain.placeholders import missing_args, placeholders_of
from .analysis_claim import loaded

if TYPE_CHECKING:
    from ...domain.analysis import TemplateSpec
    from ...domain.deployment import Deployment
    from ...domain.spec import Spec
    from .deciding import DecidingApp, Decision


def model() -> type[TemplateSpec]:
    """The validated model of a template: loaded only by what reads one (a config without templates, and
    every read, never pays for pydantic)."""
    from ...domain.analysis import TemplateSpec  # start-up cost: pydantic, only where a template is read

    return TemplateSpec


def template_spec(template: AnalysisTemplate) -> TemplateSpec:
    return model().model_validate(template.spec)


def at_revision(app: DecidingApp, name: str, revision: int) -> TemplateSpec:
    """The template `name` as it was at `revision` (what an attempt's claim fixed)."""
    try:
        template: AnalysisTemplate = app.repository.get(ids.template_id(name))
    except AggregateNotFoundError:
        raise NotFound(f"analysis template {name!r} not found") from None
    for version in range(template.version, 0, -1):  # (a revision is a Created or Changed event, a version any)
        past: AnalysisTemplate = app.repository.get(template.id, version=version)
        if past.revision == revision and not past.deleted:
            return template_spec(past)
    raise NotFound(f"analysis template {name!r} has no revision {revision}")


def claimed_template(app: DecidingApp, name: str, revision: int) -> TemplateSpec:
    """The template a measurement runs: at the revision its attempt's claim fixed. One deleted before the
    claim (revision 0), or since lost, is a `command` template that says so and exits 2 (inconclusive)."""
    try:
        if revision > 0:
            return at_revision(app, name, revision)
    except NotFound:
        pass
    why = f"analysis template {name} was deleted before this attempt's claim"
    return model()(provider="command", command=[sys.executable, "-c", f"print({why!r}); raise SystemExit(2)"])


def measured_template(app: DecidingApp, deployment: Deployment) -> TemplateSpec | None:
    """The template the deployment's current step measures, as its attempt's claim fixed it (None: no template)."""
    step = deployment.step
    if step is None or step.template is None:
        return None
    return claimed_template(app, step.template, deployment.template_versions.get(step.template, 0))


def create(app: DecidingApp, name: str, spec: TemplateSpec, reason: str | None, meta: Meta) -> int:
    """Record a new template (or one deleted before, again); returns its revision."""

    def decision() -> Decision[int]:
        data = spec.model_dump(mode="json", exclude_defaults=True)
        try:
            template: AnalysisTemplate = app.repository.get(ids.template_id(name))
        except AggregateNotFoundError:
            template = AnalysisTemplate(template=name, spec=data, reason=reason, meta=meta)
            return [template], template.revision
        template.recreate(data, reason, meta)
        return [template], template.revision

    return app.decide(decision)


def change(
    app: DecidingApp, name: str, changed: Callable[[TemplateSpec], TemplateSpec], reason: str | None, meta: Meta
) -> tuple[bool, int]:
    """Change the template with what was given (the rest as it is); (whether anything changed, its revision).
    A change that leaves a config naming it without a value for a declared argument is refused."""

    def decision() -> Decision[tuple[bool, int]]:
        template = loaded(app, name)
        spec = changed(template_spec(template))
        for config, given in _configs_naming(app, name):
            lacking = missing_args(spec, given)
            if lacking:
                raise UsageError(f"config {config} names {name} and gives no value for argument {lacking[0]!r}")
        if not template.change(spec.model_dump(mode="json", exclude_defaults=True), reason, meta):
            return [], (False, template.revision)
        return [template], (True, template.revision)

    return app.decide(decision)


def delete(app: DecidingApp, name: str, meta: Meta) -> None:
    """Delete a template no config names (refused while one does: its rollouts would measure nothing)."""

    def decision() -> Decision[None]:
        template = loaded(app, name)
        template.delete(meta)
        return [template], None

    return app.decide(decision)


def _configs_naming(app: DecidingApp, name: str) -> list[tuple[str, dict[str, str]]]:
    """(config, its analysis arguments) of each config whose spec names template `name` (the template keeps
    their names, changed in the same save as the config's spec: see named())."""
    template = loaded(app, name)
    return [(user, dict(app.config(user).spec.get("analysis_args") or {})) for user in template.users]


def named(app: DecidingApp, config: str, old: Spec | None, new: Spec, meta: Meta) -> list[AnalysisTemplate]:
    """Check the templates a config's new spec names (DESIGN 7.9: refused where given, never found at
    measurement time), and the templates to save with the config: each records the configs naming it, so a
    delete is refused exactly while one does. UsageError (exit 2): a template missing, an argument declared
    without a value, or an argument no template declares."""
    before = set(old.analysis or []) if old is not None else set()
    after = new.analysis or []
    given = new.analysis_args or {}
    declared: set[str] = set()
    changed: list[AnalysisTemplate] = []
    for name in after:
        try:
            template = loaded(app, name)
        except NotFound as missing:
            raise UsageError(f"--analysis: {missing}") from None
        spec = template_spec(template)
        declared |= set(spec.args)
        lacking = missing_args(spec, given)
        if lacking:
            raise UsageError(f"--analysis {name}: argument {lacking[0]!r} has no value: give --analysis-arg")
        if template.named_by(config, meta):
            changed.append(template)
    unknown = sorted(set(given) - declared)
    if unknown:
        raise UsageError(f"--analysis-arg {unknown[0]}: no template of this config declares it")
    for name in sorted(before - set(after)):
        try:
            template = app.repository.get(ids.template_id(name))
        except AggregateNotFoundError:
            continue
        if template.unnamed_by(config, meta):
            changed.append(template)
    return changed


def uses_rollout(spec: TemplateSpec) -> bool:
    """Whether the template names a rollout placeholder (a measurement by hand then needs --config)."""
    return any(p.startswith("rollout.") for p in placeholders_of(spec))
