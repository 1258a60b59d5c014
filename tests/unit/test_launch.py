"""What a deployer or hook is launched with (DESIGN 7.2), decided without processes: launch_spec."""

from __future__ import annotations

from typing import Any

import pytest

from rollouts.adapters.runtime.shim import environment
from rollouts.adapters.service.launch import launch_spec
from rollouts.domain.spec import Spec
from rollouts.domain.step import Step as DeploymentStep

CONTROLLER = ["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_TIME", "TZ", "TMPDIR", "TERM"]
DECOYS = ["MY_SECRET_TOKEN", "ROLLOUTS_STORE", "PYTHONPATH", "LCX", "SHELL", "PWD", "OLDPWD"]


class Step:
    """A deployment as launch_spec reads it, at a given step."""

    def __init__(self, spec: Spec, kind: str = "deployer", name: str = "app-2-deploy-3") -> None:
        self.spec = spec
        self.config, self.revision, self.attempt = "app", 2, 3
        self.step = DeploymentStep(kind, 1, name)

    def typed_spec(self) -> Spec:
        return self.spec


def launch(spec: Spec, kind: str = "deployer", name: str = "app-2-deploy-3") -> Any:
    return launch_spec(Step(spec, kind, name), [*CONTROLLER, *DECOYS], "/work")  # type: ignore[arg-type]


def test_a_deployer_is_passed_only_the_allowed_names_and_those_its_spec_passes() -> None:
    started = launch(Spec(command=["deploy"], pass_env=["MY_SECRET_TOKEN", "NOT_THERE"]))
    assert started.argv == ["deploy"]
    assert started.pass_env == sorted([*CONTROLLER, "MY_SECRET_TOKEN", "NOT_THERE"])
    assert started.env == {
        "PWD": "/work",
        "ROLLOUT_CONFIG": "app",
        "ROLLOUT_VERSION": "2",
        "ROLLOUT_ATTEMPT": "3",
        "ROLLOUT_DEPLOYER": "app-2-deploy-3",
        "ROLLOUT_STEP": "1",
        "ROLLOUT_STEPS": "1",
        "ROLLOUT_WEIGHT": "100",
    }


def test_the_spec_env_wins_over_an_allowed_name_which_is_then_not_passed() -> None:
    started = launch(Spec(command=["deploy"], env={"PATH": "/opt/bin", "PWD": "/elsewhere", "K": "v"}))
    assert started.env["PATH"] == "/opt/bin" and started.env["K"] == "v" and started.env["PWD"] == "/elsewhere"
    assert "PATH" not in started.pass_env


def test_a_hook_gets_the_deployers_environment_with_its_own_name_and_kind() -> None:
    spec = Spec(command=["deploy"], pass_env=["T"], pre_hook={"command": ["migrate", "--check"]})
    started = launch(spec, "pre", "app-2-hook-pre-3")
    assert started.argv == ["migrate", "--check"]
    assert started.env["ROLLOUT_DEPLOYER"] == "app-2-hook-pre-3" and started.env["ROLLOUT_HOOK"] == "pre"
    assert "T" in started.pass_env and "MY_SECRET_TOKEN" not in started.pass_env


def test_the_shim_takes_the_passed_values_from_its_own_environment_and_the_stored_env_wins(
    capsys: pytest.CaptureFixture[str],
) -> None:
    own = {"A": "own", "B": "passed", "SECRET": "never"}
    assert environment({"A": "stored", "ROLLOUT_X": "1"}, ["A", "B", "C"], own) == {
        "A": "stored",
        "B": "passed",
        "ROLLOUT_X": "1",
    }
    assert capsys.readouterr().err == "rollouts shim: not in the controller's environment, not passed: C\n"


def test_a_step_deployer_and_a_measurement_are_told_their_step_weight_and_number() -> None:
    spec = Spec(command=["deploy"], steps=[20, 100], verify=["check", "--fast"])
    fake = Step(spec, "deployer", "app-2-deploy-3-step-2")
    fake.step = DeploymentStep("deployer", 1, "app-2-deploy-3-step-2", index=2)
    started = launch_spec(fake, [], "/work")  # type: ignore[arg-type]
    assert (started.env["ROLLOUT_STEP"], started.env["ROLLOUT_STEPS"], started.env["ROLLOUT_WEIGHT"]) == (
        "2",
        "2",
        "100",
    )
    fake.step = DeploymentStep("verify", 4, "app-2-verify-3-4", index=1)
    measured = launch_spec(fake, [], "/work")  # type: ignore[arg-type]
    assert measured.argv == ["check", "--fast"]
    assert measured.env["ROLLOUT_VERIFY"] == "4"
    assert measured.env["ROLLOUT_DEPLOYER"] == "app-2-verify-3-4"
    assert (measured.env["ROLLOUT_STEP"], measured.env["ROLLOUT_WEIGHT"]) == ("1", "20")
