"""`projections diff` (7.3): the rows a bug left in a live view, against a rebuild from zero."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real subprocesses and stores


def live_file(rollouts: Rollouts, name: str) -> Path:
    return sorted((rollouts.home / "projections").glob(f"{name}-*.db"))[-1]


def test_a_row_changed_by_hand_is_shown_and_left_alone_until_a_rebuild(rollouts_on: Rollouts) -> None:
    assert rollouts_on.sh("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts_on.sh("rollout", "latest", "web").exit_code == 0
    assert rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    clean = rollouts_on.sh("projections", "diff", "desired", "history", "audit")
    assert clean.exit_code == 0, clean.stderr
    assert clean.stdout.startswith("no difference")

    with sqlite3.connect(live_file(rollouts_on, "history")) as conn:  # what a buggy fold might have written
        conn.execute("UPDATE deployments SET phase = 'Failed', reason = 'bug' WHERE revision = 1")
    found = rollouts_on.sh("projections", "diff", "history", "-o", "json")
    assert found.exit_code == 1
    rows = json.loads(found.stdout)
    assert [(r["projection"], r["live"]["phase"], r["rebuilt"]["phase"]) for r in rows] == [
        ("history", "Failed", "Complete")
    ]
    text = rollouts_on.sh("projections", "diff", "history")
    assert text.exit_code == 1 and '{"phase":"Failed","reason":"bug"}' in text.stdout
    status = json.loads(rollouts_on.sh("rollout", "history", "web", "-o", "json").stdout)
    assert status[0]["phase"] == "Failed"  # diff changed nothing live

    assert rollouts_on.sh("projections", "rebuild", "history", "--shadow").exit_code == 0
    assert rollouts_on.sh("projections", "diff", "history").exit_code == 0
    assert json.loads(rollouts_on.sh("rollout", "history", "web", "-o", "json").stdout)[0]["phase"] == "Complete"
