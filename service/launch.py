"""What a deployer or hook starts with (DESIGN 7.2): its argv, the env stored for it, the names passed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..domain.deployment import Deployment
from ..domain.step import DEPLOYER, VERIFY

if TYPE_CHECKING:
    from ..domain.spec import Spec

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


def launch_spec(deployment: Deployment, controller_names: Iterable[str], cwd: str) -> Launch:
    """The argv and environment of the deployment's current step, for a controller whose
    environment has `controller_names` and whose working directory is `cwd`."""
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
    argv = command_of(spec, kind, f"revision {deployment.revision}")
    if kind == DEPLOYER:
        return Launch(argv, env, passed)
    if kind == VERIFY:
        return Launch(argv, {**env, "ROLLOUT_VERIFY": str(deployment.step.try_)}, passed)
    return Launch(argv, {**env, "ROLLOUT_HOOK": kind}, passed)


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
