"""DESIGN 7.2 at the command line: --pass-env, the warning on secret-looking --env names, os_user beside
actor, and what a deployer inherits besides its environment (descriptors) and the home's modes."""

from __future__ import annotations

import json
import os
import pwd
import shlex
import socket
import stat
import sys
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


@pytest.mark.parametrize("name", ["API_TOKEN", "client_secret", "DB_PASSWORD", "ssh_key", "MyKeyring"])
def test_an_env_name_that_looks_secret_warns_and_points_to_pass_env(rollouts: Rollouts, name: str) -> None:
    for command in (["config", "create", "app"], ["config", "set", "app"]):
        result = ok(rollouts.sh(*command, "--env", f"{name}=v", *(["--", "true"] if "create" in command else [])))
        [line] = result.stderr.splitlines()
        assert line.startswith("warning:") and f"--pass-env {name}" in line, result


def test_a_refused_create_with_a_secret_looking_env_name_prints_its_error_line_only(rollouts: Rollouts) -> None:
    ok(rollouts.sh("config", "create", "app", "--", "true"))
    refused = rollouts.sh("config", "create", "app", "--env", "API_TOKEN=v", "--", "true")
    assert refused.exit_code == 1 and len(refused.stderr.splitlines()) == 1 and refused.stderr.startswith("error:")


def test_an_env_name_that_does_not_look_secret_and_a_removal_do_not_warn(rollouts: Rollouts) -> None:
    assert ok(rollouts.sh("config", "create", "app", "--env", "PORT=1", "--env", "MONKEY_BUSINESS=1", "--", "true"))
    assert ok(rollouts.sh("config", "set", "app", "--env", "API_TOKEN-", "--pass-env", "API_TOKEN")).stderr == ""


def test_pass_env_adds_names_sorted_once_and_name_minus_removes_one(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "app", "--pass-env", "B_TOKEN", "--pass-env", "A_KEY", "--", "true"))
    assert as_json(rollouts.run("config", "show", "app", "-o", "json"))["spec"]["pass_env"] == ["A_KEY", "B_TOKEN"]
    assert ok(rollouts.run("config", "set", "app", "--pass-env", "A_KEY")).stdout == "config app unchanged\n"
    ok(rollouts.run("config", "set", "app", "--pass-env", "A_KEY-", "--pass-env", "C"))
    assert as_json(rollouts.run("config", "show", "app", "-o", "json"))["spec"]["pass_env"] == ["B_TOKEN", "C"]
    assert "Pass env:       B_TOKEN C" in ok(rollouts.run("config", "show", "app")).stdout


def test_undo_to_a_revision_that_passed_nothing_passes_nothing_again(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "app", "--", "true"))
    ok(rollouts.run("rollout", "latest", "app"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q"))
    ok(rollouts.run("config", "set", "app", "--pass-env", "T"))
    ok(rollouts.run("rollout", "latest", "app"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q"))
    ok(rollouts.run("rollout", "undo", "app", "--to-revision", "1"))
    assert as_json(rollouts.run("config", "show", "app", "-o", "json"))["spec"]["pass_env"] == []
    assert ok(rollouts.run("config", "set", "app", "--pass-env", "T-")).stdout == "config app unchanged\n"


def test_a_passed_value_is_read_from_the_controller_that_launches_each_deployer(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "app", "--pass-env", "T", "--", "sh", "-c", 'echo "T=$T"'))
    for value in ("first", "second"):
        ok(rollouts.run("rollout", "latest", "app"))
        ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q", env={"T": value}))
    assert ok(rollouts.sh("logs", "app", "--revision", "1")).stdout == "T=first\n"
    assert ok(rollouts.sh("logs", "app", "--revision", "2")).stdout == "T=second\n"


def test_a_config_without_pass_env_shows_an_empty_list(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "app", "--", "true"))
    assert as_json(rollouts.run("config", "show", "app", "-o", "json"))["spec"]["pass_env"] == []


def test_every_event_records_the_os_account_beside_the_actor_that_as_names(rollouts: Rollouts) -> None:
    account = f"{pwd.getpwuid(os.getuid()).pw_name}@{socket.gethostname()}"
    lie = {"USER": "mallory", "LOGNAME": "mallory", "ROLLOUTS_ACTOR": "alice@laptop"}
    ok(rollouts.sh("config", "create", "app", "--", "true", env=lie))
    ok(rollouts.sh("rollout", "latest", "app", env=lie))
    ok(rollouts.sh("--as", "robot", "controller", "run", "--until-idle", "--timeout", "60", "-q", env=lie))
    events = as_json(rollouts.sh("events", "-o", "json"))
    assert {e["actor"] for e in events} == {"alice@laptop", "robot"}
    assert {e["os_user"] for e in events} == {account}
    assert "DeployerSucceeded" in {e["type"] for e in events if e["actor"] == "robot"}  # the controller's own
    by_actor = as_json(rollouts.sh("events", "--actor", "alice@laptop", "-o", "json"))
    assert by_actor and {e["actor"] for e in by_actor} == {"alice@laptop"}
    assert as_json(rollouts.sh("events", "--actor", account, "-o", "json")) == []


def test_an_event_written_before_os_user_existed_shows_null(rollouts: Rollouts) -> None:
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.domain.spec import Spec

    app = open_app(Home(rollouts.home), None)
    app.create_config("old", Spec(command=["true"]), {"actor": "old@host", "correlation_id": "c"})
    app.close()
    [event] = as_json(rollouts.sh("events", "-o", "json"))
    assert (event["actor"], event["os_user"]) == ("old@host", None)


FDS = """import os
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
print("open:", [fd for fd in range(4096) if is_open(fd)], os.readlink("/proc/self/fd/0"))
"""


def test_a_deployer_inherits_no_descriptor_but_its_stdin_stdout_and_stderr(rollouts: Rollouts) -> None:
    fds = [sys.executable, "-c", FDS]
    ok(rollouts.sh("config", "create", "app", "--pre-hook", shlex.join(fds), "--", *fds))
    ok(rollouts.sh("rollout", "latest", "app"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q"))
    assert ok(rollouts.sh("logs", "app")).stdout.splitlines() == ["open: [0, 1, 2] /dev/null"] * 2


def test_the_home_is_private_after_a_rollout_whatever_the_umask(rollouts: Rollouts) -> None:
    umask = os.umask(0)
    try:
        ok(rollouts.sh("config", "create", "app", "--", "sh", "-c", "echo hello"))
        ok(rollouts.sh("rollout", "latest", "app"))
        ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q"))
    finally:
        os.umask(umask)
    paths = [rollouts.home, *rollouts.home.rglob("*")]
    assert any(p.name == "app-1-deploy-1.log" for p in paths)
    loose = [(str(p), oct(stat.S_IMODE(p.stat().st_mode))) for p in paths if p.stat().st_mode & 0o077]
    assert loose == []
    assert {stat.S_IMODE(p.stat().st_mode) for p in paths if p.is_dir()} == {0o700}
    assert {stat.S_IMODE(p.stat().st_mode) for p in paths if p.is_file()} == {0o600}


def test_a_deployer_is_not_given_the_controllers_working_environment_for_python(rollouts: Rollouts) -> None:
    """PYTHONPATH, as any variable not allowed, stays with the controller unless a config passes it."""
    show = [sys.executable, "-c", "import os; print(os.environ.get('PYTHONPATH'))"]
    ok(rollouts.sh("config", "create", "app", "--", *show))
    ok(rollouts.sh("config", "create", "passed", "--pass-env", "PYTHONPATH", "--", *show))
    for name in ("app", "passed"):
        ok(rollouts.sh("rollout", "latest", name))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q", env={"PYTHONPATH": "/somewhere"}))
    assert ok(rollouts.sh("logs", "app")).stdout == "None\n"
    assert ok(rollouts.sh("logs", "passed")).stdout == "/somewhere\n"
