"""DESIGN 7.2, through the CLI and a real controller: what a deployer and a hook get of the controller's
environment, and that no secret value is written anywhere under the home, nor shown on a command line."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

# Writes its environment to argv[1] as JSON (and its parent's pid beside it); with argv[2], waits
# until the test lets it go, so the test can look at the running processes meanwhile.
DUMP = """import json, os, sys, time
out = sys.argv[1]
with open(out + ".ppid", "w") as f:
    f.write(str(os.getppid()))
with open(out + ".tmp", "w") as f:
    json.dump(dict(os.environ), f)
os.rename(out + ".tmp", out)
deadline = time.time() + 30
while len(sys.argv) > 2 and not os.path.exists(out + ".go") and time.time() < deadline:
    time.sleep(0.05)
"""
ALLOWED = {
    "PATH": os.environ.get("PATH", os.defpath),
    "HOME": "/home/deployer-test",
    "USER": "deployer-test",
    "LOGNAME": "deployer-test",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LC_TIME": "C",
    "TZ": "UTC",
    "TMPDIR": "/tmp",
    "TERM": "dumb",
}


def secret(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


@pytest.fixture
def secrets() -> dict[str, str]:
    """Decoys of the controller's environment, and the value --pass-env passes (a secret too)."""
    return {
        "MY_SECRET_TOKEN": secret("token"),
        "AWS_SECRET_ACCESS_KEY": secret("aws"),
        "PGPASSWORD": secret("pgpassword"),
        "DEPLOY_TOKEN": secret("passed"),
    }


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[tuple[str | None, str | None]]:
    """(store URL, its password): none for SQLite; a role of its own, with a password in the URL,
    owning the test's schema, on PostgreSQL (the server trusts any password: the point is the leak)."""
    if request.param == "sqlite":
        yield None, None
        return
    url: str = request.getfixturevalue("postgres_url")
    import psycopg

    from tests.conftest import POSTGRES

    schema = url.rsplit("schema=", 1)[1]
    role, password = f"r_{uuid.uuid4().hex[:10]}", secret("pgpw")
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION {role}')
    try:
        yield url.replace("postgres@", f"{role}:{password}@"), password
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def dump_cmd(out: Path, wait: bool = False) -> list[str]:
    return [sys.executable, "-c", DUMP, str(out), *(["wait"] if wait else [])]


def wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def command_lines() -> list[bytes]:
    """argv of every process of the machine, as `ps` shows it to every user."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                lines.append((entry / "cmdline").read_bytes())
    return lines


def files_holding(root: Path, values: list[str]) -> list[tuple[str, str]]:
    """(file, value) for every value found, as bytes, in any file under root."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [(str(path), v) for v in values if v.encode() in data]
    return found


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    return result


def test_a_deployer_and_its_hook_get_the_allowed_environment_and_no_secret_is_written(
    rollouts: Rollouts, secrets: dict[str, str], store: tuple[str | None, str | None]
) -> None:
    url, password = store
    if url:
        rollouts.env["ROLLOUTS_STORE"] = url
    controller_env = {
        **{k: v for k, v in rollouts.env.items() if k.startswith(("ROLLOUTS_", "PYTHON"))},
        **ALLOWED,
        **secrets,
        "RANDOM_DECOY": secret("decoy"),
        "PGOPTIONS": "-c statement_timeout=0",
    }
    work = rollouts.cwd
    pre, deploy = work / "pre.json", work / "deploy.json"
    ok(
        rollouts.sh(
            "config",
            "create",
            "app",
            "--env",
            "PORT=8080",
            "--pass-env",
            "DEPLOY_TOKEN",
            "--pass-env",
            "UNSET_ONE",
            "--pre-hook",
            shlex.join(dump_cmd(pre)),
            "--",
            *dump_cmd(deploy, wait=True),
        )  # fmt: skip
    )
    ok(rollouts.sh("rollout", "latest", "app"))
    argv = [sys.executable, "-m", "rollouts", "controller", "run", "--until-idle", "--timeout", "60"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    controller = subprocess.Popen(argv, cwd=work, env=controller_env, **pipes)  # type: ignore[call-overload]
    try:
        wait_for(deploy)
        # While the deployer runs: no secret on any command line (the shim's, the fork server's included),
        # and the shim's environment has no store URL.
        values = [*secrets.values(), *([password] if password else [])]
        assert not [v for v in values for line in command_lines() if v.encode() in line]
        shim_env = Path(f"/proc/{Path(f'{deploy}.ppid').read_text()}/environ").read_bytes()
        assert b"ROLLOUTS_STORE=" not in shim_env and (password is None or password.encode() not in shim_env)
        (work / "deploy.json.go").touch()
        out, err = controller.communicate(timeout=60)
    finally:
        controller.kill()
    assert controller.returncode == 0, err
    assert ok(rollouts.sh("rollout", "status", "app")).stdout.strip().endswith("Complete")

    common = {
        **ALLOWED,
        "PWD": str(work),
        "DEPLOY_TOKEN": secrets["DEPLOY_TOKEN"],
        "PORT": "8080",
        "ROLLOUT_CONFIG": "app",
        "ROLLOUT_VERSION": "1",
        "ROLLOUT_ATTEMPT": "1",
    }
    fence = ("ROLLOUT_CLAIM", "ROLLOUT_HOME", "ROLLOUT_STORE")  # for `claim check` (7.7); the store has no password
    deployed, hooked = json.loads(deploy.read_text()), json.loads(pre.read_text())
    for env in (deployed, hooked):
        assert set(fence) <= set(env) and (password is None or password not in env["ROLLOUT_STORE"])
    deployed = {k: v for k, v in deployed.items() if k not in fence and not k.startswith("ROLLOUT_STEP")}
    hooked = {k: v for k, v in hooked.items() if k not in fence and not k.startswith("ROLLOUT_STEP")}
    deployed.pop("ROLLOUT_WEIGHT", None)
    hooked.pop("ROLLOUT_WEIGHT", None)
    assert deployed == {**common, "ROLLOUT_DEPLOYER": "app-1-deploy-1"}
    assert hooked == {**common, "ROLLOUT_DEPLOYER": "app-1-hook-pre-1", "ROLLOUT_HOOK": "pre"}

    shown = [
        out + err,
        *(
            r.stdout + r.stderr
            for r in (
                ok(rollouts.sh("logs", "app")),
                ok(rollouts.sh("events", "-o", "json")),
                ok(rollouts.sh("config", "show", "app", "-o", "json")),
                ok(rollouts.sh("deployers", "list", "--all", "-o", "json")),
                ok(rollouts.sh("rollout", "history", "app", "--revision", "1")),
            )
        ),
    ]
    assert "UNSET_ONE" in shown[1]  # the shim says a named variable was missing, by name only
    assert not [v for v in values for text in shown if v in text]
    assert not files_holding(rollouts.home, values)


# A process with no capability: as an account that is not root is (the tests may run as root).
UNPRIVILEGED = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"]


def readable_without_privilege(pid: int | str) -> bool:
    """Whether another process of the same account, with no privilege (as a deployer is, unless run
    as root), may read /proc/PID/environ: Linux lets it for a dumpable process only."""
    reader = subprocess.run([*UNPRIVILEGED, "cat", f"/proc/{pid}/environ"], capture_output=True, timeout=10)
    return reader.returncode == 0


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux) to drop privileges")
def test_the_controllers_and_shims_environment_is_not_readable_by_the_accounts_other_processes(
    rollouts: Rollouts, secrets: dict[str, str]
) -> None:
    deploy = rollouts.cwd / "deploy.json"
    ok(rollouts.sh("config", "create", "app", "--pass-env", "DEPLOY_TOKEN", "--", *dump_cmd(deploy, wait=True)))
    ok(rollouts.sh("rollout", "latest", "app"))
    argv = [sys.executable, "-m", "rollouts", "controller", "run", "--until-idle", "--timeout", "60", "-q"]
    controller = subprocess.Popen([*UNPRIVILEGED, *argv], cwd=rollouts.cwd, env={**rollouts.env, **secrets})
    try:
        wait_for(deploy)
        deployer = json.loads(deploy.read_text())  # (its own environment it may read: the control case)
        shim = Path(f"{deploy}.ppid").read_text()
        deployer_pid = next(p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == shim)
        assert deployer["DEPLOY_TOKEN"] == secrets["DEPLOY_TOKEN"]
        assert readable_without_privilege(deployer_pid)
        assert not readable_without_privilege(shim)
        assert not readable_without_privilege(controller.pid)
        (rollouts.cwd / "deploy.json.go").touch()
        assert controller.wait(timeout=60) == 0
    finally:
        controller.kill()


def _ppid(proc: Path) -> str | None:
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return None


OLD_RUNTIME_TABLE = """CREATE TABLE deployers (
    name TEXT PRIMARY KEY, config TEXT NOT NULL, revision INTEGER NOT NULL,
    attempt INTEGER NOT NULL, state TEXT NOT NULL, argv TEXT, env TEXT, cwd TEXT,
    creator_pid INTEGER, creator_start INTEGER, shim_pid INTEGER, shim_start INTEGER,
    pid INTEGER, pgid INTEGER, start_time INTEGER, exit_code INTEGER, reason TEXT,
    log_path TEXT, created_at TEXT NOT NULL, started_at TEXT, ended_at TEXT,
    pruned INTEGER NOT NULL DEFAULT 0, stop_deadline REAL)"""


def test_a_runtime_table_from_before_pass_env_forgets_the_environments_it_stored(tmp_path: Path) -> None:
    """Such a table held every deployer's whole environment, tombstones included: opened once, no byte
    of the secrets is left in runtime.db or its write-ahead log, and a row still to spawn keeps its env."""
    import sqlite3

    from rollouts.adapters.runtime.local import LocalRuntime

    home = tmp_path / "home"
    (home / "runtime").mkdir(parents=True)
    values = [secret("old") for _ in range(3)]
    whole = {f"VAR_{i}": "x" * 200 for i in range(40)}  # larger than a page: overflow pages too
    db = sqlite3.connect(home / "runtime" / "runtime.db")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(OLD_RUNTIME_TABLE)
    insert = (
        "INSERT INTO deployers (name, config, revision, attempt, state, argv, env, created_at)"
        " VALUES (?, 'app', ?, 1, ?, ?, ?, 'then')"
    )
    for i, (state, value) in enumerate([("exited", values[0]), ("stopped", values[1]), ("deleted", values[2])]):
        env = json.dumps({**whole, "MY_SECRET_TOKEN": value})
        db.execute(insert, (f"app-{i + 1}-deploy-1", i + 1, state, '["true"]', env))
    db.execute(insert, ("app-9-deploy-1", 9, "created", '["true"]', '{"K": "v"}'))
    db.commit()
    db.close()
    assert files_holding(home, values)
    LocalRuntime(home).close()
    assert not files_holding(home, values)
    db = sqlite3.connect(home / "runtime" / "runtime.db")
    assert db.execute("SELECT name, env FROM deployers WHERE env IS NOT NULL").fetchall() == [
        ("app-9-deploy-1", '{"K": "v"}')
    ]
    db.close()
