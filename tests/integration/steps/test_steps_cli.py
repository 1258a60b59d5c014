"""The options of DESIGN 7.6 at the command line: kept, shown and removed; promote and abort refuse with nothing
to act on (exit 1). In-process, no controller. Each bad value's one error line, exit 2, nothing appended, on
create and on set, is a row of the table in tests/integration/cli/test_cli_errors.py."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.conftest import Rollouts


def test_the_options_are_kept_shown_and_removed(rollouts: Rollouts) -> None:
    options = ["--steps", "10,100", "--step-pause", "manual", "--verify", "check --fast", "--verify-count", "2"]
    assert rollouts.run("config", "create", "web", *options, "--auto-rollback", "--", "true").exit_code == 0
    spec = json.loads(rollouts.run("config", "show", "web", "-o", "json").stdout)["spec"]
    assert (spec["steps"], spec["step_pause"], spec["verify"], spec["verify_count"]) == (
        [10, 100],
        "manual",
        ["check", "--fast"],
        2,
    )
    assert spec["auto_rollback"] is True and spec["verify_interval"] == 10
    shown = rollouts.run("config", "show", "web").stdout
    assert "Steps:          10,100 (pause between: manual (rollout promote))" in shown
    assert rollouts.run("config", "set", "web", "--steps", "", "--verify", "", "--no-auto-rollback").exit_code == 0
    spec = json.loads(rollouts.run("config", "show", "web", "-o", "json").stdout)["spec"]
    assert (spec["steps"], spec["verify"], spec["auto_rollback"]) == (None, None, False)


def test_promote_and_abort_with_nothing_to_act_on_are_refused(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--steps", "10,100", "--", "true").exit_code == 0
    before = rollouts.event_count()
    promoted = rollouts.run("rollout", "promote", "web")
    assert (promoted.exit_code, promoted.stderr) == (1, "error: config web has no paused rollout to promote\n")
    aborted = rollouts.run("rollout", "abort", "web")
    assert (aborted.exit_code, aborted.stderr) == (1, "error: config web has no rollout in progress to abort\n")
    assert rollouts.event_count() == before
    assert rollouts.run("rollout", "promote", "nope").exit_code == 4


def test_abort_of_a_new_deployment_fails_it_at_once_and_rolls_back(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    assert rollouts.run("rollout", "abort", "web", "--reason", "wrong build").exit_code == 0
    rows = json.loads(rollouts.run("rollout", "history", "web", "-o", "json").stdout)
    assert [(r["phase"], r["reason"]) for r in rows] == [("Failed", "aborted: wrong build")]  # nothing Complete before
    assert rollouts.run("audit").exit_code == 0


def test_the_help_spells_step_pause_as_it_is_accepted(rollouts: Rollouts) -> None:
    """`--step-pause SECONDS|manual` (DESIGN 7.6): the help once showed SECONDS|MANUAL, a value refused."""
    for verb in ("create", "set"):
        shown = rollouts.sh("config", verb, "--help").stdout
        assert "--step-pause SECONDS|manual" in shown and "MANUAL" not in shown, shown
