"""I8: the hash chain reports any change to written events, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import POSTGRES, Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


class Log:
    """Direct access to a store's tables, as an attacker with the file or the database would have."""

    def __init__(self, rollouts: Rollouts) -> None:
        self.rollouts = rollouts
        self.store = rollouts.store

    def execute(self, sql_sqlite: str, sql_pg: str, *params: Any) -> None:
        if self.store is None:
            with sqlite3.connect(self.rollouts.home / "events.db") as conn:
                conn.execute(sql_sqlite, params)
            return
        import psycopg

        schema = self.store.split("schema=")[1]
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            conn.execute(sql_pg.replace("?", "%s"), params)

    def edit(self, position: int) -> None:
        self.execute(
            "UPDATE stored_events SET state = CAST(REPLACE(CAST(state AS TEXT), 'tester@test', 'mallory@evl')"
            " AS BLOB) WHERE rowid = ?",
            "UPDATE rollouts_events SET state = convert_to(replace(convert_from(state, 'UTF8'), 'tester@test',"
            " 'mallory@evl'), 'UTF8') WHERE notification_id = ?",
            position,
        )

    def delete(self, position: int) -> None:
        self.execute(
            "DELETE FROM stored_events WHERE rowid = ?",
            "DELETE FROM rollouts_events WHERE notification_id = ?",
            position,
        )

    def swap(self, position: int) -> None:
        for old, new in ((position, -1), (position + 1, position), (-1, position + 1)):
            self.execute(
                "UPDATE stored_events SET rowid = ? WHERE rowid = ?",
                "UPDATE rollouts_events SET notification_id = ? WHERE notification_id = ?",
                new,
                old,
            )

    def insert_copy(self, position: int) -> None:
        self.execute(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) SELECT originator_id,"
            " originator_version + 1000, topic, state FROM stored_events WHERE rowid = ?",
            "INSERT INTO rollouts_events (originator_id, originator_version, topic, state) SELECT originator_id,"
            " originator_version + 1000, topic, state FROM rollouts_events WHERE notification_id = ?",
            position,
        )

    def truncate_after(self, position: int) -> None:
        self.execute(
            "DELETE FROM stored_events WHERE rowid > ?",
            "DELETE FROM rollouts_events WHERE notification_id > ?",
            position,
        )
        self.execute(
            "DELETE FROM rollouts_chain WHERE position > ?", "DELETE FROM rollouts_chain WHERE position > ?", position
        )


def history(rollouts: Rollouts) -> dict[str, Any]:
    """A few rollouts, run by a real controller: seventeen events."""
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    for _ in range(2):
        assert rollouts.sh("rollout", "latest", "web").exit_code == 0
        assert rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    verdict = verify(rollouts)
    assert verdict["ok"] and verdict["events"] >= 15 and verdict["unchained"] == 0
    return verdict


def verify(rollouts: Rollouts, *extra: str, code: int = 0) -> dict[str, Any]:
    result = rollouts.sh("log", "verify", "-o", "json", *extra)
    assert result.exit_code == code, result.stderr
    return json.loads(result.stdout)


def broken_at(rollouts: Rollouts) -> list[int]:
    verdict = verify(rollouts, code=1)
    assert not verdict["ok"]
    audit = rollouts.sh("audit", "-o", "json")
    assert audit.exit_code == 1, audit.stderr
    chain = [v["position"] for v in json.loads(audit.stdout)["violations"] if v["rule"] == "I8"]
    positions = [v["position"] for v in verdict["violations"]]
    assert chain == positions
    return positions


def test_an_untouched_log_verifies_and_prints_the_head_to_keep(rollouts_on: Rollouts) -> None:
    verdict = history(rollouts_on)
    text = rollouts_on.sh("log", "verify")
    assert text.exit_code == 0
    assert text.stdout.strip() == (
        f"ok: {verdict['events']} events, head {verdict['head']} {verdict['head_hash']}, log {verdict['log_id']}"
    )
    assert len(verdict["log_id"]) == 32
    assert verify(rollouts_on, "--expect-head", f"{verdict['head']}:{verdict['head_hash']}")["ok"]


def test_an_edited_event_is_reported_at_its_position(rollouts_on: Rollouts) -> None:
    history(rollouts_on)
    Log(rollouts_on).edit(5)
    assert broken_at(rollouts_on) == [5]
    text = rollouts_on.sh("audit")
    assert text.exit_code == 1 and text.stdout.startswith("VIOLATION I8 at position 5: hash mismatch")


def test_a_first_event_rewritten_as_text_is_a_break_not_an_internal_error(rollouts: Rollouts) -> None:
    # The first row names the log for the views; an edit that leaves SQLite holding text there
    # (no CAST back to a blob) stopped `audit` with a TypeError instead of reporting the break.
    history(rollouts)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        conn.execute(
            "UPDATE stored_events SET state = REPLACE(CAST(state AS TEXT), 'tester@test', 'mallory@evl')"
            " WHERE rowid = 1"
        )
        assert conn.execute("SELECT typeof(state) FROM stored_events WHERE rowid = 1").fetchone() == ("text",)
    assert broken_at(rollouts) == [1]
    text = rollouts.sh("audit")
    assert text.exit_code == 1 and text.stdout.startswith("VIOLATION I8 at position 1: hash mismatch"), text.stderr
    assert "internal error" not in text.stderr


@pytest.mark.parametrize(
    ("column", "value", "audit_code"),
    [("originator_id", "NULL", 5), ("originator_id", "'not-a-uuid'", 1), ("state", "NULL", 5), ("state", "7", 5)],
)
def test_a_first_event_edited_to_another_type_is_reported_not_an_internal_error(
    rollouts: Rollouts, column: str, value: str, audit_code: int
) -> None:
    # The first row also names the log for the views: read through the library (a UUID built from its id,
    # bytes added to its data), an id that is no UUID or data that is no text stopped every read command
    # with an internal error. Now: a break at 1 for `log verify`, and the damage named by the others.
    history(rollouts)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        conn.execute(f"UPDATE stored_events SET {column} = {value} WHERE rowid = 1")
    assert [v["position"] for v in verify(rollouts, code=1)["violations"]] == [1]
    audit = rollouts.sh("audit")
    assert audit.exit_code == audit_code, audit.stderr
    said = audit.stdout if audit_code == 1 else audit.stderr.splitlines()[-1]
    assert said.startswith("VIOLATION I8 at position 1" if audit_code == 1 else "error: the event at position 1 ")
    for command in (("rollout", "history", "web"), ("events",), ("controller", "run", "--until-idle", "-q")):
        result = rollouts.sh(*command)
        assert result.exit_code in (0, 5) and "internal error" not in result.stderr, (command, result.stderr)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("originator_version", "0"),  # out of sequence
        ("originator_version", "'abc'"),  # not a number
        ("topic", "'domain.config:DeploymentConfig.NoSuchEvent'"),  # no such class
        ("topic", "'domain.config:DeploymentConfig'"),  # a class that is not an event
        ("state", "CAST('{}' AS BLOB)"),  # a document without the event's fields
    ],
)
def test_a_command_that_loads_an_edited_event_refuses_and_appends_nothing(
    rollouts: Rollouts, column: str, value: str
) -> None:
    # A write loads its aggregates through the library: an event of the config's stream edited by hand
    # stopped `rollout latest` with an internal error (an OriginatorVersionError, a TopicError, a TypeError
    # from the event's apply). It says the log is damaged (exit 5), and appends nothing.
    history(rollouts)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        conn.execute(f"UPDATE stored_events SET {column} = {value} WHERE rowid = 2")  # the config's RolloutTriggered
    before = rollouts.event_count()
    latest = rollouts.sh("rollout", "latest", "web")
    assert latest.exit_code == 5, latest.stderr
    assert latest.stderr.startswith("error: ") and "the log is damaged" in latest.stderr, latest.stderr
    assert rollouts.event_count() == before


def test_a_first_event_renumbered_to_the_last_position_is_reported_not_read_forever(rollouts: Rollouts) -> None:
    # Reads that walked the positions to the head a batch at a time (the views' rebuild, the audit view's SQL,
    # the parallel export) spun for hours on a head of 2**63 - 1 with one event there and the rest near 1.
    history(rollouts)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        conn.execute("UPDATE stored_events SET rowid = 9223372036854775807 WHERE rowid = 1")
    assert broken_at(rollouts) == [1, 2**63 - 1]
    status = rollouts.sh("rollout", "status", "web", timeout=30)
    assert status.exit_code in (0, 1) and status.stdout.startswith("web version"), status.stderr
    assert rollouts.sh("projections", "rebuild", timeout=30).exit_code == 0
    events = rollouts.sh("events", "-o", "json", timeout=30)
    assert events.exit_code == 0 and json.loads(events.stdout)[-1]["position"] == 2**63 - 1
    exported = rollouts.sh("log", "export", timeout=30)
    assert exported.exit_code == 0
    assert json.loads(exported.stdout.splitlines()[-1])["head"] == 2**63 - 1


@pytest.mark.parametrize(
    ("table", "column", "position", "broken"),
    [
        ("stored_events", "topic", 2, [2]),
        ("stored_events", "originator_id", 1, [1]),  # the first row also names the log for the views
        ("rollouts_chain", "hash", 5, [5, 6]),  # the hash after it is chained on the stored one
    ],
)
def test_text_edited_to_bytes_that_are_not_utf8_is_a_break_and_other_commands_refuse(
    rollouts: Rollouts, table: str, column: str, position: int, broken: list[int]
) -> None:
    # SQLite keeps any bytes as text; Python's sqlite3 refuses to read text that is not UTF-8, with an
    # OperationalError that has no SQLite code: every command, `log verify` included, ended in an internal
    # error. The chain's walk reads such text as stored (its hash then differs); the others name the damage.
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.bootstrap import bootstrap
    from rollouts.adapters.store.verify import verify_log

    history(rollouts)
    key = "rowid" if table == "stored_events" else "position"
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        conn.execute(f"UPDATE {table} SET {column} = CAST(X'C328' AS TEXT) WHERE {key} = ?", (position,))
    assert broken_at(rollouts) == broken
    audit = rollouts.sh("audit")
    assert audit.exit_code == 1 and audit.stdout.startswith(f"VIOLATION I8 at position {position}: hash mismatch")
    recorder = bootstrap(Home(rollouts.home)).open_recorder()
    try:  # the log walked in parts, each by a process of its own, breaks where one walk does
        assert [b.position for b in verify_log(recorder, workers=3, smallest=0).breaks] == broken
    finally:
        recorder.datastore.close()
    before = rollouts.event_count()
    for command in (
        ("rollout", "history", "web"),
        ("rollout", "status", "web"),
        ("projections", "rebuild"),
        ("rollout", "latest", "web"),
        ("controller", "run", "--until-idle", "--timeout", "20", "-q"),
    ):
        result = rollouts.sh(*command)
        assert "internal error" not in result.stderr and result.exit_code != 70, (command, result.stderr)
        if table == "stored_events" and command[0] == "projections":  # a rebuild reads every row
            assert result.exit_code == 5, result.stderr
            assert result.stderr.splitlines() == [
                f"error: the log holds text that is not UTF-8 (column {column}): it was edited by hand;"
                " 'rollouts log verify' shows where"
            ]
        if result.exit_code != 0:
            assert rollouts.event_count() == before, command


@pytest.mark.parametrize(
    ("where", "edit", "error"),
    [
        ("1", "json_remove(CAST(state AS TEXT), '$.name')", "KeyError: 'name'"),  # the config's Registered
        ("2", "json_remove(CAST(state AS TEXT), '$.revision')", "KeyError: 'revision'"),  # its RolloutTriggered
        (
            "(SELECT max(rowid) FROM stored_events)",  # a deployment's last event: a timestamp that does not parse
            "json_set(CAST(state AS TEXT), '$.timestamp._data_', 'yesterday')",
            "ValueError: Invalid isoformat string: 'yesterday'",
        ),
    ],
)
def test_a_document_without_what_the_views_read_is_named_as_damage_not_an_internal_error(
    rollouts: Rollouts, where: str, edit: str, error: str
) -> None:
    # Valid JSON, yet not the event's: the views' folds read its fields by key and parse its timestamps,
    # and a rebuild (or a catch-up after the first row changed the log's identity) ended in an internal
    # error (a KeyError, a ValueError). The fold's failure names the event (exit 5), and nothing is appended.
    history(rollouts)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        conn.execute(f"UPDATE stored_events SET state = CAST({edit} AS BLOB) WHERE rowid = {where}")
        position = conn.execute(f"SELECT {where}").fetchone()[0]
    before = rollouts.event_count()
    rebuild = rollouts.sh("projections", "rebuild")
    assert rebuild.exit_code == 5, rebuild.stderr
    assert rebuild.stderr.splitlines()[-1] == (
        f"error: the event at position {position} cannot be decoded ({error}); the log is damaged:"
        " 'rollouts log verify' shows where"
    )
    assert [v["position"] for v in verify(rollouts, code=1)["violations"]] == [position]
    for command in (("rollout", "history", "web"), ("audit",), ("rollout", "latest", "web")):
        result = rollouts.sh(*command)
        assert "internal error" not in result.stderr and result.exit_code != 70, (command, result.stderr)
        if command[0] != "audit" and result.exit_code != 0:
            assert result.exit_code == 5 and "the log is damaged" in result.stderr, (command, result.stderr)
            assert rollouts.event_count() == before, command


def test_events_of_a_document_whose_meta_is_not_an_object_name_the_damage(rollouts: Rollouts) -> None:
    # `events` reads who ran each command from the document's meta: text there was an AttributeError (exit 70).
    history(rollouts)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        conn.execute(
            "UPDATE stored_events SET state = CAST(json_set(CAST(state AS TEXT), '$.meta', 'x') AS BLOB)"
            " WHERE rowid = 1"
        )
    listed = rollouts.sh("events")
    assert listed.exit_code == 5, listed.stderr
    assert listed.stderr.splitlines()[-1].startswith("error: the event at position 1 cannot be decoded (AttributeError")


def test_a_removed_event_is_reported(rollouts_on: Rollouts) -> None:
    history(rollouts_on)
    Log(rollouts_on).delete(7)
    assert broken_at(rollouts_on) == [7]  # its hash is kept, with no event


def test_reordered_events_are_reported(rollouts_on: Rollouts) -> None:
    history(rollouts_on)
    Log(rollouts_on).swap(10)
    assert broken_at(rollouts_on)[0] == 10


def test_an_inserted_event_is_reported(rollouts_on: Rollouts) -> None:
    verdict = history(rollouts_on)
    Log(rollouts_on).insert_copy(3)
    assert broken_at(rollouts_on) == [verdict["head"] + 1]


def test_a_truncated_tail_is_caught_by_the_home_and_by_the_kept_head(rollouts_on: Rollouts) -> None:
    verdict = history(rollouts_on)
    kept = f"{verdict['head']}:{verdict['head_hash']}"
    Log(rollouts_on).truncate_after(verdict["head"] - 4)
    found = verify(rollouts_on, code=1)  # the home has seen the head that is gone
    assert [v["position"] for v in found["violations"]] == [verdict["head"]]
    assert f"now ends at position {verdict['head'] - 4}" in found["violations"][0]["problem"]
    (rollouts_on.home / "runtime" / "binding.json").unlink()  # elsewhere: a shorter chain is still a chain
    assert verify(rollouts_on)["ok"]
    found = verify(rollouts_on, "--expect-head", kept, code=1)
    assert [v["position"] for v in found["violations"]] == [verdict["head"]]
    assert "is gone" in found["violations"][0]["problem"]


def test_a_kept_head_whose_hash_changed_fails(rollouts_on: Rollouts) -> None:
    verdict = history(rollouts_on)
    other = "0" * 64
    found = verify(rollouts_on, "--expect-head", f"{verdict['head']}:{other}", code=1)
    assert "another hash" in found["violations"][0]["problem"]


def test_a_log_without_its_chain_is_broken_even_where_no_home_has_seen_it(rollouts: Rollouts) -> None:
    """Removing the chain does not switch tamper evidence off: events without their hashes are a break."""
    history(rollouts)
    db = rollouts.home / "events.db"
    with sqlite3.connect(db) as conn:  # the chain and the log's id gone, as if it never had them
        conn.execute("DROP TABLE rollouts_chain")
        conn.execute("DROP TABLE rollouts_log")
        legacy = conn.execute("SELECT count(*) FROM stored_events").fetchone()[0]
    (rollouts.home / "runtime" / "binding.json").unlink()  # and no home that saw it
    found = verify(rollouts, code=1)
    assert found["unchained"] == legacy and [v["position"] for v in found["violations"]] == [1]
    assert f"events 1..{legacy} ({legacy}) have no chain record" in found["violations"][0]["problem"]
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0  # a write chains on from the fold over them
    found = verify(rollouts, code=1)
    assert found["events"] > legacy and [v["position"] for v in found["violations"]] == [1]
    audited = rollouts.sh("audit", "-o", "json")
    assert audited.exit_code == 1
    assert [(v["rule"], v["position"]) for v in json.loads(audited.stdout)["violations"]] == [("I8", 1)]


WRITER = """
import sys
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.home import Home
app = open_app(Home(sys.argv[1]), sys.argv[2] or None)
for _ in range(int(sys.argv[3])):
    app.latest("web", None, True, new_meta("writer"))
"""


def test_several_writers_at_once_keep_one_chain(rollouts_on: Rollouts) -> None:
    assert rollouts_on.sh("config", "create", "web", "--", "true").exit_code == 0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(rollouts_on.home), rollouts_on.store or "", "15"],
            env=rollouts_on.env,
            cwd=rollouts_on.cwd,
        )
        for _ in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    verdict = verify(rollouts_on)
    assert verdict["ok"] and verdict["unchained"] == 0
    assert verdict["events"] == rollouts_on.event_count()


@pytest.mark.parametrize("parts", [2, 3, 5])
def test_a_log_walked_in_parallel_parts_gives_the_verdict_of_one_walk(rollouts: Rollouts, parts: int) -> None:
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.bootstrap import bootstrap
    from rollouts.adapters.store.chain import verify
    from rollouts.adapters.store.verify import verify_log

    history(rollouts)
    recorder = bootstrap(Home(rollouts.home)).open_recorder()
    try:
        whole = verify(recorder.chained_rows(), keep=9, fmt=recorder.chain_format())
        assert recorder.parts(parts, smallest=0) is not None
        assert verify_log(recorder, keep=9, workers=parts, smallest=0) == whole and whole.ok
        for tamper in (lambda log: log.edit(4), lambda log: log.delete(11), lambda log: log.swap(14)):
            tamper(Log(rollouts))
            whole = verify(recorder.chained_rows(), keep=9, fmt=recorder.chain_format())
            assert not whole.ok
            assert verify_log(recorder, keep=9, workers=parts, smallest=0).breaks == whole.breaks
    finally:
        recorder.datastore.close()
