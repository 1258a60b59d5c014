"""`audit` folds the log itself, and the chain cannot be switched off (7.1, I5, I8): what the views or a
replaced log say is checked against the log and against what the home has seen."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rollouts.adapters.store import chain
from tests.conftest import POSTGRES, Rollouts
from tests.integration.log.test_hash_chain import Log, history

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def audited(rollouts: Rollouts, code: int) -> dict[str, Any]:
    result = rollouts.sh("audit", "-o", "json")
    assert result.exit_code == code, result
    return json.loads(result.stdout)


def view_file(rollouts: Rollouts, name: str) -> Path:
    """The file that serves view `name` in the home (the only one there after catch-ups)."""
    found = list((rollouts.home / "projections").glob(f"{name}-*.db"))
    assert len(found) == 1, found
    return found[0]


def edit_view(rollouts: Rollouts, name: str, sql: str) -> None:
    with sqlite3.connect(view_file(rollouts, name)) as conn:
        assert conn.execute(sql).rowcount > 0


def forge(rollouts: Rollouts) -> None:
    """Change an event and write the whole chain again over it: a log of the same id and length whose
    chain verifies on its own."""
    Log(rollouts).edit(3)
    select = "SELECT {0}, originator_id, originator_version, topic, state FROM {1} ORDER BY {0}"
    if rollouts.store is None:
        with sqlite3.connect(rollouts.home / "events.db") as conn:
            rows = conn.execute(select.format("rowid", "stored_events")).fetchall()
            conn.executemany("UPDATE rollouts_chain SET hash = ? WHERE position = ?", rehashed(rows))
        return
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{rollouts.store.split("schema=")[1]}"')
        rows = conn.execute(select.format("notification_id", "rollouts_events")).fetchall()
        with conn.cursor() as cursor:
            cursor.executemany("UPDATE rollouts_chain SET hash = %s WHERE position = %s", rehashed(rows))


def rehashed(rows: list[Any]) -> list[tuple[str, int]]:
    running, found = chain.ZERO, []
    for position, stream, version, topic, state in rows:
        running = chain.link(running, stream, version, topic, bytes(state), position)
        found.append((running, position))
    return found


def test_an_untouched_home_audits_and_verifies_ok(rollouts_on: Rollouts) -> None:
    verdict = history(rollouts_on)
    assert audited(rollouts_on, 0) == {
        "ok": True,
        "events": verdict["events"],
        "violations": [],
        "views_differing": [],
    }
    assert rollouts_on.sh("audit").stdout.startswith(f"ok: {verdict['events']} events checked")


def test_chain_rows_deleted_fail_verify_and_audit(rollouts_on: Rollouts) -> None:
    history(rollouts_on)
    Log(rollouts_on).execute("DELETE FROM rollouts_chain", "DELETE FROM rollouts_chain")
    verified = rollouts_on.sh("log", "verify")
    assert verified.exit_code == 1 and "have no chain record" in verified.stdout, verified
    assert "written before the chain" not in verified.stdout
    found = audited(rollouts_on, 1)
    assert {v["rule"] for v in found["violations"]} == {"I8"} and not found["ok"]
    assert any("no chain record" in v["message"] for v in found["violations"])


def test_edited_view_rows_fail_audit_naming_the_view(rollouts_on: Rollouts) -> None:
    history(rollouts_on)
    assert audited(rollouts_on, 0)["ok"]  # (every view made, and caught up)
    edit_view(rollouts_on, "history", "UPDATE deployments SET phase = 'Failed' WHERE revision = 1")
    edit_view(rollouts_on, "audit", "UPDATE events SET actor = 'nobody@else' WHERE position = 2")
    shown = rollouts_on.sh("rollout", "history", "web", "-o", "json")
    assert "Failed" in shown.stdout  # the views say it ...
    found = audited(rollouts_on, 1)  # ... the log does not
    assert sorted(v["view"] for v in found["violations"]) == ["audit", "history"]
    assert {v["rule"] for v in found["violations"]} == {"I5"}
    assert {d["name"]: d["tables"] for d in found["views_differing"]} == {
        "history": {"deployments": 1},
        "audit": {"events": 1},
    }
    assert [d["name"] for d in found["views_differing"]] == ["history", "audit"]  # in the views' order, always
    text = rollouts_on.sh("audit")
    assert text.exit_code == 1 and "view history differs from the log's fold" in text.stdout
    assert rollouts_on.sh("projections", "rebuild", "history", "audit").exit_code == 0
    assert audited(rollouts_on, 0)["ok"]


def test_edited_rules_in_the_audit_view_do_not_hide_a_violation(rollouts_on: Rollouts) -> None:
    """The rules are checked on the log's fold: an audit view edited to hide an event hides nothing."""
    history(rollouts_on)
    assert audited(rollouts_on, 0)["ok"]
    edit_view(rollouts_on, "audit", "UPDATE events SET type = 'DeployerCreated' WHERE type = 'DeployerClaimed'")
    found = audited(rollouts_on, 1)
    assert [v.get("view") for v in found["violations"]] == ["audit"]


def test_a_forged_log_of_the_same_id_and_length_is_reported_in_a_bound_home(rollouts_on: Rollouts) -> None:
    verdict = history(rollouts_on)
    forge(rollouts_on)
    binding = rollouts_on.home / "runtime" / "binding.json"
    seen = binding.read_text()
    binding.unlink()  # where no home has seen the log, the forged chain holds on its own
    assert rollouts_on.sh("log", "verify").exit_code == 0
    binding.write_text(seen)
    verified = rollouts_on.sh("log", "verify")
    assert verified.exit_code == 1, verified
    assert f"BROKEN at position {verdict['head']}: the home has seen position {verdict['head']}" in verified.stdout
    assert verdict["head_hash"] in verified.stdout
    found = audited(rollouts_on, 1)
    assert [(v["rule"], v["position"]) for v in found["violations"]] == [("I8", verdict["head"])]
