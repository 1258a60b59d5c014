"""A template's measurement, as the runtime started it, held to the log (DESIGN 7.9, I8 and I9 for `audit`):
the revision it ran is the one its attempt's claim fixed, and its argv and resolved template are what that
revision and the deployment's arguments make."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...domain.analysis import TemplateSpec
from ...projections import template_queries
from .launch import TEMPLATE_ENV, TEMPLATE_NAME_ENV, inherited, template_run

if TYPE_CHECKING:
    import sqlite_utils

TRACE = "an event it was started from was changed in the store, and put back"


def template_differs(
    audit: sqlite_utils.Database, spec_text: str, name: str, argv: list[str], env: dict[str, str], passed: str | None
) -> str | None:
    """Why the measurement `name` (argv, stored env, names passed) is not what the log calls for, if it is not."""
    fixed = env[TEMPLATE_NAME_ENV]
    template, _, revision = fixed.rpartition("@")
    attempt = (env.get("ROLLOUT_CONFIG", ""), int(env.get("ROLLOUT_VERSION", 0)), int(env.get("ROLLOUT_ATTEMPT", 0)))
    claimed = template_queries.claimed(audit, *attempt).get(template)
    if claimed is None or str(claimed) != revision:
        fix = "no revision" if claimed is None else f"revision {claimed}"
        return f"{name} ran analysis template {fixed} where its attempt's claim fixed {fix}: {TRACE}"
    known = template_queries.templates(audit).get(template)
    spec = None if known is None else known["revisions"].get(int(revision))
    if spec is None:
        return None  # a revision this log never held: fixed as deleted (0), run as what says so
    typed = TemplateSpec.model_validate(spec)
    wanted_argv, extra, named = template_run(typed, fixed, json.loads(spec_text).get("analysis_args") or {}, env)
    if typed.provider != "command":  # the interpreter is the controller's own, which no event names: not held
        argv, wanted_argv = argv[1:], wanted_argv[1:]
    if argv != wanted_argv or env.get(TEMPLATE_ENV) != extra.get(TEMPLATE_ENV):
        return f"{name} ran otherwise than analysis template {fixed} says: {TRACE}"
    odd = [n for n in (json.loads(passed) if passed else []) if n not in named and not inherited([n])]
    deployment_passed = json.loads(spec_text).get("pass_env") or []
    odd = [n for n in odd if n not in deployment_passed]
    if odd:
        return f"{name} ran with {', '.join(sorted(odd))} passed otherwise than the log says: {TRACE}"
    return None
