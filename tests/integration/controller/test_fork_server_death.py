"""A controller killed with SIGKILL leaves its fork server to end quietly: no traceback anywhere."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from rollouts.adapters.runtime import forkserver
from rollouts.adapters.runtime.interpreter import module_argv

pytestmark = pytest.mark.slow  # real processes

if TYPE_CHECKING:
    from tests.conftest import Rollouts


def test_a_fork_server_whose_controller_is_gone_before_the_answer_exits_0_without_a_traceback(
    tmp_path: pathlib.Path,
) -> None:
    server = subprocess.Popen(
        module_argv("rollouts.adapters.runtime.forkserver", str(tmp_path / "runtime.db")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdout is not None and server.stdin is not None and server.stderr is not None
    assert server.stdout.readline() == forkserver.READY
    server.stdout.close()  # as a controller's death closes it: the answer below meets a broken pipe
    server.stdin.write(b"not a request\n")
    server.stdin.close()
    assert server.wait(timeout=30) is not None
    err = server.stderr.read()
    assert b"Traceback" not in err and b"Error" not in err, err.decode()
    assert server.returncode == 0


def test_sigkill_of_a_controller_leaves_no_traceback_in_its_stderr_or_the_deployer_logs(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "sh", "-c", "sleep 0.2").exit_code == 0
    for _ in range(3):
        controller = rollouts.popen("controller", "run", "--interval", "0.05", "-q")
        assert rollouts.run("rollout", "latest", "web", "--supersede").exit_code == 0
        deadline = time.monotonic() + 30
        while not any(rollouts.home.glob("runtime/logs/*.log")) and time.monotonic() < deadline:
            time.sleep(0.02)  # the fork server is up once it has forked a first shim
        os.kill(controller.pid, signal.SIGKILL)
        _, err = controller.communicate(timeout=30)  # to EOF: the fork server holds the stderr pipe until it ends
        assert "Traceback" not in err, err
    for log in rollouts.home.glob("runtime/logs/*.log"):
        assert "Traceback" not in log.read_text(), log
