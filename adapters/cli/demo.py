"""`rollouts demo`: the main job end to end, narrated, with real deployer processes."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from ...domain import phases
from ...projections.history_queries import latest_phase
from . import cli
from .errors import run
from .state import State

QUICK = 'echo "$GREETING from $ROLLOUT_DEPLOYER"; sleep 0.3'
STEP = 'echo "shop serves $ROLLOUT_WEIGHT% (step $ROLLOUT_STEP of $ROLLOUT_STEPS)"; sleep 0.3'  # shop has no GREETING
CHECK = 'echo "error rate $ERRORS%"; test "$ERRORS" -lt 5'  # a measurement: exit 0 passed, 1 failed
FLAKY = 'test "$ROLLOUT_ATTEMPT" -gt 1 || { echo "attempt $ROLLOUT_ATTEMPT: flaky failure"; exit 3; }; echo api up'


class Demo:
    """Runs CLI commands against one home, printing each as a user would type it."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def say(self, text: str) -> None:
        click.secho(f"\n# {text}", fg="cyan")

    def run(self, *args: str, expect: int | None = 0) -> int:

        click.secho(f"$ rollouts {shlex.join(args)}", bold=True)
        code = run(cli, ["--home", str(self.home), "--as", "demo@rollouts", *args])
        if expect is not None and code != expect:
            raise click.ClickException(f"demo step `rollouts {shlex.join(args)}` exited {code}, expected {expect}")
        return code

    def wait_for(self, name: str, phase: str, timeout: float = 15) -> None:
        """Wait until NAME's latest deployment reaches `phase` (quietly)."""

        state = State(str(self.home), None, "demo@rollouts")
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if latest_phase(state.read("history").db("history"), name) == phase:
                    return
                time.sleep(0.1)
        finally:
            state.close()
        raise click.ClickException(f"demo: {name} did not reach {phase} in {timeout}s")


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Run a narrated session: two configs, rollouts, a failure and a retry,
    a supersede, a deployer deleted by hand, a projection rebuild, a
    verification that fails and its automatic rollback, the history and an
    audit. Uses a fresh temporary home unless --home is given.

    \b
    Example:
      rollouts demo
      rollouts --home /tmp/demo-home demo && rollouts --home /tmp/demo-home events
    """
    root = ctx.find_root()
    explicit = root.get_parameter_source("home") not in (click.core.ParameterSource.DEFAULT, None)
    home = Path(root.params["home"]) if explicit else Path(tempfile.mkdtemp(prefix="rollouts-demo-")) / "home"
    if explicit and (home / "events.db").exists():
        raise click.UsageError(f"demo needs a fresh home; {home} already has an event log")
    started = time.monotonic()
    click.secho(f"Rollouts demo in {home}", bold=True)
    s = Demo(home)
    s.say("Two apps. Deployers are real processes, run with no shell around the argv.")
    s.run("config", "create", "web", "--env", "GREETING=hello", "--", "sh", "-c", QUICK)
    s.run("config", "create", "api", "--", "sh", "-c", FLAKY)
    s.say("A controller in the background claims, creates and watches deployers.")
    controller = subprocess.Popen(
        [sys.executable, "-m", "rollouts", "--home", str(home), "controller", "run", "--interval", "0.05", "-q"],
        stdin=subprocess.DEVNULL,
    )
    try:
        _story(s)
        _steps_story(s)
    finally:
        controller.terminate()
        controller.wait(timeout=30)
    s.say("The whole history, audited: no deployer twice, never two active at once.")
    s.run("rollout", "history", "web")
    s.run("events", "web", "--type", "DeployerLost")
    s.run("audit")
    click.secho(f"\nDone in {time.monotonic() - started:.1f}s. Explore: rollouts --home {home} events", bold=True)


def _steps_story(s: Demo) -> None:
    s.say("Steps and verification: each step's deployer, then measurements; a failure rolls back by itself.")
    s.run("config", "create", "shop", "--env", "ERRORS=0", "--steps", "50,100", "--verify", f"sh -c '{CHECK}'",
          "--verify-count", "2", "--verify-interval", "0", "--auto-rollback", "--", "sh", "-c", STEP)  # fmt: skip
    s.run("rollout", "latest", "shop", "--reason", "shop 1.0")
    s.run("rollout", "status", "shop", "--watch", "--timeout", "15")
    s.say("Version 2 raises the error rate: its first measurement fails, and version 1's spec comes back.")
    s.run("config", "set", "shop", "--env", "ERRORS=9")
    s.run("rollout", "latest", "shop", "--reason", "shop 1.1")
    s.run("rollout", "status", "shop", "--watch", "--timeout", "15", expect=1)
    s.wait_for("shop", phases.COMPLETE)
    s.run("rollout", "history", "shop")


def _story(s: Demo) -> None:
    s.run("rollout", "latest", "web", "--reason", "first release")
    s.run("rollout", "status", "web", "--watch", "--timeout", "15")
    s.run("logs", "web")
    s.say("api's first attempt fails; a retry is the same version, next attempt, new deployer name.")
    s.run("rollout", "latest", "api")
    s.run("rollout", "status", "api", "--watch", "--timeout", "15", expect=1)
    s.run("rollout", "retry", "api")
    s.run("rollout", "status", "api", "--watch", "--timeout", "15")
    s.say("A slow rollout is superseded: the new version waits until the old deployer is stopped.")
    s.run("config", "set", "web", "--", "sh", "-c", "echo slow; sleep 30")
    s.run("rollout", "latest", "web")
    s.wait_for("web", phases.RUNNING)
    s.run("config", "set", "web", "--env", "GREETING=bonjour", "--", "sh", "-c", QUICK)
    s.run("rollout", "latest", "web", "--supersede", "--reason", "hotfix")
    s.run("rollout", "status", "web", "--watch", "--timeout", "15")
    s.say("Projections are disposable: rebuild one in a shadow file while it keeps serving.")
    s.run("projections", "rebuild", "history", "--shadow")
    s.say("A user deletes a running deployer: the deployment fails as Lost, and nothing recreates it.")
    s.run("config", "set", "web", "--", "sh", "-c", "echo long job; sleep 30")
    s.run("rollout", "latest", "web")
    s.wait_for("web", phases.RUNNING)
    s.run("deployers", "delete", "web-4-deploy-1")
    s.run("rollout", "status", "web", "--watch", "--timeout", "15", expect=1)
    s.wait_for("web", phases.FAILED)
    time.sleep(0.5)
    s.run("deployers", "list")
