"""Analysis templates as a claim reads them (DESIGN 7.9): the template in force, and the revision and cadence
of each one an attempt's claim fixes. No validated model is loaded here: the controller claims often."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eventsourcing.application import AggregateNotFoundError

from ...domain import ids
from ...domain.analysis_template import CADENCE, AnalysisTemplate
from ...domain.errors import NotFound

if TYPE_CHECKING:
    from .deciding import DecidingApp

NO_LIMITS = {"failure_limit": 0, "inconclusive_limit": 0}


def loaded(app: DecidingApp, name: str) -> AnalysisTemplate:
    """The template `name` as the log has it now (NotFound: never created, or deleted)."""
    try:
        template: AnalysisTemplate = app.repository.get(ids.template_id(name))
    except AggregateNotFoundError:
        raise NotFound(f"analysis template {name!r} not found") from None
    if template.deleted:
        raise NotFound(f"analysis template {name!r} not found (it was deleted)")
    app.guard(template.id, template.version)  # a decision that read it is decided again if it changed
    return template


def fixed_at_claim(app: DecidingApp, names: Iterable[str]) -> list[dict[str, Any]]:
    """What an attempt's claim records of each template its spec names (DESIGN 7.9: the version is fixed at
    the claim; editing the template changes later attempts only): its revision and cadence. A template
    deleted meanwhile is fixed as revision 0, measured once: inconclusive, so a human looks."""
    fixed = []
    for name in names:
        try:
            template = loaded(app, name)
        except NotFound:
            fixed.append({"template": name, "version": 0, "count": 1, "interval": 0, **NO_LIMITS})
            continue
        cadence = {key: int(template.spec.get(key, default)) for key, default in CADENCE.items()}
        fixed.append({"template": name, "version": template.revision, **cadence})
    return fixed
