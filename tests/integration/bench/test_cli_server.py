"""The bench's CLI fork server (bench/shared/cli_server.py): each command is a process of its own running the CLI."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.shared.cli_server import ForkedCli, FreshCli  # noqa: E402

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUTS_")}
    env["ROLLOUTS_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return env


@pytest.fixture
def server(tmp_path: Path, env: dict[str, str]) -> Iterator[ForkedCli]:
    forked = ForkedCli(tmp_path, env, tmp_path / "server.log")
    yield forked
    forked.close()


def fds_of(pid: int) -> list[str]:
    """What each open descriptor of `pid` names. One closed between the listing and its read is left out: the
    controller opens and closes files as it starts (a CI run failed on one), and an inherited one stays open."""
    names = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            names.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return sorted(names)


def catches(pid: int, sig: int) -> bool:
    """Whether the process has a handler for `sig` (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def wait_until(what: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not what() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def test_forked_commands_answer_as_fresh_interpreters_do(
    tmp_path: Path, env: dict[str, str], server: ForkedCli
) -> None:
    fresh = FreshCli(tmp_path, env)
    assert server.run(["config", "create", "web", "--", "true"], 60)[:3] == (0, "config web created\n", "")
    assert server.run(["rollout", "latest", "web"], 60)[:3] == (0, "1\n", "")
    for args in (["rollout", "latest", "web"], ["config", "list"], ["config", "show", "nosuch"], ["nosuch"], []):
        forked_rc, forked_out, forked_err, cpu = server.run(args, 60)
        assert (forked_rc, forked_out, forked_err) == fresh.run(args, 60)[:3], args
        assert cpu is not None and cpu > 0


def test_a_forked_command_is_a_process_of_its_own_with_only_its_own_descriptors(
    tmp_path: Path, server: ForkedCli
) -> None:
    log = tmp_path / "controller.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    child = server.spawn(["controller", "run", "--interval", "0.05"], fd, fd)
    os.close(fd)
    try:
        assert child.pid not in (os.getpid(), server.proc.pid)
        wait_until(lambda: (tmp_path / "home").exists())
        fds = fds_of(child.pid)  # type: ignore[arg-type]
        assert fds[:3] == sorted(["/dev/null", str(log), str(log)])
        assert not any(f.startswith("socket:") for f in fds)  # not the server's socket
        assert os.getpgid(child.pid) == os.getpgid(0)  # type: ignore[arg-type]  # the client's group, as Popen
        assert child.poll() is None
        wait_until(lambda: catches(child.pid, signal.SIGTERM))  # type: ignore[arg-type]
        child.terminate()  # the controller's own SIGTERM handler: it finishes the pass, exits 0
        assert child.wait(30) == 0
    finally:
        child.kill()
    assert "received signal 15" in log.read_text()


def test_kills_and_timeouts_reach_the_command(server: ForkedCli) -> None:
    child = server.spawn(["controller", "run", "--interval", "0.05"], 1, 2)
    time.sleep(0.5)
    child.kill()
    assert child.wait(30) == -signal.SIGKILL
    rc, _, err, _ = server.run(["controller", "run", "--interval", "0.05"], 1.0)
    assert rc is None and err.endswith("(killed: timed out)")


def test_closing_the_client_kills_what_still_runs(server: ForkedCli) -> None:
    child = server.spawn(["controller", "run", "--interval", "0.05"], 1, 2)
    pid = child.pid
    assert pid is not None
    server.close()
    assert server.proc.returncode == 0
    assert child.wait(5) == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
