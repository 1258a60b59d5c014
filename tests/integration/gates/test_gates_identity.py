"""Who may approve (DESIGN 7.8) through the CLI: --approval-identity os on SQLite, and db on PostgreSQL with
two real roles, whose server refuses an event that names another role (bad input is in the table of
tests/integration/cli/test_cli_errors.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from rollouts.adapters.identity import os_user

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

REFUSED = 1


def assert_refused(result: Result, words: str) -> None:
    assert result.exit_code == REFUSED, result
    assert result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1, result
    assert words in result.stderr and "Traceback" not in result.stderr + result.stdout, result


def events(rollouts: Rollouts, *store: str) -> list[dict[str, object]]:
    found = rollouts.run(*store, "events", "-o", "json")
    assert found.exit_code == 0, found
    return list(json.loads(found.stdout))


def test_os_mode_refuses_an_approval_by_the_same_os_user_under_another_label(rollouts: Rollouts) -> None:
    made = rollouts.run("config", "create", "web", "--require-approval", "--approval-identity", "os", "--", "true")
    assert made.exit_code == 0, made
    assert "by another OS user" in rollouts.run("config", "show", "web").stdout
    assert rollouts.run("--as", "alice", "rollout", "latest", "web").exit_code == 0
    before = rollouts.event_count()
    refused = rollouts.run("--as", "bob", "rollout", "approve", "web")
    assert_refused(refused, f"alice asked for revision 1 attempt 1 as OS user {os_user()}: approval identity os")
    assert rollouts.event_count() == before
    assert "waiting for approval" in rollouts.run("rollout", "status", "web").stdout
    assert rollouts.run("audit").exit_code == 0


def test_events_on_sqlite_show_a_null_db_user(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    assert [(e["os_user"], e["db_user"]) for e in events(rollouts)] == [(os_user(), None)]


@pytest.fixture
def roles(postgres_url: str) -> Iterator[tuple[str, str]]:
    """Two login roles of this test's own, allowed to use the test's schema as DESIGN 7.8's docs say
    (after the log was made there by its owner); dropped afterwards."""
    import psycopg

    from tests.conftest import POSTGRES

    tag = uuid.uuid4().hex[:8]
    names = (f"rollouts_test_alice_{tag}", f"rollouts_test_bob_{tag}")
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE ROLE {name} LOGIN")
    yield names
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        for name in names:
            conn.execute(f"DROP OWNED BY {name}")  # its grants in this database
            conn.execute(f"DROP ROLE {name}")


def grant(postgres_url: str, names: tuple[str, ...]) -> None:
    import psycopg

    from tests.conftest import POSTGRES

    schema = postgres_url.split("schema=")[1]
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        for name in names:
            conn.execute(f'GRANT USAGE, CREATE ON SCHEMA "{schema}" TO {name}')
            conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO {name}')
            conn.execute(f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA "{schema}" TO {name}')


def as_role(postgres_url: str, role: str) -> str:
    return postgres_url.replace("postgresql://postgres@", f"postgresql://{role}@")


def test_db_mode_on_postgres_tells_approvers_apart_by_their_database_roles(
    rollouts: Rollouts, postgres_url: str, roles: tuple[str, str]
) -> None:
    alice, bob = roles
    owner = ("--store", postgres_url)
    made = rollouts.run(*owner, "config", "create", "web", "--require-approval", "--approval-identity", "db", "--", "x")
    assert made.exit_code == 0, made
    grant(postgres_url, roles)
    as_alice, as_bob = ("--store", as_role(postgres_url, alice)), ("--store", as_role(postgres_url, bob))
    assert rollouts.run(*as_alice, "--as", "alice", "rollout", "latest", "web").exit_code == 0
    before = len(events(rollouts, *owner))

    # Another label, the same role: refused, nothing appended.
    refused = rollouts.run(*as_alice, "--as", "bob", "rollout", "approve", "web")
    assert_refused(refused, f"as database role {alice}: approval identity db needs another database role")
    assert len(events(rollouts, *owner)) == before

    approved = rollouts.run(*as_bob, "--as", "bob", "rollout", "approve", "web")
    assert approved.exit_code == 0, approved
    shown = [(e["type"], e["actor"], e["db_user"]) for e in events(rollouts, *as_bob)]
    assert shown == [
        ("Registered", "tester@test", "postgres"),
        ("RolloutTriggered", "alice", alice),
        ("Created", "alice", alice),
        ("Approved", "bob", bob),
    ]
    assert rollouts.run(*owner, "audit").exit_code == 0
    assert rollouts.run(*owner, "log", "verify").exit_code == 0


def test_the_server_refuses_an_event_that_names_another_role_and_any_rewrite(
    rollouts: Rollouts, postgres_url: str, roles: tuple[str, str]
) -> None:
    import psycopg

    alice, bob = roles
    assert rollouts.run("--store", postgres_url, "config", "create", "web", "--", "true").exit_code == 0
    grant(postgres_url, roles)
    schema = postgres_url.split("schema=")[1]
    table = f'"{schema}".rollouts_events'
    insert = f"INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES (%s, 1, 't', %s)"
    with psycopg.connect(as_role(postgres_url.split("?")[0], alice), autocommit=True) as conn:
        for meta in ({"actor": "bob", "db_user": bob}, {"actor": "alice"}):
            state = json.dumps({"meta": meta}).encode()
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=f"must be the session user, {alice}"):
                conn.execute(insert, (uuid.uuid4(), state))
        for rewrite in (f"UPDATE {table} SET topic = topic", f"DELETE FROM {table}"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="the event log is append-only"):
                conn.execute(rewrite)
        with conn.transaction(force_rollback=True):  # its own name it may write (rolled back: not a real event)
            conn.execute(insert, (uuid.uuid4(), json.dumps({"meta": {"db_user": alice}}).encode()))
    assert len(events(rollouts, "--store", postgres_url)) == 1


def _unshared(rollouts: Rollouts, *args: str) -> Result:
    """`rollouts ARGS` as a subprocess in a user namespace of its own (`unshare -r -u`: uid 0 there, and a
    host name of its own), which any unprivileged account may make."""
    import shutil
    import subprocess
    import sys

    from tests.conftest import Result

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-r", "-u", "true"]).returncode != 0:
        pytest.skip("no unshare -r -u here (user namespaces disabled)")
    script = 'hostname elsewhere && exec "$@"'
    argv = ["unshare", "-r", "-u", "sh", "-c", script, "sh", sys.executable, "-m", "rollouts", *args]
    done = subprocess.run(argv, cwd=rollouts.cwd, env=rollouts.env, capture_output=True, text=True, timeout=60)
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.mark.slow  # processes in user namespaces of their own
def test_os_mode_refuses_approvals_and_requests_from_inside_a_user_namespace(rollouts: Rollouts) -> None:
    made = rollouts.run("config", "create", "web", "--require-approval", "--approval-identity", "os", "--", "true")
    assert made.exit_code == 0, made
    assert rollouts.run("--as", "alice", "rollout", "latest", "web").exit_code == 0
    before = rollouts.event_count()
    assert_refused(_unshared(rollouts, "--as", "bob", "rollout", "approve", "web"), "records no OS user")
    assert_refused(_unshared(rollouts, "--as", "carol", "rollout", "latest", "web", "--supersede"), "user namespace")
    assert rollouts.event_count() == before
    assert "waiting for approval" in rollouts.run("rollout", "status", "web").stdout
    assert rollouts.run("audit").exit_code == 0


@pytest.mark.parametrize("blank", ["", " ", "\t "])
def test_an_empty_or_blank_as_is_refused_and_creates_nothing(rollouts: Rollouts, blank: str) -> None:
    refused = rollouts.run("--as", blank, "config", "create", "web", "--", "true")
    assert refused.exit_code == 2 and refused.stderr.startswith("error:") and len(refused.stderr.splitlines()) == 1
    assert "white space" in refused.stderr and not rollouts.home.exists()


def test_a_blank_rollouts_actor_is_refused_naming_the_variable(rollouts: Rollouts) -> None:
    from_env = rollouts.sh("config", "create", "web", "--", "true", env={"ROLLOUTS_ACTOR": " \t"})
    assert from_env.exit_code == 2 and "ROLLOUTS_ACTOR" in from_env.stderr and not rollouts.home.exists()
