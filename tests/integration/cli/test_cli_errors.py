"""Bad input to the CLI, in-process and as a subprocess: the right exit code, one `error:` line (saying what
was wrong, where a row names words), nothing appended. Every command's bad input is a row of CASES."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

REFUSED, USAGE, MISSING, STORE = 1, 2, 4, 5
HUGE = "9" * 20  # beyond SQLite's 64-bit INTEGER
PAST = "2001-01-01T00:00:00"
FUTURE = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0, tzinfo=None).isoformat()

BAD_NAMES = {
    "uppercase": "WEB",
    "mixed case": "Web",
    "64 characters": "a" * 64,
    "leading dash": "-lead",
    "trailing dash": "lead-",
    "underscore": "a_b",
    "dot": "web.example",
    "space": " web",
    "non-ascii": "wéb",
    "shell command": "web;rm -rf /",
    "command substitution": "$(reboot)",
    "path traversal": "../etc",
    "trailing newline": "web\n",
    "empty": "",
}

AS_OF = ["999", "-1", "yesterday", "2026-13-01", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"]
# the last two are ISO times past what UTC can hold in Python's datetime: they were an internal error (70)

STEPS = [
    (["--steps", "50,10,100"], "--steps", "strictly increasing"),
    (["--steps", "10,50"], "--steps", "the last step's weight must be 100"),
    (["--steps", "0,100"], "--steps", "1..100"),
    (["--steps", "ten,100"], "--steps", "expected weights like 10,50,100"),
    (["--steps", "１０,100"], "--steps", "expected weights"),
    (["--step-pause", "soon"], "--step-pause", "or manual"),
    (["--step-pause", "-1"], "--step-pause", "or manual"),
    (["--verify", "'unclosed"], "--verify", "No closing quotation"),
    (["--verify-count", "0"], "--verify-count", "out of range"),
    (["--verify-interval", "-5"], "--verify-interval", "out of range"),
    (["--verify-timeout", "0"], "--verify-timeout", "out of range"),
    (["--failure-limit", "x"], "--failure-limit", "is not a valid integer"),
    (["--inconclusive-limit", "-1"], "--inconclusive-limit", "out of range"),
    (["--failure-limit", "3"], "--failure-limit", "could never fail"),
    (["--verify-count", "2", "--failure-limit", "2"], "--failure-limit", "could never fail"),
]

GATES = [
    (["freeze", "web", "--until", PAST, "--reason", "x"], USAGE, "is not in the future"),
    (["freeze", "--all", "--until", PAST, "--reason", "x"], USAGE, "is not in the future"),
    (["freeze", "web", "--until", "next friday", "--reason", "x"], USAGE, "is not an ISO time"),
    (["freeze", "web", "--reason", "  "], USAGE, "must not be empty"),
    (["freeze", "web"], USAGE, "--reason"),
    (["freeze", "--reason", "x"], USAGE, "give one or more config NAMEs, or --all"),
    (["freeze", "web", "--all", "--reason", "x"], USAGE, "not both"),
    (["freeze", "web", "nope", "--reason", "x"], MISSING, "config 'nope' not found"),
    (["freeze", "WEB", "--reason", "x"], USAGE, "WEB"),
    (["unfreeze", "web"], REFUSED, "config web is not frozen"),
    (["unfreeze", "--all"], REFUSED, "there is no freeze in force"),
    (["unfreeze", "nope"], MISSING, "config 'nope' not found"),
    (["rollout", "approve", "web"], REFUSED, "alice asked for revision 1 attempt 1: another actor must approve"),
    (["rollout", "approve", "web", "--version", "2"], MISSING, "has no revision 2"),
    (["rollout", "approve", "nope"], MISSING, "config 'nope' not found"),
]

CASES = [
    *(pytest.param(["config", "create", "--", n, "true"], USAGE, (), id=f"name {k}") for k, n in BAD_NAMES.items()),
    pytest.param(["config", "create", "-lead", "--", "true"], USAGE, (), id="name that looks like an option"),
    pytest.param(["rollout", "latest", "WEB"], USAGE, (), id="latest with an uppercase name"),
    pytest.param(["config", "show", "../etc"], USAGE, (), id="show with a path for a name"),
    pytest.param(["rollout", "history", "web;id"], USAGE, (), id="history with an injected name"),
    pytest.param(["logs", "$(reboot)"], USAGE, (), id="logs with a substitution for a name"),
    pytest.param(["config", "create", "api"], USAGE, (), id="create with no command"),
    pytest.param(["config", "create", "api", "--"], USAGE, (), id="create with nothing after the dashes"),
    pytest.param(["config", "create", "api", "--", ""], USAGE, (), id="create with an empty command"),
    pytest.param(["config", "create", "api", "--env", "NOEQUALS", "--", "true"], USAGE, (), id="env without equals"),
    pytest.param(["config", "create", "api", "--env", "=v", "--", "true"], USAGE, (), id="env without a key"),
    pytest.param(
        ["config", "create", "api", "--env", "1BAD=x", "--", "true"], USAGE, (), id="env key with a digit first"
    ),
    pytest.param(["config", "set", "web", "--env", "NOEQUALS"], USAGE, (), id="set env without equals"),
    pytest.param(["config", "create", "api", "--timeout", "-5", "--", "true"], USAGE, (), id="negative timeout"),
    pytest.param(["config", "create", "api", "--timeout", "0", "--", "true"], USAGE, (), id="zero timeout"),
    pytest.param(["config", "create", "api", "--timeout", "86401", "--", "true"], USAGE, (), id="timeout over a day"),
    pytest.param(["config", "create", "api", "--timeout", "soon", "--", "true"], USAGE, (), id="timeout not a number"),
    pytest.param(["config", "set", "web", "--timeout", "0"], USAGE, (), id="set zero timeout"),
    pytest.param(["config", "create", "api", "--history-limit", "0", "--", "true"], USAGE, (), id="history limit zero"),
    pytest.param(["config", "set", "web", "--history-limit", "-1"], USAGE, (), id="set negative history limit"),
    pytest.param(["config", "create", "api", "--trigger", "always", "--", "true"], USAGE, (), id="unknown trigger"),
    pytest.param(["config", "create", "api", "--env", "A=\udcff", "--", "true"], USAGE, (), id="env value not utf-8"),
    pytest.param(
        ["config", "create", "api", "--pre-hook", "'open", "--", "true"], USAGE, (), id="unbalanced hook quote"
    ),
    pytest.param(
        ["config", "create", "api", "--pre-hook-policy", "retry", "--", "true"], USAGE, (), id="policy without a hook"
    ),
    pytest.param(["config", "create", "api", "--pass-env", "1BAD", "--", "true"], USAGE, (), id="pass-env digit first"),
    pytest.param(["config", "create", "api", "--pass-env", "A=b", "--", "true"], USAGE, (), id="pass-env with a value"),
    pytest.param(
        ["config", "create", "api", "--pass-env", "MY-VAR", "--", "true"], USAGE, (), id="pass-env with a dash"
    ),
    pytest.param(["config", "create", "api", "--pass-env", "", "--", "true"], USAGE, (), id="pass-env empty"),
    pytest.param(
        ["config", "create", "api", "--pass-env", "ROLLOUT_CONFIG", "--", "true"], USAGE, (), id="pass ROLLOUT_"
    ),
    pytest.param(["config", "set", "web", "--pass-env", "ROLLOUT_DEPLOYER"], USAGE, (), id="set pass-env ROLLOUT_"),
    pytest.param(["config", "set", "web", "--pass-env", "ROLLOUTS_STORE"], USAGE, (), id="pass the store URL"),
    pytest.param(["config", "set", "web", "--pass-env", "é"], USAGE, (), id="set pass-env non-ascii"),
    pytest.param(
        ["config", "create", "api", "--env", "A=1", "--pass-env", "A", "--", "true"], USAGE, (), id="set and passed"
    ),
    pytest.param(["config", "set", "nope", "--env", "A=1"], MISSING, (), id="set of an unknown config"),
    pytest.param(["config", "show", "nope"], MISSING, (), id="show of an unknown config"),
    pytest.param(["rollout", "latest", "nope"], MISSING, (), id="latest of an unknown config"),
    pytest.param(["rollout", "cancel", "nope"], MISSING, (), id="cancel of an unknown config"),
    pytest.param(["rollout", "retry", "nope"], MISSING, (), id="retry of an unknown config"),
    pytest.param(["rollout", "undo", "nope"], MISSING, (), id="undo of an unknown config"),
    pytest.param(["rollout", "pause", "nope"], MISSING, (), id="pause of an unknown config"),
    pytest.param(["rollout", "resume", "nope"], MISSING, (), id="resume of an unknown config"),
    pytest.param(["rollout", "status", "nope"], MISSING, (), id="status of an unknown config"),
    pytest.param(["rollout", "history", "nope"], MISSING, (), id="history of an unknown config"),
    pytest.param(["events", "nope"], MISSING, (), id="events of an unknown config"),
    pytest.param(["audit", "nope"], MISSING, (), id="audit of an unknown config"),
    pytest.param(["logs", "nope"], MISSING, (), id="logs of an unknown config"),
    pytest.param(["rollout", "history", "web", "--revision", "9"], MISSING, (), id="history of an unknown revision"),
    pytest.param(["rollout", "undo", "web", "--to-revision", "9"], MISSING, (), id="undo to an unknown revision"),
    pytest.param(["logs", "web", "--revision", "9"], MISSING, (), id="logs of an unknown revision"),
    pytest.param(["rollout", "history", "web", "--revision", "0"], USAGE, (), id="history of revision zero"),
    pytest.param(["rollout", "undo", "web", "--to-revision", HUGE], USAGE, (), id="undo to a huge revision"),
    pytest.param(
        ["rollout", "history", "web", "--revision", HUGE],
        USAGE,
        (),
        id="history of a huge revision",
    ),
    pytest.param(
        ["logs", "web", "--revision", HUGE],
        USAGE,
        (),
        id="logs of a huge revision",
    ),
    pytest.param(["deployers", "delete", "web-9-deploy-1"], MISSING, (), id="delete of an unknown deployer"),
    pytest.param(["events", "--since", "yesterday"], USAGE, (), id="since in words"),
    pytest.param(["events", "--since", "2026-13-01"], USAGE, (), id="since with month thirteen"),
    pytest.param(
        ["events", "--since", "9999-12-31T23:59:59-05:00"],
        USAGE,
        (),
        id="since past the year 9999 in UTC",
    ),
    pytest.param(
        ["events", "--since", "0001-01-01T00:00:00+05:00"],
        USAGE,
        (),
        id="since before the year 1 in UTC",
    ),
    pytest.param(["events", "--revision", "1"], USAGE, (), id="events revision without a name"),
    pytest.param(["--store", "mysql://x", "config", "list"], USAGE, (), id="mysql store"),
    pytest.param(["--store", "mysql://x", "rollout", "latest", "web"], USAGE, (), id="mysql store for a write"),
    pytest.param(["--store", "postgresql://", "config", "list"], USAGE, (), id="postgres store without parts"),
    pytest.param(["--store", "postgresql://u@127.0.0.1:1/db", "config", "list"], STORE, (), id="unreachable store"),
    pytest.param(
        ["--store", "postgresql://u@127.0.0.1:1/db?schema=a-b", "config", "list"], USAGE, (), id="postgres bad schema"
    ),
    pytest.param(["config", "list", "-o", "yaml"], USAGE, (), id="config list as yaml"),
    pytest.param(["config", "show", "web", "-o", "xml"], USAGE, (), id="config show as xml"),
    pytest.param(["rollout", "history", "web", "-o", "yaml"], USAGE, (), id="history as yaml"),
    pytest.param(["events", "-o", "csv"], USAGE, (), id="events as csv"),
    pytest.param(["audit", "-o", "yaml"], USAGE, (), id="audit as yaml"),
    pytest.param(["deployers", "list", "-o", "wide"], USAGE, (), id="deployers as wide"),
    pytest.param(["projections", "status", "-o", "yaml"], USAGE, (), id="projections status as yaml"),
    pytest.param(["rollout", "status", "web", "--watch", "--timeout", "-1"], USAGE, (), id="negative watch timeout"),
    pytest.param(["controller", "run", "--once", "--until-idle"], USAGE, (), id="once and until idle"),
    pytest.param(["rollout", "history", "web", "--as-of", "\uff15"], USAGE, (), id="as-of a full-width digit"),
    pytest.param(["config", "show", "web", "--as-of", "1\u0661"], USAGE, (), id="as-of an arabic-indic digit"),
    pytest.param(["rollout", "history", "web", "--revision", "\uff11"], USAGE, (), id="revision a full-width digit"),
    pytest.param(
        ["config", "create", "api", "--timeout", "\uff16\uff10", "--", "true"], USAGE, (), id="timeout full-width"
    ),
    pytest.param(
        ["rollout", "status", "web", "--watch", "--timeout", "\uff15"], USAGE, (), id="watch timeout full-width"
    ),
    pytest.param(["log", "verify", "--expect-head", "\uff13:" + "a" * 64], USAGE, (), id="expect-head full-width"),
    pytest.param(["config", "create", "api", "--env", "ROLLOUT_VERSION=9", "--", "true"], USAGE, (), id="env ROLLOUT_"),
    pytest.param(["config", "set", "web", "--env", "ROLLOUT_CONFIG=x"], USAGE, (), id="set env ROLLOUT_"),
    pytest.param(["--home", "/dev/null", "config", "list"], STORE, (), id="home is a device"),
    pytest.param(
        ["--home", "/dev/null", "rollout", "latest", "web"], STORE, (), id="write with a home that is a device"
    ),
    pytest.param(["--home", "/dev/null/x", "rollout", "latest", "web"], STORE, (), id="home under a file"),
    pytest.param(["notify", "add", "s", "--url", "http://h/" + "a" * 2040], USAGE, (), id="sink URL of 2,049 chars"),
    pytest.param(["notify", "add", "s", "--url", "http://h/" + "a" * 100_000], USAGE, (), id="sink URL of 100 KB"),
    pytest.param(["notify", "add", "s", "--url", "http://h/", "--config", "nope"], MISSING, (), id="sink of no config"),
    pytest.param(
        ["--store", "postgresql://u@127.0.0.1:1/db", "deployers", "list"], STORE, (), id="deployers, store down"
    ),
    pytest.param(
        ["--store", "postgresql://u@127.0.0.1:1/db", "deployers", "delete", "web-1-deploy-1"],
        STORE,
        (),
        id="delete a deployer, store down",
    ),
    pytest.param(["frobnicate"], USAGE, (), id="unknown command"),
    pytest.param(["rollout", "latest", "web", "--force"], USAGE, (), id="unknown option"),
    # readable ranges and the choices of `-o` (what the line says)
    pytest.param(
        ["config", "create", "api", "--history-limit", "1001", "--", "true"], USAGE, ("1 to 1000",), id="limit"
    ),
    pytest.param(["config", "set", "web", "--history-limit", "5000"], USAGE, ("1 to 1000",), id="set limit"),
    pytest.param(["config", "create", "api", "--timeout", "86401", "--", "true"], USAGE, ("1 to 86400",), id="timeout"),
    pytest.param(["config", "create", "api", "--env", "K-", "--", "true"], USAGE, ("nothing to remove",), id="env K-"),
    pytest.param(["config", "create", "api", "--pass-env", "K-", "--", "true"], USAGE, ("--pass-env",), id="pass K-"),
    pytest.param(["events", "--type", "DeployerExploded"], USAGE, ("DeployerClaimed",), id="unknown type"),
    pytest.param(["events", "web", "--revision", "9"], MISSING, ("no revision 9",), id="missing revision"),
    pytest.param(["events", "--limit", "0"], USAGE, ("1 or more",), id="limit zero"),
    pytest.param(["rollout", "status", "web", "-o", "yaml"], USAGE, ("yaml",), id="status as yaml"),
    pytest.param(["logs", "web", "-o", "yaml"], USAGE, ("yaml",), id="logs as yaml"),
    pytest.param(["logs", "web", "-f", "-o", "json"], USAGE, ("choose one",), id="follow as json"),
    # paging through the log, and the log as it stood then (7.3)
    *(
        pytest.param(["events", *args], USAGE, (), id=f"events {' '.join(args)}")
        for args in (["--after", "-1"], ["--until", "999"], ["--after", "999"], ["--after", "5", "--until", "3"])
    ),
    *(pytest.param(["rollout", "history", "web", "--as-of", value], USAGE, (), id=f"as-of {value}") for value in AS_OF),
    *(
        pytest.param(["events", "--since", value], USAGE, (), id=f"since {value}")
        for value in AS_OF
        if value[:1].isdigit() and value != "2026-13-01"  # a row above already has that one
    ),
    pytest.param(["rollout", "status", "web", "--watch", "--as-of", "1"], USAGE, (), id="watch as-of"),
    *(
        pytest.param(["log", "verify", "--expect-head", bad], USAGE, ("POSITION:HASH",), id=f"expect-head {bad}")
        for bad in ["12", "x:" + "a" * 64, "3:" + "a" * 63, "3:" + "g" * 64, "-1:" + "a" * 64]
    ),
    pytest.param(["projections", "diff", "nosuch"], USAGE, ("desired, history, audit",), id="diff of no view"),
    pytest.param(["projections", "diff"], USAGE, (), id="diff of nothing"),
    # steps and verification (DESIGN 7.6), each value on create and on set
    *(
        pytest.param(command, USAGE, (option, problem), id=f"{verb} {' '.join(args)}")
        for args, option, problem in STEPS
        for verb, command in (
            ("create", ["config", "create", "api", *args, "--", "true"]),
            ("set", ["config", "set", "web", *args]),
        )
    ),
    # sinks
    pytest.param(["notify", "add", "x", "--url", "ftp://h/"], USAGE, ("not an http",), id="sink not http"),
    pytest.param(
        ["notify", "add", "x", "--url", "http://h/", "--on", "done"], USAGE, ("unknown kind 'done'",), id="sink kind"
    ),
    pytest.param(["notify", "add", "Bad_Name", "--url", "http://h/"], USAGE, ("DNS-1123",), id="sink name"),
    pytest.param(["notify", "remove", "nope"], MISSING, ("sink 'nope' not found",), id="remove of no sink"),
    # who may approve (7.8): SQLite has no database roles
    pytest.param(
        ["config", "create", "api", "--approval-identity", "db", "--", "true"],
        USAGE,
        ("--approval-identity", "needs a PostgreSQL store"),
        id="create approval identity db on sqlite",
    ),
    pytest.param(
        ["config", "set", "web", "--approval-identity", "db"],
        USAGE,
        ("--approval-identity", "needs a PostgreSQL store"),
        id="set approval identity db on sqlite",
    ),
    pytest.param(
        ["config", "create", "api", "--approval-identity", "ldap", "--", "true"],
        USAGE,
        ("'ldap' is not one of 'label', 'os', 'db'",),
        id="unknown approval identity",
    ),
    # freezes and approvals, asked by alice, who triggered web's version 1
    *(
        pytest.param(["--as", "alice", *args], code, (words,), id=f"gates {' '.join(args)}")
        for args, code, words in GATES
    ),
]


@pytest.fixture(params=["in-process", pytest.param("subprocess", marks=pytest.mark.slow)])
def invoke(request: pytest.FixtureRequest, rollouts: Rollouts) -> Callable[..., Result]:
    """A home holding config web (approval required) with version 1 open, triggered by alice; the CLI run one
    way or the other."""
    assert rollouts.run("config", "create", "web", "--require-approval", "--", "true").exit_code == 0
    assert rollouts.run("--as", "alice", "rollout", "latest", "web").exit_code == 0
    return rollouts.run if request.param == "in-process" else rollouts.sh


def assert_one_error_line(result: Result, code: int) -> None:
    assert result.exit_code == code, result
    assert "Traceback" not in result.stdout + result.stderr, result
    assert result.stderr.endswith("\n") and len(result.stderr.splitlines()) == 1, result
    assert result.stderr.startswith("error:"), result
    assert "Errno" not in result.stderr, result  # an exception's text, not a sentence of ours
    assert result.stdout == "", result


@pytest.mark.parametrize(("args", "code", "says"), CASES)
def test_bad_input_is_one_error_line_and_appends_nothing(
    rollouts: Rollouts, invoke: Callable[..., Result], args: list[str], code: int, says: tuple[str, ...]
) -> None:
    before = rollouts.event_count()
    result = invoke(*args)
    assert_one_error_line(result, code)
    assert all(words in result.stderr for words in says), result
    assert rollouts.event_count() == before


@pytest.mark.parametrize("name", ["a" * 63, "a", "0", "web-2"])
def test_names_at_the_edge_of_the_rule_are_accepted(rollouts: Rollouts, name: str) -> None:
    result = rollouts.run("config", "create", name, "--", "true")
    assert result.exit_code == 0, result
    assert rollouts.run("config", "show", name).exit_code == 0


def test_an_unreachable_store_error_hides_the_password(rollouts: Rollouts) -> None:
    rollouts.home.mkdir()  # a missing home would add its own warning line (DESIGN 7.1, Homes)
    result = rollouts.sh("--store", "postgresql://u:s3cr3t@127.0.0.1:1/db", "config", "list")
    assert_one_error_line(result, STORE)
    assert "s3cr3t" not in result.stderr and "***" in result.stderr


def test_a_revision_too_large_to_exist_is_a_usage_error(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    assert_one_error_line(rollouts.run("events", "web", "--revision", HUGE, "-o", "json"), USAGE)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["rollout", "status", "web", "--watch", "--timeout", "nan"], id="watch timeout nan"),
        pytest.param(["controller", "run", "--timeout", "nan"], id="controller timeout nan"),
        pytest.param(["controller", "run", "--interval", "inf", "--timeout", "1"], id="controller interval inf"),
    ],
)
def test_a_duration_that_is_not_finite_is_a_usage_error(rollouts: Rollouts, args: list[str]) -> None:
    # Subprocess only, killed after 30 s: in-process the nan cases would hang the test run. (5 s was too
    # short for a loaded CI machine: the error was printed and the process still counted as hanging.)
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    before = rollouts.event_count()
    assert_one_error_line(rollouts.sh(*args, timeout=30), USAGE)
    assert rollouts.event_count() == before
