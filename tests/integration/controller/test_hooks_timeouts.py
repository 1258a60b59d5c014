"""Hooks, timeouts, config-change triggers and the history limit, with real processes through the CLI.

Ground truth comes from the processes themselves: every step appends its
ROLLOUT_DEPLOYER and ROLLOUT_HOOK to a trace file, so a run that happened
twice, or out of order, shows there whatever the event log says.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


if TYPE_CHECKING:
    from tests.conftest import Rollouts

STEP = 'echo "$ROLLOUT_DEPLOYER ${ROLLOUT_HOOK:-none}" >> "$TRACE"\nexit "${1:-0}"\n'
# Fails on its first run only: the marker file remembers that it ran.
FLAKY = '[ -e "$0.ran" ] && code=0 || code=1\ntouch "$0.ran"\n' + STEP.replace('"${1:-0}"', "$code")


class Steps:
    """Scripts in the test's working directory and the trace they write."""

    def __init__(self, folder: Path) -> None:
        self.trace = folder / "trace"
        (folder / "step.sh").write_text(STEP)
        (folder / "flaky.sh").write_text(FLAKY)
        self.folder = folder

    def cmd(self, code: int = 0) -> str:
        return f"sh {self.folder / 'step.sh'} {code}"

    def flaky(self) -> str:
        return f"sh {self.folder / 'flaky.sh'}"

    def env(self) -> list[str]:
        return ["--env", f"TRACE={self.trace}"]

    def ran(self) -> list[tuple[str, str]]:
        """(ROLLOUT_DEPLOYER, ROLLOUT_HOOK or 'none') of every run, in order."""
        if not self.trace.exists():
            return []
        return [tuple(line.split()) for line in self.trace.read_text().splitlines()]  # type: ignore[misc]


@pytest.fixture
def steps(rollouts: Rollouts) -> Steps:
    return Steps(rollouts.cwd)


def ok(rollouts: Rollouts, *args: str) -> str:
    result = rollouts.run(*args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def control(rollouts: Rollouts) -> None:
    """A real controller process, until nothing is waiting or active."""
    result = rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q")
    assert result.exit_code == 0, result.stderr


def history(rollouts: Rollouts, name: str = "app", *more: str) -> list[dict[str, Any]]:
    return json.loads(ok(rollouts, "rollout", "history", name, *more, "-o", "json"))


def deployers(rollouts: Rollouts, *more: str) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in json.loads(ok(rollouts, "deployers", "list", *more, "-o", "json"))}


def roll_out(rollouts: Rollouts, *create: str) -> dict[str, Any]:
    """Create config `app` with `create` options, roll out version 1, run the controller; v1's history row."""
    ok(rollouts, "config", "create", "app", *create)
    ok(rollouts, "rollout", "latest", "app")
    control(rollouts)
    return history(rollouts)[-1]


def hook_options(steps: Steps, hook: str, command: str, policy: str | None) -> list[str]:
    policy_args = [f"--{hook}-hook-policy", policy] if policy else []
    return [*steps.env(), f"--{hook}-hook", command, *policy_args, "--", *steps.cmd().split()]


def ran_around(hook: str, hook_runs: list[str], deployer_ran: bool = True) -> list[tuple[str, str]]:
    """The expected trace: pre hook runs before the deployer, post hook runs after it."""
    runs = [(name, hook) for name in hook_runs]
    deployer = [("app-1-deploy-1", "none")] if deployer_ran else []
    return runs + deployer if hook == "pre" else deployer + runs


# -- hooks ---------------------------------------------------------------------------


def test_hooks_run_in_order_as_deployers_of_their_own_with_their_names_and_kinds(
    rollouts: Rollouts, steps: Steps
) -> None:
    row = roll_out(
        rollouts, *steps.env(), "--pre-hook", steps.cmd(), "--post-hook", steps.cmd(), "--", *steps.cmd().split()
    )
    assert (row["phase"], row["reason"]) == ("Complete", None)
    assert steps.ran() == [("app-1-hook-pre-1", "pre"), ("app-1-deploy-1", "none"), ("app-1-hook-post-1", "post")]
    [detail] = history(rollouts, "app", "--revision", "1")
    runs = [(s["name"], s["kind"], s["try"], s["state"], s["exit_code"]) for s in detail["steps"]]
    assert runs == [  # a run succeeds when it exits 0, as `deployers list` shows too
        ("app-1-hook-pre-1", "pre", 1, "succeeded", 0),
        ("app-1-deploy-1", "deployer", 1, "succeeded", 0),
        ("app-1-hook-post-1", "post", 1, "succeeded", 0),
    ]


@pytest.mark.parametrize("hook", ["pre", "post"])
def test_a_failing_hook_with_the_default_abort_policy_fails_the_deployment_naming_the_hook(
    rollouts: Rollouts, steps: Steps, hook: str
) -> None:
    row = roll_out(rollouts, *hook_options(steps, hook, steps.cmd(1), None))
    name = f"app-1-hook-{hook}-1"
    assert row["phase"] == "Failed"
    assert name in row["reason"]
    assert steps.ran() == ran_around(hook, [name], deployer_ran=hook == "post")
    assert ("app-1-deploy-1" in deployers(rollouts)) == (hook == "post")


@pytest.mark.parametrize("hook", ["pre", "post"])
def test_a_hook_that_keeps_failing_with_retry_runs_three_new_hook_deployers_once_each_then_fails(
    rollouts: Rollouts, steps: Steps, hook: str
) -> None:
    row = roll_out(rollouts, *hook_options(steps, hook, steps.cmd(1), "retry"))
    names = [f"app-1-hook-{hook}-1", f"app-1-hook-{hook}-1-2", f"app-1-hook-{hook}-1-3"]
    assert row["phase"] == "Failed"
    assert names[-1] in row["reason"]
    assert steps.ran() == ran_around(hook, names, deployer_ran=hook == "post")
    hooks = {n: d for n, d in deployers(rollouts).items() if "-hook-" in n}
    assert sorted(hooks) == names
    assert {(d["state"], d["exit_code"]) for d in hooks.values()} == {("exited", 1)}
    [detail] = history(rollouts, "app", "--revision", "1")
    assert [(s["name"], s["try"], s["state"]) for s in detail["steps"] if s["kind"] == hook] == [
        (n, t, "failed") for t, n in enumerate(names, 1)
    ]


@pytest.mark.parametrize("hook", ["pre", "post"])
def test_a_hook_that_fails_once_with_retry_goes_on_after_its_second_run(
    rollouts: Rollouts, steps: Steps, hook: str
) -> None:
    row = roll_out(rollouts, *hook_options(steps, hook, steps.flaky(), "retry"))
    assert (row["phase"], row["reason"]) == ("Complete", None)
    assert steps.ran() == ran_around(hook, [f"app-1-hook-{hook}-1", f"app-1-hook-{hook}-1-2"])


@pytest.mark.parametrize("hook", ["pre", "post"])
def test_a_failing_hook_with_ignore_lets_the_rollout_go_on(rollouts: Rollouts, steps: Steps, hook: str) -> None:
    row = roll_out(rollouts, *hook_options(steps, hook, steps.cmd(1), "ignore"))
    assert row["phase"] == "Complete"
    assert steps.ran() == ran_around(hook, [f"app-1-hook-{hook}-1"])
    assert deployers(rollouts)[f"app-1-hook-{hook}-1"]["exit_code"] == 1


def test_a_deployment_completed_past_an_ignored_post_hook_failure_has_no_reason(
    rollouts: Rollouts, steps: Steps
) -> None:
    row = roll_out(rollouts, *hook_options(steps, "post", steps.cmd(1), "ignore"))
    assert (row["phase"], row["reason"]) == ("Complete", None)


# -- timeouts ------------------------------------------------------------------------


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether `pid` has ended (absent or a zombie) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("where", ["pre", "deployer"])
def test_an_attempt_past_its_timeout_is_stopped_and_failed_with_timeout(
    rollouts: Rollouts, steps: Steps, where: str
) -> None:
    pidfile = rollouts.cwd / "pid"
    slow = f"echo $$ > {pidfile}; exec sleep 30"
    command = ["--pre-hook", f"sh -c '{slow}'", "--", "true"] if where == "pre" else ["--", "sh", "-c", slow]
    started = time.monotonic()
    row = roll_out(rollouts, "--timeout", "1", *command)
    assert time.monotonic() - started < 20
    assert row["phase"] == "Failed"
    assert "timeout" in row["reason"]
    name = "app-1-hook-pre-1" if where == "pre" else "app-1-deploy-1"
    record = deployers(rollouts)[name]
    assert record["state"] == "stopped"
    assert "timeout" in record["reason"]
    assert gone(int(pidfile.read_text()))
    if where == "pre":
        assert "app-1-deploy-1" not in deployers(rollouts)


# -- config-change trigger --------------------------------------------------------------


def test_config_change_trigger_rolls_out_on_create_and_on_spec_changes_only(rollouts: Rollouts) -> None:
    out = ok(rollouts, "config", "create", "app", "--trigger", "config-change", "--", "sleep", "30")
    assert "version 1 triggered (config change)" in out
    assert [(r["version"], r["cause"]) for r in history(rollouts)] == [(1, "config change")]
    assert rollouts.sh("controller", "run", "--timeout", "1", "-q").exit_code == 0  # version 1 starts, and stays
    assert deployers(rollouts)["app-1-deploy-1"]["state"] in ("created", "running")

    assert "version 2 triggered (config change)" in ok(rollouts, "config", "set", "app", "--", "true")
    before = rollouts.event_count()
    same = ok(rollouts, "config", "set", "app", "--", "true")
    assert (same.strip(), rollouts.event_count()) == ("config app unchanged", before)
    assert "triggered" not in ok(rollouts, "config", "set", "app", "--history-limit", "4")

    control(rollouts)
    rows = history(rollouts)
    assert [(r["version"], r["phase"], r["reason"], r["cause"]) for r in rows] == [
        (1, "Failed", "cancelled", "config change"),
        (2, "Complete", None, "config change"),
    ]
    assert deployers(rollouts)["app-1-deploy-1"]["state"] == "stopped"


# -- history limit --------------------------------------------------------------------


def test_history_limit_prunes_older_versions_records_and_logs_but_not_their_history(rollouts: Rollouts) -> None:
    logs = rollouts.home / "runtime" / "logs"
    roll_out(rollouts, "--history-limit", "1", "--pre-hook", "true", "--", "sh", "-c", "echo one")
    ok(rollouts, "config", "set", "app", "--", "sh", "-c", "echo two")
    ok(rollouts, "rollout", "latest", "app")
    control(rollouts)

    v1, v2 = ["app-1-hook-pre-1", "app-1-deploy-1"], ["app-2-hook-pre-1", "app-2-deploy-1"]
    assert sorted(deployers(rollouts)) == sorted(v2)
    everything = deployers(rollouts, "--all")
    assert sorted(everything) == sorted(v1 + v2)
    assert [everything[n]["pruned"] for n in v1 + v2] == [True, True, False, False]
    assert not any((logs / f"{n}.log").exists() for n in v1)
    assert (logs / "app-2-deploy-1.log").read_text() == "two\n"
    assert [(r["version"], r["phase"]) for r in history(rollouts)] == [(1, "Complete"), (2, "Complete")]

    assert "as version 3" in ok(rollouts, "rollout", "undo", "app", "--to-revision", "1")
    control(rollouts)
    assert [(r["version"], r["phase"], r["cause"]) for r in history(rollouts)] == [
        (1, "Complete", "manual"),
        (2, "Complete", "manual"),
        (3, "Complete", "rollback to 1"),
    ]
    assert ok(rollouts, "logs", "app", "--revision", "3") == "one\n"
    assert sorted(deployers(rollouts)) == ["app-3-deploy-1", "app-3-hook-pre-1"]


def test_history_limit_keeps_the_older_version_while_the_newer_one_still_runs(rollouts: Rollouts) -> None:
    roll_out(rollouts, "--history-limit", "1", "--", "true")
    ok(rollouts, "config", "set", "app", "--", "sleep", "30")
    ok(rollouts, "rollout", "latest", "app")
    try:
        assert rollouts.sh("controller", "run", "--timeout", "1.5", "-q").exit_code == 0
        assert deployers(rollouts)["app-2-deploy-1"]["state"] == "running"
        assert "app-1-deploy-1" in deployers(rollouts)
        assert (rollouts.home / "runtime" / "logs" / "app-1-deploy-1.log").exists()
    finally:
        rollouts.run("deployers", "delete", "app-2-deploy-1")
