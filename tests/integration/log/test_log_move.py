"""A move is not a copy (DESIGN 7.3): a sealed log refuses writes and claims, an import is a new log, and a
copy without its seal imports only as a fork whose open deployments fail; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real subprocesses, controllers and stores


@pytest.fixture
def target(rollouts_on: Rollouts, tmp_path: Path) -> Iterator[Rollouts]:
    """An empty store of the source's backend, with a home of its own (a schema of its own on PostgreSQL)."""
    other = Rollouts(tmp_path / "target-home", rollouts_on.cwd)
    if rollouts_on.store:
        other.store = rollouts_on.store + "_to"
        other.env["ROLLOUTS_STORE"] = other.store
    yield other
    if other.store:
        assert schema_exists(other.store) is not None  # (the drop below must reach the server)
        import psycopg

        from tests.conftest import POSTGRES

        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other.store.rpartition("=")[2]}" CASCADE')


def schema_exists(store: str) -> bool:
    import psycopg

    from tests.conftest import POSTGRES

    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        found = conn.execute("SELECT to_regnamespace(%s)", (store.rpartition("=")[2],)).fetchone()
        return found is not None and found[0] is not None


def made_nothing(target: Rollouts) -> bool:
    """Whether the target holds no log and no home: nothing made, not even a log id."""
    if target.store and schema_exists(target.store):
        return False
    return not target.home.exists()


def app_with(rollouts: Rollouts, marker: Path, command: str = "true") -> None:
    argv = ["sh", "-c", f'echo "$ROLLOUT_DEPLOYER" >> {marker}; {command}']
    assert rollouts.sh("config", "create", "app", "--", *argv).exit_code == 0


def verified(rollouts: Rollouts) -> dict:
    result = rollouts.sh("log", "verify", "-o", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def audited(rollouts: Rollouts) -> bool:
    return bool(json.loads(rollouts.sh("audit", "-o", "json").stdout)["ok"])


def latest_row(rollouts: Rollouts) -> dict:
    return json.loads(rollouts.sh("rollout", "history", "app", "-o", "json").stdout)[-1]


def test_a_copy_without_its_seal_cannot_run_a_deployer_twice(
    rollouts_on: Rollouts, target: Rollouts, tmp_path: Path
) -> None:
    """The reproduction of issue 32: latest, export, import, then a controller on each log."""
    marker = tmp_path / "ran"
    app_with(rollouts_on, marker)
    assert rollouts_on.sh("rollout", "latest", "app").exit_code == 0
    backup = tmp_path / "log.jsonl"
    backup.write_text(rollouts_on.sh("log", "export").stdout)

    plain = target.sh("log", "import", str(backup))
    assert plain.exit_code == 1 and plain.stderr.count("\n") == 1, plain
    assert "--seal" in plain.stderr and "--fork" in plain.stderr
    assert made_nothing(target)

    forked = target.sh("log", "import", "--fork", str(backup))
    assert forked.exit_code == 0, forked.stderr
    row = latest_row(target)
    assert row["phase"] == "Failed" and row["reason"].startswith("forked: log ")
    assert target.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert marker.read_text().split() == ["app-1-deploy-1"]  # once: by the source, which goes on
    source, copy = verified(rollouts_on), verified(target)
    assert copy["log_id"] != source["log_id"] and copy["origin"]["log_id"] == source["log_id"]
    assert copy["origin"]["fork"] is True
    assert audited(rollouts_on) and audited(target)


def test_a_sealed_log_refuses_writes_and_claims_and_its_move_runs_the_deployer_once(
    rollouts_on: Rollouts, target: Rollouts, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    app_with(rollouts_on, marker)
    assert rollouts_on.sh("config", "create", "api", "--", "true").exit_code == 0
    assert rollouts_on.sh("rollout", "latest", "app").exit_code == 0
    # a move carries no open work (DESIGN 7.11): the deployment ends before the seal
    assert rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    sealed = rollouts_on.sh("log", "export", "--seal", "--reason", "to the new store")
    assert sealed.exit_code == 0, sealed.stderr
    *lines, end = [json.loads(line) for line in sealed.stdout.splitlines()]
    assert end["end"] is True and end["events"] == len(lines) and end["head"] == lines[-1]["position"]
    assert lines[-1]["type"] == "Sealed" and lines[-1]["data"]["reason"] == "to the new store"
    count = rollouts_on.event_count()

    old = rollouts_on.sh("controller", "run", "--once")
    assert old.exit_code == 1 and "is sealed" in old.stderr, old
    for refused in (
        ("rollout", "latest", "api"),
        ("config", "set", "api", "--env", "A=1"),
        ("freeze", "api", "--reason", "x"),
    ):
        result = rollouts_on.sh(*refused)
        assert result.exit_code == 1 and result.stderr.startswith("error: the log ") and "sealed" in result.stderr
    again = rollouts_on.sh("log", "export", "--seal")
    assert again.exit_code == 1 and "sealed" in again.stderr
    assert rollouts_on.event_count() == count
    assert rollouts_on.sh("rollout", "status", "app").exit_code == 0  # reads still work
    assert marker.read_text().split() == ["app-1-deploy-1"]

    (tmp_path / "log.jsonl").write_text(sealed.stdout)
    moved = target.sh("log", "import", str(tmp_path / "log.jsonl"))
    assert moved.exit_code == 0, moved.stderr
    assert target.event_count() == len(lines) + 1  # exactly one event: the origin
    assert target.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert marker.read_text().split() == ["app-1-deploy-1"]  # nothing of the old history runs again
    assert target.sh("rollout", "latest", "app").exit_code == 0  # the new log goes on
    assert target.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert rollouts_on.sh("controller", "run", "--once").exit_code == 1
    assert marker.read_text().split() == ["app-1-deploy-1", "app-2-deploy-1"]
    assert latest_row(target)["phase"] == "Complete"
    source, new = verified(rollouts_on), verified(target)
    assert source["sealed"] == lines[-1]["position"] and new["sealed"] is None
    assert new["origin"] == {
        "log_id": source["log_id"],
        "head": source["head"],
        "head_hash": source["head_hash"],
        "fork": False,
    }
    assert audited(rollouts_on) and audited(target)


def forged_seal(last: dict) -> dict:
    """A seal line for the log of export line `last`, chained after it, as anyone can append one to a backup."""
    from rollouts.adapters.store import chain

    stream, topic, at = str(uuid.uuid4()), "domain.log:LogSeal.Sealed", last["timestamp"]
    data = {"log_id": last["log_id"], "head": last["position"], "head_hash": last["hash"], "reason": None}
    meta = {"actor": "mallory@test", "os_user": "mallory", "correlation_id": uuid.uuid4().hex}
    stamp = {"_type_": "datetime_iso", "_data_": at}
    document = {"timestamp": stamp, "originator_topic": "domain.log:LogSeal", **data, "meta": meta}
    state = json.dumps(document, separators=(",", ":"))
    return {
        "position": last["position"] + 1,
        "stream": stream,
        "stream_version": 1,
        "type": "Sealed",
        "timestamp": at,
        "data": data,
        "meta": meta,
        "hash": chain.link(last["hash"], stream, 1, topic, state.encode(), last["position"] + 1),
        "log_id": last["log_id"],
        "topic": topic,
        "state": state,
        "chain": last["chain"],
    }


def test_a_seal_is_refused_while_a_deployment_runs_and_a_fork_fails_it(
    rollouts_on: Rollouts, target: Rollouts, tmp_path: Path
) -> None:
    marker, go = tmp_path / "ran", tmp_path / "go"
    app_with(rollouts_on, marker, f"while [ ! -e {go} ]; do sleep 0.1; done")
    assert rollouts_on.sh("rollout", "latest", "app").exit_code == 0
    controller = rollouts_on.popen("controller", "run", "--interval", "0.2", "-q")
    try:
        deadline = time.monotonic() + 30
        while latest_row(rollouts_on)["phase"] != "Running":
            assert time.monotonic() < deadline, "the deployment never ran"
            time.sleep(0.2)
        count = rollouts_on.event_count()
        refused = rollouts_on.sh("log", "export", "--seal")
        assert refused.exit_code == 1 and "Pending or Running" in refused.stderr and "app version 1" in refused.stderr
        assert refused.stdout == "" and rollouts_on.event_count() == count
        (tmp_path / "log.jsonl").write_text(rollouts_on.sh("log", "export").stdout)  # a backup, in flight
        go.touch()
    finally:
        go.touch()
        deadline = time.monotonic() + 30
        while latest_row(rollouts_on)["phase"] == "Running" and time.monotonic() < deadline:
            time.sleep(0.2)
        controller.terminate()
        controller.wait(30)
    # The refused seal, forged on the backup: not a move either (a move of it left two live copies)
    *lines, end = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    seal = forged_seal(lines[-1])
    end |= {"events": len(lines) + 1, "head": seal["position"]}
    (tmp_path / "sealed.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [*lines, seal, end]))
    moved = target.sh("log", "import", str(tmp_path / "sealed.jsonl"))
    assert moved.exit_code == 1 and moved.stderr.count("\n") == 1, moved
    assert (
        "ends with a seal while app revision 1 is New, Pending or Running" in moved.stderr and "--fork" in moved.stderr
    )
    assert made_nothing(target)
    forked = target.sh("log", "import", "--fork", str(tmp_path / "log.jsonl"))
    assert forked.exit_code == 0, forked.stderr
    row = latest_row(target)
    assert row["phase"] == "Failed" and "forked" in row["reason"]  # not Running for ever
    assert target.sh("controller", "run", "--until-idle", "--timeout", "20", "-q").exit_code == 0
    assert target.sh("rollout", "retry", "app").exit_code == 0  # the config is not blocked
    assert audited(target) and audited(rollouts_on)


@pytest.mark.parametrize("content", ["", "not json\n", "broken"])
def test_a_failed_import_leaves_nothing(rollouts_on: Rollouts, target: Rollouts, tmp_path: Path, content: str) -> None:
    source = tmp_path / "log.jsonl"
    if content == "broken":  # a sealed export with one line changed
        assert rollouts_on.sh("config", "create", "app", "--", "true").exit_code == 0
        lines = rollouts_on.sh("log", "export", "--seal").stdout.splitlines()
        changed = json.loads(lines[0])
        changed["data"]["name"] = "other"
        content = "\n".join([json.dumps(changed), *lines[1:]]) + "\n"
    source.write_text(content)
    result = target.sh("log", "import", str(source))
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result
    assert made_nothing(target)


def test_the_fence_holds_for_a_writer_that_opened_the_log_before_the_seal(tmp_path: Path, backend_store) -> None:
    """The seal is checked in the transaction that appends: an application opened before it is refused too."""
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.application import new_meta
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.service.moves import seal
    from rollouts.adapters.store.log_recorder import LogSealed
    from rollouts.domain.spec import Spec

    early = open_app(Home(tmp_path / "a"), backend_store)
    early.create_config("app", Spec(command=["true"]), new_meta("t"))
    late = open_app(Home(tmp_path / "b") if backend_store else Home(tmp_path / "a"), backend_store)
    seal(late, None, new_meta("t"))
    head = early.recorder.max_notification_id()
    with pytest.raises(LogSealed, match="sealed"):
        early.latest("app", None, False, new_meta("t"))
    assert early.recorder.max_notification_id() == head
    early.close()
    late.close()


def test_a_controller_running_when_the_log_is_sealed_stops_naming_the_seal(
    rollouts_on: Rollouts, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    app_with(rollouts_on, marker)
    controller = rollouts_on.popen("controller", "run", "--interval", "0.2")
    try:
        time.sleep(1.5)  # (it runs, with nothing to do)
        assert controller.poll() is None
        assert rollouts_on.sh("log", "export", "--seal").exit_code == 0
        assert controller.wait(30) == 1
        assert "is sealed" in controller.stderr.read()  # type: ignore[union-attr]
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()


def forged_move(lines: list[dict], end: dict) -> str:
    """An export with a seal appended to it, as anyone can append one to a backup: the file, end marker and all."""
    seal = forged_seal(lines[-1])
    return "".join(
        json.dumps(e) + "\n" for e in [*lines, seal, end | {"events": len(lines) + 1, "head": seal["position"]}]
    )


def test_a_seal_is_refused_while_a_deployment_is_new_and_a_seal_after_one_is_no_move(
    rollouts_on: Rollouts, target: Rollouts, tmp_path: Path
) -> None:
    """Issue 46, item 1 (DESIGN 7.11): a deployment New, no controller yet, is open work that a move may not
    carry (the next controller of either copy claims it)."""
    marker = tmp_path / "ran"
    app_with(rollouts_on, marker)
    assert rollouts_on.sh("rollout", "latest", "app").exit_code == 0
    count = rollouts_on.event_count()
    refused = rollouts_on.sh("log", "export", "--seal")
    assert refused.exit_code == 1 and refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1
    assert "New, Pending or Running" in refused.stderr and "app version 1" in refused.stderr, refused
    assert refused.stdout == "" and rollouts_on.event_count() == count
    *lines, end = [json.loads(line) for line in rollouts_on.sh("log", "export").stdout.splitlines()]
    (tmp_path / "sealed.jsonl").write_text(forged_move(lines, end))
    moved = target.sh("log", "import", str(tmp_path / "sealed.jsonl"))
    assert moved.exit_code == 1 and "app revision 1 is New, Pending or Running" in moved.stderr, moved
    assert "--fork" in moved.stderr and made_nothing(target)
    forked = target.sh("log", "import", "--fork", str(tmp_path / "sealed.jsonl"))
    assert forked.exit_code == 0, forked.stderr
    assert latest_row(target)["phase"] == "Failed"
    for log in (target, rollouts_on):
        assert log.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert marker.read_text().split() == ["app-1-deploy-1"]  # once: by the source


def test_a_byte_copy_sealed_behind_the_sources_back_cannot_run_a_deployer_twice(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    """Issue 46, item 1 as reported: `rollout latest` (no controller), events.db copied to another home, sealed
    there and imported into a third: the seal is refused, so is the plain import of the copy, and the
    deployer runs once, in the original."""
    import sqlite3

    marker = tmp_path / "ran"
    app_with(rollouts, marker)
    assert rollouts.sh("rollout", "latest", "app").exit_code == 0
    copy, third = Rollouts(tmp_path / "copy-home", rollouts.cwd), Rollouts(tmp_path / "third-home", rollouts.cwd)
    copy.home.mkdir(mode=0o700)
    with sqlite3.connect(rollouts.home / "events.db") as source, sqlite3.connect(copy.home / "events.db") as into:
        source.backup(into)  # the file as it stands (a byte copy of a quiet log)
    (copy.home / "events.db").chmod(0o600)
    sealed = copy.sh("log", "export", "--seal")
    assert sealed.exit_code == 1 and "New, Pending or Running" in sealed.stderr, sealed
    (tmp_path / "copy.jsonl").write_text(copy.sh("log", "export").stdout)
    plain = third.sh("log", "import", str(tmp_path / "copy.jsonl"))
    assert plain.exit_code == 1 and "without its seal" in plain.stderr, plain
    for home in (third, rollouts):
        assert home.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert marker.read_text().split() == ["app-1-deploy-1"]
