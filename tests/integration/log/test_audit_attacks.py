"""Edits of a home's files that must not leave `audit` saying ok (7.1, I5, I8): what the views say
is checked against the log's own fold, whatever shape the edited files were given."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from eventsourcing.domain import Snapshot
from eventsourcing.persistence import EventStore

from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain import ids
from tests.conftest import Rollouts
from tests.integration.log.test_audit_fold import audited, view_file
from tests.integration.log.test_hash_chain import Log, history

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def test_a_row_removed_and_another_doubled_in_a_view_without_its_key_fails_audit(rollouts: Rollouts) -> None:
    """The table is made again without its primary key (same columns: it still opens as a view), one
    deployment is removed and another written twice: as many rows as the fold, each equal to one of
    its rows, yet `rollout history` no longer shows version 1."""
    history(rollouts)
    assert audited(rollouts, 0)["ok"]
    with sqlite3.connect(view_file(rollouts, "history")) as conn:
        conn.executescript(
            "CREATE TABLE loose AS SELECT * FROM deployments; DROP TABLE deployments;"
            " ALTER TABLE loose RENAME TO deployments;"
            " DELETE FROM deployments WHERE revision = 1;"
            " INSERT INTO deployments SELECT * FROM deployments WHERE revision = 2;"
        )
    shown = rollouts.sh("rollout", "history", "web", "-o", "json")
    assert shown.exit_code == 0 and [d["version"] for d in _loads(shown.stdout)] == [2, 2]  # the view says it ...
    found = audited(rollouts, 1)  # ... the log does not
    assert [(v["rule"], v.get("view")) for v in found["violations"]] == [("I5", "history")]
    assert list(found["views_differing"][0]["tables"]) == ["deployments"]
    diff = rollouts.sh("projections", "diff", "history", "-o", "json")
    assert diff.exit_code == 1 and "Traceback" not in diff.stderr and "internal error" not in diff.stderr, diff
    rows = [(d["live"] is None, d["rebuilt"] is None) for d in _loads(diff.stdout)]
    assert sorted(rows) == [(False, True), (True, False)]  # version 2 once too many, version 1 missing


def _loads(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(text)
    return found


def test_an_index_that_no_longer_says_what_the_rows_say_fails_audit(rollouts: Rollouts) -> None:
    """The rows stay the log's, but the index that `rollout status` and `rollout history` read by config
    holds version 2 under another name (the index made partial while the row changed back, then made
    whole again): both commands hide version 2, a comparison of the rows alone sees nothing."""
    history(rollouts)
    assert audited(rollouts, 0)["ok"]
    path = view_file(rollouts, "history")
    index = "CREATE UNIQUE INDEX deployments_config ON deployments (config, revision)"
    for sql in (
        "UPDATE deployments SET config = 'hidden' WHERE revision = 2",
        f"PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = '{index} WHERE revision < 0'"
        " WHERE name = 'deployments_config'",
        "UPDATE deployments SET config = 'web' WHERE config = 'hidden'",
        f"PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = '{index}' WHERE name = 'deployments_config'",
    ):
        with sqlite3.connect(path) as conn:  # (one connection each: the schema is read again)
            conn.executescript(sql)
    status = rollouts.sh("rollout", "status", "web")
    assert status.exit_code == 0 and "version 1 " in status.stdout, status  # the view says it ...
    found = audited(rollouts, 1)  # ... the log does not
    assert [(v["rule"], v.get("view")) for v in found["violations"]] == [("I5", "history")]
    assert rollouts.sh("projections", "rebuild", "history").exit_code == 0
    assert "version 2 " in rollouts.sh("rollout", "status", "web").stdout
    assert audited(rollouts, 0)["ok"]


def test_a_view_table_made_again_with_another_collation_fails_audit(rollouts: Rollouts) -> None:
    """Same columns, same rows to a comparison that takes the live table's collation: 'COMPLETE' IS
    'Complete' under NOCASE. What the table is made of is the code's, or the view is not the fold."""
    history(rollouts)
    assert audited(rollouts, 0)["ok"]
    with sqlite3.connect(view_file(rollouts, "history")) as conn:
        made = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'deployments'").fetchone()[0]
        assert "phase TEXT," in made
        conn.executescript(
            "ALTER TABLE deployments RENAME TO old; DROP INDEX deployments_config;"
            f" {made.replace('phase TEXT,', 'phase TEXT COLLATE NOCASE,')};"
            " INSERT INTO deployments SELECT * FROM old; DROP TABLE old;"
            " UPDATE deployments SET phase = upper(phase);"
        )
    shown = rollouts.sh("rollout", "history", "web", "-o", "json")
    assert shown.exit_code == 0 and {d["phase"] for d in _loads(shown.stdout)} == {"COMPLETE"}
    found = audited(rollouts, 1)
    assert [(v["rule"], v.get("view")) for v in found["violations"]] == [("I5", "history")]


def test_a_snapshot_in_the_store_is_not_read_and_a_forged_one_fails_audit(rollouts_on: Rollouts) -> None:
    """Earlier versions kept a config's snapshot every 50 events, outside the chain, and loaded the config
    from its last one: a snapshot forged at the config's latest version with another command made the next
    rollout run that command while `config show` and the chain said nothing of it. This version reads
    none, whatever the library's settings say (a config is its chained events' fold); `audit` still reports
    a snapshot that is not its events' fold, which an earlier version would load."""
    assert rollouts_on.sh("config", "create", "web", "--", "sh", "-c", "echo good").exit_code == 0
    assert rollouts_on.sh("config", "set", "web", "--env", "N=1").exit_code == 0
    assert audited(rollouts_on, 0)["ok"]
    app = open_app(rollouts_on.home, rollouts_on.store)
    try:
        config = app.repository.get(ids.config_id("web"))
        config.spec = {**config.spec, "command": ["sh", "-c", "echo EVIL"]}
        snapshots = app.factory.aggregate_recorder(purpose="snapshots")  # the library's table, made here
        EventStore(app.mapper, snapshots).put([Snapshot.take(config)])
        assert len(app.recorder.snapshot_rows()) == 1
    finally:
        app.close()
    on = {"IS_SNAPSHOTTING_ENABLED": "y", "ROLLOUTS_IS_SNAPSHOTTING_ENABLED": "y"}
    assert rollouts_on.sh("rollout", "latest", "web", env=on).exit_code == 0
    ran = rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q", env=on)
    assert ran.exit_code == 0, ran
    assert rollouts_on.sh("logs", "web").stdout.strip() == "good"  # the config's command, not the snapshot's
    assert rollouts_on.sh("log", "verify").exit_code == 0  # (the chain holds: the snapshot is not in it)
    found = audited(rollouts_on, 1)
    assert [v["rule"] for v in found["violations"]] == ["I8"]
    assert "at version 2 is not what its events fold to" in found["violations"][0]["message"]


def test_a_stream_id_written_another_way_breaks_the_chain(rollouts: Rollouts) -> None:
    """The last event's stream id written with dashes: the same UUID to a reader, another stream to every
    query by id (a config loaded to decide would not see the event, and the next append would take its
    version again), so not the record that was hashed."""
    history(rollouts)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        position, stream = conn.execute("SELECT rowid, originator_id FROM stored_events ORDER BY rowid DESC").fetchone()
        dashed = f"{stream[:8]}-{stream[8:12]}-{stream[12:16]}-{stream[16:20]}-{stream[20:]}"
        conn.execute("UPDATE stored_events SET originator_id = ? WHERE rowid = ?", (dashed, position))
    verified = rollouts.sh("log", "verify")
    assert verified.exit_code == 1 and f"BROKEN at position {position}: hash mismatch" in verified.stdout, verified
    found = audited(rollouts, 1)
    assert (position, "I8") in [(v["position"], v["rule"]) for v in found["violations"]]


@pytest.mark.parametrize(
    ("changed", "ran", "trace"),
    [
        pytest.param(
            ("echo good", "echo EVIL"), "EVIL", 'ran ["sh", "-c", "echo EVIL"] where the log\'s spec says', id="argv"
        ),
        # (a name that starts as the one variable of ours without the ROLLOUT_ prefix does, PWD, is still another)
        pytest.param(('"env":{}', '"env":{"PWD_X":"1"}'), "good", "ran with PWD_X set otherwise", id="env"),
    ],
)
def test_an_event_changed_while_a_controller_ran_it_and_put_back_fails_audit(
    rollouts_on: Rollouts, changed: tuple[str, str], ran: str, trace: str
) -> None:
    """Someone who can write the store changes a deployment's Created event (its command, its env), lets a
    controller run it, and puts the event back: the chain holds again and every view folds to the event as it
    was. The home's runtime kept what was started, out of the store's reach: `audit` holds it to the log's spec."""
    r = rollouts_on
    assert r.sh("config", "create", "web", "--", "sh", "-c", "echo good").exit_code == 0
    assert r.sh("rollout", "latest", "web").exit_code == 0
    (created,) = json.loads(r.sh("events", "web", "--type", "Created", "-o", "json").stdout)
    store = Log(r)

    def replace(old: str, new: str) -> None:
        store.execute(
            "UPDATE stored_events SET state = CAST(REPLACE(CAST(state AS TEXT), ?, ?) AS BLOB) WHERE rowid = ?",
            "UPDATE rollouts_events SET state = convert_to(replace(convert_from(state, 'UTF8'), ?, ?), 'UTF8')"
            " WHERE notification_id = ?",
            old,
            new,
            created["position"],
        )

    replace(*changed)
    done = r.sh("controller", "run", "--until-idle", "--timeout", "30", "-q")
    assert done.exit_code == 0, done
    assert r.sh("logs", "web").stdout.strip() == ran  # what the changed event said ran
    replace(changed[1], changed[0])
    assert r.sh("log", "verify").exit_code == 0  # the chain holds again: the log alone cannot tell
    assert [v["rule"] for v in audited(r, 1)["violations"]] == ["I8", "I5"]  # the views folded the change
    assert r.sh("projections", "rebuild").exit_code == 0  # as audit then says to: the views are the log's again
    found = audited(r, 1)
    assert [(v["rule"], v["config"], v["version"]) for v in found["violations"]] == [("I8", "web", 1)]
    message = found["violations"][0]["message"]
    assert f"web-1-deploy-1 {trace}" in message, message
    assert r.sh("rollout", "latest", "web", "--supersede").exit_code == 0
    assert r.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert len(audited(r, 1)["violations"]) == 1  # the first run's trace stays; the second run is the spec's
