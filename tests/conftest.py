"""Shared fixtures: a private home per test, and the CLI run in-process or as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from rollouts.adapters.cli import cli


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


class Rollouts:
    """Runs `rollouts` against one home: `run` in-process (click's runner), `sh` as a subprocess."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.home = home
        self.cwd = cwd
        self.store: str | None = None
        self.env = {**os.environ, "ROLLOUTS_HOME": str(home), "ROLLOUTS_ACTOR": "tester@test"}
        self.env.pop("ROLLOUTS_STORE", None)

    def run(self, *args: str) -> Result:
        from rollouts.adapters.cli.errors import run

        runner = CliRunner()
        env = {"ROLLOUTS_HOME": str(self.home), "ROLLOUTS_ACTOR": "tester@test", "ROLLOUTS_STORE": self.store}
        with runner.isolation(env=env) as (out, err, _):
            code = run(cli, list(args))
            return Result(code, out.getvalue().decode(), err.getvalue().decode())

    def sh(self, *args: str, timeout: float = 60, env: dict[str, str] | None = None) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "rollouts", *args],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def popen(self, *args: str, **kwargs: object) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "rollouts", *args],
            cwd=self.cwd,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **kwargs,  # type: ignore[call-overload]
        )

    def event_count(self) -> int:
        import sqlite3

        if self.store:
            return int(self.sh("events", "-o", "json").stdout.count('"position"'))

        db = self.home / "events.db"
        if not db.exists():
            return 0
        with sqlite3.connect(db) as conn:
            try:
                return conn.execute("SELECT count(*) FROM stored_events").fetchone()[0]
            except sqlite3.OperationalError:
                return 0


@pytest.fixture
def rollouts(tmp_path: Path) -> Iterator[Rollouts]:
    work = tmp_path / "work"
    work.mkdir()
    yield Rollouts(tmp_path / "home", work)


POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_reachable() -> str | None:
    """None when the test server answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(POSTGRES, connect_timeout=3):
            return None
    except Exception as error:  # noqa: BLE001 - any failure means "no server here"
        return " ".join(str(error).split())[:200]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL store URL with a schema of its own, dropped afterwards."""
    import uuid

    why = postgres_reachable()
    if why is not None:
        if os.environ.get("ROLLOUTS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required (ROLLOUTS_REQUIRE_POSTGRES=1) but unreachable: {why}")
        pytest.skip(f"PostgreSQL unreachable at {POSTGRES}: {why}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{POSTGRES}?schema={schema}"
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def backend_store(request: pytest.FixtureRequest) -> str | None:
    """The store URL of each backend in turn: None (SQLite in the home) or a PostgreSQL schema."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def rollouts_on(rollouts: Rollouts, backend_store: str | None) -> Rollouts:
    """The `rollouts` fixture on each backend: same tests, only the environment changes."""
    if backend_store:
        rollouts.env["ROLLOUTS_STORE"] = backend_store
        rollouts.store = backend_store
    return rollouts
