"""The store's credentials (DESIGN 7.2): libpq's own ways to find a password, and reads with a role that may
only SELECT. Passwords are caught by a stand-in server that asks for one, as a server with md5 auth would."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

SSL_REQUEST, GSS_REQUEST = 80877103, 80877104
CLEARTEXT_PASSWORD = 3


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class PasswordCatcher:
    """Speaks the PostgreSQL protocol as far as asking for a cleartext password; records each one sent."""

    def __init__(self) -> None:
        self.passwords: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, contextlib.suppress(ConnectionError, OSError, struct.error):
                self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        while True:
            length, code = struct.unpack("!ii", _exactly(conn, 8))
            if code not in (SSL_REQUEST, GSS_REQUEST):
                _exactly(conn, length - 8)  # the startup message
                break
            conn.sendall(b"N")
        conn.sendall(b"R" + struct.pack("!ii", 8, CLEARTEXT_PASSWORD))
        kind = _exactly(conn, 1)
        (length,) = struct.unpack("!i", _exactly(conn, 4))
        body = _exactly(conn, length - 4)
        if kind == b"p":
            self.passwords.append(body.rstrip(b"\0").decode())
        error = b"SFATAL\0C28P01\0Mpassword authentication failed\0\0"
        conn.sendall(b"E" + struct.pack("!i", len(error) + 4) + error)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def catcher() -> Iterator[PasswordCatcher]:
    server = PasswordCatcher()
    yield server
    server.close()


def one_store_error(result: Result) -> None:
    assert result.exit_code == 5, result
    assert result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1, result


@pytest.mark.parametrize("way", ["PGPASSWORD", "PGPASSFILE", "~/.pgpass"])
def test_with_no_password_in_the_url_libpq_finds_one_its_own_ways(
    rollouts: Rollouts, catcher: PasswordCatcher, tmp_path: Path, way: str
) -> None:
    rollouts.home.mkdir()  # an existing home: a missing one adds its own warning line
    password = f"pw-{uuid.uuid4().hex}"
    passfile = tmp_path / ("pgpass" if way == "PGPASSFILE" else ".pgpass")
    passfile.write_text(f"127.0.0.1:{catcher.port}:test:alice:{password}\n")
    passfile.chmod(0o600)
    env = {"PGPASSWORD": password} if way == "PGPASSWORD" else {"PGPASSFILE": str(passfile)}
    if way == "~/.pgpass":
        env = {"HOME": str(tmp_path)}
    for command in (["config", "list"], ["config", "create", "web", "--", "true"]):  # a read, a write
        result = rollouts.sh("--store", f"postgresql://alice@127.0.0.1:{catcher.port}/test", *command, env=env)
        one_store_error(result)
        assert password not in result.stdout + result.stderr
    assert catcher.passwords and set(catcher.passwords) == {password}


def test_a_password_in_the_url_is_sent_and_never_printed(rollouts: Rollouts, catcher: PasswordCatcher) -> None:
    rollouts.home.mkdir()  # an existing home: a missing one adds its own warning line
    password = f"pw-{uuid.uuid4().hex}"
    env = {"ROLLOUTS_STORE": f"postgresql://alice:{password}@127.0.0.1:{catcher.port}/test", "PGPASSWORD": "other"}
    for command in (["events"], ["rollout", "latest", "web"]):
        result = rollouts.sh(*command, env=env)
        one_store_error(result)
        assert password not in result.stdout + result.stderr and "***" in result.stderr
    assert set(catcher.passwords) == {password}
    assert not [p for p in rollouts.home.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]


READS = [
    ["events", "-o", "json"],
    ["events", "app", "--revision", "1", "-o", "json"],
    ["audit", "-o", "json"],
    ["rollout", "history", "app", "-o", "json"],
    ["rollout", "history", "app", "--revision", "1", "-o", "json"],
    ["rollout", "status", "app"],
    ["config", "list", "-o", "json"],
    ["config", "show", "app", "-o", "json"],
    ["projections", "status", "-o", "json"],
    ["log", "verify", "-o", "json"],
]


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    return result


@pytest.fixture
def reader(postgres_url: str) -> Iterator[Callable[[], str]]:
    """The store URL for a role that may only use the test's schema and SELECT its tables (granted when
    called, on the tables there then), dropped afterwards."""
    import psycopg

    from tests.conftest import POSTGRES

    schema = postgres_url.rsplit("schema=", 1)[1]
    role = f"ro_{uuid.uuid4().hex[:10]}"
    granted = False

    def grant() -> str:
        nonlocal granted
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {role}')
        granted = True
        return postgres_url.replace("postgres@", f"{role}@")

    yield grant
    if granted:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_read_commands_work_with_a_role_that_may_only_select(
    rollouts: Rollouts, postgres_url: str, reader: Callable[[], str], tmp_path: Path
) -> None:
    rollouts.env["ROLLOUTS_STORE"] = postgres_url
    ok(rollouts.sh("config", "create", "app", "--", "true"))
    ok(rollouts.sh("rollout", "latest", "app"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q"))
    as_owner = {tuple(cmd): ok(rollouts.sh(*cmd)).stdout for cmd in READS}
    count = len(json.loads(as_owner[("events", "-o", "json")]))

    url = reader()
    env = {"ROLLOUTS_STORE": url, "ROLLOUTS_HOME": str(tmp_path / "reader-home")}
    for cmd in READS:
        shown = ok(rollouts.sh(*cmd, env=env)).stdout
        if cmd[0] != "projections":  # (positions and lag are the reader's own views')
            assert shown == as_owner[tuple(cmd)], cmd
    refused = rollouts.sh("rollout", "latest", "app", env=env)
    assert refused.exit_code == 5 and refused.stderr.startswith("error:"), refused
    assert len(json.loads(ok(rollouts.sh("events", "-o", "json")).stdout)) == count
