"""Edits of a home's files that must not leave `audit` saying ok (7.1, I5, I8): what the views say
is checked against the log's own fold, whatever shape the edited files were given."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from tests.conftest import Rollouts
from tests.integration.log.test_audit_fold import audited, view_file
from tests.integration.log.test_hash_chain import history

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
    assert found["views_differing"][0]["tables"] == {"deployments": 1}
    diff = rollouts.sh("projections", "diff", "history", "-o", "json")
    assert diff.exit_code == 1 and "Traceback" not in diff.stderr and "internal error" not in diff.stderr, diff
    rows = [(d["live"] is None, d["rebuilt"] is None) for d in _loads(diff.stdout)]
    assert sorted(rows) == [(False, True), (True, False)]  # version 2 once too many, version 1 missing


def _loads(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(text)
    return found
