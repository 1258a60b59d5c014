"""Freezes and approvals through the CLI (in-process): what status, show and history say, and the refusals
that depend on an approval given (bad input to freeze, unfreeze and approve is in the table of
tests/integration/cli/test_cli_errors.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

REFUSED = 1
FUTURE = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0, tzinfo=None).isoformat()


def as_(rollouts: Rollouts, actor: str, *args: str) -> Result:
    return rollouts.run("--as", actor, *args)


@pytest.fixture
def approving(rollouts: Rollouts) -> Rollouts:
    """Config web requiring approval, its version 1 triggered by alice."""
    assert rollouts.run("config", "create", "web", "--require-approval", "--", "true").exit_code == 0
    assert as_(rollouts, "alice", "rollout", "latest", "web").exit_code == 0
    return rollouts


def assert_refused(result: Result, code: int, words: str) -> None:
    assert result.exit_code == code, result
    assert result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1, result
    assert words in result.stderr and "Traceback" not in result.stderr + result.stdout


def test_approving_what_needs_no_approval_or_is_not_waiting_is_refused(approving: Rollouts) -> None:
    assert as_(approving, "bob", "rollout", "approve", "web").exit_code == 0
    before = approving.event_count()
    again = as_(approving, "bob", "rollout", "approve", "web")
    assert_refused(again, REFUSED, "not waiting for an approval")
    assert approving.event_count() == before
    assert approving.run("config", "create", "api", "--", "true").exit_code == 0
    assert approving.run("rollout", "latest", "api").exit_code == 0
    before = approving.event_count()
    assert_refused(as_(approving, "bob", "rollout", "approve", "api"), REFUSED, "needs no approval")
    assert approving.event_count() == before


def test_approving_a_config_that_never_rolled_out_is_refused_as_nothing_waiting(rollouts: Rollouts) -> None:
    """DESIGN 7.4: nothing waiting for approval is exit 1, as for a config whose rollouts are all approved;
    a --revision it does not have is still exit 4. Run as the user runs it."""
    assert rollouts.sh("config", "create", "web", "--require-approval", "--", "true").exit_code == 0
    before = rollouts.event_count()
    assert_refused(rollouts.sh("--as", "bob", "rollout", "approve", "web"), REFUSED, "nothing waiting for an approval")
    missing = rollouts.sh("--as", "bob", "rollout", "approve", "web", "--revision", "1")
    assert_refused(missing, 4, "has no revision 1")
    assert rollouts.event_count() == before


def test_status_history_and_show_say_who_approved_and_who_froze_why_until_when(approving: Rollouts) -> None:
    status = approving.run("rollout", "status", "web")
    assert status.stdout == "web version 1 (attempt 1): New; waiting for approval (rollout approve, by another actor)\n"
    approved = as_(approving, "bob", "rollout", "approve", "web")
    assert approved.exit_code == 0 and approved.stdout == "web version 1 attempt 1 approved by bob\n"
    assert "Approval:    by bob" in approving.run("rollout", "history", "web", "--revision", "1").stdout
    (row,) = json.loads(approving.run("rollout", "history", "web", "-o", "json").stdout)
    assert (row["needs_approval"], row["approved_by"]) == (True, "bob")

    assert as_(approving, "carol", "freeze", "web", "--until", FUTURE, "--reason", "release week").exit_code == 0
    until = datetime.fromisoformat(FUTURE).replace(tzinfo=UTC).isoformat()
    line = f"frozen (config) by carol: release week, until {until}"
    assert approving.run("rollout", "status", "web").stdout == f"web version 1 (attempt 1): New; {line}\n"
    status = json.loads(approving.run("rollout", "status", "web", "-o", "json").stdout)
    assert status["frozen"] is True and [f["by"] for f in status["freezes"]] == ["carol"]
    assert (status["needs_approval"], status["approved_by"]) == (True, "bob")
    assert f"Frozen:         {line}" in approving.run("config", "show", "web").stdout
    shown = json.loads(approving.run("config", "show", "web", "-o", "json").stdout)
    assert shown["frozen"] is True and shown["spec"]["require_approval"] is True
    (freeze,) = shown["freezes"]
    assert {k: freeze[k] for k in ("scope", "by", "reason", "until")} == {
        "scope": "config",
        "by": "carol",
        "reason": "release week",
        "until": until,
    }
    assert as_(approving, "dave", "freeze", "--all", "--reason", "incident").exit_code == 0
    scopes = [f["scope"] for f in json.loads(approving.run("config", "show", "web", "-o", "json").stdout)["freezes"]]
    assert scopes == ["config", "all"]
    assert approving.run("unfreeze", "web").exit_code == 0
    still = approving.run("unfreeze", "web")
    assert still.exit_code == REFUSED and "frozen only by the freeze of all: unfreeze --all" in still.stderr
    assert approving.run("unfreeze", "--all").exit_code == 0
    shown = json.loads(approving.run("config", "show", "web", "-o", "json").stdout)
    assert (shown["frozen"], shown["freezes"]) == (False, [])
    assert approving.run("rollout", "status", "web").stdout == "web version 1 (attempt 1): New\n"


def frozen(rollouts: Rollouts) -> dict[str, bool]:
    return {row["name"]: row["frozen"] for row in json.loads(rollouts.run("config", "list", "-o", "json").stdout)}


def test_unfreeze_all_lifts_every_freeze_in_force_by_name_or_of_all(approving: Rollouts) -> None:
    for name in ("api", "db"):
        assert approving.run("config", "create", name, "--", "true").exit_code == 0
    assert as_(approving, "carol", "freeze", "web", "api", "--reason", "release week").exit_code == 0
    lifted = as_(approving, "carol", "unfreeze", "--all")
    assert (lifted.exit_code, lifted.stderr) == (0, "")
    assert frozen(approving) == {"api": False, "db": False, "web": False}
    events = json.loads(approving.run("events", "--type", "Unfrozen", "-o", "json").stdout)
    assert sorted(e["config"] for e in events) == ["api", "web"]  # db was not frozen: nothing to lift
    assert_refused(as_(approving, "carol", "unfreeze", "--all"), REFUSED, "there is no freeze in force")

    assert as_(approving, "carol", "freeze", "db", "--reason", "disk swap").exit_code == 0
    assert as_(approving, "dave", "freeze", "--all", "--reason", "incident").exit_code == 0
    assert frozen(approving) == {"api": True, "db": True, "web": True}
    assert as_(approving, "dave", "unfreeze", "--all").exit_code == 0
    assert frozen(approving) == {"api": False, "db": False, "web": False}


def test_freezes_and_approvals_are_events_with_who_why_and_until(approving: Rollouts) -> None:
    as_(approving, "carol", "freeze", "web", "--until", FUTURE, "--reason", "release week")
    as_(approving, "carol", "unfreeze", "web")
    as_(approving, "bob", "rollout", "approve", "web")
    events = json.loads(approving.run("events", "web", "-o", "json").stdout)
    found = [(e["type"], e["actor"], e["data"].get("reason"), e["data"].get("until")) for e in events[-3:]]
    until = datetime.fromisoformat(FUTURE).replace(tzinfo=UTC).isoformat()
    assert found == [
        ("Frozen", "carol", "release week", until),
        ("Unfrozen", "carol", None, None),
        ("Approved", "bob", None, None),
    ]


def test_require_approval_is_switched_off_by_config_set_and_another_actors_config_approve(
    approving: Rollouts,
) -> None:
    result = approving.run("config", "set", "web", "--no-require-approval")
    assert result.exit_code == 0 and result.stdout.startswith("config web updated\nlowering the approval guard")
    assert as_(approving, "bob", "config", "approve", "web").stdout == "config web: approval not required\n"
    assert json.loads(approving.run("config", "show", "web", "-o", "json").stdout)["spec"]["require_approval"] is False
    # the version already triggered keeps what it was triggered with
    assert "waiting for approval" in approving.run("rollout", "status", "web").stdout


def test_one_person_cannot_lower_four_eyes(rollouts_on: Rollouts) -> None:
    """7.11: the requester drops --require-approval and rolls out at once: the old policy holds (the new
    version waits for an approval) until another identity runs `config approve`, and `audit` stays ok."""
    r = rollouts_on
    assert r.run("config", "create", "web", "--require-approval", "--", "true").exit_code == 0
    lowered = as_(r, "alice", "config", "set", "web", "--no-require-approval", "--env", "A=1")
    assert lowered.exit_code == 0 and "pending" in lowered.stdout, lowered
    shown = json.loads(r.run("config", "show", "web", "-o", "json").stdout)
    assert shown["spec"]["require_approval"] is True and shown["spec"]["env"] == {"A": "1"}
    assert shown["pending_guard"]["actor"] == "alice" and shown["pending_guard"]["require_approval"] is False
    assert "Pending:" in r.run("config", "show", "web").stdout
    assert as_(r, "alice", "rollout", "latest", "web", "--supersede").exit_code == 0
    assert "waiting for approval" in r.run("rollout", "status", "web").stdout
    assert r.run("controller", "run", "--until-idle", "--timeout", "30").exit_code == 0
    assert "waiting for approval" in r.run("rollout", "status", "web").stdout  # never claimed
    before = r.event_count()
    assert_refused(as_(r, "alice", "config", "approve", "web"), REFUSED, "another actor must approve it")
    assert r.event_count() == before
    assert as_(r, "bob", "config", "approve", "web").exit_code == 0
    shown = json.loads(r.run("config", "show", "web", "-o", "json").stdout)
    assert shown["spec"]["require_approval"] is False and shown["pending_guard"] is None
    assert_refused(as_(r, "bob", "config", "approve", "web"), REFUSED, "no lowering")
    assert r.run("audit").exit_code == 0
