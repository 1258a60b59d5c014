"""A command the home's binding refuses creates nothing anywhere, and `home rebind` asks before it stops a
deployer (--dry-run shows what it would do; --yes does not ask; no terminal and no --yes: exit 1) (7.1)."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Result, Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    return result


def running_deployer(rollouts: Rollouts, tmp_path: Path) -> int:
    """Config web's version 1 running a deployer that sleeps; its pid."""
    pid_file = tmp_path / "pid"
    ok(rollouts.sh("config", "create", "web", "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"))
    ok(rollouts.sh("rollout", "latest", "web"))
    ok(rollouts.sh("controller", "run", "--once", "-q"))
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.1)
    raise AssertionError("the deployer did not start")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state != "Z"


def rebind(rollouts: Rollouts, *args: str, stdin: int = subprocess.DEVNULL) -> Result:
    """`home rebind` as a subprocess, its stdin `stdin` (no terminal unless given one)."""
    proc = subprocess.run(
        [sys.executable, "-m", "rollouts", "home", "rebind", *args],
        cwd=rollouts.cwd,
        env=rollouts.env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def schema_exists(url: str) -> bool:
    import psycopg

    from tests.conftest import POSTGRES

    schema = url.split("schema=")[1]
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        return conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()[0] is not None  # type: ignore[index]


def one_error_line(result: Result, code: int, says: str) -> None:
    assert result.exit_code == code, result
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1, result
    assert says in result.stderr, result


def test_a_mistyped_store_is_refused_leaving_no_schema_and_rebind_there_stops_nothing_unasked(
    rollouts: Rollouts, tmp_path: Path, postgres_url: str
) -> None:
    """As it happened: a write with a mistyped --store made the schema and a log there, and `home rebind`
    against it then stopped the production deployer without a word."""
    rollouts.env["ROLLOUTS_STORE"] = rollouts.store = postgres_url
    pid = running_deployer(rollouts, tmp_path)
    try:
        typo = rollouts.env["ROLLOUTS_STORE"] = rollouts.store = postgres_url + "typo"
        for args in (["config", "create", "api", "--", "true"], ["controller", "run", "--once", "-q"]):
            one_error_line(rollouts.sh(*args), 5, "holds no log")
        assert not schema_exists(typo)

        planned = ok(rebind(rollouts, "--dry-run"))
        assert "would stop web-1-deploy-1" in planned.stdout and "nothing changed" in planned.stdout
        one_error_line(rebind(rollouts), 1, "--yes")
        assert not schema_exists(typo) and alive(pid)

        rollouts.env["ROLLOUTS_STORE"] = rollouts.store = postgres_url  # the right store: nothing was lost
        assert ok(rollouts.sh("rollout", "status", "web")).stdout.startswith("web version 1 (attempt 1): ")
    finally:
        os.kill(pid, 9)


def test_an_emptied_sqlite_store_is_refused_without_making_a_log_and_rebind_asks_first(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    pid = running_deployer(rollouts, tmp_path)
    try:
        away = tmp_path / "away"
        away.mkdir()
        for name in ("events.db", "events.db-wal", "events.db-shm"):
            if (rollouts.home / name).exists():
                shutil.move(rollouts.home / name, away / name)
        one_error_line(rollouts.sh("rollout", "latest", "web"), 5, "holds no log")
        one_error_line(rollouts.sh("projections", "rebuild"), 5, "holds no log")
        assert not (rollouts.home / "events.db").exists()

        planned = ok(rebind(rollouts, "--dry-run"))
        assert planned.stdout.splitlines() == [
            f"would bind home {rollouts.home} to a new, empty log in {rollouts.home / 'events.db'}"
            f" (was {planned.stdout.split('(was ')[1].split(')')[0]})",
            "would stop web-1-deploy-1: it runs for no claim of this log",
            "would rebuild the views desired, history and audit from the log",
            "nothing changed (--dry-run)",
        ]
        one_error_line(rebind(rollouts), 1, "would stop 1 running deployer(s) (web-1-deploy-1)")
        declined = answered(rollouts, "n\n")
        assert declined.exit_code == 1 and "Stop 1 running deployer(s)" in declined.stderr, declined
        assert not (rollouts.home / "events.db").exists() and alive(pid)

        rebound = ok(rebind(rollouts, "--yes"))
        assert "stopped web-1-deploy-1: it runs for no claim of this log" in rebound.stdout
        for _ in range(100):
            if not alive(pid):
                break
            time.sleep(0.1)
        assert not alive(pid)
    finally:
        if alive(pid):
            os.kill(pid, 9)


def answered(rollouts: Rollouts, answer: str) -> Result:
    """`home rebind` on a terminal (a pseudo-terminal), answering its question with `answer`."""
    primary, secondary = pty.openpty()
    try:
        os.write(primary, answer.encode())
        return rebind(rollouts, stdin=secondary)
    finally:
        os.close(secondary)
        os.close(primary)


def test_a_rebind_that_stops_nothing_asks_nothing(rollouts: Rollouts) -> None:
    ok(rollouts.sh("config", "create", "web", "--", "true"))
    ok(rollouts.sh("rollout", "latest", "web"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
    rebound = ok(rebind(rollouts))
    assert rebound.stdout.startswith(f"home {rollouts.home} bound to log ") and "stopped" not in rebound.stdout
