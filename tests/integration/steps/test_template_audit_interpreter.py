"""`audit` holds a built-in provider's measurement to its template revision (DESIGN 7.9, I8) without holding
it to the auditing process's own interpreter path: the measurement runs as the controller's interpreter
(`python -m rollouts measure --resolved`), which no event names, so a controller started as `python` and an
audit run from the console script (`#!.../python3`) agree. Found by the chaos run with templates; what the
log does say (the rest of the argv, the resolved template) is still held."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

if TYPE_CHECKING:
    from tests.conftest import Rollouts

# Nothing listens on port 9 (discard) on loopback: each measurement is inconclusive at once, let pass.
TEMPLATE = ["--provider", "http", "--url", "http://127.0.0.1:9/x", "--count", "1", "--inconclusive-limit", "1"]


def ok(rollouts: Rollouts, *args: str) -> str:
    result = rollouts.sh(*args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def rewrite_argv(rollouts: Rollouts, name: str, change: dict[int, str]) -> None:
    runtime = sqlite3.connect(rollouts.home / "runtime" / "runtime.db")
    (argv,) = runtime.execute("SELECT argv FROM deployers WHERE name = ?", (name,)).fetchone()
    ran = json.loads(argv)
    for index, value in change.items():
        ran[index] = value
    runtime.execute("UPDATE deployers SET argv = ? WHERE name = ?", (json.dumps(ran), name))
    runtime.commit()
    runtime.close()


def test_a_measurement_run_by_another_interpreter_path_is_not_a_changed_log(rollouts: Rollouts) -> None:
    ok(rollouts, "analysis", "create", "probe", *TEMPLATE)
    ok(rollouts, "config", "create", "web", "--analysis", "probe", "--", "true")
    ok(rollouts, "rollout", "latest", "web")
    ok(rollouts, "controller", "run", "--until-idle", "--interval", "0.1", "-q")
    assert json.loads(ok(rollouts, "rollout", "history", "web", "-o", "json"))[0]["phase"] == "Complete"
    assert ok(rollouts, "audit").startswith("ok: ")
    # The controller as another install starts it: the interpreter's path differs from the auditor's.
    rewrite_argv(rollouts, "web-1-verify-1-1", {0: "/opt/elsewhere/bin/python3"})
    assert ok(rollouts, "audit").startswith("ok: ")
    # What the log calls for still holds: a measurement that ran another module is reported.
    rewrite_argv(rollouts, "web-1-verify-1-1", {2: "elsewhere"})
    audited = rollouts.sh("audit")
    assert audited.exit_code == 1, audited.stdout
    assert "web-1-verify-1-1 ran otherwise than analysis template probe@1 says" in audited.stdout
