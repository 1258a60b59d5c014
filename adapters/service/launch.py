"""What a deployer or hook starts with (DESIGN 7.2): its argv, the env stored for it, the names passed."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...domain.analysis import resolved_document
from ...domain.deployment import Deployment
from ...domain.placeholders import resolved, values_of
from ...domain.step import DEPLOYER, VERIFY

if TYPE_CHECKING:
    from ...domain.analysis import TemplateSpec
    from ...domain.spec import Spec

# A built-in provider's measurement runs as the program itself (DESIGN 7.9), with the resolved template here.
MEASURE = ["-m", "rollouts", "measure", "--resolved"]
TEMPLATE_ENV = "ROLLOUT_ANALYSIS"
TEMPLATE_NAME_ENV = "ROLLOUT_ANALYSIS_TEMPLATE"  # NAME@REVISION of the template a measurement runs

# Taken from the controller's environment for every deployer and hook; nothing else is, unless named.
INHERITED = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TERM"})
INHERITED_PREFIXES = ("LC_",)


@dataclass(frozen=True)
class Launch:
    """`env` may be stored (the spec's env, ROLLOUT_*, PWD); the values of `pass_env` never are: the
    process that spawns the deployer takes them from its own environment (the controller's)."""

    argv: list[str]
    env: dict[str, str]
    pass_env: list[str]


def inherited(names: Iterable[str]) -> list[str]:
    """Those of the controller's variable `names` that every deployer gets."""
    return sorted(n for n in names if n in INHERITED or n.startswith(INHERITED_PREFIXES))


def launch_spec(
    deployment: Deployment, controller_names: Iterable[str], cwd: str, template: TemplateSpec | None = None
) -> Launch:
    """The argv and environment of the deployment's current step, for a controller whose
    environment has `controller_names` and whose working directory is `cwd` (`template`: the analysis
    template a measurement runs, at the revision its attempt's claim fixed)."""
    spec = deployment.typed_spec()
    if deployment.step is None:
        raise ValueError(f"revision {deployment.revision} runs nothing now")
    kind, name = deployment.step.kind, deployment.step.name
    weights = spec.step_weights
    index = deployment.step.index if kind in (DEPLOYER, VERIFY) else (1 if kind == "pre" else len(weights))
    env = {
        "PWD": cwd,
        **spec.env,
        "ROLLOUT_CONFIG": deployment.config,
        "ROLLOUT_VERSION": str(deployment.revision),
        "ROLLOUT_ATTEMPT": str(deployment.attempt),
        "ROLLOUT_DEPLOYER": name,
        "ROLLOUT_STEP": str(index),  # 7.6: the step, the number of steps, and the step's weight
        "ROLLOUT_STEPS": str(len(weights)),
        "ROLLOUT_WEIGHT": str(weights[min(index, len(weights)) - 1]),
    }
    passed = sorted({*inherited(controller_names), *spec.pass_env} - set(env))
    if kind == VERIFY and template is not None:
        return measurement_launch(deployment, template, {**env, "ROLLOUT_VERIFY": str(deployment.step.try_)}, passed)
    argv = command_of(spec, kind, f"revision {deployment.revision}")
    if kind == DEPLOYER:
        return Launch(argv, env, passed)
    if kind == VERIFY:
        return Launch(argv, {**env, "ROLLOUT_VERIFY": str(deployment.step.try_)}, passed)
    return Launch(argv, {**env, "ROLLOUT_HOOK": kind}, passed)


def measurement_launch(
    deployment: Deployment, template: TemplateSpec, env: dict[str, str], passed: list[str]
) -> Launch:
    """A template's measurement, at the revision its attempt's claim fixed (template_run says what it runs)."""
    assert deployment.step is not None and deployment.step.template is not None  # a template's measurement
    name = deployment.step.template
    version = deployment.template_versions.get(name, 0)
    args = deployment.spec.get("analysis_args") or {}
    argv, extra, named = template_run(template, f"{name}@{version}", args, env)
    return Launch(argv, {**env, **extra}, sorted({*passed, *named}))


def template_run(
    template: TemplateSpec, fixed: str, given: dict[str, str], env: dict[str, str]
) -> tuple[list[str], dict[str, str], list[str]]:
    """(argv, env added, names passed) of a measurement of template `fixed` (NAME@REVISION), its placeholders
    resolved from the arguments `given` and the run's own ROLLOUT_* `env`: a `command` template runs its
    command, a built-in provider the program itself with the resolved template in ROLLOUT_ANALYSIS. What the
    template names by a variable (`*-env`) is passed from the controller's environment by name: its value
    is never stored. `audit` makes the same from the log, to hold each run to the revision its claim fixed."""
    args = values_of(template, given)
    rollout = {
        "config": env["ROLLOUT_CONFIG"],
        "version": env["ROLLOUT_VERSION"],
        "attempt": env["ROLLOUT_ATTEMPT"],
        "step": env["ROLLOUT_STEP"],
        "weight": env["ROLLOUT_WEIGHT"],
    }
    named = [n for n in (template.address_env, template.url_env, *template.header_env.values()) if n is not None]
    extra = {TEMPLATE_NAME_ENV: fixed}
    if template.provider == "command":
        return [resolved(arg, args, rollout) for arg in template.command or []], extra, named
    document = resolved_document(template, fixed, args, rollout)
    extra[TEMPLATE_ENV] = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return [sys.executable, *MEASURE], extra, named


def command_of(spec: Spec, kind: str, what: str) -> list[str]:
    """The argv a run of `kind` (deployer, verify, pre or post) starts with under `spec` (of `what`)."""
    if kind == DEPLOYER:
        return list(spec.command)
    if kind == VERIFY:
        if spec.verify is None:
            raise ValueError(f"{what} has no verification")
        return list(spec.verify)
    hook = spec.hook(kind)
    if hook is None:
        raise ValueError(f"{what} has no {kind} hook")
    return list(hook.command)
