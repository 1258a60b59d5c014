"""The local runtime with real processes: create, exit codes, stop, delete, loss and races."""

from __future__ import annotations

import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from rollouts.adapters.runtime import procs, shim
from rollouts.adapters.runtime.forkserver import ForkServer
from rollouts.adapters.runtime.local import (
    SHIM,
    DeployerExists,
    LocalRuntime,
    NoSuchDeployer,
    Observed,
    shim_argv,
)

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


REPO = pathlib.Path(__file__).resolve().parents[3]
NAME = "app-1-deploy-1"
ENV = {"PATH": os.environ.get("PATH", os.defpath)}
T = TypeVar("T")
SLEEP_FOREVER = ["sh", "-c", 'echo $$ $PPID > "$0"; exec sleep 30']


@pytest.fixture
def home(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "home"


@pytest.fixture
def runtime(home: pathlib.Path) -> Iterator[LocalRuntime]:
    rt = LocalRuntime(home)
    yield rt
    for row in rt.active():
        rt.stop(row.name, reason="test over", grace=0)
    rt.close()


def create(rt: LocalRuntime, argv: list[str], *, env: dict[str, str] = ENV, cwd: str = "/") -> None:
    rt.create(NAME, config="app", revision=1, attempt=1, argv=argv, env=env, cwd=cwd)


def wait_for(check: Callable[[], T], timeout: float = 5.0) -> T:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return result


def row_of(rt: LocalRuntime) -> Observed:
    found = rt.get(NAME)
    assert found is not None
    return found


def ended(rt: LocalRuntime) -> Observed:
    """The row once the deployer has ended (any state but created and running)."""
    return wait_for(lambda: (row := row_of(rt)).state not in ("created", "running") and row)


def sleeper(rt: LocalRuntime, tmp_path: pathlib.Path) -> tuple[int, int | None]:
    """A deployer that sleeps for ever, created: its pid and start time (which tell it from a reused pid)."""
    create(rt, [*SLEEP_FOREVER, str(tmp_path / "pids")])
    pid, _ = pids_of(tmp_path / "pids")
    return pid, procs.start_time_of(pid)


def stopped_for_its_heartbeat(rt: LocalRuntime, pid: int, start: int | None) -> None:
    """The deployer's row ends lost for a stale heartbeat, its process gone; then the runtime closes."""
    row = wait_for(lambda: (r := row_of(rt)).state == "lost" and r, timeout=10)
    assert "heartbeat" in (row.reason or "")
    wait_for(lambda: not procs.is_alive(pid, start))
    rt.close()


def pids_of(path: pathlib.Path) -> tuple[int, int]:
    """The deployer's pid and its parent's (the shim), as SLEEP_FOREVER wrote them."""
    text = wait_for(lambda: path.exists() and path.read_text().strip())
    pid, ppid = map(int, str(text).split())
    return pid, ppid


def test_a_command_that_succeeds_is_recorded_as_exited_with_code_0(
    runtime: LocalRuntime,
) -> None:
    create(runtime, ["sh", "-c", "echo hello"])
    row = ended(runtime)
    assert (row.state, row.exit_code, row.reason) == ("exited", 0, None)
    assert row.ended_at is not None
    assert runtime.log_path(NAME).read_text() == "hello\n"


def test_a_command_that_fails_is_recorded_with_its_exit_code(
    runtime: LocalRuntime,
) -> None:
    create(runtime, ["sh", "-c", "exit 3"])
    row = ended(runtime)
    assert (row.state, row.exit_code) == ("exited", 3)


def test_the_deployer_gets_exactly_the_env_and_cwd_it_was_given(runtime: LocalRuntime, tmp_path: pathlib.Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    script = 'echo "$GREETING"; pwd; echo "${HOME:-unset}"'
    create(runtime, ["sh", "-c", script], env={**ENV, "GREETING": "hi"}, cwd=str(workdir))
    assert ended(runtime).exit_code == 0
    assert runtime.log_path(NAME).read_text() == f"hi\n{workdir}\nunset\n"


def test_a_death_by_signal_n_is_exit_code_128_plus_n(runtime: LocalRuntime) -> None:
    create(runtime, ["sh", "-c", "kill -KILL $$"])
    row = ended(runtime)
    assert (row.state, row.exit_code) == ("exited", 128 + signal.SIGKILL)
    assert row.reason == "killed by signal 9 (SIGKILL)"


def test_a_missing_executable_exits_127_and_says_it_cannot_execute(
    runtime: LocalRuntime,
) -> None:
    create(runtime, ["no-such-deployer-binary"])
    row = ended(runtime)
    assert (row.state, row.exit_code) == ("exited", 127)
    assert row.reason is not None and row.reason.startswith("cannot execute")
    assert "no-such-deployer-binary" in runtime.log_path(NAME).read_text()


def test_signals_ignored_by_the_controller_are_not_ignored_by_the_deployer(
    runtime: LocalRuntime,
) -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        create(runtime, ["grep", "SigIgn", "/proc/self/status"])
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert ended(runtime).exit_code == 0
    assert runtime.log_path(NAME).read_text().split() == ["SigIgn:", "0" * 16]


def test_a_name_is_never_created_twice(runtime: LocalRuntime) -> None:
    create(runtime, ["true"])
    with pytest.raises(DeployerExists):
        create(runtime, ["true"])


def test_a_deleted_deployer_stays_as_a_tombstone_that_blocks_its_name(
    runtime: LocalRuntime,
) -> None:
    create(runtime, ["true"])
    ended(runtime)
    runtime.delete(NAME)
    assert row_of(runtime).state == "deleted"
    with pytest.raises(DeployerExists):
        create(runtime, ["true"])


def test_deleting_a_running_deployer_kills_its_whole_group_and_leaves_it_deleted(
    runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    script = 'sleep 30 & echo $! > "$0"; wait'
    child_file = tmp_path / "child"
    create(runtime, ["sh", "-c", script, str(child_file)])
    child = int(str(wait_for(lambda: child_file.exists() and child_file.read_text())))
    start = procs.start_time_of(child)
    runtime.delete(NAME)
    row = row_of(runtime)
    assert (row.state, row.reason) == ("deleted", "deleted by user")
    assert not procs.is_alive(child, start)


def test_deleting_a_name_that_never_existed_raises(runtime: LocalRuntime) -> None:
    with pytest.raises(NoSuchDeployer):
        runtime.delete("never-1-deploy-1")


def test_stop_ends_a_running_deployer_as_stopped_and_the_shim_does_not_overwrite_it(
    runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    create(runtime, [*SLEEP_FOREVER, str(tmp_path / "pids")])
    pid, _ = pids_of(tmp_path / "pids")
    start = procs.start_time_of(pid)
    # The deployer can write its pids before its shim records it running; stopped before that,
    # the shim kills it itself (SIGKILL, 137): wait for 'running' to test the SIGTERM path.
    wait_for(lambda: row_of(runtime).state == "running")
    runtime.stop(NAME, reason="cancelled", grace=2)
    row = row_of(runtime)
    assert (row.state, row.reason, row.exit_code) == ("stopped", "cancelled", 143)
    assert row.ended_at is not None
    assert not procs.is_alive(pid, start)


def test_stop_kills_a_deployer_that_ignores_sigterm_once_the_grace_is_over(
    runtime: LocalRuntime,
) -> None:
    create(runtime, ["sh", "-c", 'trap "" TERM; echo up; sleep 30'])
    wait_for(lambda: runtime.log_path(NAME).read_text())
    wait_for(lambda: row_of(runtime).state == "running")  # stopped before, its shim would SIGKILL it at once
    began = time.monotonic()
    runtime.stop(NAME, reason="timeout", grace=0.3)
    assert 0.3 <= time.monotonic() - began < 3
    assert row_of(runtime).state == "stopped"


def test_sigterm_to_the_shim_is_forwarded_to_the_deployer(runtime: LocalRuntime, tmp_path: pathlib.Path) -> None:
    create(runtime, [*SLEEP_FOREVER, str(tmp_path / "pids")])
    _, shim = pids_of(tmp_path / "pids")
    os.kill(shim, signal.SIGTERM)
    row = ended(runtime)
    assert (row.state, row.exit_code) == ("exited", 128 + signal.SIGTERM)


def test_the_deployer_dies_with_its_shim_even_before_anyone_observes(
    runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    create(runtime, [*SLEEP_FOREVER, str(tmp_path / "pids")])
    pid, shim = pids_of(tmp_path / "pids")
    start = procs.start_time_of(pid)
    os.kill(shim, signal.SIGKILL)
    wait_for(lambda: not procs.is_alive(pid, start))


def test_a_killed_shim_makes_observe_kill_the_deployer_group_and_report_it_lost(
    runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    script = 'sleep 30 & echo $! $PPID > "$0"; wait'
    create(runtime, ["sh", "-c", script, str(tmp_path / "pids")])
    orphan, shim = pids_of(tmp_path / "pids")
    orphan_start = procs.start_time_of(orphan)
    os.kill(shim, signal.SIGKILL)
    seen = wait_for(lambda: [o for o in runtime.observe() if o.state == "lost"])
    assert [(o.name, o.reason) for o in seen] == [(NAME, "shim vanished")]
    assert not procs.is_alive(orphan, orphan_start)
    assert runtime.active() == []


def test_a_row_whose_creator_died_before_spawning_is_reported_lost(home: pathlib.Path, runtime: LocalRuntime) -> None:
    code = (
        "import pathlib, sys\n"
        "from rollouts.adapters.runtime.local import LocalRuntime\n"
        "rt = LocalRuntime(pathlib.Path(sys.argv[1]))\n"
        "rt._spawn = lambda name: None  # the creator dies between commit and spawn\n"
        f"rt.create({NAME!r}, config='app', revision=1, attempt=1, argv=['true'],"
        " env={}, cwd='/')\n"
    )
    run_python(code, str(home)).check_returncode()
    [row] = runtime.observe()
    assert (row.state, row.reason) == ("lost", "creator died before starting the shim")


def test_a_shim_that_starts_after_its_row_was_stopped_runs_nothing(
    runtime: LocalRuntime,
    home: pathlib.Path,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setattr(runtime, "_spawn", lambda name: None)
    create(runtime, ["touch", str(marker)])
    runtime.stop(NAME, reason="cancelled")
    db = home / "runtime" / "runtime.db"
    subprocess.run(shim_argv(db, NAME), check=True, timeout=10)
    assert not marker.exists()
    assert row_of(runtime).state == "stopped"


def test_a_tombstone_blocks_a_later_create(runtime: LocalRuntime) -> None:
    def tombstone() -> bool:
        return runtime.tombstone(NAME, config="app", revision=1, attempt=1, reason="cancelled")

    assert tombstone() is True
    assert tombstone() is False
    with pytest.raises(DeployerExists):
        create(runtime, ["true"])
    assert row_of(runtime).state == "stopped"


def test_prune_removes_the_log_and_keeps_the_row_as_a_pruned_tombstone(
    runtime: LocalRuntime,
) -> None:
    create(runtime, ["echo", "hi"])
    ended(runtime)
    runtime.prune([NAME])
    assert not runtime.log_path(NAME).exists()
    assert runtime.list() == []
    [row] = runtime.list(include_pruned=True)
    assert (row.name, row.pruned, row.exit_code) == (NAME, True, 0)
    with pytest.raises(DeployerExists):
        create(runtime, ["true"])


def test_the_rows_of_some_configs_are_theirs_alone_pruned_ones_left_out_unless_asked(
    runtime: LocalRuntime,
) -> None:
    """What a pass that ended deployments reads to prune: the rows of those configs, not the whole table."""
    for config in ("app", "web", "db"):
        runtime.tombstone(f"{config}-1-deploy-1", config=config, revision=1, attempt=1, reason="cancelled")
    runtime.prune(["web-1-deploy-1"])
    assert [r.name for r in runtime.list(configs={"app", "web"})] == ["app-1-deploy-1"]
    names = {r.name for r in runtime.list(configs=["web", "db"], include_pruned=True)}
    assert names == {"web-1-deploy-1", "db-1-deploy-1"}
    assert runtime.list(configs=[]) == []
    assert len(runtime.list()) == 2
    # lists of any length (sent in few statement shapes: adapters/sql_lists), each row once
    assert sorted(r.name for r in runtime.list(configs={"app", "web", "db"})) == ["app-1-deploy-1", "db-1-deploy-1"]
    many = [f"other-{i}" for i in range(700)] + ["db"]
    assert [r.name for r in runtime.list(configs=many, include_pruned=True)] == ["db-1-deploy-1"]


def test_two_threads_racing_to_create_one_name_spawn_it_once(
    home: pathlib.Path, runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    out = tmp_path / "runs"
    barrier = threading.Barrier(4)
    results: list[str] = []

    def racer() -> None:
        rt = LocalRuntime(home)
        barrier.wait()
        try:
            create(rt, ["sh", "-c", 'echo run >> "$0"', str(out)])
            results.append("created")
        except DeployerExists:
            results.append("exists")
        rt.close()

    threads = [threading.Thread(target=racer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["created", "exists", "exists", "exists"]
    assert ended(runtime).exit_code == 0
    assert out.read_text() == "run\n"


def test_processes_racing_on_a_new_home_spawn_one_deployer(home: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "runs"
    code = (
        "import os, pathlib, sys\n"
        "from rollouts.adapters.runtime.local import DeployerExists, LocalRuntime\n"
        "rt = LocalRuntime(pathlib.Path(sys.argv[1]))\n"
        "argv = ['sh', '-c', 'echo run >> \"$0\"', sys.argv[2]]\n"
        "try:\n"
        f"    rt.create({NAME!r}, config='app', revision=1, attempt=1, argv=argv,"
        " env=dict(os.environ), cwd='/')\n"
        "    print('created')\n"
        "except DeployerExists:\n"
        "    print('exists')\n"
    )
    racers = [start_python(code, str(home), str(out)) for _ in range(5)]
    said = sorted(p.communicate(timeout=30)[0].strip() for p in racers)
    assert said == ["created"] + ["exists"] * 4
    rt = LocalRuntime(home)
    assert ended(rt).exit_code == 0
    rt.close()
    assert out.read_text() == "run\n"


def test_is_alive_refuses_a_pid_whose_start_time_differs(
    tmp_path: pathlib.Path,
) -> None:
    me = os.getpid()
    start = procs.start_time_of(me)
    assert start is not None
    assert procs.is_alive(me, start)
    assert not procs.is_alive(me, start + 1)
    zombie = subprocess.Popen(["true"])
    zombie_start = procs.start_time_of(zombie.pid)
    wait_for(lambda: not procs.is_alive(zombie.pid, zombie_start))  # exited, not yet reaped
    zombie.wait()
    assert procs.start_time_of(zombie.pid) is None


def test_a_group_whose_leader_pid_now_belongs_to_another_process_is_not_killed() -> None:
    stranger = subprocess.Popen(["sleep", "30"], process_group=0)
    try:
        start = procs.start_time_of(stranger.pid)
        assert start is not None
        assert procs.kill_group_and_wait(stranger.pid, start - 1, grace=0) is True
        assert procs.is_alive(stranger.pid, start)
        assert procs.kill_group_and_wait(stranger.pid, start, grace=0) is True
        assert stranger.wait(timeout=5) == -signal.SIGKILL
    finally:
        stranger.kill()
        stranger.wait()


def test_runtime_files_are_private_and_active_uses_the_state_index(home: pathlib.Path, runtime: LocalRuntime) -> None:
    create(runtime, ["true"])
    ended(runtime)
    folder = home / "runtime"
    for path in (folder, folder / "logs"):
        assert path.stat().st_mode & 0o777 == 0o700
    for path in (folder / "runtime.db", runtime.log_path(NAME)):
        assert path.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(folder / "runtime.db") as db:
        plan = db.execute("EXPLAIN QUERY PLAN SELECT * FROM deployers WHERE state IN ('created', 'running')").fetchall()
    assert "deployers_state" in str(plan)


# -- the fork server and the shim's claim ---------------------------------------------


def parent_of(pid: int) -> int:
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def test_the_fork_server_starts_a_detached_shim_that_outlives_it(home: pathlib.Path, tmp_path: pathlib.Path) -> None:
    rt = LocalRuntime(home)
    create(rt, [*SLEEP_FOREVER, str(tmp_path / "pids")])
    pid, shim = pids_of(tmp_path / "pids")
    pid_start, shim_start = procs.start_time_of(pid), procs.start_time_of(shim)
    server = rt._fork_server.pid
    assert server is not None and parent_of(shim) == server
    assert os.getsid(shim) == shim  # a session of its own, as Popen(start_new_session=True) makes
    assert (os.getpgid(pid), os.getsid(pid)) == (pid, shim)  # the deployer: its own group, in the shim's session
    rt.close()  # the server sees its request pipe close, ends, and is reaped
    assert not pathlib.Path(f"/proc/{server}").exists()
    assert procs.is_alive(shim, shim_start) and procs.is_alive(pid, pid_start)
    again = LocalRuntime(home)
    assert row_of(again).state == "running"
    again.stop(NAME, reason="test over", grace=0)
    assert not procs.is_alive(pid, pid_start)
    wait_for(lambda: not procs.is_alive(shim, shim_start))
    again.close()


def test_shims_forked_by_the_server_are_reaped_while_it_lives(runtime: LocalRuntime) -> None:
    create(runtime, ["true"])
    ended(runtime)
    server = runtime._fork_server.pid
    assert server is not None
    children = pathlib.Path(f"/proc/{server}/task/{server}/children")
    wait_for(lambda: children.read_text().strip() == "", timeout=5)  # no zombie left behind


def test_two_shims_started_for_one_row_run_its_deployer_once(
    runtime: LocalRuntime, home: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "runs"
    monkeypatch.setattr(runtime, "_spawn", lambda name: None)
    create(runtime, ["sh", "-c", 'echo run >> "$0"', str(out)])
    db = home / "runtime" / "runtime.db"
    shims = [subprocess.Popen(shim_argv(db, NAME)) for _ in range(3)]
    assert [s.wait(timeout=30) for s in shims] == [0, 0, 0]
    assert ended(runtime).exit_code == 0
    assert out.read_text() == "run\n"


def test_a_shim_that_its_row_does_not_name_runs_nothing(
    runtime: LocalRuntime, home: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setattr(runtime, "_spawn", lambda name: None)
    create(runtime, ["touch", str(marker)])
    other = subprocess.Popen(["sleep", "30"])
    try:
        runtime._record_shim(NAME, other.pid, procs.start_time_of(other.pid))  # the spawner named another shim
        db = home / "runtime" / "runtime.db"
        subprocess.run(shim_argv(db, NAME), check=True, timeout=10)
        assert not marker.exists()
        assert row_of(runtime).state == "created"
    finally:
        other.kill()
        other.wait()


def test_without_a_fork_server_the_shim_starts_as_an_interpreter_of_its_own(
    runtime: LocalRuntime, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = ForkServer(str(tmp_path / "unused.db"), None, runtime._forked)
    monkeypatch.setattr(broken, "_argv", [str(tmp_path / "no-such-python")])
    monkeypatch.setattr(runtime, "_fork_server", broken)
    create(runtime, [*SLEEP_FOREVER, str(tmp_path / "pids")])
    _, shim = pids_of(tmp_path / "pids")
    assert parent_of(shim) == os.getpid()
    assert str(SHIM).encode() in pathlib.Path(f"/proc/{shim}/cmdline").read_bytes()
    wait_for(lambda: row_of(runtime).state == "running")


def test_a_fork_server_that_died_is_started_again(runtime: LocalRuntime, tmp_path: pathlib.Path) -> None:
    create(runtime, ["true"])
    ended(runtime)
    first = runtime._fork_server.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: runtime._fork_server._proc is not None and runtime._fork_server._proc.poll() is not None)
    out = tmp_path / "out"
    second = "app-2-deploy-1"
    runtime.create(
        second, config="app", revision=2, attempt=1, argv=["sh", "-c", 'echo ran > "$0"', str(out)], env=ENV, cwd="/"
    )
    wait_for(lambda: (row := runtime.get(second)) is not None and row.state == "exited")
    assert out.read_text() == "ran\n"
    assert runtime._fork_server.pid not in (None, first)


def test_requests_a_dying_fork_server_left_unanswered_get_shims_of_their_own(
    runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    create(runtime, ["true"])
    ended(runtime)
    server = runtime._fork_server.pid
    assert server is not None
    os.kill(server, signal.SIGSTOP)  # it takes no request from now on
    names = ["app-2-deploy-1", "app-3-deploy-1"]
    for revision, name in enumerate(names, start=2):
        argv = ["sh", "-c", 'echo run >> "$0"', str(tmp_path / name)]
        runtime.create(name, config="app", revision=revision, attempt=1, argv=argv, env=ENV, cwd="/")
    os.kill(server, signal.SIGKILL)
    for name in names:
        wait_for(lambda name=name: (row := runtime.get(name)) is not None and row.state == "exited")
        assert (tmp_path / name).read_text() == "run\n"


def test_creates_in_a_batch_commit_together_before_any_of_their_shims_starts(
    runtime: LocalRuntime, home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    names = ["app-1-deploy-1", "app-2-deploy-1", "app-3-deploy-1"]
    db = sqlite3.connect(home / "runtime" / "runtime.db")
    with runtime.batched():
        for revision, name in enumerate(names, start=1):
            argv = ["sh", "-c", 'echo run >> "$0"', str(tmp_path / name)]
            runtime.create(name, config="app", revision=revision, attempt=1, argv=argv, env=ENV, cwd="/")
        with pytest.raises(DeployerExists):  # refused alone: the batch goes on
            runtime.create(names[0], config="app", revision=1, attempt=1, argv=["true"], env=ENV, cwd="/")
        assert db.execute("SELECT count(*) FROM deployers").fetchone()[0] == 0  # not committed yet
        time.sleep(0.2)
        assert not any((tmp_path / name).exists() for name in names)  # nothing started
    db.close()
    for name in names:
        wait_for(lambda name=name: (row := runtime.get(name)) is not None and row.state == "exited")
        assert (tmp_path / name).read_text() == "run\n"


def test_an_error_in_a_batch_rolls_its_creates_back_and_starts_nothing(
    runtime: LocalRuntime, tmp_path: pathlib.Path
) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(RuntimeError), runtime.batched():
        create(runtime, ["touch", str(marker)])
        raise RuntimeError("the pass failed")
    time.sleep(0.2)
    assert runtime.get(NAME) is None and not marker.exists()
    create(runtime, ["touch", str(marker)])  # the name never existed: it can be created now
    assert ended(runtime).exit_code == 0 and marker.exists()


def test_a_shim_kills_its_deployer_once_the_controllers_heartbeat_is_too_old(
    home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    rt = LocalRuntime(home, heartbeat_max_age=0.3)
    rt.beat()
    pid, start = sleeper(rt, tmp_path)
    stopped_for_its_heartbeat(rt, pid, start)


def test_a_heartbeat_as_of_an_old_renewal_stops_the_deployer_though_just_written(
    home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The controller beats as of its lease's last renewal (DESIGN 7.7: stopped within half a lease of it),
    not as of the pass that wrote the beat: a renewal older than the limit stops the deployer."""
    rt = LocalRuntime(home, heartbeat_max_age=1.0)
    rt.beat()
    pid, start = sleeper(rt, tmp_path)
    for _ in range(8):  # beating every 0.25 s, each beat carrying a renewal 5 s old
        rt.beat(at=shim.boot_clock() - 5)
        time.sleep(0.25)
    stopped_for_its_heartbeat(rt, pid, start)


def test_a_heartbeat_whose_file_time_says_long_ago_keeps_its_deployer_alive(
    home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The wall clock stepped forward by far more than a lease: the heartbeat is fresh by the boot clock."""
    rt = LocalRuntime(home, heartbeat_max_age=1.0)
    rt.beat()
    pid, start = sleeper(rt, tmp_path)
    for _ in range(8):  # 2 s: twice the limit, beating as a live controller does
        rt.beat()
        os.utime(rt.heartbeat_path, (1.0, 1.0))  # its time of change, read by the wall clock: 1970
        time.sleep(0.25)
    assert row_of(rt).state == "running" and procs.is_alive(pid, start)
    rt.close()


def test_a_stale_heartbeat_whose_file_time_is_in_the_future_still_stops_its_deployer(
    home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The wall clock stepped back: a controller that stopped beating is still found gone, by the boot clock."""
    rt = LocalRuntime(home, heartbeat_max_age=0.5)
    rt.beat()
    os.utime(rt.heartbeat_path, (time.time() + 3600, time.time() + 3600))
    pid, start = sleeper(rt, tmp_path)
    stopped_for_its_heartbeat(rt, pid, start)


def test_data_version_changes_when_a_shim_commits(runtime: LocalRuntime) -> None:
    before = runtime.data_version()
    runtime.tombstone(NAME, config="app", revision=1, attempt=1, reason="ours")
    assert runtime.data_version() == before  # its own commits do not count
    runtime.create("app-2-deploy-1", config="app", revision=2, attempt=1, argv=["true"], env=ENV, cwd="/")
    wait_for(lambda: runtime.data_version() != before)


def python_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def start_python(code: str, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", code, *args]
    return subprocess.Popen(argv, env=python_env(), stdout=subprocess.PIPE, text=True)


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", code, *args]
    return subprocess.run(argv, env=python_env(), check=False, capture_output=True, text=True, timeout=30)
