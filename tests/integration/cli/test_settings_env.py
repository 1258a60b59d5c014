"""Settings read from the environment (ROLLOUTS_*) are checked as options are: a bad value is a usage
error (exit 2) on one line naming the variable, before anything is opened or created (DESIGN 7)."""

from __future__ import annotations

import json

import pytest
from conftest import Rollouts

from rollouts.adapters.settings import SETTINGS

NUMBERS = ["ROLLOUTS_LEASE_SECONDS", "ROLLOUTS_NOTIFY_LEASE_SECONDS", "ROLLOUTS_NOTIFY_TIMEOUT"]
BAD = {name: ["abc", "-5", "0", "1e3", "٣"] for name in NUMBERS} | {"ROLLOUTS_FREEZE_PROJECTIONS": ["yes", "2"]}


def test_every_setting_read_from_the_environment_is_checked_here() -> None:
    assert set(BAD) == set(SETTINGS)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_setting_is_a_usage_error_naming_it_from_the_real_command(rollouts: Rollouts, name: str) -> None:
    """As a subprocess, the command a user runs: exit 2, one `error:` line, no home made, no traceback."""
    result = rollouts.sh("config", "list", env={name: BAD[name][0]})
    assert result.exit_code == 2, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert name in result.stderr
    assert not rollouts.home.exists()


@pytest.mark.parametrize(("name", "value"), [(name, value) for name, values in BAD.items() for value in values[1:]])
def test_each_bad_value_is_refused(rollouts: Rollouts, monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    result = rollouts.run("config", "create", "web", "--", "true")
    assert result.exit_code == 2, result
    assert result.stderr.startswith(f"error: {name}=") and name in result.stderr
    assert not rollouts.home.exists()


@pytest.mark.parametrize(
    ("name", "value"),
    [("ROLLOUTS_LEASE_SECONDS", "0.5"), ("ROLLOUTS_NOTIFY_TIMEOUT", "12"), ("ROLLOUTS_FREEZE_PROJECTIONS", "0")],
)
def test_a_good_setting_is_taken(rollouts: Rollouts, monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ROLLOUTS_STORE", "sqlite:///tmp/events.db"),
        ("ROLLOUTS_STORE", "postgresql://u@127.0.0.1/db?sslmod=require"),
        ("ROLLOUTS_HOME", "   "),
    ],
)
def test_a_bad_home_or_store_from_the_environment_names_the_variable(rollouts: Rollouts, name: str, value: str) -> None:
    """The options' own variables are settings too: the error says which variable to fix, not an
    option the user never typed."""
    result = rollouts.sh("config", "list", env={name: value})
    assert result.exit_code == 2, result
    assert result.stderr.startswith(f"error: {name}") and result.stderr.count("\n") == 1, result.stderr
    assert "--store" not in result.stderr and "--home" not in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["ROLLOUTS_STORE", "ROLLOUT_STORE"])
def test_claim_check_names_the_variable_its_bad_store_came_from(rollouts: Rollouts, name: str) -> None:
    result = rollouts.sh("claim", "check", f"{'0' * 32}:1", env={name: "mysql://x@h/db"})
    assert result.exit_code == 2, result
    assert result.stderr.startswith(f"error: {name}: ") and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("bob\nVIOLATION I1 at position 1", "U+000A"),  # a second line of output, in a table or a line of `audit`
        ("bob\x1b[2J", "U+001B"),  # an escape sequence: clears the terminal that shows `events`
        ("\u202ebob", "U+202E"),  # a direction override: shows as another name
        ("b" * 257, "at most 256"),
    ],
)
def test_an_actor_that_could_pass_for_other_output_is_refused(rollouts: Rollouts, value: str, problem: str) -> None:
    """`--as` labels every event and is shown as it is: a name that could pass for other rows is refused
    (exit 2, one line), from the option or its variable, and the refused command creates nothing."""
    by_option = rollouts.sh("--as", value, "config", "create", "web", "--", "true")
    assert by_option.exit_code == 2 and "'--as'" in by_option.stderr and problem in by_option.stderr, by_option
    by_variable = rollouts.sh("config", "create", "web", "--", "true", env={"ROLLOUTS_ACTOR": value})
    assert by_variable.exit_code == 2, by_variable
    assert by_variable.stderr.startswith("error: ROLLOUTS_ACTOR=") and by_variable.stderr.count("\n") == 1
    assert problem in by_variable.stderr
    assert not rollouts.home.exists()
    names = ["Zoë Ångström@laptop", "محمد\u200cرضا", "\U0001f469\u200d\U0001f4bb alice", "jane.doe+ops@example.com"]
    for n, name in enumerate(names):  # (a zero-width joiner or non-joiner belongs to names and emoji)
        shown = rollouts.sh("--as", name, "config", "create", f"web{n}", "--", "true")
        assert shown.exit_code == 0, shown
    assert [e["actor"] for e in json.loads(rollouts.sh("events", "-o", "json").stdout)] == names
    table = rollouts.sh("events").stdout  # and a table shows them whole, joiners kept
    assert all(name in table for name in names), table


def test_a_default_actor_that_could_pass_for_other_output_is_refused(rollouts: Rollouts) -> None:
    """With no --as, the actor is USER or LOGNAME (getpass reads them first) @ host: checked as --as is."""
    del rollouts.env["ROLLOUTS_ACTOR"]
    forged = {"USER": "bob\nVIOLATION I1 at position 1", "LOGNAME": "bob\nVIOLATION I1 at position 1"}
    refused = rollouts.sh("config", "create", "web", "--", "true", env=forged)
    assert refused.exit_code == 2, refused
    assert refused.stderr.startswith("error: the default actor 'bob\\nVIOLATION") and "U+000A" in refused.stderr
    assert refused.stderr.count("\n") == 1 and not rollouts.home.exists()
    assert rollouts.sh("--as", "bob", "config", "create", "web", "--", "true", env=forged).exit_code == 0
    plain = rollouts.sh("config", "create", "api", "--", "true", env={"USER": "carol", "LOGNAME": "carol"})
    assert plain.exit_code == 0, plain
    assert json.loads(rollouts.sh("events", "-o", "json").stdout)[-1]["actor"].startswith("carol@")
