"""Positions are chained (DESIGN 7.11), a log made before keeps its rule, and an export ends with its marker
(issue 46): on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rollouts.adapters.store import chain
from tests.conftest import POSTGRES, Result, Rollouts

pytestmark = pytest.mark.slow  # real subprocesses, controllers and stores


def history(rollouts: Rollouts) -> None:
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    for _ in range(2):
        assert rollouts.sh("rollout", "latest", "web").exit_code == 0
        assert rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0


def exported(rollouts: Rollouts, *args: str) -> tuple[list[dict], dict]:
    """The events of an export, and its end marker."""
    result = rollouts.sh("log", "export", *args)
    assert result.exit_code == 0, result.stderr
    *events, end = [json.loads(line) for line in result.stdout.splitlines()]
    return events, end


def text(lines: list[dict]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def imported(rollouts: Rollouts, tmp_path: Path, name: str, content: str, *args: str) -> tuple[Rollouts, Result]:
    """`content` imported into a new home of its own (a SQLite log), and what the import said."""
    (tmp_path / f"{name}.jsonl").write_text(content)
    target = Rollouts(tmp_path / f"{name}-home", rollouts.cwd)
    return target, target.sh("log", "import", *args, str(tmp_path / f"{name}.jsonl"))


def on_store(rollouts: Rollouts, *statements: str) -> None:
    """Run `statements` on the log's own tables ({events}: the events table, {position}: its positions)."""
    if rollouts.store is None:
        with sqlite3.connect(rollouts.home / "events.db") as conn:
            for sql in statements:
                conn.execute(sql.format(events="stored_events", position="rowid"))
        return
    import psycopg

    with psycopg.connect(POSTGRES) as conn:
        conn.execute(f'SET search_path TO "{rollouts.store.split("schema=")[1]}"')
        for sql in statements:
            conn.execute(sql.format(events="rollouts_events", position="notification_id"))


def test_positions_are_chained_a_renumbered_export_or_log_is_refused(rollouts_on: Rollouts, tmp_path: Path) -> None:
    """Issue 46, item 2: an export edited to positions 1, 5, 9, ... does not import (as a move or a fork),
    and a log whose positions were changed (events and chain rows alike) fails `log verify`."""
    history(rollouts_on)
    events, end = exported(rollouts_on, "--seal")
    assert {e["chain"] for e in events} == {chain.POSITIONED} and end["chain"] == chain.POSITIONED
    renumbered = [e | {"position": 1 + 4 * n} for n, e in enumerate(events)]
    content = text([*renumbered, end | {"head": renumbered[-1]["position"]}])
    for args in ((), ("--fork",)):
        target, result = imported(rollouts_on, tmp_path, f"renumbered{len(args)}", content, *args)
        assert result.exit_code == 1 and result.stderr.startswith("error: line 2 (position 5): "), result
        assert "does not chain" in result.stderr and target.event_count() == 0
    _, good = imported(rollouts_on, tmp_path, "good", text([*events, end]))
    assert good.exit_code == 0, good  # the file as exported moves

    on_store(
        rollouts_on,
        *(
            f"UPDATE {table} SET {column} = {column} + 1000000 WHERE {column} > 2"
            for table, column in (("{events}", "{position}"), ("rollouts_chain", "position"))
        ),
        *(
            f"UPDATE {table} SET {column} = {column} - 1000000 + 10 WHERE {column} > 1000000"
            for table, column in (("{events}", "{position}"), ("rollouts_chain", "position"))
        ),
    )
    verify = rollouts_on.sh("log", "verify")
    assert verify.exit_code == 1 and "BROKEN at position 13: hash mismatch" in verify.stdout, verify


def make_legacy(rollouts: Rollouts) -> None:
    """The log as this program wrote it before positions were chained: its hashes by the old rule, and no
    chain format in its log table. (The home forgets the head it saw: those hashes are rewritten here.)"""
    select = "SELECT {position}, originator_id, originator_version, topic, state FROM {events} ORDER BY {position}"
    if rollouts.store is None:
        with sqlite3.connect(rollouts.home / "events.db") as conn:
            rows = conn.execute(select.format(events="stored_events", position="rowid")).fetchall()
    else:
        import psycopg

        with psycopg.connect(POSTGRES) as conn:
            conn.execute(f'SET search_path TO "{rollouts.store.split("schema=")[1]}"')
            rows = conn.execute(select.format(events="rollouts_events", position="notification_id")).fetchall()
    rows = [(p, s, v, t, bytes(b)) for p, s, v, t, b in rows]
    hashes = chain.hashes_after(chain.ZERO, rows, chain.LEGACY)
    on_store(
        rollouts,
        *(f"UPDATE rollouts_chain SET hash = '{h}' WHERE position = {r[0]}" for h, r in zip(hashes, rows, strict=True)),
        "ALTER TABLE rollouts_log DROP COLUMN chain",
    )
    (rollouts.home / "runtime" / "binding.json").unlink()


def test_a_log_made_before_positions_were_chained_verifies_goes_on_and_moves_with_its_rule(
    rollouts_on: Rollouts, tmp_path: Path
) -> None:
    history(rollouts_on)
    make_legacy(rollouts_on)
    before = json.loads(rollouts_on.sh("log", "verify", "-o", "json").stdout)
    assert before["ok"] is True, before
    assert rollouts_on.sh("rollout", "latest", "web").exit_code == 0  # written on, by its own rule
    assert rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert rollouts_on.sh("audit").exit_code == 0
    events, end = exported(rollouts_on, "--seal")
    assert {e["chain"] for e in events} == {chain.LEGACY} and end["chain"] == chain.LEGACY
    sealed = json.loads(rollouts_on.sh("log", "verify", "-o", "json").stdout)
    assert sealed["ok"] and sealed["head_hash"] == events[-1]["hash"]

    target, result = imported(rollouts_on, tmp_path, "moved", text([*events, end]))
    assert result.exit_code == 0, result
    moved = json.loads(target.sh("log", "verify", "-o", "json").stdout)
    assert moved["ok"] and moved["origin"]["head_hash"] == sealed["head_hash"], moved
    again, _ = exported(target)
    assert [e["hash"] for e in again[: len(events)]] == [e["hash"] for e in events]  # the same hashes
    assert {e["chain"] for e in again} == {chain.LEGACY}  # and the same rule for what it writes
    assert target.sh("rollout", "latest", "web").exit_code == 0
    assert target.sh("log", "verify").exit_code == 0


def test_an_export_cut_at_a_line_boundary_imports_only_as_a_fork(rollouts_on: Rollouts, tmp_path: Path) -> None:
    """Issue 46: every export ends with its marker; a file without it was cut, and says so."""
    history(rollouts_on)
    events, end = exported(rollouts_on, "--seal")
    assert end == {
        "end": True,
        "log_id": events[0]["log_id"],
        "events": len(events),
        "head": events[-1]["position"],
    } | {"chain": chain.POSITIONED}
    for name, lines in (("no-marker", events), ("shorter", events[:-2])):
        target, cut = imported(rollouts_on, tmp_path, name, text(lines))
        assert cut.exit_code == 1 and cut.stderr.count("\n") == 1, cut
        assert "without its end marker" in cut.stderr and "--fork" in cut.stderr and target.event_count() == 0
        target, forked = imported(rollouts_on, tmp_path, f"{name}-fork", text(lines), "--fork")
        assert forked.exit_code == 0, forked
        assert f"warning: the file was cut after position {lines[-1]['position']}" in forked.stderr
    target, short = imported(rollouts_on, tmp_path, "marker-kept", text([*events[:-2], end]))
    assert short.exit_code == 1 and "the end marker says" in short.stderr and target.event_count() == 0
    target, more = imported(rollouts_on, tmp_path, "after-marker", text([*events, end, events[-1]]))
    assert more.exit_code == 1 and "after the export's end marker" in more.stderr and target.event_count() == 0
