"""The CLI's rough edges (issue 18): bare groups, JSON of every read, completion, NO_COLOR, `logs -f`
on a deployment nothing moves, `events` filters, readable ranges, quoted commands, pruned rows (the bad input
among these edges is in the table of tests/integration/cli/test_cli_errors.py)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
import pytest

from rollouts.adapters.cli import cli

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

USAGE = 2
STYLE = re.compile(rb"\x1b\[[0-9;]*m")  # an SGR sequence: colour, bold...
GROUPS = [
    name
    for name in cli.list_commands(click.Context(cli))
    if isinstance(cli.get_command(click.Context(cli), name), click.Group)
]


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    assert "Traceback" not in result.stderr, result
    return result


def opened(rollouts: Rollouts, *command: str) -> None:
    """Config web with version 1 open (no controller runs)."""
    ok(rollouts.run("config", "create", "web", "--", *(command or ("true",))))
    ok(rollouts.run("rollout", "latest", "web"))


def until_idle(rollouts: Rollouts) -> None:
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))


def complete(rollouts: Rollouts, words: str, shell: str = "bash", home: str | None = None) -> Result:
    """What Tab offers after `words` (the last word the one being typed), by click's env var protocol."""
    env = {
        "_ROLLOUTS_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    if home is not None:
        env["ROLLOUTS_HOME"] = home
    return rollouts.sh(env=env)


def offered(result: Result) -> list[str]:
    ok(result)
    assert result.stderr == "", result
    return [line.split(",", 1)[1] for line in result.stdout.splitlines() if line]


# -- no subcommand: click's help, not a squashed error line -------------------------------


def test_rollouts_alone_prints_its_help_on_stdout_and_exits_0(rollouts: Rollouts) -> None:
    result = ok(rollouts.sh())
    assert result.stdout.startswith("Usage: rollouts [OPTIONS] COMMAND") and "\nCommands:\n" in result.stdout
    assert result.stderr == "" and not rollouts.home.exists()
    for variable in ("ROLLOUTS_HOME", "ROLLOUTS_STORE", "ROLLOUTS_ACTOR"):  # the global options' env vars
        assert f"env var: {variable}" in result.stdout, variable


@pytest.mark.parametrize("group", GROUPS)
def test_a_group_without_its_verb_prints_its_help_on_stderr_and_exits_2(rollouts: Rollouts, group: str) -> None:
    result = rollouts.run(group)
    assert result.exit_code == USAGE, result
    assert result.stdout == "" and "error:" not in result.stderr
    assert result.stderr.startswith(f"Usage: rollouts {group} [OPTIONS] COMMAND") and "\nCommands:\n" in result.stderr
    assert len(result.stderr.splitlines()) > 5


# -- ranges that read, bounds that hold ---------------------------------------------------


def every_command() -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        for name in group.list_commands(click.Context(group)):
            command = group.get_command(click.Context(group), name)
            paths.append((*prefix, name))
            if isinstance(command, click.Group):
                walk(command, (*prefix, name))

    walk(cli, ())
    return paths


def test_help_states_ranges_in_words(rollouts: Rollouts) -> None:
    for path in every_command():
        text = ok(rollouts.run(*path, "--help")).stdout
        assert "<=x" not in text and "x>=" not in text and "x<=" not in text, (path, text)
    create = " ".join(ok(rollouts.run("config", "create", "--help")).stdout.split())
    assert "[1 to 86400]" in create and "[1 to 1000]" in create
    assert "[0 or more]" in " ".join(ok(rollouts.run("events", "--help")).stdout.split())


def test_freeze_usage_shows_names_as_optional_since_all_may_stand_for_them(rollouts: Rollouts) -> None:
    for verb in ("freeze", "unfreeze"):
        usage = ok(rollouts.run(verb, "--help")).stdout.splitlines()[0]
        assert usage == f"Usage: rollouts {verb} [OPTIONS] [NAME]...", usage


def test_the_bounds_themselves_are_accepted_and_set_may_still_remove(rollouts: Rollouts) -> None:
    ok(
        rollouts.run(
            "config", "create", "web", "--history-limit", "1000", "--timeout", "86400", "--env", "K=v", "--", "true"
        )
    )
    ok(rollouts.run("config", "set", "web", "--env", "K-", "--history-limit", "1"))
    spec = json.loads(ok(rollouts.run("config", "show", "web", "-o", "json")).stdout)["spec"]
    assert (spec["env"], spec["history_limit"], spec["timeout"]) == ({}, 1, 86400)


def test_events_of_a_known_type_that_never_happened_is_an_empty_answer(rollouts: Rollouts) -> None:
    opened(rollouts)
    assert json.loads(ok(rollouts.run("events", "--type", "DeployerLost", "-o", "json")).stdout) == []
    assert [e["type"] for e in json.loads(ok(rollouts.run("events", "web", "--revision", "1", "-o", "json")).stdout)]


# -- every read command takes -o json -----------------------------------------------------


def test_status_json_is_the_latest_deployment_as_history_shows_it(rollouts: Rollouts) -> None:
    opened(rollouts)
    document = json.loads(ok(rollouts.run("rollout", "status", "web", "-o", "json")).stdout)
    row = json.loads(ok(rollouts.run("rollout", "history", "web", "-o", "json")).stdout)[-1]
    del row["spec"]
    assert document == {"config": "web", **row, "frozen": False, "freezes": []}  # and the freezes in force
    assert document["phase"] == "New" and document["version"] == 1


def test_status_json_of_a_watch_that_times_out_is_one_document_then_the_error(rollouts: Rollouts) -> None:
    opened(rollouts)
    result = rollouts.run("rollout", "status", "web", "--watch", "--timeout", "0.3", "-o", "json")
    assert result.exit_code == 1 and result.stderr.startswith("error: timed out")
    assert json.loads(result.stdout)["phase"] == "New"


def test_logs_json_of_a_deployment_not_started_has_no_deployers(rollouts: Rollouts) -> None:
    opened(rollouts)
    document = json.loads(ok(rollouts.run("logs", "web", "-o", "json")).stdout)
    assert document == {"config": "web", "version": 1, "phase": "New", "deployers": []}


def test_every_read_command_takes_json(rollouts: Rollouts) -> None:
    """What the README promises: a command that reads offers -o json (writes and runs need not)."""
    writes = {
        ("config", "create"), ("config", "set"), ("config", "approve"), ("home", "rebind"), ("log", "export"),
        ("log", "import"),
        ("projections", "rebuild"), ("controller", "run"), ("deployers", "delete"), ("demo",),
        ("freeze",), ("unfreeze",), ("notify", "add"), ("notify", "remove"),
        ("serve",),  # serve: a server, its API is the -o json
        *(("rollout", verb) for verb in ("latest", "cancel", "retry", "undo", "pause", "resume", "approve")),
        ("rollout", "promote"), ("rollout", "abort"),
        ("analysis", "create"), ("analysis", "set"), ("analysis", "delete"),
    }  # fmt: skip
    reads = [p for p in every_command() if p not in writes and p not in {(g,) for g in GROUPS}]
    assert ("logs",) in reads and ("rollout", "status") in reads
    for path in reads:
        assert "-o, --output [table|json]" in ok(rollouts.run(*path, "--help")).stdout, path


# -- COMMAND column --------------------------------------------------------------------------


def test_config_list_quotes_each_command_as_a_shell_would_need_it(rollouts: Rollouts) -> None:
    commands = {
        "web": ["sh", "-c", 'echo "hi there";  sleep 1'],
        "api": ["printf", "%s|", "two\nlines", "it's", ""],
    }
    for name, argv in commands.items():
        ok(rollouts.run("config", "create", name, "--", *argv))
    lines = ok(rollouts.run("config", "list")).stdout.splitlines()
    start = lines[0].index("COMMAND")
    cells = {line.split()[0]: line[start:] for line in lines[1:]}
    assert shlex.split(cells["web"]) == commands["web"]
    typed = subprocess.run(["bash", "-c", f"{cells['api']}"], capture_output=True, text=True, check=True).stdout
    assert typed == "two\nlines|it's||"


# -- completion ---------------------------------------------------------------------------


def test_completion_offers_config_names_for_every_name_argument(rollouts: Rollouts) -> None:
    for name in ("web", "worker"):
        ok(rollouts.run("config", "create", name, "--", "true"))
    ok(rollouts.run("config", "list"))  # the history view has these two
    ok(rollouts.run("config", "create", "api", "--", "true"))  # and only the log this one
    assert offered(complete(rollouts, "rollouts rollout status w")) == ["web", "worker"]
    assert offered(complete(rollouts, "rollouts logs ")) == ["api", "web", "worker"]
    assert offered(complete(rollouts, "rollouts events a")) == ["api"]
    assert offered(complete(rollouts, f"rollouts --home {rollouts.home} config show wo", home="/nowhere")) == ["worker"]
    zsh = ok(complete(rollouts, "rollouts config set w", shell="zsh")).stdout.split("\n")
    assert "web" in zsh and "worker" in zsh


def test_completion_offers_view_names(rollouts: Rollouts) -> None:
    assert offered(complete(rollouts, "rollouts projections rebuild ")) == ["desired", "history", "audit"]
    assert offered(complete(rollouts, "rollouts projections diff h")) == ["history"]


def test_completion_on_a_missing_home_offers_nothing_and_creates_nothing(rollouts: Rollouts) -> None:
    assert offered(complete(rollouts, "rollouts config show ")) == []
    assert offered(complete(rollouts, "rollouts deployers delete ")) == []
    assert not rollouts.home.exists()


def test_completion_on_broken_files_offers_nothing_and_says_nothing(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--", "true"))
    ok(rollouts.run("config", "list"))
    (rollouts.home / "projections" / "catalog.db").write_bytes(os.urandom(4096))
    (rollouts.home / "runtime" / "runtime.db").write_bytes(b"")
    assert offered(complete(rollouts, "rollouts config show ")) == ["web"]  # from the log
    assert offered(complete(rollouts, "rollouts deployers delete ")) == []
    (rollouts.home / "events.db").write_bytes(os.urandom(4096))
    assert offered(complete(rollouts, "rollouts config show ")) == []


@pytest.mark.slow  # three interpreters, for what click prints
def test_the_docs_enable_completion_in_each_shell_by_a_script_rollouts_prints(rollouts: Rollouts) -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    shells = re.findall(r"_ROLLOUTS_COMPLETE=(\w+)_source rollouts", docs)
    assert sorted(shells) == ["bash", "fish", "zsh"]
    for shell in shells:
        script = ok(rollouts.sh(env={"_ROLLOUTS_COMPLETE": f"{shell}_source"})).stdout
        assert f"_ROLLOUTS_COMPLETE={shell}_complete" in script.replace('"', ""), shell


# -- with real deployers ---------------------------------------------------------------------


@pytest.mark.slow  # real processes
def test_a_finished_deployment_in_json_and_completion_and_pruned_rows(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--history-limit", "1", "--", "sh", "-c", "echo v$ROLLOUT_VERSION"))
    for _ in range(2):
        ok(rollouts.run("rollout", "latest", "web"))
        until_idle(rollouts)
    status = json.loads(ok(rollouts.sh("rollout", "status", "web", "-o", "json")).stdout)
    assert (status["version"], status["phase"]) == (2, "Complete")
    logs = json.loads(ok(rollouts.sh("logs", "web", "-o", "json")).stdout)
    assert logs["phase"] == "Complete"
    assert [(d["name"], d["state"], d["exit_code"], d["output"]) for d in logs["deployers"]] == [
        ("web-2-deploy-1", "exited", 0, "v2\n")
    ]
    assert offered(complete(rollouts, "rollouts deployers delete web-")) == ["web-2-deploy-1"]  # not the pruned one
    table = ok(rollouts.run("deployers", "list", "--all")).stdout.splitlines()
    assert table[0].split()[-1] == "PRUNED"
    assert {line.split()[0]: line.split()[-1] for line in table[1:]} == {
        "web-1-deploy-1": "True",
        "web-2-deploy-1": "False",
    }
    assert "PRUNED" not in ok(rollouts.run("deployers", "list")).stdout
    pruned = ok(rollouts.sh("logs", "web", "--revision", "1"))
    assert pruned.stdout == ""
    assert pruned.stderr == "warning: web version 1: the history limit pruned the output of web-1-deploy-1\n"
    assert ok(rollouts.sh("logs", "web")).stderr == ""  # version 2 kept its output


# -- NO_COLOR ------------------------------------------------------------------------------


def on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 90) -> bytes:
    """What `argv` writes to a pseudo-terminal (so that click believes colour would show)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.execve(argv[0], argv, env)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    os.waitpid(pid, 0)
    os.close(fd)
    return out


def test_a_terminal_shows_clicks_styles_unless_no_color(rollouts: Rollouts) -> None:
    styled = [sys.executable, "-c", "import click; click.secho('x', bold=True)"]
    assert STYLE.search(on_a_terminal(styled, {**rollouts.env}))  # the harness sees colour when there is some


@pytest.mark.slow  # the whole demo, with real processes
def test_demo_on_a_terminal_with_no_color_has_no_escape_sequence(rollouts: Rollouts) -> None:
    env = {**rollouts.env, "NO_COLOR": "1"}
    env.pop("ROLLOUTS_HOME")
    out = on_a_terminal([sys.executable, "-m", "rollouts", "demo"], env)
    assert b"Rollouts demo in" in out and b"Done in" in out, out[-2000:]
    assert not STYLE.search(out), out[:2000]  # (a progress bar still hides and shows the cursor)


def test_free_text_reaches_a_terminal_without_its_control_characters(rollouts: Rollouts) -> None:
    """A reason anyone may write (a freeze's, a rollout's, a sink's URL) holds escape sequences: set a
    window's title, clear the screen, write the clipboard (OSC 52). The tables and lines that show them
    to another operator's terminal show spaces in their place, and every printable character as it is."""
    sequences = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\x07"
    ok(rollouts.sh("config", "create", "web", "--", "true"))
    ok(rollouts.sh("freeze", "web", "--reason", f"x{sequences}y"))
    ok(rollouts.sh("rollout", "latest", "web", "--reason", f"m{sequences}n"))
    ok(rollouts.sh("notify", "add", "ops", "--url", f"http://127.0.0.1:1/{sequences}"))
    env = {**rollouts.env, "NO_COLOR": "1"}  # (no style of click's own either)
    for command in (("rollout", "status", "web"), ("rollout", "history", "web"), ("notify", "list")):
        out = on_a_terminal([sys.executable, "-m", "rollouts", *command], env)
        assert b"\x1b" not in out and b"\x07" not in out, (command, out)
    status = on_a_terminal([sys.executable, "-m", "rollouts", "rollout", "status", "web"], env)
    assert b"x ]0;pwned [2J ]52;c;ZWNobyBwd25lZA== y" in status  # the printable rest, a space for each run
    history = on_a_terminal([sys.executable, "-m", "rollouts", "rollout", "history", "web", "--revision", "1"], env)
    assert b"m ]0;pwned" in history and b"\x1b" not in history


# -- logs -f on a deployment nothing moves -----------------------------------------------------


def follow(rollouts: Rollouts, seconds: float, env: dict[str, str]) -> tuple[int | None, str]:
    """`logs web -f` for at most `seconds`: its exit code (None if still running) and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rollouts", "logs", "web", "-f"],
        cwd=rollouts.cwd,
        env={**rollouts.env, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        code = proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(timeout=10)
        code = None
    return code, proc.stderr.read() if proc.stderr else ""


@pytest.mark.slow  # real processes
def test_follow_says_on_stderr_when_no_controller_touches_the_deployment(rollouts: Rollouts) -> None:
    opened(rollouts)
    code, stderr = follow(rollouts, 4, {"ROLLOUTS_LEASE_SECONDS": "1"})
    assert code is None  # still following: the deployment is open
    assert stderr.count("\n") == 1, stderr  # said once, not every poll
    assert stderr.startswith("warning: web version 1: nothing has touched this deployment for 1s"), stderr
    assert "no controller ever ran on this store" in stderr


@pytest.mark.slow  # real processes
def test_follow_says_nothing_while_a_controller_runs_a_quiet_deployer(rollouts: Rollouts) -> None:
    lease = {"ROLLOUTS_LEASE_SECONDS": "1"}
    opened(rollouts, "sleep", "3")
    controller = subprocess.Popen(
        [sys.executable, "-m", "rollouts", "controller", "run", "--interval", "0.05", "-q"],
        cwd=rollouts.cwd,
        env={**rollouts.env, **lease},
    )
    try:
        code, stderr = follow(rollouts, 30, lease)
    finally:
        controller.terminate()
        controller.wait(timeout=30)
    assert (code, stderr) == (0, "")
    assert json.loads(ok(rollouts.run("rollout", "status", "web", "-o", "json")).stdout)["phase"] == "Complete"


def test_the_freshest_lease_is_read_without_creating_anything(rollouts_on: Rollouts) -> None:
    from rollouts.adapters.cli.state import State
    from rollouts.adapters.service.leases import Leases, freshest_age

    opened(rollouts_on)
    state = State(str(rollouts_on.home), rollouts_on.store, "tester@test")
    try:
        assert freshest_age(state.recorder) is None  # no controller ever ran: no table, none made
        Leases(state.app).renew("someone")
        age = freshest_age(state.app.recorder)
        assert age is not None and 0 <= age < 5
    finally:
        state.close()


def test_commands_on_a_sqlite_home_do_not_load_the_postgresql_driver(rollouts: Rollouts) -> None:
    """psycopg and the library's PostgreSQL module cost ~0.2 s of every command's start: only a
    PostgreSQL store loads them. The web stack (waitress, Jinja2) loads only when `serve` runs."""
    opened(rollouts)
    probe = (
        "import sys; from rollouts.adapters.cli import main\nsys.argv[0] = 'rollouts'\n"
        "try:\n    main()\n"
        "except SystemExit as end:\n    code = end.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool', 'asyncio', 'waitress',"
        " 'jinja2')))\n"
    )
    commands = (["config", "list"], ["rollout", "latest", "web"], ["rollout", "history", "web", "-o", "json"])
    for command in (*commands, ["claim", "check"], ["serve", "--help"]):
        done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, env=rollouts.env)
        assert done.returncode == 0, done
        assert done.stdout.splitlines()[-1] == "[]", (command, done.stdout)


# -- controller run --until-idle, stopped before idle --------------------------------------------


@pytest.mark.slow  # real processes
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_until_idle_stopped_before_idle_is_not_a_success(rollouts: Rollouts, signum: int) -> None:
    """`controller run --until-idle && next-step` must not go on when the job is cancelled while a deployment
    runs: exit 1, as for --timeout (it exited 0, as if idle). Stopped once idle, or without --until-idle, is 0."""
    ok(rollouts.sh("config", "create", "slow", "--", "sleep", "30"))
    ok(rollouts.sh("rollout", "latest", "slow"))
    proc = rollouts.popen("controller", "run", "--until-idle", "--interval", "0.1", "-q")
    deadline = time.monotonic() + 30
    while json.loads(rollouts.sh("rollout", "status", "slow", "-o", "json").stdout)["phase"] != "Running":
        assert time.monotonic() < deadline and proc.poll() is None, "the deployment never ran"
        time.sleep(0.2)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (1, "error: stopped (SIGTERM or Ctrl-C) before the controller was idle\n")
    ok(rollouts.sh("rollout", "cancel", "slow"))  # (its deployer outlived the controller: stopped here)
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
    daemon = rollouts.popen("controller", "run", "--interval", "0.1", "-q")
    time.sleep(1)
    daemon.send_signal(signum)
    assert daemon.wait(timeout=30) == 0
