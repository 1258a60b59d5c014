"""The CLI verbs against the contract: refusals, read-after-write, JSON shapes, exit codes, files and help."""

from __future__ import annotations

import os
import re
import stat
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import click
import pytest

from rollouts.adapters.cli import cli
from tests.support.cli_results import as_json, ok

if TYPE_CHECKING:
    from tests.conftest import Rollouts


def history(rollouts: Rollouts, name: str = "web") -> list[dict[str, Any]]:
    return as_json(rollouts.run("rollout", "history", name, "-o", "json"))


def events(rollouts: Rollouts, *args: str) -> list[dict[str, Any]]:
    return as_json(rollouts.run("events", *args, "-o", "json"))


def until_idle(rollouts: Rollouts) -> None:
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))


def completed(rollouts: Rollouts, command: str = "true") -> None:
    """Config web whose version 1 ran `command` to its end."""
    ok(rollouts.run("config", "create", "web", "--", command))
    ok(rollouts.run("rollout", "latest", "web"))
    until_idle(rollouts)


def created(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--", "true"))


def opened(rollouts: Rollouts) -> None:
    created(rollouts)
    ok(rollouts.run("rollout", "latest", "web"))


def paused(rollouts: Rollouts) -> None:
    created(rollouts)
    ok(rollouts.run("rollout", "pause", "web"))


@pytest.mark.slow  # real processes
@pytest.mark.parametrize(
    ("setup", "args"),
    [
        pytest.param(opened, ["rollout", "latest", "web"], id="latest while a deployment is open"),
        pytest.param(paused, ["rollout", "latest", "web"], id="latest while paused"),
        pytest.param(paused, ["rollout", "latest", "web", "--supersede"], id="latest with supersede while paused"),
        pytest.param(completed, ["rollout", "retry", "web"], id="retry of a Complete deployment"),
        pytest.param(opened, ["rollout", "retry", "web"], id="retry of an open deployment"),
        pytest.param(created, ["rollout", "cancel", "web"], id="cancel with nothing ever triggered"),
        pytest.param(completed, ["rollout", "cancel", "web"], id="cancel with nothing open"),
        pytest.param(paused, ["rollout", "pause", "web"], id="pause twice"),
        pytest.param(created, ["rollout", "resume", "web"], id="resume when not paused"),
        pytest.param(created, ["rollout", "undo", "web"], id="undo with no deployment"),
        pytest.param(completed, ["rollout", "undo", "web"], id="undo with no earlier Complete"),
        pytest.param(opened, ["rollout", "undo", "web", "--to-revision", "1"], id="undo while a deployment is open"),
        pytest.param(created, ["config", "create", "web", "--", "true"], id="create of an existing config"),
    ],
)
def test_a_refused_verb_exits_1_with_one_error_line_and_appends_nothing(
    rollouts: Rollouts, setup: Any, args: list[str]
) -> None:
    setup(rollouts)
    before = rollouts.event_count()
    result = rollouts.run(*args)
    assert result.exit_code == 1, result
    assert result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1, result
    assert result.stdout == ""
    assert rollouts.event_count() == before


@pytest.mark.parametrize("verb", [["latest"], ["undo", "--to-revision", "1"]])
def test_a_refusal_offers_only_options_its_own_command_has(rollouts: Rollouts, verb: list[str]) -> None:
    """`undo` is refused as `latest` is, but has no --supersede: its error must not tell the user to use it."""
    ok(rollouts.sh("config", "create", "web", "--", "true"))
    ok(rollouts.sh("rollout", "latest", "web"))
    refused = rollouts.sh("rollout", *verb, "web")
    assert refused.exit_code == 1 and "in progress" in refused.stderr, refused
    offered = set(re.findall(r"--[a-z][a-z-]*", refused.stderr))
    own = ok(rollouts.sh("rollout", verb[0], "--help")).stdout
    assert {option for option in offered if option not in own} == set(), refused.stderr


@pytest.mark.slow  # real processes
def test_a_reason_of_several_lines_cannot_pass_for_more_fields_of_a_detail_or_status_line(rollouts: Rollouts) -> None:
    created(rollouts)
    ok(rollouts.run("rollout", "latest", "web", "--reason", "fix\nActor:       mallory@evil"))
    detail = ok(rollouts.run("rollout", "history", "web", "--revision", "1")).stdout.splitlines()
    assert [line for line in detail if line.startswith("Actor:")] == ["Actor:       tester@test"], detail
    assert "Message:     fix Actor: mallory@evil" in detail
    ok(rollouts.run("freeze", "web", "--reason", "release\nweb version 1 (attempt 1): Complete"))
    status = ok(rollouts.run("rollout", "status", "web")).stdout
    assert status.count("\n") == 1 and "release web version 1" in status, status


@pytest.mark.slow  # real processes
def test_the_controller_narrates_in_words_naming_each_deployer_once_it_has_one(rollouts: Rollouts) -> None:
    opened(rollouts)
    said = ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30")).stderr.splitlines()
    lines = [line.split(" ", 1)[1] for line in said if re.match(r"\d\d:\d\d:\d\d ", line)]
    assert lines[0] == "claim (web v1 attempt 1)", said
    assert {line.rsplit(" (", 1)[1] for line in lines} == {"web v1 attempt 1)"}, said
    assert all(line.split(" (")[0].endswith("web-1-deploy-1") for line in lines[1:]), said
    said_words = {word for line in lines for word in line.split(" (")[0].removesuffix(" web-1-deploy-1").split(", ")}
    assert said_words <= {"claim", "create", "created", "started", "exited"} and "exited" in said_words, said


@pytest.mark.slow  # real processes
def test_a_new_version_shows_at_once_in_the_history(rollouts: Rollouts) -> None:
    created(rollouts)
    version = int(ok(rollouts.sh("rollout", "latest", "web", "--reason", "ship 1.4")).stdout)
    rows = as_json(rollouts.sh("rollout", "history", "web", "-o", "json"))
    assert [(r["version"], r["phase"], r["message"]) for r in rows] == [(version, "New", "ship 1.4")]


@pytest.mark.slow  # real processes
def test_history_json_has_the_contract_keys_and_values(rollouts: Rollouts) -> None:
    completed(rollouts)
    ok(rollouts.run("rollout", "latest", "web", "--reason", "second"))
    done, open_ = history(rollouts)
    keys = {"version", "phase", "reason", "attempt", "cause", "message", "created_at", "finished_at"}
    assert keys <= done.keys() and keys <= open_.keys()
    assert (done["version"], done["phase"], done["attempt"], done["cause"]) == (1, "Complete", 1, "manual")
    assert done["reason"] is None and done["message"] is None and done["finished_at"].endswith("+00:00")
    assert (open_["version"], open_["phase"], open_["message"]) == (2, "New", "second")
    assert open_["reason"] is None and open_["finished_at"] is None and open_["created_at"].endswith("+00:00")


def test_a_cancelled_deployment_says_cancelled_in_its_reason(rollouts: Rollouts) -> None:
    opened(rollouts)
    ok(rollouts.run("rollout", "cancel", "web"))
    [row] = history(rollouts)
    assert (row["phase"], row["reason"]) == ("Failed", "cancelled")


def test_events_json_has_the_contract_keys_in_position_order(rollouts: Rollouts) -> None:
    opened(rollouts)
    rows = events(rollouts)
    keys = {"position", "stream", "stream_version", "type", "config", "version", "timestamp", "actor", "data"}
    assert all(keys <= row.keys() for row in rows)
    assert [r["position"] for r in rows] == sorted(r["position"] for r in rows)
    assert len(rows) == rollouts.event_count()
    triggered = next(r for r in rows if r["type"] == "RolloutTriggered")
    assert (triggered["config"], triggered["version"], triggered["actor"]) == ("web", 1, "tester@test")
    assert isinstance(triggered["data"], dict) and triggered["timestamp"].endswith("+00:00")


def test_events_json_data_is_what_the_event_says_without_the_stores_wrappers(rollouts: Rollouts) -> None:
    opened(rollouts)
    rows = events(rollouts)
    assert not [r for r in rows if {"timestamp", "originator_topic"} & r["data"].keys()]
    registered = next(r for r in rows if r["type"] == "Registered")
    assert registered["data"]["name"] == "web"
    created = next(r for r in rows if r["type"] == "Created")
    assert re.fullmatch("[0-9a-f]{32}", created["data"]["config_id"]), created["data"]["config_id"]
    assert created["data"]["revision"] == 1


@pytest.mark.slow  # real processes
def test_deployers_list_json_has_the_contract_keys(rollouts: Rollouts) -> None:
    completed(rollouts)
    [row] = as_json(rollouts.run("deployers", "list", "-o", "json"))
    assert {k: row[k] for k in ("name", "config", "version", "attempt", "state", "exit_code")} == {
        "name": "web-1-deploy-1",
        "config": "web",
        "version": 1,
        "attempt": 1,
        "state": "exited",
        "exit_code": 0,
    }


@pytest.mark.slow  # real processes
def test_audit_json_counts_every_event_and_finds_no_violation(rollouts: Rollouts) -> None:
    completed(rollouts)
    report = as_json(rollouts.run("audit", "-o", "json"))
    assert report == {"ok": True, "events": rollouts.event_count(), "violations": [], "views_differing": []}


def test_the_as_option_names_the_actor_of_the_events(rollouts: Rollouts) -> None:
    created(rollouts)
    before = rollouts.event_count()
    ok(rollouts.sh("--as", "alice", "rollout", "latest", "web"))
    mine = events(rollouts, "--actor", "alice")
    assert mine and len(mine) == rollouts.event_count() - before
    assert {r["actor"] for r in mine} == {"alice"}
    assert {r["actor"] for r in events(rollouts)} == {"alice", "tester@test"}


@pytest.mark.slow  # real processes
@pytest.mark.parametrize("tz", ["America/New_York", "Asia/Tokyo"])
def test_since_without_an_offset_is_utc_whatever_the_local_zone(rollouts: Rollouts, tz: str) -> None:
    created(rollouts)
    [registered] = events(rollouts)
    moment = datetime.fromisoformat(registered["timestamp"]).astimezone(UTC).replace(tzinfo=None)
    env = {"TZ": tz}
    before = (moment - timedelta(minutes=1)).isoformat(timespec="seconds")
    after = (moment + timedelta(minutes=1)).isoformat(timespec="seconds")
    assert len(as_json(rollouts.sh("events", "--since", before, "-o", "json", env=env))) == 1
    assert as_json(rollouts.sh("events", "--since", after, "-o", "json", env=env)) == []


def test_since_with_an_offset_is_that_offset(rollouts: Rollouts) -> None:
    created(rollouts)
    [registered] = events(rollouts)
    moment = datetime.fromisoformat(registered["timestamp"])
    plus_five = timezone_shifted(moment - timedelta(minutes=1), hours=5)
    assert len(events(rollouts, "--since", plus_five)) == 1
    assert events(rollouts, "--since", timezone_shifted(moment + timedelta(minutes=1), hours=-5)) == []


def timezone_shifted(moment: datetime, hours: int) -> str:
    return moment.astimezone(timezone(timedelta(hours=hours))).isoformat(timespec="seconds")


def test_status_exits_4_with_no_deployment(rollouts: Rollouts) -> None:
    created(rollouts)
    result = rollouts.run("rollout", "status", "web")
    assert result.exit_code == 4 and result.stderr.startswith("error:"), result


def test_status_exits_0_while_the_deployment_is_open(rollouts: Rollouts) -> None:
    opened(rollouts)
    assert "New" in ok(rollouts.run("rollout", "status", "web")).stdout


@pytest.mark.slow  # real processes
def test_status_exits_1_once_a_false_deployer_failed(rollouts: Rollouts) -> None:
    completed(rollouts, "false")
    result = rollouts.run("rollout", "status", "web")
    assert result.exit_code == 1 and "Failed" in result.stdout, result


@pytest.mark.slow  # real processes
def test_status_exits_0_once_complete_with_and_without_watch(rollouts: Rollouts) -> None:
    completed(rollouts)
    assert "Complete" in ok(rollouts.run("rollout", "status", "web")).stdout
    assert "Complete" in ok(rollouts.sh("rollout", "status", "web", "--watch", "--timeout", "5")).stdout


@pytest.mark.slow  # real processes
def test_watch_gives_up_with_exit_1_at_its_timeout_when_no_controller_runs(rollouts: Rollouts) -> None:
    opened(rollouts)
    started = time.monotonic()
    result = rollouts.sh("rollout", "status", "web", "--watch", "--timeout", "1")
    assert result.exit_code == 1, result
    assert 1 <= time.monotonic() - started < 15
    assert result.stderr.startswith("error:") and "Traceback" not in result.stderr


@pytest.mark.slow  # real processes
def test_retry_of_a_failed_deployment_opens_the_next_attempt_of_the_same_version(rollouts: Rollouts) -> None:
    completed(rollouts, "false")
    ok(rollouts.run("rollout", "retry", "web"))
    [row] = history(rollouts)
    assert (row["version"], row["attempt"], row["phase"], row["reason"], row["finished_at"]) == (
        1,
        2,
        "New",
        None,
        None,
    )


def test_latest_with_supersede_cancels_the_open_deployment(rollouts: Rollouts) -> None:
    opened(rollouts)
    assert ok(rollouts.run("rollout", "latest", "web", "--supersede")).stdout == "2\n"
    assert [(r["version"], r["phase"], r["reason"]) for r in history(rollouts)] == [
        (1, "Failed", "cancelled"),
        (2, "New", None),
    ]


def test_a_change_while_paused_is_recorded_and_resume_does_not_roll_out(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--trigger", "config-change", "--", "true"))
    ok(rollouts.run("rollout", "pause", "web"))
    ok(rollouts.run("config", "set", "web", "--env", "A=2"))
    ok(rollouts.run("rollout", "resume", "web"))
    assert [r["version"] for r in history(rollouts)] == [1]
    assert as_json(rollouts.run("config", "show", "web", "-o", "json"))["spec"]["env"] == {"A": "2"}


def test_create_with_config_change_trigger_rolls_out_version_1(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--trigger", "config-change", "--", "true"))
    [row] = history(rollouts)
    assert (row["version"], row["cause"], row["phase"]) == (1, "config change", "New")


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(["--env", "A=1"], id="same env"),
        pytest.param(["--", "true"], id="same command"),
        pytest.param(["--trigger", "config-change"], id="same trigger"),
        pytest.param(["--env", "MISSING-"], id="removing an absent key"),
        pytest.param(["--history-limit", "3"], id="history limit only"),
    ],
)
def test_config_set_with_no_change_to_what_runs_triggers_nothing(rollouts: Rollouts, change: list[str]) -> None:
    ok(rollouts.run("config", "create", "web", "--trigger", "config-change", "--env", "A=1", "--", "true"))
    result = ok(rollouts.run("config", "set", "web", *change))
    assert "triggered" not in result.stdout
    assert [r["version"] for r in history(rollouts)] == [1]
    assert len(events(rollouts, "--type", "RolloutTriggered")) == 1


def test_config_set_with_a_real_change_triggers_the_next_version(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--trigger", "config-change", "--env", "A=1", "--", "true"))
    ok(rollouts.run("config", "set", "web", "--env", "A=2"))
    assert [(r["version"], r["cause"]) for r in history(rollouts)] == [(1, "config change"), (2, "config change")]


@pytest.mark.slow  # real processes
def test_home_is_0700_and_its_files_0600_even_under_umask_0(rollouts: Rollouts) -> None:
    for args in (("config", "create", "web", "--", "true"), ("rollout", "latest", "web")):
        proc = rollouts.popen(*args, preexec_fn=lambda: os.umask(0))
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    proc = rollouts.popen("controller", "run", "--until-idle", "--timeout", "30", preexec_fn=lambda: os.umask(0))
    assert proc.wait(timeout=60) == 0
    assert stat.S_IMODE(rollouts.home.stat().st_mode) == 0o700
    assert stat.S_IMODE((rollouts.home / "events.db").stat().st_mode) == 0o600
    for path in rollouts.home.rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


def command_paths() -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = [()]

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            paths.append((*prefix, name))
            if isinstance(command, click.Group):
                walk(command, (*prefix, name))

    walk(cli, ())
    return paths


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "rollouts")
def test_every_command_help_exits_0_with_an_example(rollouts: Rollouts, path: tuple[str, ...]) -> None:
    result = ok(rollouts.run(*path, "--help"))
    assert "Example:" in result.stdout


def test_every_option_taking_a_time_shows_iso_as_its_value() -> None:
    """The contract writes `--since ISO`, `--until ISO`: a help line `--since TEXT` hid what it takes."""
    ctx = click.Context(cli)
    shown = {}
    for path in command_paths():
        command: click.Command | None = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.get_command(ctx, name)
        assert command is not None
        for param in command.params:
            if isinstance(param, click.Option) and "ISO time" in (param.help or ""):
                shown[" ".join((*path, param.opts[0]))] = param.make_metavar(ctx)
    assert shown and {where: metavar for where, metavar in shown.items() if "ISO" not in metavar} == {}, shown


def test_the_module_entry_point_prints_help(rollouts: Rollouts) -> None:
    result = ok(rollouts.sh("--help"))
    assert "Example:" in result.stdout and "rollout" in result.stdout
    assert not rollouts.home.exists()
