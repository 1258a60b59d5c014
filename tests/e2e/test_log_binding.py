"""A home is bound to one log: another log, or one that went back, is refused until `home rebind` (7.1, I7)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import Rollouts
from tests.integration.log.test_hash_chain import Log

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def rollout(rollouts: Rollouts, code: int = 0) -> None:
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0
    result = rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q")
    assert result.exit_code == code, result.stderr


def setup(rollouts: Rollouts, tmp_path: Path) -> Path:
    marker = tmp_path / "ran"
    command = ["sh", "-c", f'echo "$ROLLOUT_DEPLOYER" >> {marker}']
    assert rollouts.sh("config", "create", "web", "--", *command).exit_code == 0
    rollout(rollouts)
    return marker


def logged(rollouts: Rollouts) -> tuple[int, str]:
    """(events, head hash) of the store's log; (0, "") when there is none (log verify refuses to read one)."""
    verified = rollouts.sh("log", "verify", "-o", "json")
    if verified.exit_code not in (0, 1):  # (1: a broken log still has its events and head)
        assert verified.exit_code in (4, 5) and "no log" in verified.stderr, verified
        return 0, ""
    document = json.loads(verified.stdout)
    return document["events"], document["head_hash"] if document["events"] else ""


def refused(rollouts: Rollouts, *args: str, says: str) -> None:
    before = logged(rollouts)
    result = rollouts.sh(*args)
    assert result.exit_code == 5, (args, result)
    assert result.stderr.startswith("error:") and says in result.stderr and result.stderr.count("\n") == 1
    assert logged(rollouts) == before  # nothing appended


def test_a_log_put_back_from_a_backup_is_refused_and_its_reused_names_never_complete(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    marker = setup(rollouts, tmp_path)
    backup = tmp_path / "backup.db"
    shutil.copy(rollouts.home / "events.db", backup)  # a backup at version 1 (the WAL was checkpointed)
    rollout(rollouts)  # version 2 runs web-2-deploy-1
    assert marker.read_text().split() == ["web-1-deploy-1", "web-2-deploy-1"]

    for side in ("-wal", "-shm"):
        (rollouts.home / f"events.db{side}").unlink(missing_ok=True)
    shutil.copy(backup, rollouts.home / "events.db")

    refused(rollouts, "rollout", "latest", "web", says="the log went back")
    refused(rollouts, "controller", "run", "--once", says="the log went back")
    refused(rollouts, "projections", "rebuild", says="the log went back")
    status = rollouts.sh("rollout", "status", "web")
    assert status.exit_code == 0 and "scratch views" in status.stderr
    assert status.stdout.strip() == "web version 1 (attempt 1): Complete"  # what this log says, not the old views
    assert rollouts.sh("events").exit_code == 0
    audited = rollouts.sh("audit")  # reads, and says what the home has seen that the log lost
    assert audited.exit_code == 1 and "the home has seen position" in audited.stdout, audited

    rebound = rollouts.sh("home", "rebind")
    assert rebound.exit_code == 0, rebound.stderr
    events = json.loads(rollouts.sh("events", "--type", "Rebound", "-o", "json").stdout)
    assert len(events) == 1 and events[0]["actor"] == "tester@test"
    assert events[0]["data"]["old_seen"] > events[0]["data"]["head"]

    rollout(rollouts)  # version 2 again in this history: the runtime still holds web-2-deploy-1
    history = json.loads(rollouts.sh("rollout", "history", "web", "--revision", "2", "-o", "json").stdout)
    assert history[0]["phase"] == "Failed"
    assert "no claim of this log made" in history[0]["reason"]
    assert marker.read_text().split() == ["web-1-deploy-1", "web-2-deploy-1"]  # nothing ran for it

    assert rollouts.sh("rollout", "retry", "web").exit_code == 0
    assert rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert rollouts.sh("rollout", "status", "web").stdout.strip() == "web version 2 (attempt 2): Complete"
    assert marker.read_text().split() == ["web-1-deploy-1", "web-2-deploy-1", "web-2-deploy-2"]
    assert rollouts.sh("audit").exit_code == 0


def put_back(rollouts: Rollouts, copy: Path) -> None:
    for side in ("-wal", "-shm"):
        (rollouts.home / f"events.db{side}").unlink(missing_ok=True)
    shutil.copy(copy, rollouts.home / "events.db")


def test_a_copy_of_the_log_that_went_another_way_is_refused_even_with_a_higher_head(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    """Head not below what the home saw, another history: the home's views and runtime were made from
    the history it saw, so it must not go on (the views mixed both histories). The rebind onto the older
    copy renamed that log (its next positions are new changes), so the newer copy is another log now."""
    setup(rollouts, tmp_path)
    older, newer = tmp_path / "older.db", tmp_path / "newer.db"
    shutil.copy(rollouts.home / "events.db", older)
    rollout(rollouts)
    rollout(rollouts)
    shutil.copy(rollouts.home / "events.db", newer)  # versions 1-3, all Complete
    put_back(rollouts, older)
    assert rollouts.sh("home", "rebind").exit_code == 0
    assert rollouts.sh("config", "set", "web", "--", "sh", "-c", "exit 3").exit_code == 0
    rollout(rollouts)  # version 2 of this history: Failed
    put_back(rollouts, newer)  # the wrong backup put back: its head is above what the home saw

    says = "but the store holds log"
    refused(rollouts, "rollout", "latest", "web", says=says)
    refused(rollouts, "controller", "run", "--once", says=says)
    status = rollouts.sh("rollout", "status", "web")
    assert status.exit_code == 0 and says in status.stderr and "scratch views" in status.stderr
    assert status.stdout.strip() == "web version 3 (attempt 1): Complete"  # this log's own history alone
    history = json.loads(rollouts.sh("rollout", "history", "web", "-o", "json").stdout)
    assert [(row["version"], row["phase"]) for row in history] == [(1, "Complete"), (2, "Complete"), (3, "Complete")]
    assert rollouts.sh("home", "rebind").exit_code == 0
    assert rollouts.sh("rollout", "status", "web").stderr == ""


def test_a_log_whose_chain_hash_was_removed_where_the_home_has_seen_it_is_refused(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    """Writes refuse, and `log verify` and `audit` report both the events without hashes and the head lost."""
    setup(rollouts, tmp_path)
    head = json.loads(rollouts.sh("log", "verify", "-o", "json").stdout)["head"]
    Log(rollouts).execute("DELETE FROM rollouts_chain", "DELETE FROM rollouts_chain")
    refused(rollouts, "rollout", "latest", "web", says=f"has seen position {head}")
    assert "but the log now has no hash there" in rollouts.sh("rollout", "status", "web").stderr
    verified = rollouts.sh("log", "verify")
    assert verified.exit_code == 1
    assert f"BROKEN at position 1: events 1..{head} ({head}) have no chain record" in verified.stdout
    assert f"BROKEN at position {head}: the home has seen position {head} of this log" in verified.stdout
    audited = rollouts.sh("audit")
    assert audited.exit_code == 1 and audited.stdout.count("VIOLATION I8") == 2, audited


def test_an_emptied_event_store_is_another_log(rollouts: Rollouts, tmp_path: Path) -> None:
    setup(rollouts, tmp_path)
    for name in ("events.db", "events.db-wal", "events.db-shm"):
        (rollouts.home / name).unlink(missing_ok=True)
    refused(rollouts, "config", "create", "api", "--", "true", says="belongs to log")
    refused(rollouts, "controller", "run", "--once", says="belongs to log")


def test_one_home_pointed_at_two_postgres_schemas_refuses_the_second(
    rollouts: Rollouts, tmp_path: Path, postgres_url: str
) -> None:
    rollouts.env["ROLLOUTS_STORE"] = rollouts.store = postgres_url
    setup(rollouts, tmp_path)
    first = rollouts.sh("log", "verify", "-o", "json").stdout
    other = postgres_url + "x"  # another schema of the same database
    try:
        rollouts.env["ROLLOUTS_STORE"] = rollouts.store = other
        refused(rollouts, "config", "create", "api", "--", "true", says="belongs to log")
        refused(rollouts, "controller", "run", "--once", says="belongs to log")
    finally:
        import psycopg

        from tests.conftest import POSTGRES

        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other.split("schema=")[1]}" CASCADE')
    rollouts.env["ROLLOUTS_STORE"] = rollouts.store = postgres_url
    assert rollouts.sh("log", "verify", "-o", "json").stdout == first
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0  # its own log is still fine


def test_a_truncated_postgres_log_is_refused_until_rebind(
    rollouts: Rollouts, tmp_path: Path, postgres_url: str
) -> None:
    rollouts.env["ROLLOUTS_STORE"] = rollouts.store = postgres_url
    marker = setup(rollouts, tmp_path)
    head = json.loads(rollouts.sh("log", "verify", "-o", "json").stdout)["head"]
    rollout(rollouts)
    Log(rollouts).truncate_after(head)
    refused(rollouts, "rollout", "latest", "web", says="the log went back")
    assert rollouts.sh("home", "rebind").exit_code == 0
    rollout(rollouts)
    assert marker.read_text().split() == ["web-1-deploy-1", "web-2-deploy-1"]
    status = rollouts.sh("rollout", "status", "web")
    assert status.exit_code == 1 and "no claim of this log made" in status.stdout


def test_rebind_stops_a_deployer_that_runs_for_a_history_that_is_gone(rollouts: Rollouts, tmp_path: Path) -> None:
    assert rollouts.sh("config", "create", "web", "--", "sleep", "60").exit_code == 0
    assert rollouts.sh("config", "create", "api", "--", "sleep", "60").exit_code == 0
    assert rollouts.sh("rollout", "latest", "api").exit_code == 0
    assert rollouts.sh("controller", "run", "--once", "-q").exit_code == 0  # api-1-deploy-1 runs, in both
    backup = tmp_path / "backup.db"
    shutil.copy(rollouts.home / "events.db", backup)
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0
    assert rollouts.sh("controller", "run", "--once", "-q").exit_code == 0  # web-1-deploy-1: after the backup
    for side in ("-wal", "-shm"):
        (rollouts.home / f"events.db{side}").unlink(missing_ok=True)
    shutil.copy(backup, rollouts.home / "events.db")

    rebound = rollouts.sh("home", "rebind", "--yes")  # it stops a deployer: asked first, unless --yes
    assert rebound.exit_code == 0, rebound.stderr
    assert "stopped web-1-deploy-1" in rebound.stdout and "api-1" not in rebound.stdout
    states = {d["name"]: d["state"] for d in json.loads(rollouts.sh("deployers", "list", "-o", "json").stdout)}
    assert states == {"web-1-deploy-1": "stopped", "api-1-deploy-1": states["api-1-deploy-1"]}
    assert states["api-1-deploy-1"] in ("created", "running")  # still this log's: left alone
    assert rollouts.sh("rollout", "cancel", "api").exit_code == 0
    assert rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0


@pytest.mark.parametrize(
    "text", ["garbage", "[]", '{"log_id": null, "seen": 1e999}', '{"log_id": null, "seen": true}', '{"seen": "3"}']
)
def test_an_unreadable_binding_is_repaired_by_the_rebind_its_error_points_to(rollouts: Rollouts, text: str) -> None:
    """The refusal says "run 'rollouts home rebind'"; that command must then work, not refuse the same way.
    JSON that is not a binding's (a list, a seen position that is no whole number) is as unreadable: it
    crashed every command (exit 70)."""
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    (rollouts.home / "runtime" / "binding.json").write_text(text)
    refused = rollouts.sh("rollout", "latest", "web")
    assert refused.exit_code == 5 and "home rebind" in refused.stderr, refused
    for reading in (("log", "verify"), ("events",)):
        said = rollouts.sh(*reading)
        assert said.exit_code in (0, 1, 5) and "internal error" not in said.stderr, said
    planned = rollouts.sh("home", "rebind", "--dry-run")
    assert planned.exit_code == 0 and "was an unreadable binding" in planned.stdout, planned
    rebound = rollouts.sh("home", "rebind")
    assert rebound.exit_code == 0 and "was an unreadable binding" in rebound.stdout, rebound
    assert rollouts.sh("rollout", "latest", "web").stdout == "1\n"
    assert rollouts.sh("audit").exit_code == 0
